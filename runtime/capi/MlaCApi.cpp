//===- MlaCApi.cpp - The C interface over the runtime and the MLA layer ---===//
//
// Every entry point runs its body through `guarded`, which turns any C++
// exception into a status (this file is compiled with exceptions on), and
// sets the calling thread's last-error message. Checks that decide the
// status (argument shapes, configuration, backend selection) run here,
// before the C++ call, so that each failure gets the status of the step
// that failed rather than a guess from the message text.
//
//===----------------------------------------------------------------------===//

#include "mla/mla.h"

#include "mla/Runtime/JitObject.h"
#include "mla/Runtime/MlaLayer.h"
#include "mla/Runtime/Runtime.h"
#include "mla/Support/Diagnostics.h"
#include "mla/Target/GpuTarget.h"

#include "llvm/Support/Error.h"

#include <atomic>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

using namespace mla;
using namespace mla::runtime;

namespace {

/// The strings a selection hands out, kept by their owner.
struct SelectionText {
  const Backend *backend = nullptr;
  mla_backend_source_t source = MLA_BACKEND_SOURCE_PRIORITY;
  int32_t numSkipped = 0;
  std::string skipped;
  std::string summary;
};

} // namespace

struct mla_runtime {
  std::unique_ptr<Runtime> runtime;
  std::string description;
  std::string cacheDirectory;

  std::mutex mutex;
  /// Live allocations by their pointer.
  std::unordered_map<void *, DeviceAllocation> allocations;
  /// Strings handed to callers (selections); node-based, so pointers into
  /// them stay valid until the runtime goes away.
  std::set<std::string> strings;
  std::atomic<int64_t> layers{0};
  std::atomic<int64_t> kernels{0};

  const char *intern(std::string text) {
    std::lock_guard<std::mutex> lock(mutex);
    return strings.insert(std::move(text)).first->c_str();
  }

  /// The plan family of layers configured as `fingerprint` says.
  uint64_t planFamily(const std::string &fingerprint);

private:
  std::map<std::string, uint64_t> planFamilies;
};

struct mla_layer {
  mla_runtime *owner = nullptr;
  /// The layers that plan alike: one number for every layer of this
  /// runtime with the same configuration and backend, unique in the
  /// process otherwise, so that a plan serves every such layer (a model's
  /// layers plan a step once) and no other, even when a new layer reuses a
  /// destroyed one's address.
  uint64_t planFamily = 0;
  std::unique_ptr<MlaLayer> layer;
  SelectionText selection;
  /// Graphs captured by the layer and not destroyed: they refer to it.
  std::atomic<int64_t> graphs{0};
};

struct mla_decode_graph {
  mla_layer *owner = nullptr;
  std::unique_ptr<DecodeStepGraph> graph;
};

struct mla_plan {
  uint64_t planFamily = 0;
  MlaStepPlan plan;
  std::string line;
};

struct mla_kernel {
  mla_runtime *owner = nullptr;
  std::shared_ptr<Kernel> kernel;
  std::string cacheEntry;
};

/// Plan families are numbered across runtimes: a plan of one runtime's
/// layer never passes for another runtime's.
static std::atomic<uint64_t> nextPlanFamily{1};

uint64_t mla_runtime::planFamily(const std::string &fingerprint) {
  std::lock_guard<std::mutex> lock(mutex);
  auto [at, added] = planFamilies.try_emplace(fingerprint, 0);
  if (added)
    at->second = nextPlanFamily++;
  return at->second;
}

