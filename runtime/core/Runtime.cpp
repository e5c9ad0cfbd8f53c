//===- Runtime.cpp - The runtime a serving engine embeds ------------------===//

#include "mla/Runtime/Runtime.h"

#include "mla/Builders/KernelBuilders.h"
#include "mla/Pipelines/Pipelines.h"
#include "mla/Runtime/ContextPool.h"
#include "mla/Runtime/CpuKernel.h"
#include "mla/Runtime/CudaDevice.h"
#include "mla/Runtime/GpuKernel.h"
#include "mla/Support/Diagnostics.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

namespace mla::runtime {

Kernel::~Kernel() = default;

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

constexpr size_t kAlignment = 256;

} // namespace

struct Runtime::State {
  RuntimeOptions options;
  std::unique_ptr<cuda::Device> device; // null on the CPU
  std::optional<GpuTarget> target;
  int64_t sharedMemoryPerSm = 0; ///< 0 on the CPU
  std::unique_ptr<KernelCache> cache;
  ContextPool contexts;

  /// Guards what follows.
  std::mutex mutex;
  /// Kernels of this process by key digest.
  llvm::StringMap<std::shared_ptr<Kernel>> kernels;
  /// Digests being compiled now: a second request for one waits for the
  /// first rather than compiling and loading the same module again.
  llvm::StringSet<> compiling;
  std::condition_variable compiled;
  std::vector<CompileEvent> events;
  /// Requests answered with a kernel of `kernels` (memory hits the kernel
  /// cache never sees).
  uint64_t heldKernelHits = 0;

  /// The GPU target with `strategy`, or the CPU (nullopt).
  llvm::Expected<std::optional<GpuTarget>>
  targetFor(std::optional<KernelStrategy> strategy) const {
    if (!device)
      return std::optional<GpuTarget>();
    GpuTarget chosen = *target;
    if (strategy)
      chosen.strategy = *strategy;
    // A strategy the device's chip cannot run (wgmma off sm_90a).
    if (llvm::Error error = chosen.checkStrategy())
      return std::move(error);
    return std::optional<GpuTarget>(chosen);
  }

  /// The kernel this process holds for `digest`, waiting while another
  /// thread compiles it; null when there is none and no compile running,
  /// after which the caller compiles it (and must call `finish`).
  std::shared_ptr<Kernel> heldOrClaim(llvm::StringRef digest) {
    std::unique_lock<std::mutex> lock(mutex);
    compiled.wait(lock, [&] { return !compiling.contains(digest); });
    if (auto found = kernels.find(digest); found != kernels.end()) {
      ++heldKernelHits;
      return found->second;
    }
    compiling.insert(digest);
    return nullptr;
  }

  /// Ends the compile `heldOrClaim` handed out: records `kernel` (null when
  /// the compile failed) and wakes those waiting for it.
  void finish(llvm::StringRef digest, std::shared_ptr<Kernel> kernel) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      compiling.erase(digest);
      if (kernel) {
        events.push_back(kernel->compileEvent());
        kernels[digest] = std::move(kernel);
      }
    }
    compiled.notify_all();
  }
};

//===----------------------------------------------------------------------===//
// Creation and the device
//===----------------------------------------------------------------------===//

Runtime::Runtime(std::unique_ptr<State> state) : state(std::move(state)) {}
Runtime::~Runtime() {
  // Kernels unload their GPU modules while the device is still open.
  state->kernels.clear();
}

llvm::Expected<std::unique_ptr<Runtime>> Runtime::create(RuntimeOptions options) {
  auto state = std::make_unique<State>();
  state->options = std::move(options);
  state->cache = std::make_unique<KernelCache>(state->options.cache);
  state->cache->setLogSink(state->options.log);
  std::unique_ptr<Runtime> runtime(new Runtime(std::move(state)));
  State &s = *runtime->state;

  if (s.options.device != DevicePreference::Cpu) {
    auto device = cuda::Device::open(s.options.gpuOrdinal);
    if (!device) {
      if (s.options.device == DevicePreference::Gpu)
        return makeError("no usable GPU: " +
                         llvm::toString(device.takeError()));
      runtime->log("runtime: no usable GPU (" +
                   llvm::toString(device.takeError()) + "), running on the CPU");
    } else {
      auto target = GpuTarget::forCapability((*device)->capability().major,
                                             (*device)->capability().minor);
      if (!target) {
        if (s.options.device == DevicePreference::Gpu)
          return target.takeError();
        runtime->log("runtime: " + llvm::toString(target.takeError()) +
                     "; running on the CPU");
      } else {
        s.device = std::move(*device);
        s.target = *target;
        if (auto bytes = s.device->attribute(
                cuda::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR))
          s.sharedMemoryPerSm = *bytes;
        else
          runtime->log("runtime: shared memory per SM unknown (" +
                       llvm::toString(bytes.takeError()) +
                       "); decode schedules assume one block an SM");
      }
    }
  }
  runtime->log("runtime: device " + runtime->deviceDescription() +
               ", kernel cache " +
               (s.cache->config().diskEnabled ? s.cache->config().directory
                                              : std::string("in memory only")));
  return runtime;
}

