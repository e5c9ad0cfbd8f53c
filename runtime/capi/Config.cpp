//===- Config.cpp - Layer configuration and backend selection in C --------===//

#include "CApi.h"

#include <cstring>

using namespace mla;
using namespace mla::runtime;
using namespace mla::capi;

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
    config->prefill_backend = nullptr;
    config->dcp_world_size = defaults.dcp.worldSize;
    config->dcp_rank = defaults.dcp.rank;
    config->dcp_interleave = defaults.dcp.interleave;
    return succeed();
  });
}

/// The selection of `role` for `config` on `runtime`, its strings kept by
/// the runtime.
static mla_status_t selectInC(const char *fn, mla_runtime_t *runtime,
                              const mla_layer_config_t *config,
                              mla_backend_selection_t *selection,
                              BackendRole role) {
  MLA_REQUIRE(runtime);
  MLA_REQUIRE(config);
  MLA_REQUIRE(selection);
  MlaLayerConfig c;
  if (mla_status_t s = toLayerConfig(fn, *config, c))
    return s;
  auto chosen = runtime->runtime->selectBackend(
      c.attentionConfig(*runtime->runtime),
      role == BackendRole::Prefill ? c.prefillBackend : c.backend, role);
  if (!chosen)
    return fail(MLA_ERROR_BACKEND_REJECTED, fn, chosen.takeError());
  SelectionText text = describeSelection(*chosen);
  *selection = toCSelection(text, runtime->intern(std::move(text.skipped)),
                            runtime->intern(std::move(text.summary)));
  return succeed();
}

extern "C" mla_status_t
mla_runtime_select_backend(mla_runtime_t *runtime,
                           const mla_layer_config_t *config,
                           mla_backend_selection_t *selection) {
  return guarded("mla_runtime_select_backend", [&](const char *fn) {
    return selectInC(fn, runtime, config, selection, BackendRole::Decode);
  });
}

extern "C" mla_status_t
mla_runtime_select_prefill_backend(mla_runtime_t *runtime,
                                   const mla_layer_config_t *config,
                                   mla_backend_selection_t *selection) {
  return guarded("mla_runtime_select_prefill_backend", [&](const char *fn) {
    return selectInC(fn, runtime, config, selection, BackendRole::Prefill);
  });
}
