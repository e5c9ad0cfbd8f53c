/*===- mla.h - The C interface of the MLA runtime -----------------*- C -*-===*
 *
 * A C99 interface over the C++ runtime (mla/Runtime/Runtime.h) and the MLA
 * attention layer (mla/Runtime/MlaLayer.h), for host engines written in C or
 * reached through a foreign-function interface (ctypes, cffi, Rust, Go).
 *
 *   mla_version              the library's version, compiler build and chips
 *   mla_runtime_create       the device (a CUDA GPU, or the host CPU), the
 *                            kernel cache, the compiled kernels
 *   mla_runtime_select_backend / mla_runtime_select_prefill_backend
 *                            which attention backend runs a layer's decode
 *                            and which its prefill, and why each one above
 *                            them in priority does not
 *   mla_layer_create         an MLA attention layer: selects its backend and
 *                            compiles (or loads from the cache) its kernels
 *   mla_layer_plan           one batch's metadata, checked and planned on the
 *                            host
 *   mla_layer_forward        the layer's forward on caller buffers
 *   mla_layer_capture_decode_step / mla_layer_replay
 *                            a decode step captured once as a CUDA graph,
 *                            replayed every step
 *   mla_kernel_compile_source / mla_kernel_run
 *                            any module of mla ops, from MLIR text
 *   mla_runtime_allocate ... memory on the runtime's device
 *
 * Conventions
 *
 *  - Every function but mla_status_string and mla_last_error returns an
 *    mla_status_t; results come back through pointer arguments, which are
 *    written only on success. No function throws, aborts or exits.
 *  - Every call sets the calling thread's last-error message: "" after a
 *    success, else a message that starts with the function's name and says
 *    what is wrong (a NULL argument by its name, a tensor by its role, a
 *    metadata field and request, both sides of a failed comparison);
 *    compiler diagnostics follow on further lines. mla_last_error returns
 *    it; mla_status_string and mla_last_error themselves leave it as it
 *    is.
 *  - Handles are opaque. Layers, kernels and allocations belong to the
 *    runtime that made them and must be released before it:
 *    mla_runtime_destroy refuses (MLA_ERROR_INVALID_ARGUMENT, nothing
 *    released) while any is alive. Plans are plain host data; they serve
 *    every layer of the runtime configured as the one that made them (same
 *    mla_layer_config_t, same backend) and may outlive it.
 *  - Destroying NULL is a no-op that returns MLA_OK, as free(NULL) is, so
 *    cleanup paths need no checks.
 *  - Strings returned through `const char **` stay valid as long as the
 *    object that returned them (the runtime, layer, plan or kernel).
 *  - Device memory is GPU memory on a GPU runtime and host memory on a CPU
 *    one; a stream is a CUstream on a GPU (NULL: the legacy default stream)
 *    and is ignored on the CPU, where everything runs on the calling thread
 *    and has completed when the call returns.
 *
 * Thread safety: runtime functions may be called from several threads at
 * once (compiles run concurrently; a module asked for twice is compiled
 * once). Calls on one layer must be
 * ordered (one thread at a time, and one stream or synchronized streams):
 * the layer reuses its metadata and scratch buffers between steps. Kernels
 * may run concurrently on distinct buffers. The log callback may be called
 * from any thread that calls into the runtime.
 *
 *===----------------------------------------------------------------------===*/

#ifndef MLA_MLA_H
#define MLA_MLA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*===----------------------------------------------------------------------===*
 * Status and errors
 *===----------------------------------------------------------------------===*/

/* The enums below hold any int in C++ too, so a value a C caller passes
 * outside them is defined behaviour that the library can check and refuse
 * (C enums are int-sized; the layout is the same in both languages). */
#ifdef __cplusplus
#define MLA_ENUM_INT : int
#else
#define MLA_ENUM_INT
#endif

typedef enum mla_status MLA_ENUM_INT {
  /** Success. */
  MLA_OK = 0,
  /** A NULL handle or pointer, an enum value out of range, a dtype, rank or
   *  shape that does not fit (a tensor of the wrong element type or shape,
   *  a non-positive dimension), a plan given to a layer that did not make
   *  it, a runtime destroyed while its objects are alive. */
  MLA_ERROR_INVALID_ARGUMENT = 1,
  /** MLA_DEVICE_GPU was asked for and no usable GPU was found (no driver,
   *  no device at that ordinal, an unsupported chip). */
  MLA_ERROR_NO_DEVICE = 2,
  /** A module did not parse, verify or lower, its entry does not exist, or
   *  a layer's kernels failed to compile; the message holds the compiler's
   *  diagnostics. */
  MLA_ERROR_COMPILE = 3,
  /** Backend selection failed: the named backend does not exist (the
   *  message lists the valid names), refuses the configuration, or no
   *  backend fits it (the message gives every reason). */
  MLA_ERROR_BACKEND_REJECTED = 4,
  /** A batch's metadata is inconsistent (a negative count, seq_len <
   *  query_len, a block table too short or naming pages outside the cache,
   *  a slot that disagrees with the block table, a batch not ordered
   *  decodes first, decodes of different query lengths, ...). */
  MLA_ERROR_INVALID_METADATA = 5,
  /** A failure while running: a kernel launch, a copy or a synchronization
   *  failed on the device. */
  MLA_ERROR_RUNTIME = 6,
  /** Device memory (host memory on a CPU runtime) could not be allocated,
   *  or the host ran out of memory inside the call. */
  MLA_ERROR_OUT_OF_MEMORY = 7,
  /** Something the runtime did not expect; please report the message. */
  MLA_ERROR_INTERNAL = 8
} mla_status_t;

