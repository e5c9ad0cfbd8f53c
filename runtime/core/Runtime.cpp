//===- Runtime.cpp - The runtime a serving engine embeds ------------------===//

#include "mla/Runtime/Runtime.h"

#include "RuntimeState.h"

#include "mla/Runtime/GpuKernel.h"
#include "mla/Runtime/JitObject.h"
#include "mla/Runtime/RuntimeCompile.h"
#include "mla/Support/Diagnostics.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <cstdlib>
#include <cstring>
#include <thread>

namespace mla::runtime {

Kernel::~Kernel() = default;

namespace {
constexpr size_t kAlignment = 256;
} // namespace

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

const BackendRegistry &Runtime::backends(BackendRole role) const {
  return BackendRegistry::builtin(role);
}

llvm::Expected<Selection> Runtime::selectBackend(const AttentionConfig &config,
                                                 llvm::StringRef choice,
                                                 BackendRole role) const {
  auto selection = backends(role).select(config, choice);
  if (!selection)
    return selection.takeError();
  log(std::string(role == BackendRole::Prefill ? "prefill backend: "
                                               : "backend: ") +
      selection->str());
  return selection;
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

llvm::Expected<std::shared_ptr<Kernel>>
Runtime::compileSource(llvm::StringRef source, llvm::StringRef entry) {
  std::string diagnostics;
  // MLIR's lexer stops at a NUL after the text, reading past the end of a
  // StringRef that has none: it parses a terminated copy (found by the IR
  // fuzzer, test/fuzz).
  std::string terminated = source.str();
  auto kernel = runtime::compile(
      *this,
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