namespace {

//===----------------------------------------------------------------------===//
// Status and the last error
//===----------------------------------------------------------------------===//

thread_local std::string lastError;

mla_status_t succeed() {
  lastError.clear();
  return MLA_OK;
}

mla_status_t fail(mla_status_t status, const std::string &message) {
  lastError = message;
  return status;
}

mla_status_t fail(mla_status_t status, const char *fn,
                  const std::string &message) {
  return fail(status, std::string(fn) + ": " + message);
}

mla_status_t fail(mla_status_t status, const char *fn, llvm::Error error) {
  return fail(status, fn, llvm::toString(std::move(error)));
}

/// Sets the message without allocating more than it must: the handlers
/// below may run because memory ran out.
void setLastErrorNoThrow(const char *fn, const char *what) {
  try {
    lastError = std::string(fn) + ": " + what;
  } catch (...) {
    lastError.clear();
  }
}

constexpr const char *kForeignPlan =
    "the plan was made by a layer of another configuration or runtime";

/// Everything a layer's plans depend on: its configuration (every field)
/// and its backend, whose kernels the decode schedule follows.
std::string planFingerprint(const MlaLayer &layer) {
  const MlaLayerConfig &c = layer.config();
  return c.selectionKey().str() + " scale=" + std::to_string(c.softmaxScale) +
         " workspace=" + std::to_string(c.workspaceTokens) +
         " max_model_len=" + std::to_string(c.maxModelLen) +
         " max_num_seqs=" + std::to_string(c.maxNumSeqs) +
         " backend=" + layer.selection().backend->name;
}

/// Runs `body(fn)`; no exception leaves it.
template <typename Body> mla_status_t guarded(const char *fn, Body &&body) {
  try {
    return body(fn);
  } catch (const std::bad_alloc &) {
    setLastErrorNoThrow(fn, "out of host memory");
    return MLA_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception &e) {
    setLastErrorNoThrow(fn, (std::string("unexpected exception: ") + e.what()).c_str());
    return MLA_ERROR_INTERNAL;
  } catch (...) {
    setLastErrorNoThrow(fn, "unexpected exception");
    return MLA_ERROR_INTERNAL;
  }
}

/// Returns MLA_ERROR_INVALID_ARGUMENT naming the argument when it is NULL.
#define MLA_REQUIRE(arg)                                                       \
  do {                                                                         \
    if (!(arg))                                                                \
      return fail(MLA_ERROR_INVALID_ARGUMENT, fn,                              \
                  "argument '" #arg "' is NULL");                              \
  } while (false)

std::string str(int64_t value) { return std::to_string(value); }

//===----------------------------------------------------------------------===//
// Element types and tensors
//===----------------------------------------------------------------------===//

std::optional<DType> toDType(mla_dtype_t dtype) {
  switch (dtype) {
  case MLA_DTYPE_F32:
    return DType::F32;
  case MLA_DTYPE_F16:
    return DType::F16;
  case MLA_DTYPE_BF16:
    return DType::BF16;
  case MLA_DTYPE_I32:
    return DType::I32;
  case MLA_DTYPE_I64:
    return DType::I64;
  }
  return std::nullopt;
}

mla_dtype_t fromDType(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return MLA_DTYPE_F32;
  case DType::F16:
    return MLA_DTYPE_F16;
  case DType::BF16:
    return MLA_DTYPE_BF16;
  case DType::I32:
    return MLA_DTYPE_I32;
  case DType::I64:
    return MLA_DTYPE_I64;
  }
  return MLA_DTYPE_F32;
}

std::string badDType(const std::string &what, mla_dtype_t dtype) {
  return what + " has an invalid dtype (" + str(static_cast<int64_t>(dtype)) +
         "; valid: MLA_DTYPE_F32, _F16, _BF16, _I32, _I64)";
}

/// `tensor` as a BufferView, checking what every tensor must satisfy: a
/// dtype of the enum, a rank in [0, MLA_MAX_RANK], non-negative sizes.
mla_status_t toView(const char *fn, const std::string &what,
                    const mla_tensor_t &tensor, BufferView &view) {
  std::optional<DType> dtype = toDType(tensor.dtype);
  if (!dtype)
    return fail(MLA_ERROR_INVALID_ARGUMENT, fn, badDType(what, tensor.dtype));
  if (tensor.rank < 0 || tensor.rank > MLA_MAX_RANK)
    return fail(MLA_ERROR_INVALID_ARGUMENT, fn,
                what + " has rank " + str(tensor.rank) + ", must be 0 to " +
                    str(MLA_MAX_RANK));
  view.data = tensor.data;
  view.dtype = *dtype;
  view.shape.assign(tensor.shape, tensor.shape + tensor.rank);
  view.strides.assign(tensor.strides, tensor.strides + tensor.rank);
  for (int32_t d = 0; d < tensor.rank; ++d)
    if (tensor.shape[d] < 0)
      return fail(MLA_ERROR_INVALID_ARGUMENT, fn,
                  what + " has a negative size in dimension " + str(d) +
                      ": " + view.describe());
  return MLA_OK;
}

/// The status of a failed C++ call: INVALID_ARGUMENT for an ArgumentError
/// (a buffer of the wrong type, shape or layout), else `otherwise`.
mla_status_t statusOf(const llvm::Error &error, mla_status_t otherwise) {
  return error.isA<mla::ArgumentError>() ? MLA_ERROR_INVALID_ARGUMENT
                                         : otherwise;
}

/// Records a failed C++ call: INVALID_ARGUMENT for an ArgumentError, else
/// `otherwise`.
mla_status_t failCall(mla_status_t otherwise, const char *fn,
                      llvm::Error error) {
  mla_status_t status = statusOf(error, otherwise);
  return fail(status, fn, std::move(error));
}

//===----------------------------------------------------------------------===//
// Configuration and selection
//===----------------------------------------------------------------------===//

/// `c` as the C++ layer config, checking every field the C++ side would
/// otherwise reject late or truncate (the selection key holds ints).
mla_status_t toLayerConfig(const char *fn, const mla_layer_config_t &c,
                           MlaLayerConfig &out) {
  struct Field {
    const char *name;
    int64_t value;
    int64_t min;
  };
  const Field fields[] = {
      {"num_heads", c.num_heads, 1},
      {"kv_lora_rank", c.kv_lora_rank, 1},
      {"qk_nope_head_dim", c.qk_nope_head_dim, 1},
      {"qk_rope_head_dim", c.qk_rope_head_dim, 1},
      {"v_head_dim", c.v_head_dim, 1},
      {"block_size", c.block_size, 1},
      {"decode_threshold", c.decode_threshold, 1},
      {"max_model_len", c.max_model_len, 1},
      {"max_num_seqs", c.max_num_seqs, 1},
      {"workspace_tokens", c.workspace_tokens, 0},
  };
  for (const Field &f : fields) {
    if (f.value < f.min)
      return fail(MLA_ERROR_INVALID_ARGUMENT, fn,
                  std::string("config->") + f.name + " must be " +
                      (f.min ? "positive" : "non-negative") + ", got " +
                      str(f.value));
    if (f.value > INT32_MAX)
      return fail(MLA_ERROR_INVALID_ARGUMENT, fn,
                  std::string("config->") + f.name + " is too large (" +
                      str(f.value) + ")");
  }
  for (auto [field, dtype] : {std::pair{"activation_dtype", c.activation_dtype},
                              std::pair{"cache_dtype", c.cache_dtype}}) {
    std::optional<DType> t = toDType(dtype);
    if (!t)
      return fail(MLA_ERROR_INVALID_ARGUMENT, fn,
                  badDType(std::string("config->") + field, dtype));
    if (!isFloat(*t))
      return fail(MLA_ERROR_INVALID_ARGUMENT, fn,
                  std::string("config->") + field + " must be f32, f16 or "
                  "bf16, got " + std::string(name(*t)));
  }
  if (!std::isfinite(c.softmax_scale) || c.softmax_scale < 0)
    return fail(MLA_ERROR_INVALID_ARGUMENT, fn,
                "config->softmax_scale must be finite and non-negative (0: "
                "the default), got " + std::to_string(c.softmax_scale));

  out = MlaLayerConfig();
  out.dims.numHeads = c.num_heads;
  out.dims.kvLoraRank = c.kv_lora_rank;
  out.dims.qkNopeHeadDim = c.qk_nope_head_dim;
  out.dims.ropeDim = c.qk_rope_head_dim;
  out.dims.vHeadDim = c.v_head_dim;
  out.activation = *toDType(c.activation_dtype);
  out.cacheDType = *toDType(c.cache_dtype);
  out.blockSize = c.block_size;
  out.softmaxScale = c.softmax_scale;
  out.decodeThreshold = c.decode_threshold;
  out.needsDecodeLse = c.needs_decode_lse != 0;
  out.wantsCudaGraphs = c.wants_cuda_graphs != 0;
  out.maxModelLen = c.max_model_len;
  out.maxNumSeqs = c.max_num_seqs;
  out.workspaceTokens = c.workspace_tokens;
  out.backend = c.backend ? c.backend : "";
  return MLA_OK;
}

SelectionText describeSelection(const Selection &s) {
  SelectionText text;
  text.backend = s.backend;
  text.source = s.source == ChoiceSource::Api ? MLA_BACKEND_SOURCE_REQUESTED
                : s.source == ChoiceSource::Environment
                    ? MLA_BACKEND_SOURCE_ENVIRONMENT
                    : MLA_BACKEND_SOURCE_PRIORITY;
  text.numSkipped = static_cast<int32_t>(s.skipped.size());
  for (const Rejection &r : s.skipped) {
    if (!text.skipped.empty())
      text.skipped += "\n";
    text.skipped += r.backend ? r.backend->name : std::string("?");
    text.skipped += ": ";
    for (size_t i = 0; i < r.reasons.size(); ++i)
      text.skipped += (i ? "; " : "") + r.reasons[i];
  }
  text.summary = s.str();
  return text;
}

/// `text` as the C struct, its strings `skipped` and `summary` kept by the
/// caller's owner (the runtime or the layer); the backend's own strings
/// live as long as the registry, the whole process.
static_assert(int(CudaGraphSupport::NEVER) == MLA_CUDA_GRAPHS_NEVER &&
                  int(CudaGraphSupport::UNIFORM_SINGLE_TOKEN_DECODE) ==
                      MLA_CUDA_GRAPHS_UNIFORM_SINGLE_TOKEN_DECODE &&
                  int(CudaGraphSupport::UNIFORM_BATCH) ==
                      MLA_CUDA_GRAPHS_UNIFORM_BATCH &&
                  int(CudaGraphSupport::ALWAYS) == MLA_CUDA_GRAPHS_ALWAYS,
              "the C levels are the C++ ones");

mla_backend_selection_t toCSelection(const SelectionText &text,
                                     const char *skipped, const char *summary) {
  mla_backend_selection_t c;
  c.backend = text.backend->name.c_str();
  c.source = text.source;
  c.num_skipped = text.numSkipped;
  c.skipped = skipped;
  c.summary = summary;
  c.description = text.backend->description.c_str();
  c.cuda_graphs =
      static_cast<mla_cuda_graph_support_t>(text.backend->cudaGraphs);
  return c;
}

//===----------------------------------------------------------------------===//
// Layer buffers
//===----------------------------------------------------------------------===//

/// The weights as views; their types and shapes are checked by
/// MlaLayer::create.
mla_status_t toWeights(const char *fn, const mla_layer_weights_t &w,
                       MlaLayerWeights &out) {
  if (mla_status_t s = toView(fn, "'kv_b_proj'", w.kv_b_proj, out.kvBProj))
    return s;
  if (mla_status_t s = toView(fn, "'w_uk_t'", w.w_uk_t, out.wUkT))
    return s;
  return toView(fn, "'w_uv'", w.w_uv, out.wUv);
}

/// The step's tensors as views; their types and shapes are checked by
/// MlaLayer::forward.
mla_status_t toForwardArgs(const char *fn, const mla_forward_args_t &a,
                           MlaForwardArgs &out) {
  struct Arg {
    const char *name;
    const mla_tensor_t &tensor;
    BufferView &view;
  };
  const Arg args[] = {{"q", a.q, out.q},
                      {"kv_c", a.kv_c, out.kvC},
                      {"k_pe", a.k_pe, out.kPe},
                      {"kv_cache", a.kv_cache, out.kvCache},
                      {"output", a.output, out.output}};
  for (const Arg &arg : args)
    if (mla_status_t s = toView(fn, std::string("'") + arg.name + "'",
                                arg.tensor, arg.view))
      return s;
  // The decode LSE is optional: a zeroed tensor means "not wanted".
  if (a.decode_lse.data || a.decode_lse.rank != 0)
    return toView(fn, "'decode_lse'", a.decode_lse, out.decodeLse);
  return MLA_OK;
}

} // namespace

