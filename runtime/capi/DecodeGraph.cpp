//===- DecodeGraph.cpp - Decode steps replayed as CUDA graphs, in C -------===//

#include "CApi.h"

using namespace mla;
using namespace mla::runtime;
using namespace mla::capi;

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
