//===- MlaLayerKernels.cpp - The kernel modules of an MLA layer -----------===//

#include "mla/Runtime/MlaLayerKernels.h"

#include "mla/Builders/KernelBuilders.h"

namespace mla::runtime {

std::vector<CompileRequest>
layerKernelModules(const MlaLayerConfig &config,
                   std::optional<KernelStrategy> strategy) {
  // Captured by value: the requests may outlive `config`.
  MlaLayerConfig c = config;
  MlaDims d = c.dims;
  float scale = c.effectiveScale();
  auto request = [&](auto build) {
    return CompileRequest{build, kKernelEntry, strategy};
  };
  std::vector<CompileRequest> modules{
      request([=](mlir::MLIRContext &ctx) {
        return buildConcatAndCache(ctx, {d.kvLoraRank, d.ropeDim, c.blockSize,
                                         c.activation, c.cacheDType});
      }),
      request([=](mlir::MLIRContext &ctx) {
        return buildChunkedPrefill(
            ctx, {d, c.activation, c.cacheDType, c.blockSize, scale});
      }),
      request([=](mlir::MLIRContext &ctx) {
        return buildDecodeQuery(ctx, {d, c.activation});
      }),
      request([=](mlir::MLIRContext &ctx) {
        DecodeAttentionSpec spec{d,           c.activation,     c.cacheDType,
                                 c.blockSize, /*causal=*/true, scale};
        spec.withSplitPlan = true;
        return buildDecodeAttention(ctx, spec);
      }),
      request([=](mlir::MLIRContext &ctx) {
        return buildVUpProj(ctx, {d, c.activation});
      }),
  };
  if (c.dcp.worldSize > 1)
    modules.push_back(request([=](mlir::MLIRContext &ctx) {
      return buildMergeAttnStatesN(
          ctx, {c.dcp.worldSize, /*numHeads=*/0, d.vHeadDim, c.activation,
                c.activation, /*withOutputLse=*/true});
    }));
  return modules;
}

} // namespace mla::runtime