//===----------------------------------------------------------------------===//
// Status and errors
//===----------------------------------------------------------------------===//

extern "C" const char *mla_status_string(mla_status_t status) {
  switch (status) {
  case MLA_OK:
    return "MLA_OK";
  case MLA_ERROR_INVALID_ARGUMENT:
    return "MLA_ERROR_INVALID_ARGUMENT";
  case MLA_ERROR_NO_DEVICE:
    return "MLA_ERROR_NO_DEVICE";
  case MLA_ERROR_COMPILE:
    return "MLA_ERROR_COMPILE";
  case MLA_ERROR_BACKEND_REJECTED:
    return "MLA_ERROR_BACKEND_REJECTED";
  case MLA_ERROR_INVALID_METADATA:
    return "MLA_ERROR_INVALID_METADATA";
  case MLA_ERROR_RUNTIME:
    return "MLA_ERROR_RUNTIME";
  case MLA_ERROR_OUT_OF_MEMORY:
    return "MLA_ERROR_OUT_OF_MEMORY";
  case MLA_ERROR_INTERNAL:
    return "MLA_ERROR_INTERNAL";
  }
  return "unknown status";
}

extern "C" const char *mla_last_error(void) { return lastError.c_str(); }

//===----------------------------------------------------------------------===//
// Version
//===----------------------------------------------------------------------===//

extern "C" mla_status_t mla_version(mla_version_info_t *info) {
  return guarded("mla_version", [&](const char *fn) {
    MLA_REQUIRE(info);
    // Built once, on the first call; function-local statics are
    // initialized thread-safely.
    static const std::string version = std::to_string(MLA_VERSION_MAJOR) +
                                       "." + std::to_string(MLA_VERSION_MINOR) +
                                       "." + std::to_string(MLA_VERSION_PATCH);
    static const std::string chips = GpuTarget::allChips(",");
    info->major = MLA_VERSION_MAJOR;
    info->minor = MLA_VERSION_MINOR;
    info->patch = MLA_VERSION_PATCH;
    info->version = version.c_str();
    info->build_identity = compilerBuildIdentity().c_str();
    info->gpu_chips = chips.c_str();
    info->host_target = hostTargetDescription().c_str();
    return succeed();
  });
}

//===----------------------------------------------------------------------===//
// Element types and tensors
//===----------------------------------------------------------------------===//

extern "C" mla_status_t mla_dtype_size(mla_dtype_t dtype, size_t *bytes) {
  return guarded("mla_dtype_size", [&](const char *fn) {
    MLA_REQUIRE(bytes);
    std::optional<DType> t = toDType(dtype);
    if (!t)
      return fail(MLA_ERROR_INVALID_ARGUMENT, fn, badDType("'dtype'", dtype));
    *bytes = byteWidth(*t);
    return succeed();
  });
}

extern "C" mla_status_t mla_dtype_name(mla_dtype_t dtype, const char **name) {
  return guarded("mla_dtype_name", [&](const char *fn) {
    MLA_REQUIRE(name);
    std::optional<DType> t = toDType(dtype);
    if (!t)
      return fail(MLA_ERROR_INVALID_ARGUMENT, fn, badDType("'dtype'", dtype));
    // The names are string literals, so their data is NUL-terminated.
    *name = mla::name(*t).data();
    return succeed();
  });
}