/** A static, readable name of `status` ("MLA_ERROR_COMPILE"); "unknown
 *  status" for values outside the enum. Never NULL; sets no error. */
const char *mla_status_string(mla_status_t status);

/** The message the calling thread's last call left: "" after a success.
 *  Valid until the thread's next call into this interface. Never NULL. */
const char *mla_last_error(void);

/*===----------------------------------------------------------------------===*
 * Version
 *===----------------------------------------------------------------------===*/

/** The version of this header. The shared library's SONAME carries the
 *  major version (libmla.so.0): a program built against this header runs
 *  with any library of the same major version and at least this minor. */
#define MLA_VERSION_MAJOR 0
#define MLA_VERSION_MINOR 1
#define MLA_VERSION_PATCH 0

typedef struct mla_version_info {
  /** The library's version (compare with MLA_VERSION_MAJOR ...). */
  int32_t major;
  int32_t minor;
  int32_t patch;
  /** "0.1.0". */
  const char *version;
  /** What made the library's compiler, as it enters every kernel cache
   *  key: "mla-compiler 0.1.0 (<git commit>) LLVM 22.1.8". */
  const char *build_identity;
  /** The GPU chips the compiler generates code for, comma-separated
   *  ("sm_80,sm_86,sm_89,sm_90,sm_90a"); newer chips run the closest
   *  older chip's PTX. */
  const char *gpu_chips;
  /** The host CPU the JIT compiles CPU kernels and launch code for. */
  const char *host_target;
} mla_version_info_t;

/** Fills `info` (static strings). Needs no runtime and no device. */
mla_status_t mla_version(mla_version_info_t *info);

/*===----------------------------------------------------------------------===*
 * Element types and tensors
 *===----------------------------------------------------------------------===*/

typedef enum mla_dtype MLA_ENUM_INT {
  MLA_DTYPE_F32 = 0,
  MLA_DTYPE_F16 = 1,
  MLA_DTYPE_BF16 = 2,
  MLA_DTYPE_I32 = 3,
  MLA_DTYPE_I64 = 4,
  /** KV cache formats only: 8-bit floats stored as value / kv_scale (see
   *  mla_forward_args_t::kv_scale). */
  MLA_DTYPE_FP8_E4M3 = 5,
  MLA_DTYPE_FP8_E5M2 = 6
} mla_dtype_t;

/** Bytes per element of `dtype` (1, 2, 4 or 8). MLA_ERROR_INVALID_ARGUMENT for
 *  a value outside the enum or a NULL `bytes`. */
mla_status_t mla_dtype_size(mla_dtype_t dtype, size_t *bytes);

/** The name of `dtype` ("bf16"), a static string. */
mla_status_t mla_dtype_name(mla_dtype_t dtype, const char **name);

/** The most dimensions a tensor has. */
#define MLA_MAX_RANK 8

/** A strided view of caller-owned memory. Shapes and strides are in
 *  elements; entries at and past `rank` are ignored. Layers take
 *  row-major contiguous tensors; kernels take what their entry's memref
 *  types accept. A tensor with no elements may have NULL data. */
typedef struct mla_tensor {
  void *data;
  mla_dtype_t dtype;
  int32_t rank;
  int64_t shape[MLA_MAX_RANK];
  int64_t strides[MLA_MAX_RANK];
} mla_tensor_t;

/** Fills `tensor` with a row-major contiguous view of `data`: `rank` (0 to
 *  MLA_MAX_RANK) sizes from `shape` (non-negative; may be NULL for rank 0)
 *  and their strides. */
mla_status_t mla_tensor_contiguous(void *data, mla_dtype_t dtype, int32_t rank,
                                   const int64_t *shape, mla_tensor_t *tensor);

/** The bytes `tensor` spans from its data pointer: one past its last
 *  element (the element count times the element size for a contiguous
 *  tensor; 0 for an empty one). Negative sizes or strides are
 *  MLA_ERROR_INVALID_ARGUMENT. */
mla_status_t mla_tensor_span_bytes(const mla_tensor_t *tensor, size_t *bytes);

/*===----------------------------------------------------------------------===*
 * Runtime
 *===----------------------------------------------------------------------===*/

typedef struct mla_runtime mla_runtime_t;

typedef enum mla_device_preference MLA_ENUM_INT {
  /** The GPU when one is usable, else the host CPU (logged). */
  MLA_DEVICE_AUTO = 0,
  MLA_DEVICE_CPU = 1,
  /** A CUDA GPU; mla_runtime_create fails with MLA_ERROR_NO_DEVICE
   *  without one. */
  MLA_DEVICE_GPU = 2
} mla_device_preference_t;

typedef enum mla_device_kind MLA_ENUM_INT {
  MLA_DEVICE_KIND_CPU = 0,
  MLA_DEVICE_KIND_CUDA = 1
} mla_device_kind_t;

/** Receives one log line (no trailing newline) and the options' user
 *  pointer: the device chosen, each backend selected, each kernel compiled
 *  or loaded from the cache with its time, cache problems. `line` is valid
 *  only during the call. The callback may run on any thread that
 *  compiles (a layer compiles its kernels on several), while a kernel
 *  cache entry is locked: it must not call into this interface. */
typedef void (*mla_log_fn)(const char *line, void *user);

