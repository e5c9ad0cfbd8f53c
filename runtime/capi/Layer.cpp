//===- Layer.cpp - The C API's MLA layer, plans and forward ---------------===//

#include "CApi.h"

using namespace mla;
using namespace mla::runtime;
using namespace mla::capi;

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
    // Selections first (without logging; the layer logs its own), so that
    // a refusal is told apart from a compile failure.
    Runtime &rt = *runtime->runtime;
    auto chosen = rt.backends().select(c.attentionConfig(rt), c.backend);
    if (!chosen)
      return fail(MLA_ERROR_BACKEND_REJECTED, fn, chosen.takeError());
    auto chosenPrefill = rt.backends(BackendRole::Prefill)
                             .select(c.attentionConfig(rt), c.prefillBackend);
    if (!chosenPrefill)
      return fail(MLA_ERROR_BACKEND_REJECTED, fn, chosenPrefill.takeError());
    auto created = MlaLayer::create(rt, std::move(c), std::move(w));
    if (!created)
      return failCall(MLA_ERROR_COMPILE, fn, created.takeError());
    auto handle = std::make_unique<mla_layer>();
    handle->owner = runtime;
    handle->layer = std::move(*created);
    handle->planFamily = runtime->planFamily(planFingerprint(*handle->layer));
    handle->selection = describeSelection(handle->layer->selection());
    handle->prefillSelection =
        describeSelection(handle->layer->prefillSelection());
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

extern "C" mla_status_t
mla_layer_prefill_selection(const mla_layer_t *layer,
                            mla_backend_selection_t *selection) {
  return guarded("mla_layer_prefill_selection", [&](const char *fn) {
    MLA_REQUIRE(layer);
    MLA_REQUIRE(selection);
    const SelectionText &text = layer->prefillSelection;
    *selection =
        toCSelection(text, text.skipped.c_str(), text.summary.c_str());
    return succeed();
  });
}


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