DeviceKind Runtime::deviceKind() const {
  return state->device ? DeviceKind::CUDA : DeviceKind::CPU;
}

const cuda::Device *Runtime::gpu() const { return state->device.get(); }

std::string Runtime::deviceDescription() const {
  if (!state->device)
    return "host CPU (" + hostTargetDescription() + ", " +
           std::to_string(parallelism()) + " threads)";
  return state->device->name() + " (" + state->target->chip() + ", " +
         std::to_string(state->device->multiprocessorCount()) + " SMs)";
}

int64_t Runtime::parallelism() const {
  if (state->device)
    return state->device->multiprocessorCount();
  return std::max(1u, std::thread::hardware_concurrency());
}

int64_t Runtime::sharedMemoryPerSm() const { return state->sharedMemoryPerSm; }

int64_t Runtime::maxSharedBytesPerBlock() const {
  return state->target ? state->target->maxSharedBytesPerBlock() : 0;
}

//===----------------------------------------------------------------------===//
// Backends
//===----------------------------------------------------------------------===//

AttentionConfig Runtime::onThisDevice(AttentionConfig config) const {
  config.device = deviceKind();
  config.capability = {};
  if (state->device)
    config.capability = {state->device->capability().major,
                         state->device->capability().minor};
  return config;
}

const BackendRegistry &Runtime::backends() const {
  return BackendRegistry::builtin();
}