extern "C" mla_status_t mla_tensor_contiguous(void *data, mla_dtype_t dtype,
                                              int32_t rank,
                                              const int64_t *shape,
                                              mla_tensor_t *tensor) {
  return guarded("mla_tensor_contiguous", [&](const char *fn) {
    MLA_REQUIRE(tensor);
    if (!toDType(dtype))
      return fail(MLA_ERROR_INVALID_ARGUMENT, fn, badDType("'dtype'", dtype));
    if (rank < 0 || rank > MLA_MAX_RANK)
      return fail(MLA_ERROR_INVALID_ARGUMENT, fn,
                  "rank " + str(rank) + " is outside 0 to " +
                      str(MLA_MAX_RANK));
    if (rank > 0)
      MLA_REQUIRE(shape);
    for (int32_t d = 0; d < rank; ++d)
      if (shape[d] < 0)
        return fail(MLA_ERROR_INVALID_ARGUMENT, fn,
                    "shape[" + str(d) + "] is negative (" + str(shape[d]) +
                        ")");
    mla_tensor_t result;
    std::memset(&result, 0, sizeof(result));
    result.data = data;
    result.dtype = dtype;
    result.rank = rank;
    int64_t stride = 1;
    for (int32_t d = rank; d-- > 0;) {
      result.shape[d] = shape[d];
      result.strides[d] = stride;
      stride *= shape[d];
    }
    *tensor = result;
    return succeed();
  });
}

extern "C" mla_status_t mla_tensor_span_bytes(const mla_tensor_t *tensor,
                                              size_t *bytes) {
  return guarded("mla_tensor_span_bytes", [&](const char *fn) {
    MLA_REQUIRE(tensor);
    MLA_REQUIRE(bytes);
    BufferView view;
    if (mla_status_t s = toView(fn, "'tensor'", *tensor, view))
      return s;
    uint64_t last = 0;
    for (size_t d = 0; d < view.shape.size(); ++d) {
      if (view.shape[d] == 0) {
        *bytes = 0;
        return succeed();
      }
      if (view.strides[d] < 0)
        return fail(MLA_ERROR_INVALID_ARGUMENT, fn,
                    "'tensor' has a negative stride in dimension " +
                        str(static_cast<int64_t>(d)));
      last += uint64_t(view.shape[d] - 1) * uint64_t(view.strides[d]);
    }
    *bytes = size_t((last + 1) * byteWidth(view.dtype));
    return succeed();
  });
}

//===----------------------------------------------------------------------===//
// Runtime
//===----------------------------------------------------------------------===//

extern "C" mla_status_t
mla_runtime_options_default(mla_runtime_options_t *options) {
  return guarded("mla_runtime_options_default", [&](const char *fn) {
    MLA_REQUIRE(options);
    std::memset(options, 0, sizeof(*options));
    options->device = MLA_DEVICE_AUTO;
    options->gpu_ordinal = 0;
    return succeed();
  });
}

extern "C" mla_status_t mla_runtime_create(const mla_runtime_options_t *options,
                                           mla_runtime_t **runtime) {
  return guarded("mla_runtime_create", [&](const char *fn) {
    MLA_REQUIRE(runtime);
    mla_runtime_options_t given;
    mla_runtime_options_default(&given);
    if (options)
      given = *options;

    RuntimeOptions o;
    switch (given.device) {
    case MLA_DEVICE_AUTO:
      o.device = DevicePreference::Auto;
      break;
    case MLA_DEVICE_CPU:
      o.device = DevicePreference::Cpu;
      break;
    case MLA_DEVICE_GPU:
      o.device = DevicePreference::Gpu;
      break;
    default:
      return fail(MLA_ERROR_INVALID_ARGUMENT, fn,
                  "options->device is not an mla_device_preference_t (" +
                      str(static_cast<int64_t>(given.device)) + ")");
    }
    if (given.gpu_ordinal < 0)
      return fail(MLA_ERROR_INVALID_ARGUMENT, fn,
                  "options->gpu_ordinal must be non-negative, got " +
                      str(given.gpu_ordinal));
    o.gpuOrdinal = given.gpu_ordinal;
    o.cache = KernelCache::Config::fromEnvironment();
    if (given.cache_dir && given.cache_dir[0]) {
      o.cache.directory = given.cache_dir;
      const char *disabled = std::getenv("MLA_CACHE_DISABLE");
      o.cache.diskEnabled = !(disabled && std::strcmp(disabled, "1") == 0);
    }
    if (given.disable_disk_cache)
      o.cache.diskEnabled = false;
    if (given.force_recompile)
      o.cache.forceRecompile = true;
    if (given.log) {
      mla_log_fn log = given.log;
      void *user = given.log_user;
      o.log = [log, user](const std::string &line) { log(line.c_str(), user); };
    }

    auto created = Runtime::create(std::move(o));
    if (!created)
      return fail(given.device == MLA_DEVICE_GPU ? MLA_ERROR_NO_DEVICE
                                                 : MLA_ERROR_RUNTIME,
                  fn, created.takeError());
    auto handle = std::make_unique<mla_runtime>();
    handle->runtime = std::move(*created);
    handle->description = handle->runtime->deviceDescription();
    const KernelCache::Config &cache = handle->runtime->kernelCache().config();
    handle->cacheDirectory = cache.diskEnabled ? cache.directory : "";
    *runtime = handle.release();
    return succeed();
  });
}

extern "C" mla_status_t mla_runtime_destroy(mla_runtime_t *runtime) {
  return guarded("mla_runtime_destroy", [&](const char *fn) {
    if (!runtime)
      return succeed();
    size_t allocations;
    {
      std::lock_guard<std::mutex> lock(runtime->mutex);
      allocations = runtime->allocations.size();
    }
    int64_t layers = runtime->layers, kernels = runtime->kernels;
    if (layers || kernels || allocations)
      return fail(MLA_ERROR_INVALID_ARGUMENT, fn,
                  "the runtime still has " + str(layers) + " layer(s), " +
                      str(kernels) + " kernel(s) and " +
                      str(static_cast<int64_t>(allocations)) +
                      " allocation(s) alive; destroy or free them first "
                      "(nothing was released)");
    delete runtime;
    return succeed();
  });
}

extern "C" mla_status_t mla_runtime_device_kind(const mla_runtime_t *runtime,
                                                mla_device_kind_t *kind) {
  return guarded("mla_runtime_device_kind", [&](const char *fn) {
    MLA_REQUIRE(runtime);
    MLA_REQUIRE(kind);
    *kind = runtime->runtime->deviceKind() == DeviceKind::CUDA
                ? MLA_DEVICE_KIND_CUDA
                : MLA_DEVICE_KIND_CPU;
    return succeed();
  });
}