typedef struct mla_runtime_options {
  mla_device_preference_t device;
  /** Which GPU, for MLA_DEVICE_AUTO and MLA_DEVICE_GPU (>= 0). */
  int32_t gpu_ordinal;
  /** The kernel cache directory, instead of MLA_CACHE_DIR (else
   *  $XDG_CACHE_HOME/mla, else ~/.cache/mla). NULL or "": the environment
   *  decides. Created on the first store. */
  const char *cache_dir;
  /** Nonzero: no disk cache, only this process's kernels (as
   *  MLA_CACHE_DISABLE=1). Zero: the environment decides. */
  int32_t disable_disk_cache;
  /** Nonzero: every kernel is compiled again and stored (as
   *  MLA_CACHE_FORCE_RECOMPILE=1). Zero: the environment decides. */
  int32_t force_recompile;
  /** The log sink, or NULL to drop log lines. */
  mla_log_fn log;
  void *log_user;
} mla_runtime_options_t;

/** The defaults: MLA_DEVICE_AUTO, GPU 0, the cache as the environment sets
 *  it up, no log sink. */
mla_status_t mla_runtime_options_default(mla_runtime_options_t *options);

/** Creates a runtime as `options` asks (NULL: the defaults) into
 *  `*runtime`. MLA_ERROR_NO_DEVICE when MLA_DEVICE_GPU finds no usable
 *  GPU; with MLA_DEVICE_AUTO a missing GPU is logged, not an error. */
mla_status_t mla_runtime_create(const mla_runtime_options_t *options,
                                mla_runtime_t **runtime);

/** Releases `runtime`. Refused with MLA_ERROR_INVALID_ARGUMENT (the message
 *  counts them) while layers, kernels or allocations it made are alive.
 *  NULL is a no-op. */
mla_status_t mla_runtime_destroy(mla_runtime_t *runtime);

/** Where the runtime runs its kernels. */
mla_status_t mla_runtime_device_kind(const mla_runtime_t *runtime,
                                     mla_device_kind_t *kind);

/** The device in words: "NVIDIA H100 80GB HBM3 (sm_90a, 132 SMs)" or
 *  "host CPU (...)". */
mla_status_t mla_runtime_device_description(const mla_runtime_t *runtime,
                                            const char **description);

/** The GPU's streaming multiprocessors, or the CPU's hardware threads. */
mla_status_t mla_runtime_parallelism(const mla_runtime_t *runtime,
                                     int64_t *parallelism);

/** The kernel cache directory in use, or "" when the cache is in memory
 *  only. */
mla_status_t mla_runtime_cache_dir(const mla_runtime_t *runtime,
                                   const char **directory);

/** What the runtime's kernel cache has done since the runtime was created.
 *  A request answered with a kernel this runtime already holds counts as a
 *  memory hit (see mla_kernel_info for where each kernel came from). */
typedef struct mla_cache_stats {
  /** Lookups served from memory: the cache's in-process map, or a kernel
   *  the runtime already holds. */
  uint64_t memory_hits;
  /** Lookups served from a validated disk entry. */
  uint64_t disk_hits;
  /** Lookups that found nothing usable. */
  uint64_t misses;
  /** Kernels compiled. */
  uint64_t compiles;
  /** Disk entries found corrupt, reported, removed and rebuilt. */
  uint64_t corrupt_entries;
  /** Disk writes that failed (the kernel was still returned). */
  uint64_t store_failures;
} mla_cache_stats_t;

mla_status_t mla_runtime_cache_stats(const mla_runtime_t *runtime,
                                     mla_cache_stats_t *stats);

/*===----------------------------------------------------------------------===*
 * Device memory
 *===----------------------------------------------------------------------===*/

/** `bytes` of the runtime's device memory, 256-byte aligned, into
 *  `*pointer` (NULL for zero bytes). MLA_ERROR_OUT_OF_MEMORY when it cannot
 *  be had. Release it with mla_runtime_free before the runtime. */
mla_status_t mla_runtime_allocate(mla_runtime_t *runtime, size_t bytes,
                                  void **pointer);

/** Releases memory from mla_runtime_allocate of this runtime (after the
 *  work queued on it must have finished: synchronize first on a GPU).
 *  NULL is a no-op; any other pointer not allocated by this runtime is
 *  MLA_ERROR_INVALID_ARGUMENT. */
mla_status_t mla_runtime_free(mla_runtime_t *runtime, void *pointer);

/** Copies `bytes` of host memory to device memory, ordered on `stream`; the
 *  host memory may be reused when the call returns. The device pointer may
 *  be any device memory, not only this runtime's allocations. NULL
 *  pointers are allowed only for zero bytes. */
mla_status_t mla_runtime_upload(mla_runtime_t *runtime, void *device,
                                const void *host, size_t bytes, void *stream);

/** Copies `bytes` of device memory to the host after the work queued before
 *  it on `stream`, and waits for the copy. */
mla_status_t mla_runtime_download(mla_runtime_t *runtime, void *host,
                                  const void *device, size_t bytes,
                                  void *stream);

/** Waits for the work queued on `stream`; returns at once on the CPU. */
mla_status_t mla_runtime_synchronize(mla_runtime_t *runtime, void *stream);

/** Waits until the GPU kernels compiled so far run their best code. A cold
 *  compile first loads the driver's linked code, which is ready sooner but
 *  slower, and replaces it in the background by the driver's module-load
 *  code (the next launch of each kernel switches). CUDA graph captures wait
 *  by themselves; call this where the first steps must run at full speed
 *  (benchmarks). Returns at once on the CPU or when nothing is pending. */
