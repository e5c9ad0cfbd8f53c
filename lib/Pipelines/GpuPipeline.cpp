//===- GpuPipeline.cpp - mla to PTX kernels and host launch code ----------===//

#include "mla/Pipelines/Pipelines.h"
#include "mla/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/Pipelines/Passes.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace mla {

void buildGpuLoweringPipeline(OpPassManager &pm, const GpuTarget &target) {
  pm.addPass(createExpandChunkedPrefill());
  pm.addPass(createSelectGpuTarget(SelectGpuTargetOptions{target.chip()}));
  pm.addPass(createConvertMLAToGPU());
  // One sweep without region simplification: the lowering emits the
  // kernels fully unrolled, and on a wgmma decode module the default
  // canonicalization (iterating to a fixpoint, merging blocks) took 0.3 s
  // of a 1.1 s pipeline while the later canonicalizations and CSE leave
  // the same PTX and host code either way (checked over every op and
  // strategy of test/lit/Target/ptxas.mlir).
  GreedyRewriteConfig oneSweep;
  oneSweep.setMaxIterations(1);
  oneSweep.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
  pm.addPass(createCanonicalizerPass(oneSweep));
  pm.addPass(createCSEPass());
  // Launches, device allocations and copies become asynchronous on one
  // stream per call, with host waits only where the host reads results.
  pm.addNestedPass<func::FuncOp>(createGpuAsyncRegionPass());
  // ... and none at the end: a call returns with its work queued on the
  // caller's stream.
  pm.addNestedPass<func::FuncOp>(createAsyncEntryReturn());

  // Kernels through NVVM and LLVM's NVPTX backend to PTX (embedded in the
  // module as a gpu.binary), host code to the LLVM dialect with launches
  // as calls into the runtime's mgpu* entry points.
  gpu::GPUToNVVMPipelineOptions nvvm;
  nvvm.cubinChip = target.chip();
  nvvm.cubinFeatures = target.ptxFeature();
  nvvm.cubinFormat = "isa";
  nvvm.optLevel = 3;
  gpu::buildLowerToNVVMPassPipeline(pm, nvvm);
}

} // namespace mla