extern "C" mla_status_t
mla_runtime_device_description(const mla_runtime_t *runtime,
                               const char **description) {
  return guarded("mla_runtime_device_description", [&](const char *fn) {
    MLA_REQUIRE(runtime);
    MLA_REQUIRE(description);
    *description = runtime->description.c_str();
    return succeed();
  });
}

extern "C" mla_status_t mla_runtime_parallelism(const mla_runtime_t *runtime,
                                                int64_t *parallelism) {
  return guarded("mla_runtime_parallelism", [&](const char *fn) {
    MLA_REQUIRE(runtime);
    MLA_REQUIRE(parallelism);
    *parallelism = runtime->runtime->parallelism();
    return succeed();
  });
}

extern "C" mla_status_t mla_runtime_cache_dir(const mla_runtime_t *runtime,
                                              const char **directory) {
  return guarded("mla_runtime_cache_dir", [&](const char *fn) {
    MLA_REQUIRE(runtime);
    MLA_REQUIRE(directory);
    *directory = runtime->cacheDirectory.c_str();
    return succeed();
  });
}

extern "C" mla_status_t mla_runtime_cache_stats(const mla_runtime_t *runtime,
                                                mla_cache_stats_t *stats) {
  return guarded("mla_runtime_cache_stats", [&](const char *fn) {
    MLA_REQUIRE(runtime);
    MLA_REQUIRE(stats);
    KernelCacheStats s = runtime->runtime->cacheStats();
    stats->memory_hits = s.memoryHits;
    stats->disk_hits = s.diskHits;
    stats->misses = s.misses;
    stats->compiles = s.compiles;
    stats->corrupt_entries = s.corruptEntries;
    stats->store_failures = s.storeFailures;
    return succeed();
  });
}

//===----------------------------------------------------------------------===//
// Device memory
//===----------------------------------------------------------------------===//

extern "C" mla_status_t mla_runtime_allocate(mla_runtime_t *runtime,
                                             size_t bytes, void **pointer) {
  return guarded("mla_runtime_allocate", [&](const char *fn) {
    MLA_REQUIRE(runtime);
    MLA_REQUIRE(pointer);
    if (bytes == 0) {
      *pointer = nullptr;
      return succeed();
    }
    auto allocation = runtime->runtime->allocate(bytes);
    if (!allocation)
      return fail(MLA_ERROR_OUT_OF_MEMORY, fn,
                  std::to_string(bytes) + " bytes: " +
                      llvm::toString(allocation.takeError()));
    void *data = allocation->data();
    {
      std::lock_guard<std::mutex> lock(runtime->mutex);
      runtime->allocations.emplace(data, std::move(*allocation));
    }
    *pointer = data;
    return succeed();
  });
}

extern "C" mla_status_t mla_runtime_free(mla_runtime_t *runtime,
                                         void *pointer) {
  return guarded("mla_runtime_free", [&](const char *fn) {
    MLA_REQUIRE(runtime);
    if (!pointer)
      return succeed();
    DeviceAllocation released;
    {
      std::lock_guard<std::mutex> lock(runtime->mutex);
      auto found = runtime->allocations.find(pointer);
      if (found == runtime->allocations.end()) {
        char text[32];
        std::snprintf(text, sizeof(text), "%p", pointer);
        return fail(MLA_ERROR_INVALID_ARGUMENT, fn,
                    std::string("pointer ") + text +
                        " was not allocated by this runtime (or was freed "
                        "already)");
      }
      released = std::move(found->second);
      runtime->allocations.erase(found);
    }
    // `released` goes away here, outside the lock.
    return succeed();
  });
}

extern "C" mla_status_t mla_runtime_upload(mla_runtime_t *runtime,
                                           void *device, const void *host,
                                           size_t bytes, void *stream) {
  return guarded("mla_runtime_upload", [&](const char *fn) {
    MLA_REQUIRE(runtime);
    if (bytes) {
      MLA_REQUIRE(device);
      MLA_REQUIRE(host);
    }
    if (llvm::Error error =
            runtime->runtime->upload(device, host, bytes, stream))
      return fail(MLA_ERROR_RUNTIME, fn, std::move(error));
    return succeed();
  });
}

extern "C" mla_status_t mla_runtime_download(mla_runtime_t *runtime,
                                             void *host, const void *device,
                                             size_t bytes, void *stream) {
  return guarded("mla_runtime_download", [&](const char *fn) {
    MLA_REQUIRE(runtime);
    if (bytes) {
      MLA_REQUIRE(host);
      MLA_REQUIRE(device);
    }
    if (llvm::Error error =
            runtime->runtime->download(host, device, bytes, stream))
      return fail(MLA_ERROR_RUNTIME, fn, std::move(error));
    return succeed();
  });
}

extern "C" mla_status_t mla_runtime_synchronize(mla_runtime_t *runtime,
                                                void *stream) {
  return guarded("mla_runtime_synchronize", [&](const char *fn) {
    MLA_REQUIRE(runtime);
    if (llvm::Error error = runtime->runtime->synchronize(stream))
      return fail(MLA_ERROR_RUNTIME, fn, std::move(error));
    return succeed();
  });
}

//===----------------------------------------------------------------------===//
// Configuration and backend selection
//===----------------------------------------------------------------------===//

extern "C" mla_status_t mla_layer_config_default(mla_layer_config_t *config) {
  return guarded("mla_layer_config_default", [&](const char *fn) {
    MLA_REQUIRE(config);
    const MlaLayerConfig defaults;
    std::memset(config, 0, sizeof(*config));
    config->num_heads = defaults.dims.numHeads;
    config->kv_lora_rank = defaults.dims.kvLoraRank;
    config->qk_nope_head_dim = defaults.dims.qkNopeHeadDim;
    config->qk_rope_head_dim = defaults.dims.ropeDim;
    config->v_head_dim = defaults.dims.vHeadDim;
    config->activation_dtype = fromDType(defaults.activation);
    config->cache_dtype = fromDType(defaults.cacheDType);
    config->block_size = defaults.blockSize;
    config->softmax_scale = defaults.softmaxScale;
    config->decode_threshold = defaults.decodeThreshold;
    config->needs_decode_lse = defaults.needsDecodeLse;
    config->wants_cuda_graphs = defaults.wantsCudaGraphs;
    config->max_model_len = defaults.maxModelLen;
    config->max_num_seqs = defaults.maxNumSeqs;
    config->workspace_tokens = defaults.workspaceTokens;
    config->backend = nullptr;
    return succeed();
  });
}

