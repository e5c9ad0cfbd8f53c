//===- Dcp.cpp - The C API's decode context parallelism -------------------===//

#include "CApi.h"

#include "mla/Runtime/MetadataDcp.h"

#include <algorithm>

using namespace mla;
using namespace mla::runtime;
using namespace mla::capi;

extern "C" mla_status_t
mla_layer_merge_dcp_partials(mla_layer_t *layer, const mla_plan_t *plan,
                             const mla_dcp_merge_args_t *args, void *stream) {
  return guarded("mla_layer_merge_dcp_partials", [&](const char *fn) {
    MLA_REQUIRE(layer);
    MLA_REQUIRE(plan);
    MLA_REQUIRE(args);
    if (plan->planFamily != layer->planFamily)
      return fail(MLA_ERROR_INVALID_ARGUMENT, fn, kForeignPlan);
    DcpMergeArgs a;
    if (mla_status_t s = toView(fn, "'gathered_output'", args->gathered_output,
                                a.gatheredOutput))
      return s;
    if (mla_status_t s =
            toView(fn, "'gathered_lse'", args->gathered_lse, a.gatheredLse))
      return s;
    if (mla_status_t s = toView(fn, "'output'", args->output, a.output))
      return s;
    // The merged LSE is optional: a zeroed tensor means "not wanted".
    if (args->lse.data || args->lse.rank != 0)
      if (mla_status_t s = toView(fn, "'lse'", args->lse, a.lse))
        return s;
    if (llvm::Error error =
            layer->layer->mergeDcpPartials(plan->plan, a, stream))
      return failCall(MLA_ERROR_RUNTIME, fn, std::move(error));
    return succeed();
  });
}

extern "C" mla_status_t
mla_dcp_local_slot_mapping(const mla_batch_metadata_t *metadata,
                           int64_t block_size, int64_t dcp_world_size,
                           int64_t dcp_rank, int64_t dcp_interleave,
                           int64_t *slots) {
  return guarded("mla_dcp_local_slot_mapping", [&](const char *fn) {
    MLA_REQUIRE(metadata);
    MLA_REQUIRE(slots);
    CommonAttentionMetadata m;
    // No cache to check pages against here: the plan does that.
    if (mla_status_t s = toMetadata(fn, *metadata, /*num_cache_blocks=*/1, m))
      return s;
    // 0 means off (world size 1) and 1 (interleave), as in the config.
    DcpConfig dcp{dcp_world_size == 0 ? 1 : dcp_world_size, dcp_rank,
                  dcp_interleave == 0 ? 1 : dcp_interleave};
    if (llvm::Error error = checkDcp(dcp, block_size))
      return fail(MLA_ERROR_INVALID_ARGUMENT, fn, std::move(error));
    auto local = dcpLocalSlotMapping(m, block_size, dcp);
    if (!local)
      return fail(MLA_ERROR_INVALID_METADATA, fn, local.takeError());
    std::copy(local->begin(), local->end(), slots);
    return succeed();
  });
}

extern "C" mla_status_t
mla_layer_set_dcp_all_gather(mla_layer_t *layer,
                             mla_dcp_all_gather_fn all_gather,
                             void *user_data) {
  return guarded("mla_layer_set_dcp_all_gather", [&](const char *fn) {
    MLA_REQUIRE(layer);
    if (!all_gather) {
      layer->layer->setDcpAllGather(nullptr);
      return succeed();
    }
    layer->layer->setDcpAllGather(
        [all_gather, user_data](const void *send, void *received,
                                size_t bytesPerRank,
                                Stream stream) -> llvm::Error {
          int32_t code =
              all_gather(user_data, send, received, bytesPerRank, stream);
          if (code != 0)
            return llvm::createStringError(
                "the engine's all-gather returned " + std::to_string(code));
          return llvm::Error::success();
        });
    return succeed();
  });
}