mla_status_t mla_runtime_wait_for_kernel_upgrades(mla_runtime_t *runtime);

/*===----------------------------------------------------------------------===*
 * MLA layer configuration and backend selection
 *===----------------------------------------------------------------------===*/

typedef struct mla_layer_config {
  /** Heads on this device, and the MLA dims. */
  int64_t num_heads;
  int64_t kv_lora_rank;     /**< Lkv, the latent width */
  int64_t qk_nope_head_dim; /**< P */
  int64_t qk_rope_head_dim; /**< R */
  int64_t v_head_dim;       /**< V */
  /** q, kv_c, k_pe, the output and the weights: f32, f16 or bf16. */
  mla_dtype_t activation_dtype;
  /** The latent KV cache: f32, f16, bf16, or fp8_e4m3 / fp8_e5m2 (stored
   *  as value / kv_scale, see mla_forward_args_t; backends with generic
   *  kernels only, CPU_JIT and GENERIC_GPU). */
  mla_dtype_t cache_dtype;
  /** Tokens per cache page. */
  int64_t block_size;
  /** The softmax scale; 0 means 1 / sqrt(qk_nope_head_dim +
   *  qk_rope_head_dim). */
  float softmax_scale;
  /** Requests with at most this many new tokens run as decodes (1, or 1 +
   *  speculative tokens). */
  int64_t decode_threshold;
  /** Nonzero: the caller wants the decode LSE (see mla_forward_args_t). */
  int32_t needs_decode_lse;
  /** Nonzero: the caller will capture decode steps into CUDA graphs. */
  int32_t wants_cuda_graphs;
  /** For the default context workspace (vLLM's formula):
   *  min(max(8 * max_model_len, 4 * max_num_seqs * block_size), 131072). */
  int64_t max_model_len;
  int64_t max_num_seqs;
  /** Rows of the prefill context-gather workspace; 0 uses the formula. */
  int64_t workspace_tokens;
  /** A backend to use instead of automatic selection ("CPU_JIT",
   *  "GENERIC_GPU", ...); NULL or "": MLA_ATTENTION_BACKEND if set, else
   *  the device's priority list. Copied by the calls that take it. */
  const char *backend;

  /* --- Prefill backend selection --------------------------------------- */
  /** A prefill backend for the chunked prefill instead of automatic
   *  selection ("PREFILL_TC_SM80", "PREFILL_CPU_JIT", ...), chosen apart
   *  from `backend`; NULL or "": MLA_PREFILL_BACKEND if set, else the
   *  device's prefill priority list. Copied by the calls that take it. */
  const char *prefill_backend;

  /* --- Decode context parallelism -------------------------------------- */
  /** This layer is rank `dcp_rank` of a group of `dcp_world_size` that
   *  spreads every request's cache over its ranks, token i on rank
   *  (i / dcp_interleave) mod dcp_world_size (vLLM's dcp_world_size,
   *  dcp_rank, cp_kv_cache_interleave_size). 0 or 1: off. A rank plans its
   *  own block table and slot mapping (its new tokens, -1 for the others),
   *  runs decodes of one new token over its share and writes partial rows
   *  and decode_lse, which mla_layer_merge_dcp_partials merges once the
   *  engine has all-gathered them. At most 64 ranks; under DCP
   *  decode_threshold must be 1 (mla_layer_create refuses otherwise). */
  int64_t dcp_world_size;
  int64_t dcp_rank;
  /** Tokens a rank holds in a row; must divide block_size. 0 or 1: 1. */
  int64_t dcp_interleave;
} mla_layer_config_t;

/** Fills DeepSeek-V3's attention: 128 heads, Lkv 512, P 128, R 64, V 128,
 *  bf16 activations and cache, 64-token pages, the default scale, decode
 *  threshold 1, no decode LSE, no CUDA graphs, max_model_len 163840,
 *  max_num_seqs 256, the default workspace, automatic backend and
 *  prefill backend selection.
 *  Callers with fewer heads per device (tensor parallelism) set num_heads. */
mla_status_t mla_layer_config_default(mla_layer_config_t *config);

/** How a backend was chosen. */
typedef enum mla_backend_source MLA_ENUM_INT {
  /** The first backend of the device's priority list that fits. */
  MLA_BACKEND_SOURCE_PRIORITY = 0,
  /** Named by mla_layer_config_t::backend (a prefill backend: by
   *  ::prefill_backend). */
  MLA_BACKEND_SOURCE_REQUESTED = 1,
  /** Named by MLA_ATTENTION_BACKEND (a prefill backend: by
   *  MLA_PREFILL_BACKEND). */
  MLA_BACKEND_SOURCE_ENVIRONMENT = 2
} mla_backend_source_t;

/** Which decode steps a backend's kernels allow to be captured into CUDA
 *  graphs (vLLM's AttentionCGSupport levels). */
typedef enum mla_cuda_graph_support MLA_ENUM_INT {
  MLA_CUDA_GRAPHS_NEVER = 0,
  /** Batches of decodes with one new token each. */
  MLA_CUDA_GRAPHS_UNIFORM_SINGLE_TOKEN_DECODE = 1,
  /** Batches of decodes with the same number of new tokens each (1 +
   *  speculative tokens). */
  MLA_CUDA_GRAPHS_UNIFORM_BATCH = 2,
  /** Any batch, prefills included. */
  MLA_CUDA_GRAPHS_ALWAYS = 3
} mla_cuda_graph_support_t;