extern "C" mla_status_t
mla_runtime_select_backend(mla_runtime_t *runtime,
                           const mla_layer_config_t *config,
                           mla_backend_selection_t *selection) {
  return guarded("mla_runtime_select_backend", [&](const char *fn) {
    MLA_REQUIRE(runtime);
    MLA_REQUIRE(config);
    MLA_REQUIRE(selection);
    MlaLayerConfig c;
    if (mla_status_t s = toLayerConfig(fn, *config, c))
      return s;
    auto chosen = runtime->runtime->selectBackend(
        c.attentionConfig(*runtime->runtime), c.backend);
    if (!chosen)
      return fail(MLA_ERROR_BACKEND_REJECTED, fn, chosen.takeError());
    SelectionText text = describeSelection(*chosen);
    *selection = toCSelection(text, runtime->intern(std::move(text.skipped)),
                              runtime->intern(std::move(text.summary)));
    return succeed();
  });
}

//===----------------------------------------------------------------------===//
// Layer
//===----------------------------------------------------------------------===//

extern "C" mla_status_t mla_layer_create(mla_runtime_t *runtime,
                                         const mla_layer_config_t *config,
                                         const mla_layer_weights_t *weights,
                                         mla_layer_t **layer) {
  return guarded("mla_layer_create", [&](const char *fn) {
    MLA_REQUIRE(runtime);
    MLA_REQUIRE(config);
    MLA_REQUIRE(weights);
    MLA_REQUIRE(layer);
    MlaLayerConfig c;
    if (mla_status_t s = toLayerConfig(fn, *config, c))
      return s;
    MlaLayerWeights w;
    if (mla_status_t s = toWeights(fn, *weights, w))
      return s;
    // Selection first (without logging; the layer logs its own), so that a
    // refusal is told apart from a compile failure.
    Runtime &rt = *runtime->runtime;
    auto chosen = rt.backends().select(c.attentionConfig(rt), c.backend);
    if (!chosen)
      return fail(MLA_ERROR_BACKEND_REJECTED, fn, chosen.takeError());
    auto created = MlaLayer::create(rt, std::move(c), std::move(w));
    if (!created)
      return failCall(MLA_ERROR_COMPILE, fn, created.takeError());
    auto handle = std::make_unique<mla_layer>();
    handle->owner = runtime;
    handle->layer = std::move(*created);
    handle->planFamily = runtime->planFamily(planFingerprint(*handle->layer));
    handle->selection = describeSelection(handle->layer->selection());
    ++runtime->layers;
    *layer = handle.release();
    return succeed();
  });
}

extern "C" mla_status_t mla_layer_destroy(mla_layer_t *layer) {
  return guarded("mla_layer_destroy", [&](const char *) {
    if (!layer)
      return succeed();
    if (int64_t graphs = layer->graphs)
      return fail(MLA_ERROR_INVALID_ARGUMENT, "mla_layer_destroy",
                  "the layer still has " + str(graphs) +
                      " decode graph(s) alive; destroy them first");
    mla_runtime *owner = layer->owner;
    delete layer;
    --owner->layers;
    return succeed();
  });
}

extern "C" mla_status_t mla_layer_selection(const mla_layer_t *layer,
                                            mla_backend_selection_t *selection) {
  return guarded("mla_layer_selection", [&](const char *fn) {
    MLA_REQUIRE(layer);
    MLA_REQUIRE(selection);
    const SelectionText &text = layer->selection;
    *selection =
        toCSelection(text, text.skipped.c_str(), text.summary.c_str());
    return succeed();
  });
}

namespace {

/// `m` as the C++ metadata, its counts and arrays checked before any is
/// read (`numCacheBlocks` is checked with the counts).
mla_status_t toMetadata(const char *fn, const mla_batch_metadata_t &m,
                        int64_t num_cache_blocks, CommonAttentionMetadata &c) {
  // The counts size the arrays read below, so they are checked first.
  struct Count {
    const char *name;
    int64_t value;
  };
  const Count counts[] = {{"num_reqs", m.num_reqs},
                          {"max_blocks", m.max_blocks},
                          {"num_actual_tokens", m.num_actual_tokens},
                          {"num_slots", m.num_slots},
                          {"num_cache_blocks", num_cache_blocks}};
  for (const Count &count : counts) {
    if (count.value < 0)
      return fail(MLA_ERROR_INVALID_METADATA, fn,
                  std::string(count.name) + " must be non-negative, got " +
                      str(count.value));
    if (count.value > INT32_MAX)
      return fail(MLA_ERROR_INVALID_METADATA, fn,
                  std::string(count.name) + " is too large (" +
                      str(count.value) + ")");
  }
  const int64_t tableSize = m.num_reqs * m.max_blocks;
  const int64_t numSlots = m.num_slots ? m.num_slots : m.num_actual_tokens;
  if (!m.query_start_loc)
    return fail(MLA_ERROR_INVALID_ARGUMENT, fn,
                "metadata->query_start_loc is NULL (it has num_reqs + 1 "
                "entries)");
  if (m.num_reqs > 0 && !m.seq_lens)
    return fail(MLA_ERROR_INVALID_ARGUMENT, fn,
                "metadata->seq_lens is NULL but num_reqs is " +
                    str(m.num_reqs));
  if (tableSize > 0 && !m.block_table)
    return fail(MLA_ERROR_INVALID_ARGUMENT, fn,
                "metadata->block_table is NULL but num_reqs * max_blocks "
                "is " +
                    str(tableSize));
  if (numSlots > 0 && !m.slot_mapping)
    return fail(MLA_ERROR_INVALID_ARGUMENT, fn,
                "metadata->slot_mapping is NULL but it has " + str(numSlots) +
                    " entries");

  c.queryStartLoc.assign(m.query_start_loc, m.query_start_loc + m.num_reqs + 1);
  if (m.num_reqs > 0)
    c.seqLens.assign(m.seq_lens, m.seq_lens + m.num_reqs);
  if (tableSize > 0)
    c.blockTable.assign(m.block_table, m.block_table + tableSize);
  if (numSlots > 0)
    c.slotMapping.assign(m.slot_mapping, m.slot_mapping + numSlots);
  c.maxBlocks = m.max_blocks;
  c.numReqs = m.num_reqs;
  c.numActualTokens = m.num_actual_tokens;
  c.maxQueryLen = m.max_query_len;
  c.maxSeqLen = m.max_seq_len;

  return MLA_OK;
}

/// The shape as the C++ one, its fields checked by the layer.
DecodeGraphShape toShape(const mla_decode_graph_shape_t &s) {
  return {s.max_decodes, s.query_len, s.max_blocks_per_request,
          s.num_cache_blocks, s.max_splits_per_request};
}

} // namespace

