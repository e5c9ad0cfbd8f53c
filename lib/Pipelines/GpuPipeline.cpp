//===- GpuPipeline.cpp - mla to PTX kernels and host launch code ----------===//

#include "mla/Pipelines/Pipelines.h"
#include "mla/Transforms/Passes.h"

#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/GPUCommon/GPUCommonPass.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/NVGPUToNVVM/NVGPUToNVVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/VectorToSCF/VectorToSCF.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace mla {

namespace {

/// Canonicalization then common subexpressions, after each group of
/// conversions.
void addCleanup(OpPassManager &pm) {
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

/// Strided views, affine maps, arith and index to the LLVM dialect, then a
/// cleanup: the middle of both the kernel and the host lowering.
void addScalarsToLLVM(OpPassManager &pm) {
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  addCleanup(pm);
}

/// The end of both lowerings: a cleanup, then the casts left between
/// converted ops folded away.
void addFinish(OpPassManager &pm) {
  addCleanup(pm);
  pm.addPass(createReconcileUnrealizedCastsPass());
}

/// Everything before the NVVM conversion: vectors, loops, affine maps,
/// strided views and arith/index to LLVM, then gpu ops to NVVM. The
/// gpu.module already carries its #nvvm.target (from convert-mla-to-gpu).
void addKernelLowering(OpPassManager &pm) {
  pm.addPass(createConvertNVGPUToNVVMPass());
  pm.addPass(createConvertVectorToSCFPass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createConvertNVVMToLLVMPass());
  addScalarsToLLVM(pm);
  pm.addPass(createConvertGpuOpsToNVVMOps());
  addFinish(pm);
}

/// The host functions to the LLVM dialect, launches included.
void addHostLowering(OpPassManager &pm) {
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createConvertFuncToLLVMPass());
  addScalarsToLLVM(pm);
  pm.addPass(createGpuToLLVMConversionPass());
  pm.addPass(createConvertMathToLLVMPass());
  addFinish(pm);
}

} // namespace

void buildGpuLoweringPipeline(OpPassManager &pm, const GpuTarget &target,
                              SerializedKernelObserver onKernelSerialized) {
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

  // Kernels and host code go separate ways from here. Each kernel gets a
  // gpu.module of its own, lowered to NVVM by a nested pipeline and
  // serialized through LLVM's NVPTX backend to PTX, the modules in
  // parallel; the host code then lowers to the LLVM dialect with launches
  // as calls into the runtime's mgpu* entry points, over modules that are
  // by then small gpu.binary ops. Per module, the passes and their order
  // are those of MLIR's gpu-lower-to-nvvm-pipeline, so the PTX is the same.
  pm.addPass(createSplitKernelModules());
  addKernelLowering(pm.nest<gpu::GPUModuleOp>());
  pm.addPass(createSerializeKernelModules(std::move(onKernelSerialized)));
  addHostLowering(pm);
}

} // namespace mla