/** A backend selection. The strings belong to the runtime (for
 *  mla_runtime_select_backend) or the layer (for mla_layer_selection). */
typedef struct mla_backend_selection {
  /** The chosen backend's name, e.g. "CPU_JIT". */
  const char *backend;
  mla_backend_source_t source;
  /** How many higher-priority backends were passed over. */
  int32_t num_skipped;
  /** One line per backend passed over, in priority order: "TC_SM90A: not
   *  implemented yet", reasons separated by "; ", lines by '\n'; "" when
   *  none was. */
  const char *skipped;
  /** Everything in one line: "GENERIC_GPU (skipped TC_SM90A: [...])". */
  const char *summary;
  /** The chosen backend in words. */
  const char *description;
  /** What of a layer on the chosen backend can be captured into a CUDA
   *  graph (see mla_layer_capture_decode_step); MLA_CUDA_GRAPHS_NEVER for
   *  a prefill backend (the decode backend decides what is captured). */
  mla_cuda_graph_support_t cuda_graphs;
} mla_backend_selection_t;

/** The backend that would run a layer configured as `config` on this
 *  runtime's device, and why each backend above it was passed over.
 *  MLA_ERROR_INVALID_ARGUMENT for a configuration that is malformed (see
 *  mla_layer_create); MLA_ERROR_BACKEND_REJECTED when no backend fits or
 *  the named one does not exist or refuses, with every reason. */
mla_status_t mla_runtime_select_backend(mla_runtime_t *runtime,
                                        const mla_layer_config_t *config,
                                        mla_backend_selection_t *selection);

/** The prefill backend that would run the chunked prefill of a layer
 *  configured as `config` on this runtime's device (config->
 *  prefill_backend, else MLA_PREFILL_BACKEND, else the device's prefill
 *  priority list, whatever the decode's backend), and why each one above
 *  it was passed over. Errors as mla_runtime_select_backend. */
mla_status_t
mla_runtime_select_prefill_backend(mla_runtime_t *runtime,
                                   const mla_layer_config_t *config,
                                   mla_backend_selection_t *selection);

/*===----------------------------------------------------------------------===*
 * MLA layer
 *===----------------------------------------------------------------------===*/

typedef struct mla_layer mla_layer_t;
typedef struct mla_plan mla_plan_t;

/** The layer's weights: the runtime device's memory, activation dtype,
 *  contiguous. Referenced, not copied: they must stay alive and unchanged
 *  while the layer runs. */
typedef struct mla_layer_weights {
  /** kv_b_proj [Lkv, N, P + V] (the prefill up-projection). */
  mla_tensor_t kv_b_proj;
  /** W_UK_T [N, P, Lkv] (decode query absorption). */
  mla_tensor_t w_uk_t;
  /** W_UV [N, Lkv, V] (the decode output projection). */
  mla_tensor_t w_uv;
} mla_layer_weights_t;

/** Creates a layer on `runtime` (which must outlive it): checks `config`
 *  and `weights`, selects the backend and the prefill backend and compiles
 *  or loads every kernel the layer needs (the chunked prefill with the
 *  prefill backend's kernel strategy). MLA_ERROR_INVALID_ARGUMENT for a malformed config (a
 *  non-positive dim, block size or max, decode_threshold < 1, a
 *  non-float dtype, a negative or non-finite scale) or a weight of the
 *  wrong dtype or shape (named: "kv_b_proj", "w_uk_t", "w_uv");
 *  MLA_ERROR_BACKEND_REJECTED as mla_runtime_select_backend or
 *  mla_runtime_select_prefill_backend;
 *  MLA_ERROR_COMPILE when a kernel does not compile. */
mla_status_t mla_layer_create(mla_runtime_t *runtime,
                              const mla_layer_config_t *config,
                              const mla_layer_weights_t *weights,
                              mla_layer_t **layer);

/** Releases `layer`, after the work it queued has finished. NULL is a
 *  no-op. */
mla_status_t mla_layer_destroy(mla_layer_t *layer);

/** The backend the layer runs on and why the ones above it were not
 *  chosen (strings owned by the layer). */
mla_status_t mla_layer_selection(const mla_layer_t *layer,
                                 mla_backend_selection_t *selection);

/** The prefill backend the layer's chunked prefill runs on and why the
 *  ones above it were not chosen (strings owned by the layer). */
mla_status_t mla_layer_prefill_selection(const mla_layer_t *layer,
                                         mla_backend_selection_t *selection);

/** One batch of requests, as vLLM's CommonAttentionMetadata (host arrays,
 *  read during mla_layer_plan only). For request b:
 *    query_len = query_start_loc[b + 1] - query_start_loc[b] (new tokens)
 *    seq_len   = seq_lens[b]  (cached context + new tokens)
 *  Token j of request b lives in page block_table[b * max_blocks + j /
 *  block_size], row j % block_size. The batch must be ordered decodes
 *  first (query_len <= decode_threshold), as vLLM reorders it. */