extern "C" mla_status_t mla_layer_plan(const mla_layer_t *layer,
                                       const mla_batch_metadata_t *metadata,
                                       int64_t num_cache_blocks,
                                       mla_plan_t **plan) {
  return guarded("mla_layer_plan", [&](const char *fn) {
    MLA_REQUIRE(layer);
    MLA_REQUIRE(metadata);
    MLA_REQUIRE(plan);
    CommonAttentionMetadata c;
    if (mla_status_t status = toMetadata(fn, *metadata, num_cache_blocks, c))
      return status;
    auto planned = layer->layer->plan(c, num_cache_blocks);
    if (!planned)
      return fail(MLA_ERROR_INVALID_METADATA, fn, planned.takeError());
    auto handle = std::make_unique<mla_plan>();
    handle->planFamily = layer->planFamily;
    handle->plan = std::move(*planned);
    handle->line = handle->plan.str();
    *plan = handle.release();
    return succeed();
  });
}

extern "C" mla_status_t mla_plan_destroy(mla_plan_t *plan) {
  return guarded("mla_plan_destroy", [&](const char *) {
    delete plan;
    return succeed();
  });
}

extern "C" mla_status_t mla_plan_get_info(const mla_plan_t *plan,
                                          mla_plan_info_t *info) {
  return guarded("mla_plan_get_info", [&](const char *fn) {
    MLA_REQUIRE(plan);
    MLA_REQUIRE(info);
    const MlaStepPlan &p = plan->plan;
    info->num_decodes = p.split.numDecodes;
    info->num_prefills = p.split.numPrefills;
    info->num_decode_tokens = p.split.numDecodeTokens;
    info->num_prefill_tokens = p.split.numPrefillTokens;
    info->num_actual_tokens = p.numActualTokens;
    info->decode_query_len = p.decodeQueryLen;
    info->num_context_chunks = p.split.numPrefills ? p.prefill.chunks.numChunks
                                                   : 0;
    info->num_cache_blocks = p.numCacheBlocks;
    return succeed();
  });
}

extern "C" mla_status_t mla_plan_describe(const mla_plan_t *plan,
                                          const char **line) {
  return guarded("mla_plan_describe", [&](const char *fn) {
    MLA_REQUIRE(plan);
    MLA_REQUIRE(line);
    *line = plan->line.c_str();
    return succeed();
  });
}

extern "C" mla_status_t mla_layer_forward(mla_layer_t *layer,
                                          const mla_plan_t *plan,
                                          const mla_forward_args_t *args,
                                          void *stream) {
  return guarded("mla_layer_forward", [&](const char *fn) {
    MLA_REQUIRE(layer);
    MLA_REQUIRE(plan);
    MLA_REQUIRE(args);
    if (plan->planFamily != layer->planFamily)
      return fail(MLA_ERROR_INVALID_ARGUMENT, fn, kForeignPlan);
    MlaForwardArgs a;
    if (mla_status_t s = toForwardArgs(fn, *args, a))
      return s;
    if (llvm::Error error = layer->layer->forward(plan->plan, a, stream))
      return failCall(MLA_ERROR_RUNTIME, fn, std::move(error));
    return succeed();
  });
}

extern "C" mla_status_t mla_layer_plan_decode_step(
    const mla_layer_t *layer, const mla_batch_metadata_t *metadata,
    const mla_decode_graph_shape_t *shape, mla_plan_t **plan) {
  return guarded("mla_layer_plan_decode_step", [&](const char *fn) {
    MLA_REQUIRE(layer);
    MLA_REQUIRE(metadata);
    MLA_REQUIRE(shape);
    MLA_REQUIRE(plan);
    CommonAttentionMetadata c;
    if (mla_status_t status =
            toMetadata(fn, *metadata, shape->num_cache_blocks, c))
      return status;
    auto planned = layer->layer->planDecodeStep(c, toShape(*shape));
    if (!planned)
      return failCall(MLA_ERROR_INVALID_METADATA, fn, planned.takeError());
    auto handle = std::make_unique<mla_plan>();
    handle->planFamily = layer->planFamily;
    handle->plan = std::move(*planned);
    handle->line = handle->plan.str();
    *plan = handle.release();
    return succeed();
  });
}

extern "C" mla_status_t mla_layer_capture_decode_step(
    mla_layer_t *layer, const mla_decode_graph_shape_t *shape,
    const mla_forward_args_t *args, mla_decode_graph_t **graph) {
  return guarded("mla_layer_capture_decode_step", [&](const char *fn) {
    MLA_REQUIRE(layer);
    MLA_REQUIRE(shape);
    MLA_REQUIRE(args);
    MLA_REQUIRE(graph);
    MlaForwardArgs a;
    if (mla_status_t s = toForwardArgs(fn, *args, a))
      return s;
    auto captured = layer->layer->captureDecodeStep(toShape(*shape), a);
    if (!captured)
      return failCall(MLA_ERROR_RUNTIME, fn, captured.takeError());
    auto handle = std::make_unique<mla_decode_graph>();
    handle->owner = layer;
    handle->graph = std::move(*captured);
    ++layer->graphs;
    *graph = handle.release();
    return succeed();
  });
}

extern "C" mla_status_t
mla_decode_graph_get_shape(const mla_decode_graph_t *graph,
                           mla_decode_graph_shape_t *shape) {
  return guarded("mla_decode_graph_get_shape", [&](const char *fn) {
    MLA_REQUIRE(graph);
    MLA_REQUIRE(shape);
    const DecodeGraphShape &s = graph->graph->shape();
    *shape = {s.maxDecodes, s.queryLen, s.maxBlocksPerRequest, s.numCacheBlocks,
              s.maxSplitsPerRequest};
    return succeed();
  });
}

namespace {
/// What mla_layer_replay and mla_decode_graph_stage share: the handles
/// checked, the plan the layer's own, then `call` on the C++ objects.
template <typename Call>
mla_status_t withGraphPlan(const char *fn, mla_layer_t *layer,
                           mla_decode_graph_t *graph, const mla_plan_t *plan,
                           Call call) {
  MLA_REQUIRE(layer);
  MLA_REQUIRE(graph);
  MLA_REQUIRE(plan);
  if (plan->planFamily != layer->planFamily)
    return fail(MLA_ERROR_INVALID_ARGUMENT, fn, kForeignPlan);
  if (llvm::Error error = call(*layer->layer, *graph->graph, plan->plan))
    return failCall(MLA_ERROR_RUNTIME, fn, std::move(error));
  return succeed();
}
} // namespace

