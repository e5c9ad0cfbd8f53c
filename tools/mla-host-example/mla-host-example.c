/*===- mla-host-example.c - A host engine's use of the C interface --------===*
 *
 * What a serving engine written in C does with include/mla/mla.h, end to
 * end: open a runtime (the GPU if there is one, else the CPU), ask which
 * backends run a DeepSeek-shaped layer's decode and prefill and why,
 * create the layer with its weights in device memory, describe one mixed
 * batch (two decodes and a prefill with cached context) on a small paged
 * cache as vLLM does, plan it, run the forward, and read the output back;
 * on a GPU, then capture the decodes' step as a CUDA graph and replay it.
 *
 * Every call's status is checked; a failure prints mla_last_error() and
 * exits 1 after releasing what was made.
 *
 *   build/bin/mla-host-example
 *
 *===----------------------------------------------------------------------===*/

#include "mla/mla.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The layer: DeepSeek-V3's MLA dims with 16 heads (a tensor-parallel
 * shard), bf16 activations and cache, 64-token pages. */
enum { HEADS = 16, PAGE = 64, NUM_PAGES = 16, NUM_REQS = 3, MAX_BLOCKS = 3 };

/* The batch, decodes first as vLLM orders it: two decodes with 69 and 129
 * cached tokens, then a prefill of 12 new tokens over 100 cached ones. */
static const int32_t kQueryLens[NUM_REQS] = {1, 1, 12};
static const int32_t kSeqLens[NUM_REQS] = {70, 130, 112};
/* The pages each request's tokens live in (scattered, as a paged cache's
 * allocator leaves them); 0 pads the rows. */
static const int32_t kBlockTable[NUM_REQS][MAX_BLOCKS] = {
    {5, 2, 0}, {0, 9, 3}, {7, 12, 0}};

/*===----------------------------------------------------------------------===*
 * Host data
 *===----------------------------------------------------------------------===*/

static uint64_t rngState = 0x9e3779b97f4a7c15ull;

/* A uniform value in [-1, 1) (xorshift64*). */
static float uniform(void) {
  rngState ^= rngState >> 12;
  rngState ^= rngState << 25;
  rngState ^= rngState >> 27;
  uint64_t bits = (rngState * 0x2545f4914f6cdd1dull) >> 40; /* 24 bits */
  return (float)bits / (float)(1u << 23) - 1.0f;
}

/* float -> bf16, rounding to nearest even. */
static uint16_t toBf16(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof(bits));
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return (uint16_t)(bits >> 16);
}

static float fromBf16(uint16_t value) {
  uint32_t bits = (uint32_t)value << 16;
  float result;
  memcpy(&result, &bits, sizeof(result));
  return result;
}

static size_t numElements(const mla_tensor_t *t) {
  size_t n = 1;
  for (int32_t d = 0; d < t->rank; ++d)
    n *= (size_t)t->shape[d];
  return n;
}

/*===----------------------------------------------------------------------===*
 * Status checks
 *===----------------------------------------------------------------------===*/

static int failed = 0;

/* Reports a failed call; returns nonzero when `status` is a failure. */
static int check(mla_status_t status, const char *call) {
  if (status == MLA_OK)
    return 0;
  fprintf(stderr, "mla-host-example: %s failed: %s: %s\n", call,
          mla_status_string(status), mla_last_error());
  failed = 1;
  return 1;
}

