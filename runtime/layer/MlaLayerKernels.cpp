//===- MlaLayerKernels.cpp - The kernel modules of an MLA layer -----------===//

#include "mla/Runtime/MlaLayerKernels.h"

#include "mla/Builders/KernelBuilders.h"

namespace mla::runtime {

LayerStrategies LayerStrategies::of(const Selection &decode,
                                    const Selection &prefill) {
  return {decode.backend->kernelStrategy, prefill.backend->kernelStrategy};
}

std::vector<CompileRequest>
layerKernelModules(const MlaLayerConfig &config, LayerStrategies strategies) {
  // Captured by value: the requests may outlive `config`.
  MlaLayerConfig c = config;
  MlaDims d = c.dims;
  float scale = c.effectiveScale();
  auto request = [&](std::optional<KernelStrategy> strategy, auto build) {
    return CompileRequest{build, kKernelEntry, strategy};
  };
  const std::optional<KernelStrategy> decode = strategies.decode,
                                      prefill = strategies.prefill;
  // In LayerModule order.
  std::vector<CompileRequest> modules{
      request(decode, [=](mlir::MLIRContext &ctx) {
        return buildConcatAndCache(ctx, {d.kvLoraRank, d.ropeDim, c.blockSize,
                                         c.activation, c.cacheDType});
      }),
      request(prefill, [=](mlir::MLIRContext &ctx) {
        return buildChunkedPrefill(
            ctx, {d, c.activation, c.cacheDType, c.blockSize, scale});
      }),
      request(decode, [=](mlir::MLIRContext &ctx) {
        return buildDecodeQuery(ctx, {d, c.activation});
      }),
      request(decode, [=](mlir::MLIRContext &ctx) {
        DecodeAttentionSpec spec{d,           c.activation,     c.cacheDType,
                                 c.blockSize, /*causal=*/true, scale};
        spec.withSplitPlan = true;
        // A DCP rank's cache holds every W-th run of I tokens.
        if (c.dcp.worldSize > 1)
          spec.kvShare = {{c.dcp.worldSize, c.dcp.interleave}};
        return buildDecodeAttention(ctx, spec);
      }),
      request(decode, [=](mlir::MLIRContext &ctx) {
        return buildVUpProj(ctx, {d, c.activation});
      }),
  };
  if (c.dcp.worldSize == 1)
    return modules;
  modules.push_back(request(decode, [=](mlir::MLIRContext &ctx) {
    return buildMergeAttnStatesN(
        ctx, {c.dcp.worldSize, /*numHeads=*/0, d.vHeadDim, c.activation,
              c.activation, /*withOutputLse=*/true});
  }));
  modules.push_back(request(prefill, [=](mlir::MLIRContext &ctx) {
    return buildGatherCache(
        ctx, {d.cacheEntry(), c.blockSize, c.cacheDType, c.activation});
  }));
  // The group's gathered rows are pages of one token in the activation
  // dtype; the chunk's block table puts them in token order.
  modules.push_back(request(prefill, [=](mlir::MLIRContext &ctx) {
    ChunkedPrefillSpec spec{d, c.activation, c.activation, /*blockSize=*/1,
                            scale};
    spec.contextOnly = true;
    return buildChunkedPrefill(ctx, spec);
  }));
  return modules;
}

} // namespace mla::runtime
