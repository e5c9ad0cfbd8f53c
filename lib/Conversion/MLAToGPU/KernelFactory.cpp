//===- KernelFactory.cpp - Creating and launching generic kernels ---------===//

#include "KernelFactory.h"
#include "mla/Target/KernelLoading.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;

namespace mla::gpu {

mlir::gpu::GPUFuncOp KernelFactory::create(
    StringRef base, TypeRange argTypes,
    const std::function<void(GpuEmitter &, ValueRange)> &body,
    int64_t blockThreads) {
  OpBuilder b(gpuModule.getBodyRegion());
  b.setInsertionPointToEnd(gpuModule.getBody());
  Location loc = gpuModule.getLoc();
  std::string name = (base + "_" + Twine(counter++)).str();
  auto kernel = mlir::gpu::GPUFuncOp::create(
      b, loc, name, b.getFunctionType(argTypes, {}));
  kernel->setAttr(mlir::gpu::GPUDialect::getKernelFuncAttrName(),
                  b.getUnitAttr());
  if (rarelyLaunched)
    kernel->setAttr(kLoadAtFirstLaunchAttr, b.getUnitAttr());
  kernel.setKnownBlockSizeAttr(
      b.getDenseI32ArrayAttr({int32_t(blockThreads), 1, 1}));
  Block &entry = kernel.getBody().front();
  b.setInsertionPointToStart(&entry);
  mlir::gpu::ReturnOp::create(b, loc);
  b.setInsertionPointToStart(&entry);
  GpuEmitter e(b, loc);
  body(e, entry.getArguments());
  return kernel;
}

void KernelFactory::launch(OpBuilder &host, Location loc,
                           mlir::gpu::GPUFuncOp kernel,
                           std::array<Value, 3> grid, ValueRange args,
                           int64_t dynamicSharedBytes) {
  // No guard for empty grids here: the runtime's launch skips them (an
  // empty batch is valid), and straight-line launch code lets every call
  // return with its work queued (see mla-async-entry-return).
  LoopBuilder h(host, loc);
  Value one = h.index(1);
  Value shared;
  if (dynamicSharedBytes)
    shared = arith::ConstantIntOp::create(host, loc, dynamicSharedBytes, 32);
  mlir::gpu::LaunchFuncOp::create(
      host, loc, kernel, mlir::gpu::KernelDim3{grid[0], grid[1], grid[2]},
      mlir::gpu::KernelDim3{h.index((*kernel.getKnownBlockSize())[0]), one,
                            one},
      shared, args);
}

} // namespace mla::gpu
