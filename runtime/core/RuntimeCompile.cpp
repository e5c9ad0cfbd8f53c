//===- RuntimeCompile.cpp - Kernels a runtime compiles from modules -------===//

#include "mla/Runtime/RuntimeCompile.h"

#include "RuntimeState.h"

#include "mla/Pipelines/Pipelines.h"
#include "mla/Runtime/CpuKernel.h"
#include "mla/Runtime/GpuKernel.h"
#include "mla/Support/Diagnostics.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <atomic>
#include <cstdlib>
#include <thread>

namespace mla::runtime {

namespace {

class CpuRuntimeKernel : public Kernel {
public:
  explicit CpuRuntimeKernel(std::unique_ptr<CpuKernel> kernel)
      : kernel(std::move(kernel)) {}
  llvm::Error run(const std::vector<BufferView> &args,
                  Stream) const override {
    return kernel->run(args);
  }
  const std::vector<ArgumentSpec> &signature() const override {
    return kernel->signature();
  }
  const CompileEvent &compileEvent() const override {
    return kernel->compileEvent();
  }

private:
  std::unique_ptr<CpuKernel> kernel;
};

class GpuRuntimeKernel : public Kernel {
public:
  explicit GpuRuntimeKernel(std::unique_ptr<GpuKernel> kernel)
      : kernel(std::move(kernel)) {}
  llvm::Error run(const std::vector<BufferView> &args,
                  Stream stream) const override {
    return kernel->run(args, static_cast<cuda::CUstream>(stream));
  }
  const std::vector<ArgumentSpec> &signature() const override {
    return kernel->signature();
  }
  const CompileEvent &compileEvent() const override {
    return kernel->compileEvent();
  }

private:
  std::unique_ptr<GpuKernel> kernel;
};

} // namespace

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

llvm::Expected<std::shared_ptr<Kernel>>
compile(Runtime &runtime, ModuleBuilder build, llvm::StringRef entry,
        std::optional<KernelStrategy> strategy) {
  auto &state = detail::RuntimeAccess::state(runtime);
  auto gpuTarget = state.targetFor(strategy);
  if (!gpuTarget)
    return gpuTarget.takeError();
  ContextPool::Lease lease(state.contexts);
  mlir::OwningOpRef<mlir::ModuleOp> module = build(lease.context());
  if (!module)
    return makeError("the kernel module could not be built");
  CompileRecipe recipe =
      *gpuTarget ? gpuCompileRecipe(**gpuTarget) : cpuCompileRecipe();
  std::string digest = kernelKeyFor(*module, recipe).digest() + ":" + entry.str();
  if (std::shared_ptr<Kernel> held = state.heldOrClaim(digest))
    return held;

  std::shared_ptr<Kernel> kernel;
  llvm::Error error = llvm::Error::success();
  if (state.device) {
    auto compiled = GpuKernel::compile(std::move(module), entry, *state.device,
                                       *gpuTarget, state.cache.get());
    if (compiled)
      kernel = std::make_shared<GpuRuntimeKernel>(std::move(*compiled));
    else
      error = compiled.takeError();
  } else {
    auto compiled = CpuKernel::compile(std::move(module), entry, {},
                                       state.cache.get());
    if (compiled)
      kernel = std::make_shared<CpuRuntimeKernel>(std::move(*compiled));
    else
      error = compiled.takeError();
  }
  state.finish(digest, kernel);
  if (error)
    return std::move(error);
  const CompileEvent &event = kernel->compileEvent();
  std::string ms;
  llvm::raw_string_ostream(ms) << llvm::format("%.1f", event.milliseconds);
  runtime.log("kernel " + event.entryName + ": " +
              std::string(event.source()) + ", " + ms + " ms");
  return kernel;
}

size_t compileThreads() {
  if (const char *text = std::getenv("MLA_COMPILE_THREADS")) {
    char *end = nullptr;
    long threads = std::strtol(text, &end, 10);
    if (end != text && *end == '\0' && threads >= 1)
      return size_t(threads);
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

llvm::Expected<std::vector<std::shared_ptr<Kernel>>>
compileAll(Runtime &runtime, llvm::ArrayRef<CompileRequest> requests) {
  std::vector<std::optional<llvm::Expected<std::shared_ptr<Kernel>>>> results(
      requests.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < requests.size();)
      results[i].emplace(compile(runtime, requests[i].build, requests[i].entry,
                                 requests[i].strategy));
  };
  size_t workers = std::min<size_t>(requests.size(), compileThreads());
  std::vector<std::thread> threads;
  for (size_t w = 1; w < workers; ++w)
    threads.emplace_back(work);
  work();
  for (std::thread &thread : threads)
    thread.join();

  std::vector<std::shared_ptr<Kernel>> kernels;
  llvm::Error errors = llvm::Error::success();
  for (auto &result : results) {
    if (*result)
      kernels.push_back(std::move(**result));
    else
      errors = llvm::joinErrors(std::move(errors), result->takeError());
  }
  if (errors)
    return std::move(errors);
  return kernels;
}

} // namespace mla::runtime