#define CHECK(call)                                                            \
  do {                                                                         \
    if (check((call), #call))                                                  \
      goto done;                                                               \
  } while (0)

static void logLine(const char *line, void *user) {
  (void)user;
  printf("  [log] %s\n", line);
}

/*===----------------------------------------------------------------------===*
 * Device buffers
 *===----------------------------------------------------------------------===*/

/* A device buffer for `tensor` (shape and dtype set, data NULL): allocated,
 * filled from `host` when given, and `tensor->data` set. */
static mla_status_t makeBuffer(mla_runtime_t *runtime, mla_tensor_t *tensor,
                               const void *host) {
  size_t bytes = 0;
  mla_status_t status = mla_tensor_span_bytes(tensor, &bytes);
  if (status != MLA_OK)
    return status;
  status = mla_runtime_allocate(runtime, bytes, &tensor->data);
  if (status != MLA_OK || !host)
    return status;
  return mla_runtime_upload(runtime, tensor->data, host, bytes, NULL);
}

/* `count` random bf16 values scaled by `scale` (NULL when out of memory). */
static uint16_t *randomBf16(size_t count, float scale) {
  uint16_t *values = malloc(count * sizeof(uint16_t));
  if (!values)
    return NULL;
  for (size_t i = 0; i < count; ++i)
    values[i] = toBf16(uniform() * scale);
  return values;
}

int main(void) {
  mla_runtime_t *runtime = NULL;
  mla_layer_t *layer = NULL;
  mla_plan_t *plan = NULL, *decodePlan = NULL;
  mla_decode_graph_t *graph = NULL;
  mla_layer_weights_t weights;
  mla_forward_args_t args;
  uint16_t *kvBProj = NULL, *wUkT = NULL, *wUv = NULL, *host = NULL,
           *output = NULL;
  memset(&weights, 0, sizeof(weights));
  memset(&args, 0, sizeof(args));

  /* 1. The runtime: the GPU when usable, else the CPU; the kernel cache
   * where MLA_CACHE_DIR (or the user's cache directory) says. */
  mla_runtime_options_t options;
  CHECK(mla_runtime_options_default(&options));
  options.device = MLA_DEVICE_AUTO;
  options.log = logLine;
  CHECK(mla_runtime_create(&options, &runtime));

  mla_device_kind_t kind;
  const char *description = NULL, *cacheDir = NULL;
  CHECK(mla_runtime_device_kind(runtime, &kind));
  CHECK(mla_runtime_device_description(runtime, &description));
  CHECK(mla_runtime_cache_dir(runtime, &cacheDir));
  printf("device: %s: %s\n", kind == MLA_DEVICE_KIND_CUDA ? "CUDA" : "CPU",
         description);
  printf("kernel cache: %s\n", cacheDir[0] ? cacheDir : "(memory only)");

  /* 2. The layer's configuration and the backend that runs it. */
  mla_layer_config_t config;
  CHECK(mla_layer_config_default(&config));
  config.num_heads = HEADS;
  config.block_size = PAGE;
  /* A small context workspace, so the prefill's 100 cached tokens are
   * gathered in two chunks. */
  config.workspace_tokens = 64;

  mla_backend_selection_t selection;
  CHECK(mla_runtime_select_backend(runtime, &config, &selection));
  printf("backend: %s\n", selection.backend);
  if (selection.num_skipped)
    printf("skipped:\n  %s\n", selection.skipped);
  else
    printf("skipped: none (the first backend in priority fits)\n");
  /* The chunked prefill's backend is chosen apart, by its own priorities. */
  mla_backend_selection_t prefillSelection;
  CHECK(mla_runtime_select_prefill_backend(runtime, &config,
                                           &prefillSelection));
  printf("prefill backend: %s\n", prefillSelection.backend);
  if (prefillSelection.num_skipped)
    printf("prefill skipped:\n  %s\n", prefillSelection.skipped);

  const int64_t lkv = config.kv_lora_rank, p = config.qk_nope_head_dim,
                r = config.qk_rope_head_dim, v = config.v_head_dim;

  /* 3. Weights: a random kv_b_proj [Lkv, N, P + V] and, as DeepSeek's
   * absorbed decode uses them, W_UK_T [N, P, Lkv] and W_UV [N, Lkv, V]
   * taken from it. */
  {
    const int64_t kvShape[3] = {lkv, HEADS, p + v};
    const int64_t ukShape[3] = {HEADS, p, lkv};
    const int64_t uvShape[3] = {HEADS, lkv, v};
    CHECK(mla_tensor_contiguous(NULL, MLA_DTYPE_BF16, 3, kvShape,
                                &weights.kv_b_proj));
    CHECK(mla_tensor_contiguous(NULL, MLA_DTYPE_BF16, 3, ukShape,
                                &weights.w_uk_t));
    CHECK(mla_tensor_contiguous(NULL, MLA_DTYPE_BF16, 3, uvShape,
                                &weights.w_uv));
    kvBProj = randomBf16(numElements(&weights.kv_b_proj),
                         1.0f / sqrtf((float)lkv));
    wUkT = malloc(numElements(&weights.w_uk_t) * sizeof(uint16_t));
    wUv = malloc(numElements(&weights.w_uv) * sizeof(uint16_t));
    if (!kvBProj || !wUkT || !wUv) {
      fprintf(stderr, "mla-host-example: out of host memory\n");
      failed = 1;
      goto done;
    }
    for (int64_t l = 0; l < lkv; ++l)
      for (int64_t n = 0; n < HEADS; ++n) {
        const uint16_t *row = kvBProj + (l * HEADS + n) * (p + v);
        for (int64_t i = 0; i < p; ++i)
          wUkT[(n * p + i) * lkv + l] = row[i];
        for (int64_t i = 0; i < v; ++i)
          wUv[(n * lkv + l) * v + i] = row[p + i];
      }
    CHECK(makeBuffer(runtime, &weights.kv_b_proj, kvBProj));
    CHECK(makeBuffer(runtime, &weights.w_uk_t, wUkT));
    CHECK(makeBuffer(runtime, &weights.w_uv, wUv));
  }

  /* 4. The layer: compiles its kernels, or loads them from the cache. */
  CHECK(mla_layer_create(runtime, &config, &weights, &layer));
  mla_cache_stats_t stats;
  CHECK(mla_runtime_cache_stats(runtime, &stats));
  printf("layer ready: %llu compiled, %llu from disk\n",
         (unsigned long long)stats.compiles,
         (unsigned long long)stats.disk_hits);

  /* 5. The batch's metadata, as vLLM's CommonAttentionMetadata: new tokens
   * are the last query_len positions of each sequence; each one's slot is
   * page * block_size + row of its position. */
  int32_t queryStartLoc[NUM_REQS + 1] = {0};
  int64_t slotMapping[64];
  int64_t tokens = 0, maxQueryLen = 0, maxSeqLen = 0;
  for (int b = 0; b < NUM_REQS; ++b) {
    for (int32_t j = 0; j < kQueryLens[b]; ++j) {
      int32_t position = kSeqLens[b] - kQueryLens[b] + j;
      slotMapping[tokens++] =
          (int64_t)kBlockTable[b][position / PAGE] * PAGE + position % PAGE;
    }
    queryStartLoc[b + 1] = queryStartLoc[b] + kQueryLens[b];
    if (kQueryLens[b] > maxQueryLen)
      maxQueryLen = kQueryLens[b];
    if (kSeqLens[b] > maxSeqLen)
      maxSeqLen = kSeqLens[b];
  }
  mla_batch_metadata_t metadata;
  memset(&metadata, 0, sizeof(metadata));
  metadata.query_start_loc = queryStartLoc;
  metadata.seq_lens = kSeqLens;
  metadata.block_table = &kBlockTable[0][0];
  metadata.max_blocks = MAX_BLOCKS;
  metadata.slot_mapping = slotMapping;
  metadata.num_slots = tokens;
  metadata.num_reqs = NUM_REQS;
  metadata.num_actual_tokens = tokens;
  metadata.max_query_len = maxQueryLen;
  metadata.max_seq_len = maxSeqLen;

  CHECK(mla_layer_plan(layer, &metadata, NUM_PAGES, &plan));
  const char *line = NULL;
  mla_plan_info_t info;
  CHECK(mla_plan_describe(plan, &line));
  CHECK(mla_plan_get_info(plan, &info));
  printf("plan: %s\n", line);

  /* 6. The step's buffers: this step's q, kv_c and k_pe, the paged cache
   * (random: the latent entries earlier steps wrote), the output. */
  {
    const int64_t qShape[3] = {tokens, HEADS, p + r};
    const int64_t kvcShape[2] = {tokens, lkv};
    const int64_t kpeShape[2] = {tokens, r};
    const int64_t cacheShape[3] = {NUM_PAGES, PAGE, lkv + r};
    const int64_t outShape[3] = {tokens, HEADS, v};
    mla_tensor_t *tensors[4] = {&args.q, &args.kv_c, &args.k_pe,
                                &args.kv_cache};
    CHECK(mla_tensor_contiguous(NULL, MLA_DTYPE_BF16, 3, qShape, &args.q));
    CHECK(mla_tensor_contiguous(NULL, MLA_DTYPE_BF16, 2, kvcShape, &args.kv_c));
    CHECK(mla_tensor_contiguous(NULL, MLA_DTYPE_BF16, 2, kpeShape, &args.k_pe));
    CHECK(mla_tensor_contiguous(NULL, MLA_DTYPE_BF16, 3, cacheShape,
                                &args.kv_cache));
    CHECK(mla_tensor_contiguous(NULL, MLA_DTYPE_BF16, 3, outShape,
                                &args.output));
    for (int i = 0; i < 4; ++i) {
      host = randomBf16(numElements(tensors[i]), 1.0f);
      if (!host) {
        fprintf(stderr, "mla-host-example: out of host memory\n");
        failed = 1;
        goto done;
      }
      CHECK(makeBuffer(runtime, tensors[i], host));
      free(host);
      host = NULL;
    }
    CHECK(makeBuffer(runtime, &args.output, NULL));
  }

  /* 7. The forward, on the default stream, and the output back. */
  CHECK(mla_layer_forward(layer, plan, &args, NULL));
  size_t outCount = numElements(&args.output);
  output = malloc(outCount * sizeof(uint16_t));
  if (!output) {
    fprintf(stderr, "mla-host-example: out of host memory\n");
    failed = 1;
    goto done;
  }
  CHECK(mla_runtime_download(runtime, output, args.output.data,
                             outCount * sizeof(uint16_t), NULL));

  double sum = 0, sumAbs = 0;
  size_t nonFinite = 0;
  for (size_t i = 0; i < outCount; ++i) {
    float value = fromBf16(output[i]);
    if (!isfinite(value))
      ++nonFinite;
    sum += value;
    sumAbs += fabs(value);
  }
  CHECK(mla_runtime_cache_stats(runtime, &stats));
  printf("cache: %llu memory hits, %llu disk hits, %llu misses, "
         "%llu compiles, %llu corrupt, %llu store failures\n",
         (unsigned long long)stats.memory_hits,
         (unsigned long long)stats.disk_hits,
         (unsigned long long)stats.misses, (unsigned long long)stats.compiles,
         (unsigned long long)stats.corrupt_entries,
         (unsigned long long)stats.store_failures);
  printf("output: %lld tokens x %d heads x %lld, checksum %.6f "
         "(sum |x| %.6f)\n",
         (long long)info.num_actual_tokens, HEADS, (long long)v, sum, sumAbs);
  if (nonFinite) {
    fprintf(stderr, "mla-host-example: %zu output values are not finite\n",
            nonFinite);
    failed = 1;
  }

  /* 8. On a GPU, the next steps' shape: the two decodes alone, captured
   * once as a CUDA graph on the same buffers and replayed (an engine
   * replays it every decode step, after writing that step's q, kv_c and
   * k_pe into the buffers). Its output rows must match the forward's. */
  if (kind == MLA_DEVICE_KIND_CUDA) {
    mla_decode_graph_shape_t shape = {2, 1, MAX_BLOCKS, NUM_PAGES, 0};
    CHECK(mla_layer_capture_decode_step(layer, &shape, &args, &graph));
    CHECK(mla_decode_graph_get_shape(graph, &shape));
    metadata.num_reqs = 2;
    metadata.num_actual_tokens = 2;
    metadata.num_slots = 2;
    metadata.max_query_len = 1;
    CHECK(mla_layer_plan_decode_step(layer, &metadata, &shape, &decodePlan));
    CHECK(mla_layer_replay(layer, graph, decodePlan, NULL));
    size_t decodeCount = 2 * (size_t)HEADS * (size_t)v;
    uint16_t *replayed = malloc(decodeCount * sizeof(uint16_t));
    if (!replayed) {
      fprintf(stderr, "mla-host-example: out of host memory\n");
      failed = 1;
      goto done;
    }
    mla_status_t status =
        mla_runtime_download(runtime, replayed, args.output.data,
                             decodeCount * sizeof(uint16_t), NULL);
    double worst = 0;
    for (size_t i = 0; status == MLA_OK && i < decodeCount; ++i) {
      double diff = fabs(fromBf16(replayed[i]) - fromBf16(output[i]));
      if (isnan(diff))
        diff = INFINITY;
      if (diff > worst)
        worst = diff;
    }
    free(replayed);
    CHECK(status);
    printf("decode step as a CUDA graph (at most %lld splits a request): "
           "replayed, max |replay - forward| %.2e\n",
           (long long)shape.max_splits_per_request, worst);
    /* Both ran the same math in f32 over bf16 inputs; the splits may
     * differ, and with them the last bit of rounding. */
    if (!(worst <= 0.05)) {
      fprintf(stderr, "mla-host-example: the replay differs from the "
                      "forward\n");
      failed = 1;
    }
  }

done:
  /* Releasing is checked too; the runtime goes last. */
  free(host);
  free(output);
  free(kvBProj);
  free(wUkT);
  free(wUv);
  check(mla_decode_graph_destroy(graph), "mla_decode_graph_destroy");
  check(mla_plan_destroy(decodePlan), "mla_plan_destroy");
  check(mla_plan_destroy(plan), "mla_plan_destroy");
  check(mla_layer_destroy(layer), "mla_layer_destroy");
  if (runtime) {
    void *buffers[] = {weights.kv_b_proj.data, weights.w_uk_t.data,
                       weights.w_uv.data,      args.q.data,
                       args.kv_c.data,         args.k_pe.data,
                       args.kv_cache.data,     args.output.data};
    for (size_t i = 0; i < sizeof(buffers) / sizeof(buffers[0]); ++i)
      check(mla_runtime_free(runtime, buffers[i]), "mla_runtime_free");
  }
  check(mla_runtime_destroy(runtime), "mla_runtime_destroy");
  if (!failed)
    printf("ok\n");
  return failed ? 1 : 0;
}