typedef struct mla_batch_metadata {
  /** [num_reqs + 1]: request b owns query rows [query_start_loc[b],
   *  query_start_loc[b + 1]). */
  const int32_t *query_start_loc;
  /** [num_reqs]. */
  const int32_t *seq_lens;
  /** [num_reqs, max_blocks], row-major. */
  const int32_t *block_table;
  int64_t max_blocks;
  /** [num_slots]: the cache slot (page * block_size + row) of each new
   *  token, or -1 to skip its write (padding). */
  const int64_t *slot_mapping;
  /** Entries of slot_mapping (>= num_actual_tokens; the tail past
   *  num_actual_tokens is padding); 0 means num_actual_tokens. */
  int64_t num_slots;
  int64_t num_reqs;
  /** query_start_loc[num_reqs]. */
  int64_t num_actual_tokens;
  /** The longest query (exact). */
  int64_t max_query_len;
  /** At least the longest sequence (an upper bound is fine). */
  int64_t max_seq_len;
} mla_batch_metadata_t;

/** Checks `metadata` against itself and a cache of `num_cache_blocks` pages
 *  and plans the step on the host (decode/prefill split, decode schedule,
 *  chunked-context plan) into `*plan`. MLA_ERROR_INVALID_ARGUMENT for a NULL
 *  array that the counts say has entries; MLA_ERROR_INVALID_METADATA, with
 *  the field, request or token and both sides of the failed comparison,
 *  for anything inconsistent. */
mla_status_t mla_layer_plan(const mla_layer_t *layer,
                            const mla_batch_metadata_t *metadata,
                            int64_t num_cache_blocks, mla_plan_t **plan);

/** Releases `plan`. NULL is a no-op. */
mla_status_t mla_plan_destroy(mla_plan_t *plan);

typedef struct mla_plan_info {
  int64_t num_decodes;
  int64_t num_prefills;
  int64_t num_decode_tokens;
  int64_t num_prefill_tokens;
  /** num_decode_tokens + num_prefill_tokens. */
  int64_t num_actual_tokens;
  /** New tokens of every decode (0 without decodes). */
  int64_t decode_query_len;
  /** Context chunks the prefills gather (0 without prefills). */
  int64_t num_context_chunks;
  int64_t num_cache_blocks;
} mla_plan_info_t;

mla_status_t mla_plan_get_info(const mla_plan_t *plan, mla_plan_info_t *info);

/** One line: "2 decodes (2 tokens, 2 KV splits), 1 prefills (12 tokens,
 *  2 context chunks)"; owned by the plan. */
mla_status_t mla_plan_describe(const mla_plan_t *plan, const char **line);

/** One step's buffers: the runtime device's memory, contiguous. Rows
 *  [0, num_actual_tokens) of the token-indexed tensors are used (they may
 *  have more rows). N, P, R, V, Lkv as in mla_layer_config_t. */
typedef struct mla_forward_args {
  /** q [T, N, P + R]: q_nope then q_pe, per head; activation dtype. */
  mla_tensor_t q;
  /** kv_c [T, Lkv] (the normalized latent) and k_pe [T, R] of the new
   *  tokens; activation dtype. */
  mla_tensor_t kv_c;
  mla_tensor_t k_pe;
  /** The paged cache [num_cache_blocks, block_size, Lkv + R], cache dtype,
   *  updated in place with the new tokens. */
  mla_tensor_t kv_cache;
  /** output [T, N, V], activation dtype; row t belongs to query token t. */
  mla_tensor_t output;
  /** Optional: the decode LSE [num_decodes, N, decode_query_len], f32,
   *  natural log. Leave it zeroed (NULL data, rank 0) when not wanted. */
  mla_tensor_t decode_lse;
  /** With an FP8 cache (MLA_DTYPE_FP8_E4M3 / _E5M2), and only then: its
   *  scale [1] f32 (vLLM's per-layer k_scale), read when the kernels run.
   *  Entries are stored as value / scale, saturated to the format's largest
   *  finite value, and read as entry x scale. A host-readable scale must be
   *  finite and positive; a device scale that is not gives NaN or infinite
   *  rows. Zeroed otherwise. */
  mla_tensor_t kv_scale;
} mla_forward_args_t;

/** Runs the step `plan` describes on `args`, queued on `stream` on a GPU
 *  (the call returns without waiting), to completion on the CPU.
 *  MLA_ERROR_INVALID_ARGUMENT for a plan of a layer of another
 *  configuration (plans serve every layer of the runtime configured alike,
 *  so a model's layers plan a step once) or a tensor of
 *  the wrong dtype, rank, shape or layout (named: "q", "kv_c", "k_pe",
 *  "kv_cache", "output", "decode_lse"); MLA_ERROR_RUNTIME when a kernel
 *  fails to run. */
mla_status_t mla_layer_forward(mla_layer_t *layer, const mla_plan_t *plan,
                               const mla_forward_args_t *args, void *stream);

/** The merge of a DCP group's decode partials (Td = decodes x new tokens
 *  each, N heads, V the value head dim, W the group's size): the runtime
 *  device's memory, contiguous. */
typedef struct mla_dcp_merge_args {
  /** [W, Td, N, V], activation dtype: every rank's first Td rows of
   *  `output` after its mla_layer_forward, rank by rank (an all-gather). */
  mla_tensor_t gathered_output;
  /** [W, decodes, N, new tokens] f32: every rank's decode_lse. */
  mla_tensor_t gathered_lse;
  /** [Td, H, V], activation dtype: the merged rows of every head (H = N)
   *  or of this rank's share (H = N / W, heads dcp_rank H onwards). */
  mla_tensor_t output;
  /** Optional [decodes, H, new tokens] f32, the merged LSE; a zeroed
   *  tensor when not wanted. */
  mla_tensor_t lse;
} mla_dcp_merge_args_t;

