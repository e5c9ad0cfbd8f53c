//===- GpuKernel.cpp - mla modules JIT-compiled for an NVIDIA GPU ---------===//

#include "mla/Runtime/GpuKernel.h"

#include "DriverCompiles.h"
#include "LaunchShims.h"
#include "PreloadedModules.h"
#include "mla/Pipelines/Pipelines.h"
#include "mla/Runtime/CpuKernel.h"
#include "mla/Support/Diagnostics.h"
#include "mla/Transforms/Passes.h"

#include "mlir/IR/DialectRegistry.h"

#include <chrono>

using namespace mlir;

namespace mla {

CompileRecipe gpuCompileRecipe(const GpuTarget &target,
                               SerializedKernelObserver onKernelSerialized) {
  CompileRecipe recipe;
  // The launch code runs on whatever x86-64 host the GPU sits in: entries
  // made on one host (a container's prefilled cache) serve the others.
  recipe.hostCode = HostCode::Portable;
  recipe.target = target.chip() + target.ptxFeature() + "/" +
                  hostTargetDescription(HostCode::Portable);
  recipe.options = "gpu strategy=" + name(target.strategy) + " nvptx-O" +
                   std::to_string(kKernelLlvmOptLevel) + " host-O2";
  recipe.buildPipeline = [target, onKernelSerialized](OpPassManager &pm) {
    // The target, strategy included, goes on the module first; the
    // pipeline's own mla-select-gpu-target sets the same chip and keeps
    // the strategy.
    pm.addPass(createSelectGpuTarget(
        SelectGpuTargetOptions{target.chip(), name(target.strategy)}));
    buildGpuLoweringPipeline(pm, target, onKernelSerialized);
  };
  recipe.optLevel = 2;
  recipe.failureMessage = "lowering for " + target.chip() + " failed";
  return recipe;
}

DriverLaunchTimer::DriverLaunchTimer()
    : startNanoseconds(gpu::driverLaunchNanoseconds()) {
  gpu::timeDriverLaunches(true);
}

DriverLaunchTimer::~DriverLaunchTimer() { gpu::timeDriverLaunches(false); }

double DriverLaunchTimer::milliseconds() const {
  return (gpu::driverLaunchNanoseconds() - startNanoseconds) * 1e-6;
}

GpuKernel::~GpuKernel() {
  // The module's destructors unload the kernels; they need the device's
  // context.
  if (device && compiled.object) {
    llvm::consumeError(device->makeCurrent());
    gpu::GpuCall call(device->driver(), nullptr);
    compiled.object->finalize();
  }
}

llvm::Expected<std::unique_ptr<GpuKernel>>
GpuKernel::compile(OwningOpRef<ModuleOp> module, llvm::StringRef entry,
                   const cuda::Device &device,
                   std::optional<GpuTarget> target,
                   runtime::KernelCache *cache) {
  initializeNativeTarget();
  if (!target) {
    auto chosen = GpuTarget::forCapability(device.capability().major,
                                           device.capability().minor);
    if (!chosen)
      return chosen.takeError();
    target = *chosen;
  }
  {
    DialectRegistry registry;
    registerMLADialects(registry);
    module->getContext()->appendDialectRegistry(registry);
  }
  // Each kernel module goes to the driver as soon as its PTX exists (on a
  // cache miss), so that the driver's compiles overlap the lowering.
  gpu::PreloadedModules preloaded(device, std::chrono::steady_clock::now());
  auto compiled = compileModule(
      std::move(module), entry,
      gpuCompileRecipe(*target,
                       [&](llvm::StringRef name, llvm::StringRef ptx) {
                         preloaded.load(name, ptx);
                       }),
      cache, gpu::launchShimSymbols);
  if (!compiled)
    return compiled.takeError();

  std::unique_ptr<GpuKernel> kernel(new GpuKernel());
  kernel->optIns = std::make_unique<gpu::SharedMemoryOptIns>();
  kernel->gpuTarget = *target;
  kernel->compiled = std::move(*compiled);

  // The module's constructors load the kernels on the current context,
  // taking those already loaded (or still loading); the driver compiles
  // the PTX of the others then, one module after another.
  auto loadStart = std::chrono::steady_clock::now();
  if (llvm::Error error = device.makeCurrent())
    return std::move(error);
  gpu::GpuCall call(device.driver(), nullptr);
  call.preloadedModules = &preloaded;
  if (llvm::Error error = kernel->compiled.object->initialize())
    return std::move(error);
  double loadMs = std::chrono::duration<double, std::milli>(
                      std::chrono::steady_clock::now() - loadStart)
                      .count();
  kernel->compiled.event.phases.emplace_back("load", loadMs);
  kernel->compiled.event.driverCompiles = preloaded.timeline();
  kernel->compiled.event.milliseconds += loadMs;
  kernel->device = &device;
  if (llvm::Error error = call.takeError())
    return makeError("loading the kernels for " + target->chip() + ": " +
                     llvm::toString(std::move(error)));
  return kernel;
}

llvm::Expected<CompileEvent>
GpuKernel::compileToCache(OwningOpRef<ModuleOp> module, llvm::StringRef entry,
                          const GpuTarget &target,
                          runtime::KernelCache &cache) {
  initializeNativeTarget();
  {
    DialectRegistry registry;
    registerMLADialects(registry);
    module->getContext()->appendDialectRegistry(registry);
  }
  // Linked against the launch shims as a runtime's compile links it (which
  // checks the artifact), never initialized: no driver call is made.
  auto compiled = compileModule(std::move(module), entry,
                                gpuCompileRecipe(target), &cache,
                                gpu::launchShimSymbols);
  if (!compiled)
    return compiled.takeError();
  return compiled->event;
}

llvm::Error GpuKernel::run(const std::vector<BufferView> &args,
                           cuda::CUstream stream) const {
  if (llvm::Error error = device->makeCurrent())
    return error;
  gpu::GpuCall call(device->driver(), stream);
  call.optIns = optIns.get();
  call.scratchPool = device->scratchPool();
  if (llvm::Error error = compiled.entry.invoke(compiled.packed, args))
    return error;
  return call.takeError();
}

void waitForKernelUpgrades() { gpu::waitForModuleUpgrades(); }

} // namespace mla