llvm::Expected<Selection> Runtime::selectBackend(const AttentionConfig &config,
                                                 llvm::StringRef choice) const {
  auto selection = backends().select(config, choice);
  if (!selection)
    return selection.takeError();
  log("backend: " + selection->str());
  return selection;
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

llvm::Expected<std::shared_ptr<Kernel>>
Runtime::compile(ModuleBuilder build, llvm::StringRef entry,
                 std::optional<KernelStrategy> strategy) {
  auto gpuTarget = state->targetFor(strategy);
  if (!gpuTarget)
    return gpuTarget.takeError();
  ContextPool::Lease lease(state->contexts);
  mlir::OwningOpRef<mlir::ModuleOp> module = build(lease.context());
  if (!module)
    return makeError("the kernel module could not be built");
  CompileRecipe recipe =
      *gpuTarget ? gpuCompileRecipe(**gpuTarget) : cpuCompileRecipe();
  std::string digest = kernelKeyFor(*module, recipe).digest() + ":" + entry.str();
  if (std::shared_ptr<Kernel> held = state->heldOrClaim(digest))
    return held;

  std::shared_ptr<Kernel> kernel;
  llvm::Error error = llvm::Error::success();
  if (state->device) {
    auto compiled = GpuKernel::compile(std::move(module), entry, *state->device,
                                       *gpuTarget, state->cache.get());
    if (compiled)
      kernel = std::make_shared<GpuRuntimeKernel>(std::move(*compiled));
    else
      error = compiled.takeError();
  } else {
    auto compiled = CpuKernel::compile(std::move(module), entry, {},
                                       state->cache.get());
    if (compiled)
      kernel = std::make_shared<CpuRuntimeKernel>(std::move(*compiled));
    else
      error = compiled.takeError();
  }
  state->finish(digest, kernel);
  if (error)
    return std::move(error);
  const CompileEvent &event = kernel->compileEvent();
  std::string ms;
  llvm::raw_string_ostream(ms) << llvm::format("%.1f", event.milliseconds);
  log("kernel " + event.entryName + ": " + std::string(event.source()) +
      ", " + ms + " ms");
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
Runtime::compileAll(llvm::ArrayRef<CompileRequest> requests) {
  std::vector<std::optional<llvm::Expected<std::shared_ptr<Kernel>>>> results(
      requests.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < requests.size();)
      results[i].emplace(
          compile(requests[i].build, requests[i].entry, requests[i].strategy));
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

llvm::Expected<std::shared_ptr<Kernel>>
Runtime::compileSource(llvm::StringRef source, llvm::StringRef entry) {
  std::string diagnostics;
  // MLIR's lexer stops at a NUL after the text, reading past the end of a
  // StringRef that has none: it parses a terminated copy (found by the IR
  // fuzzer, test/fuzz).
  std::string terminated = source.str();
  auto kernel = compile(
      [&](mlir::MLIRContext &ctx) {
        DiagnosticCollector collector(&ctx);
        auto module =
            mlir::parseSourceString<mlir::ModuleOp>(terminated, &ctx);
        if (!module)
          diagnostics = llvm::toString(collector.takeError("parse error"));
        return module;
      },
      entry);
  if (!kernel && !diagnostics.empty()) {
    llvm::consumeError(kernel.takeError());
    return makeError("the kernel source does not parse or verify: " +
                     diagnostics);
  }
  return kernel;
}

KernelCache &Runtime::kernelCache() const { return *state->cache; }
KernelCacheStats Runtime::cacheStats() const {
  std::lock_guard<std::mutex> lock(state->mutex);
  KernelCacheStats stats = state->cache->stats();
  stats.memoryHits += state->heldKernelHits;
  return stats;
}

std::vector<CompileEvent> Runtime::compileEvents() const {
  std::lock_guard<std::mutex> lock(state->mutex);
  return state->events;
}

void Runtime::log(const std::string &line) const {
  if (state->options.log)
    state->options.log(line);
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

DeviceAllocation::DeviceAllocation(DeviceAllocation &&other) noexcept
    : owner(other.owner), pointer(other.pointer), bytes(other.bytes) {
  other.owner = nullptr;
  other.pointer = nullptr;
  other.bytes = 0;
}

DeviceAllocation &DeviceAllocation::operator=(DeviceAllocation &&other) noexcept {
  if (this != &other) {
    if (owner && pointer)
      owner->release(pointer);
    owner = other.owner;
    pointer = other.pointer;
    bytes = other.bytes;
    other.owner = nullptr;
    other.pointer = nullptr;
    other.bytes = 0;
  }
  return *this;
}

DeviceAllocation::~DeviceAllocation() {
  if (owner && pointer)
    owner->release(pointer);
}

llvm::Expected<DeviceAllocation> Runtime::allocate(size_t bytes) const {
  DeviceAllocation allocation;
  allocation.owner = this;
  allocation.bytes = bytes;
  if (bytes == 0)
    return allocation;
  if (!state->device) {
    size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    allocation.pointer = std::aligned_alloc(kAlignment, rounded);
    if (!allocation.pointer)
      return makeError("out of host memory allocating " +
                       llvm::Twine(bytes) + " bytes");
    return allocation;
  }
  if (llvm::Error error = state->device->makeCurrent())
    return std::move(error);
  cuda::Driver &driver = state->device->driver();
  cuda::CUdeviceptr pointer = 0;
  if (llvm::Error error =
          driver.check(driver.fn.cuMemAlloc(&pointer, bytes), "cuMemAlloc"))
    return std::move(error);
  allocation.pointer = reinterpret_cast<void *>(pointer);
  return allocation;
}

void Runtime::release(void *pointer) const {
  if (!state->device) {
    std::free(pointer);
    return;
  }
  llvm::consumeError(state->device->makeCurrent());
  state->device->driver().fn.cuMemFree(reinterpret_cast<cuda::CUdeviceptr>(pointer));
}

llvm::Error Runtime::upload(void *device, const void *host, size_t bytes,
                            Stream stream) const {
  if (bytes == 0)
    return llvm::Error::success();
  if (!state->device) {
    std::memcpy(device, host, bytes);
    return llvm::Error::success();
  }
  if (llvm::Error error = state->device->makeCurrent())
    return error;
  cuda::Driver &driver = state->device->driver();
  return driver.check(
      driver.fn.cuMemcpyHtoDAsync(reinterpret_cast<cuda::CUdeviceptr>(device),
                                  host, bytes,
                                  static_cast<cuda::CUstream>(stream)),
      "cuMemcpyHtoDAsync");
}

llvm::Error Runtime::download(void *host, const void *device, size_t bytes,
                              Stream stream) const {
  if (bytes == 0)
    return llvm::Error::success();
  if (!state->device) {
    std::memcpy(host, device, bytes);
    return llvm::Error::success();
  }
  if (llvm::Error error = state->device->makeCurrent())
    return error;
  cuda::Driver &driver = state->device->driver();
  if (llvm::Error error = driver.check(
          driver.fn.cuMemcpyDtoHAsync(
              host, reinterpret_cast<cuda::CUdeviceptr>(device), bytes,
              static_cast<cuda::CUstream>(stream)),
          "cuMemcpyDtoHAsync"))
    return error;
  return synchronize(stream);
}

llvm::Error Runtime::synchronizeDevice() const {
  if (!state->device)
    return llvm::Error::success();
  if (llvm::Error error = state->device->makeCurrent())
    return error;
  cuda::Driver &driver = state->device->driver();
  return driver.check(driver.fn.cuCtxSynchronize(), "cuCtxSynchronize");
}

void Runtime::waitForKernelUpgrades() const {
  if (state->device)
    mla::waitForKernelUpgrades();
}

llvm::Error Runtime::synchronize(Stream stream) const {
  if (!state->device)
    return llvm::Error::success();
  if (llvm::Error error = state->device->makeCurrent())
    return error;
  cuda::Driver &driver = state->device->driver();
  return driver.check(
      driver.fn.cuStreamSynchronize(static_cast<cuda::CUstream>(stream)),
      "cuStreamSynchronize");
}

} // namespace mla::runtime