extern "C" mla_status_t mla_layer_replay(mla_layer_t *layer,
                                         mla_decode_graph_t *graph,
                                         const mla_plan_t *plan, void *stream) {
  return guarded("mla_layer_replay", [&](const char *fn) {
    return withGraphPlan(fn, layer, graph, plan,
                         [&](MlaLayer &l, DecodeStepGraph &g,
                             const MlaStepPlan &p) {
                           return l.replay(g, p, stream);
                         });
  });
}

extern "C" mla_status_t mla_decode_graph_stage(mla_layer_t *layer,
                                               mla_decode_graph_t *graph,
                                               const mla_plan_t *plan,
                                               void *stream) {
  return guarded("mla_decode_graph_stage", [&](const char *fn) {
    return withGraphPlan(fn, layer, graph, plan,
                         [&](MlaLayer &l, DecodeStepGraph &g,
                             const MlaStepPlan &p) {
                           return l.stageDecodeStep(g, p, stream);
                         });
  });
}

extern "C" mla_status_t mla_decode_graph_enqueue(mla_layer_t *layer,
                                                 mla_decode_graph_t *graph,
                                                 void *stream) {
  return guarded("mla_decode_graph_enqueue", [&](const char *fn) {
    MLA_REQUIRE(layer);
    MLA_REQUIRE(graph);
    if (llvm::Error error =
            layer->layer->enqueueDecodeStep(*graph->graph, stream))
      return failCall(MLA_ERROR_RUNTIME, fn, std::move(error));
    return succeed();
  });
}

extern "C" mla_status_t mla_decode_graph_destroy(mla_decode_graph_t *graph) {
  return guarded("mla_decode_graph_destroy", [&](const char *) {
    if (!graph)
      return succeed();
    mla_layer *owner = graph->owner;
    delete graph;
    --owner->graphs;
    return succeed();
  });
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

extern "C" mla_status_t mla_kernel_compile_source(mla_runtime_t *runtime,
                                                  const char *source,
                                                  const char *entry,
                                                  mla_kernel_t **kernel) {
  return guarded("mla_kernel_compile_source", [&](const char *fn) {
    MLA_REQUIRE(runtime);
    MLA_REQUIRE(source);
    MLA_REQUIRE(entry);
    MLA_REQUIRE(kernel);
    if (!entry[0])
      return fail(MLA_ERROR_INVALID_ARGUMENT, fn, "argument 'entry' is empty");
    auto compiled = runtime->runtime->compileSource(source, entry);
    if (!compiled)
      return fail(MLA_ERROR_COMPILE, fn, compiled.takeError());
    auto handle = std::make_unique<mla_kernel>();
    handle->owner = runtime;
    handle->kernel = std::move(*compiled);
    handle->cacheEntry = handle->kernel->compileEvent().entryName;
    ++runtime->kernels;
    *kernel = handle.release();
    return succeed();
  });
}

extern "C" mla_status_t mla_kernel_destroy(mla_kernel_t *kernel) {
  return guarded("mla_kernel_destroy", [&](const char *) {
    if (!kernel)
      return succeed();
    mla_runtime *owner = kernel->owner;
    delete kernel;
    --owner->kernels;
    return succeed();
  });
}

extern "C" mla_status_t mla_kernel_get_info(const mla_kernel_t *kernel,
                                            mla_kernel_info_t *info) {
  return guarded("mla_kernel_get_info", [&](const char *fn) {
    MLA_REQUIRE(kernel);
    MLA_REQUIRE(info);
    const CompileEvent &event = kernel->kernel->compileEvent();
    info->num_args = static_cast<int32_t>(kernel->kernel->signature().size());
    info->origin = event.outcome == CacheOutcome::DiskHit ? MLA_KERNEL_DISK_CACHE
                   : event.outcome == CacheOutcome::MemoryHit
                       ? MLA_KERNEL_MEMORY_CACHE
                       : MLA_KERNEL_COMPILED;
    info->milliseconds = event.milliseconds;
    info->cache_entry = kernel->cacheEntry.c_str();
    return succeed();
  });
}

extern "C" mla_status_t mla_kernel_argument(const mla_kernel_t *kernel,
                                            int32_t index, mla_tensor_t *spec) {
  return guarded("mla_kernel_argument", [&](const char *fn) {
    MLA_REQUIRE(kernel);
    MLA_REQUIRE(spec);
    const std::vector<ArgumentSpec> &signature = kernel->kernel->signature();
    if (index < 0 || size_t(index) >= signature.size())
      return fail(MLA_ERROR_INVALID_ARGUMENT, fn,
                  "index " + str(index) + " is outside the entry's " +
                      str(static_cast<int64_t>(signature.size())) +
                      " arguments");
    const ArgumentSpec &arg = signature[index];
    if (arg.shape.size() > MLA_MAX_RANK)
      return fail(MLA_ERROR_INVALID_ARGUMENT, fn,
                  "argument " + str(index) + " has rank " +
                      str(static_cast<int64_t>(arg.shape.size())) +
                      ", more than MLA_MAX_RANK");
    mla_tensor_t result;
    std::memset(&result, 0, sizeof(result));
    result.dtype = fromDType(arg.dtype);
    result.rank = static_cast<int32_t>(arg.shape.size());
    for (size_t d = 0; d < arg.shape.size(); ++d)
      result.shape[d] = arg.shape[d];
    *spec = result;
    return succeed();
  });
}

extern "C" mla_status_t mla_kernel_run(const mla_kernel_t *kernel,
                                       const mla_tensor_t *args,
                                       size_t num_args, void *stream) {
  return guarded("mla_kernel_run", [&](const char *fn) {
    MLA_REQUIRE(kernel);
    if (num_args)
      MLA_REQUIRE(args);
    // The kernel checks the tensors against its entry's signature.
    std::vector<BufferView> views(num_args);
    for (size_t i = 0; i < num_args; ++i)
      if (mla_status_t s = toView(fn, "argument " + str(static_cast<int64_t>(i)),
                                  args[i], views[i]))
        return s;
    if (llvm::Error error = kernel->kernel->run(views, stream))
      return failCall(MLA_ERROR_RUNTIME, fn, std::move(error));
    return succeed();
  });
}
