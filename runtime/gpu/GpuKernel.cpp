//===- GpuKernel.cpp - mla modules JIT-compiled for an NVIDIA GPU ---------===//

#include "mla/Runtime/GpuKernel.h"

#include "LaunchShims.h"
#include "mla/Pipelines/Pipelines.h"
#include "mla/Runtime/CpuKernel.h"
#include "mla/Support/Diagnostics.h"

#include "mlir/Dialect/GPU/IR/CompilationInterfaces.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"

using namespace mlir;

namespace mla {

GpuKernel::~GpuKernel() {
  // The JIT's static destructors unload the kernels' module; they need the
  // device's context.
  if (device)
    llvm::consumeError(device->makeCurrent());
}

/// The PTX text of every gpu.binary object in `module`.
static std::string collectPtx(ModuleOp module) {
  std::string ptx;
  module.walk([&](mlir::gpu::BinaryOp binary) {
    for (Attribute attr : binary.getObjects())
      if (auto object = dyn_cast<mlir::gpu::ObjectAttr>(attr))
        ptx += object.getObject().getValue();
  });
  return ptx;
}

llvm::Expected<std::unique_ptr<GpuKernel>>
GpuKernel::compile(OwningOpRef<ModuleOp> module, llvm::StringRef entry,
                   const cuda::Device &device,
                   std::optional<GpuTarget> target) {
  initializeNativeTarget();
  if (!target) {
    auto chosen = GpuTarget::forCapability(device.capability().major,
                                           device.capability().minor);
    if (!chosen)
      return chosen.takeError();
    target = *chosen;
  }
  MLIRContext *context = module->getContext();
  {
    DialectRegistry registry;
    registerMLADialects(registry);
    context->appendDialectRegistry(registry);
  }
  auto entryPoint = EntryPoint::verifyAndLower(
      *module, entry,
      [&](OpPassManager &pm) { buildGpuLoweringPipeline(pm, *target); },
      "lowering for " + target->chip() + " failed");
  if (!entryPoint)
    return entryPoint.takeError();

  std::unique_ptr<GpuKernel> kernel(new GpuKernel());
  kernel->device = &device;
  kernel->gpuTarget = *target;
  kernel->entryPoint = std::move(*entryPoint);
  kernel->ptxText = collectPtx(*module);

  ExecutionEngineOptions options;
  options.transformer = makeOptimizingTransformer(2, 0, nullptr);
  auto engine = ExecutionEngine::create(*module, options);
  if (!engine)
    return makeError("JIT compilation of the host code failed: " +
                     llvm::toString(engine.takeError()));
  kernel->engine = std::move(*engine);
  kernel->engine->registerSymbols(gpu::launchShimSymbols);

  // Initializing runs the static constructor that loads the kernels.
  if (llvm::Error error = device.makeCurrent())
    return std::move(error);
  gpu::GpuCall call(device.driver(), nullptr);
  kernel->engine->initialize();
  if (llvm::Error error = call.takeError())
    return makeError("loading the kernels for " + target->chip() + ": " +
                     llvm::toString(std::move(error)));
  return kernel;
}

llvm::Error GpuKernel::run(const std::vector<BufferView> &args,
                           cuda::CUstream stream) const {
  if (llvm::Error error = device->makeCurrent())
    return error;
  gpu::GpuCall call(device->driver(), stream);
  if (llvm::Error error = entryPoint.invoke(*engine, args))
    return error;
  return call.takeError();
}

} // namespace mla