/** The slot mapping of DCP rank `dcp_rank` of `dcp_world_size` (0 meaning
 *  1; tokens in runs of `dcp_interleave`, 0 meaning 1) for the new tokens of
 *  `metadata`: the batch as every rank sees it (its global seq_lens),
 *  with the rank's own block table, whose pages hold the rank's share in
 *  token order. Writes metadata->num_slots entries (num_actual_tokens
 *  when 0) to `slots`: the rank's slot of each new token it owns, -1 for
 *  the others and for padding. What mla_layer_plan checks a DCP rank's
 *  slot_mapping against. MLA_ERROR_INVALID_ARGUMENT for a bad group or
 *  block size; MLA_ERROR_INVALID_METADATA for a block table that cannot
 *  hold the rank's share, naming the request. */
mla_status_t mla_dcp_local_slot_mapping(const mla_batch_metadata_t *metadata,
                                        int64_t block_size,
                                        int64_t dcp_world_size,
                                        int64_t dcp_rank,
                                        int64_t dcp_interleave,
                                        int64_t *slots);

/** The engine's all-gather over its DCP group, which mla_layer_forward
 *  calls once per prefill context chunk of a step: every rank's
 *  `bytes_per_rank` bytes at `send` into `received`, rank by rank (world
 *  size x bytes_per_rank bytes). Both are the runtime device's memory,
 *  owned by the layer and valid during the call. The collective reads
 *  `send` after the work queued on `stream` before the call and finishes
 *  before the work queued on it afterwards (as torch's collectives do on
 *  the current stream; on the CPU, before it returns). Returns 0 on
 *  success; anything else ends the forward with MLA_ERROR_RUNTIME. */
typedef int32_t (*mla_dcp_all_gather_fn)(void *user_data, const void *send,
                                         void *received,
                                         size_t bytes_per_rank, void *stream);

/** Sets the all-gather a DCP rank's forward reads its prefills' context
 *  through: each context chunk's rows come from the ranks holding them and
 *  are read back in token order (vLLM's MLA prefill under DCP). A step
 *  whose prefills have context is MLA_ERROR_INVALID_ARGUMENT until it is
 *  set. NULL clears it. `user_data` is passed to every call. */
mla_status_t mla_layer_set_dcp_all_gather(mla_layer_t *layer,
                                          mla_dcp_all_gather_fn all_gather,
                                          void *user_data);

/** Decode context parallelism's step after the all-gather (give `lse`
 *  when capturing it into a CUDA graph: without it the layer allocates
 *  scratch for the LSE on first use), queued on
 *  `stream`: the exact decode rows from the group's partials (vLLM's
 *  cp_lse_ag_out_rs). The engine calls mla_layer_forward on every rank
 *  (with decode_lse), all-gathers each rank's first Td output rows and its
 *  decode_lse over its communicator, then calls this with `plan`, the
 *  step's plan. MLA_ERROR_INVALID_ARGUMENT for a layer without DCP, or a
 *  tensor of the wrong dtype or shape (named: "gathered_output",
 *  "gathered_lse", "output", "lse"). */
mla_status_t mla_layer_merge_dcp_partials(mla_layer_t *layer,
                                          const mla_plan_t *plan,
                                          const mla_dcp_merge_args_t *args,
                                          void *stream);

/*===----------------------------------------------------------------------===*
 * Decode steps replayed as CUDA graphs
 *
 * A serving engine replays its decode steps as CUDA graphs, one per batch
 * size it captures: the step's host side is then one planning call, one
 * copy of the metadata and one graph launch. A graph records addresses and
 * shapes, so
 *  - batches are planned at the captured shape (mla_layer_plan_decode_step
 *    pads them: padding requests have no context, their tokens' slots are
 *    padding, their output rows come out 0 and lse -inf);
 *  - every replay reads and writes the tensors given at capture (the
 *    engine's persistent input and output buffers), with maxDecodes *
 *    queryLen rows.
 *===----------------------------------------------------------------------===*/

typedef struct mla_decode_graph mla_decode_graph_t;

/** The fixed shape of a captured decode step. */
typedef struct mla_decode_graph_shape {
  /** Decode requests, padding included. */
  int64_t max_decodes;
  /** New tokens of every request (1, or 1 + speculative tokens). */
  int64_t query_len;
  /** Width of the block table: the most pages one request may name. */
  int64_t max_blocks_per_request;
  /** Pages of the paged cache. */
  int64_t num_cache_blocks;
  /** Most KV splits one request may take (the partial buffers are sized
   *  for it); 0 lets the layer choose twice a request's even share of the
   *  GPU. */
  int64_t max_splits_per_request;
} mla_decode_graph_shape_t;

/** Plans a decode-only batch padded to `shape` (as mla_layer_plan plans
 *  any batch), for mla_layer_replay or mla_layer_forward.
 *  MLA_ERROR_INVALID_ARGUMENT for a shape with a non-positive field or a
 *  query length above the layer's decode threshold;
 *  MLA_ERROR_INVALID_METADATA for a batch that does not fit the shape
 *  (prefills, more decodes, other query lengths, a wider block table) or
 *  is inconsistent. */
mla_status_t mla_layer_plan_decode_step(const mla_layer_t *layer,
                                        const mla_batch_metadata_t *metadata,
                                        const mla_decode_graph_shape_t *shape,
                                        mla_plan_t **plan);

/** Captures the decode step of `shape` on `args` as a CUDA graph (GPU
 *  runtimes; nothing runs until the first replay). The layer must outlive
 *  the graph: mla_layer_destroy refuses while it has graphs.
 *  MLA_ERROR_INVALID_ARGUMENT for a tensor that does not fit the shape
 *  (named as in mla_layer_forward) or a bad shape; MLA_ERROR_RUNTIME on a
 *  CPU runtime, for a backend that cannot be captured, or when the driver
 *  fails the capture. */
mla_status_t mla_layer_capture_decode_step(
    mla_layer_t *layer, const mla_decode_graph_shape_t *shape,
    const mla_forward_args_t *args, mla_decode_graph_t **graph);

/** The captured shape, with the split limit the layer chose: the shape
 *  to plan replays with. */
mla_status_t mla_decode_graph_get_shape(const mla_decode_graph_t *graph,
                                        mla_decode_graph_shape_t *shape);

/** Replays `graph` for `plan` (from mla_layer_plan_decode_step with the
 *  graph's shape), queued on `stream`; returns without waiting for the GPU.
 *  MLA_ERROR_INVALID_ARGUMENT for a plan of another shape or configuration,
 *  or a graph of another layer; MLA_ERROR_RUNTIME when the copy or the launch
 *  fails. */
mla_status_t mla_layer_replay(mla_layer_t *layer, mla_decode_graph_t *graph,
                              const mla_plan_t *plan, void *stream);

/** The two halves of mla_layer_replay, for an engine that captures the
 *  decode step into a CUDA graph of its own (torch.cuda.graph,
 *  cuStreamBeginCapture) rather than replaying the layer's:
 *
 *    capture once:  mla_layer_capture_decode_step, then, inside the
 *                   engine's capture, mla_decode_graph_enqueue
 *    every step:    mla_layer_plan_decode_step, mla_decode_graph_stage,
 *                   then the engine replays its graph
 *
 *  mla_decode_graph_stage copies the plan's metadata (a plan from
 *  mla_layer_plan_decode_step with the graph's shape) to the buffers the
 *  step's kernels read, ordered on `stream`; call it outside any capture,
 *  on the stream the engine's graph is replayed on. MLA_ERROR_INVALID_ARGUMENT
 *  as mla_layer_replay. */
mla_status_t mla_decode_graph_stage(mla_layer_t *layer,
                                    mla_decode_graph_t *graph,
                                    const mla_plan_t *plan, void *stream);

/** Queues the step's kernels on `stream`, one launch each, on the tensors
 *  given at capture, reading the metadata staged last: recorded into the
 *  engine's graph when `stream` is capturing, else run as a plain step.
 *  MLA_ERROR_INVALID_ARGUMENT for a graph of another layer;
 *  MLA_ERROR_RUNTIME when a launch fails. */
mla_status_t mla_decode_graph_enqueue(mla_layer_t *layer,
                                      mla_decode_graph_t *graph, void *stream);

/** Releases `graph`, after its last replay has finished. NULL is a no-op. */
mla_status_t mla_decode_graph_destroy(mla_decode_graph_t *graph);

/*===----------------------------------------------------------------------===*
 * Single kernels from MLIR source
 *===----------------------------------------------------------------------===*/

typedef struct mla_kernel mla_kernel_t;

/** Compiles the function `entry` of `source`, a module of mla ops in MLIR's
 *  textual form whose entry takes memrefs and returns nothing, for the
 *  runtime's device: the kernel this runtime already has for the same
 *  module, else from the kernel cache, else compiled (and stored).
 *  MLA_ERROR_COMPILE, with the diagnostics, when it does not parse, verify
 *  or lower, or has no such entry. */
mla_status_t mla_kernel_compile_source(mla_runtime_t *runtime,
                                       const char *source, const char *entry,
                                       mla_kernel_t **kernel);

/** Releases `kernel` (the runtime keeps its compiled code for later
 *  compiles of the same module). NULL is a no-op. */
mla_status_t mla_kernel_destroy(mla_kernel_t *kernel);

/** Where a kernel's compiled code came from when it was first asked for. */
typedef enum mla_kernel_origin MLA_ENUM_INT {
  MLA_KERNEL_COMPILED = 0,
  MLA_KERNEL_MEMORY_CACHE = 1,
  MLA_KERNEL_DISK_CACHE = 2
} mla_kernel_origin_t;

typedef struct mla_kernel_info {
  /** The entry's argument count. */
  int32_t num_args;
  mla_kernel_origin_t origin;
  /** Wall time from the module to loaded code. */
  double milliseconds;
  /** The kernel cache entry's name; owned by the kernel. */
  const char *cache_entry;
} mla_kernel_info_t;

mla_status_t mla_kernel_get_info(const mla_kernel_t *kernel,
                                 mla_kernel_info_t *info);

/** What argument `index` of the entry must be: its dtype, rank and sizes
 *  (-1 where dynamic) in a tensor whose data and strides are left 0. */
mla_status_t mla_kernel_argument(const mla_kernel_t *kernel, int32_t index,
                                 mla_tensor_t *spec);

/** Runs the kernel on `num_args` tensors in `args` (the runtime device's
 *  memory), queued on `stream` on a GPU, to completion on the CPU.
 *  MLA_ERROR_INVALID_ARGUMENT when a tensor does not fit the entry's
 *  signature (count, dtype, rank, static sizes, strides, NULL data; the
 *  argument is named by its index); MLA_ERROR_RUNTIME when the launch
 *  fails. */
mla_status_t mla_kernel_run(const mla_kernel_t *kernel,
                            const mla_tensor_t *args, size_t num_args,
                            void *stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MLA_MLA_H */
