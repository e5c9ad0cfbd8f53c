//===- LaunchShims.cpp - The mgpu* entry points of JIT-compiled host code -===//

#include "LaunchShims.h"
#include "DriverCompiles.h"
#include "PreloadedModules.h"
#include "TensorMaps.h"
#include "mla/Target/KernelLoading.h"

#include "llvm/ExecutionEngine/Orc/Shared/ExecutorAddress.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>

using namespace mla::cuda;

namespace mla::gpu {

bool SharedMemoryOptIns::ensure(CUfunction function, int bytes,
                                llvm::function_ref<bool(int)> optIn) {
  std::lock_guard<std::mutex> lock(mutex);
  auto entry = std::find_if(known.begin(), known.end(),
                            [&](const auto &k) { return k.first == function; });
  if (entry != known.end() && bytes <= entry->second)
    return true;
  int limit = entry == known.end() ? bytes : std::max(entry->second, bytes);
  if (!optIn(limit))
    return false;
  if (entry == known.end())
    known.emplace_back(function, limit);
  else
    entry->second = limit;
  return true;
}

llvm::Error inRelaxedCaptureMode(const Driver &driver,
                                 llvm::function_ref<llvm::Error()> body) {
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  if (llvm::Error error =
          driver.check(driver.fn.cuThreadExchangeStreamCaptureMode(&mode),
                       "cuThreadExchangeStreamCaptureMode"))
    return error;
  llvm::Error result = body();
  llvm::Error restored =
      driver.check(driver.fn.cuThreadExchangeStreamCaptureMode(&mode),
                   "cuThreadExchangeStreamCaptureMode");
  if (result) {
    llvm::consumeError(std::move(restored));
    return result;
  }
  return restored;
}

namespace {
thread_local GpuCall *activeCall = nullptr;
thread_local std::uint64_t launchNanoseconds = 0;
/// Open DriverLaunchTimer scopes on this thread: launches read the clock
/// only inside one.
thread_local int launchTimers = 0;

/// What the host code holds as a kernel module (its opaque handle).
struct KernelModule {
  /// Null until loaded (or when the load failed). Read at every launch,
  /// without a lock once set.
  std::atomic<CUmodule> module{nullptr};
  /// The PTX of a module marked to load at its kernel's first launch (the
  /// host object's constant, which outlives the handle); null for a module
  /// loaded with the others. Set once, when the handle is made.
  const char *deferredPtx = nullptr;
  /// Held while a deferred module loads or an upgrade is applied (a kernel
  /// may launch from several threads).
  std::mutex loading;
  /// The module-load code replacing a linked module (DriverCompiles.h),
  /// while it is pending; `upgradePending` lets launches skip the lock.
  std::shared_ptr<ModuleUpgrade> upgrade;
  std::atomic<bool> upgradePending{false};
  /// Modules replaced by their upgrades: kept until the handle is
  /// unloaded, as launches already queued or recorded may use them.
  std::vector<CUmodule> replaced;

  void setModule(LoadedModule &loaded) {
    upgrade = std::move(loaded.upgrade);
    upgradePending.store(upgrade != nullptr);
    module.store(loaded.module.releaseHandle(), std::memory_order_release);
  }
};

/// Kernels using at most 48 KiB of shared memory (static + dynamic) need no
/// opt-in.
constexpr int kDefaultSharedLimit = 48 * 1024;
/// Dynamic sizes within this much of the limit check the static size.
constexpr int kStaticSharedQueryMargin = 4 * 1024;
constexpr intptr_t kMaxGridX = 2147483647;
constexpr intptr_t kMaxGridYZ = 65535;

/// Records a failed driver call on the active call (the first one wins).
bool failed(CUresult result, const char *call) {
  if (result == CUDA_SUCCESS)
    return false;
  if (!activeCall) {
    std::fprintf(stderr, "mla: %s failed outside a GPU call (code %d)\n",
                 call, result);
    return true;
  }
  if (activeCall->error.empty())
    activeCall->error = std::string(call) + " failed: " +
                        activeCall->driver.describe(result);
  return true;
}

/// True when the call can go on (a driver is active and nothing failed).
bool usable() { return activeCall && activeCall->error.empty(); }

const Driver::Symbols &fn() { return activeCall->driver.fn; }

extern "C" {

void *mlaModuleLoadJIT(void *ptx, int optLevel) {
  (void)optLevel; // the driver's default (ptxas -O3) is what we want
  if (!usable())
    return nullptr;
  const char *text = static_cast<const char *>(ptx);
  auto handle = std::make_unique<KernelModule>();
  if (loadsAtFirstLaunch(text)) {
    handle->deferredPtx = text;
    return handle.release();
  }
  std::optional<LoadedModule> loaded;
  if (activeCall->preloadedModules)
    loaded = activeCall->preloadedModules->take(text);
  if (!loaded)
    loaded = loadPtxModule(text);
  if (!loaded->error.empty() && activeCall->error.empty())
    activeCall->error = loaded->error;
  // The host code's destructors unload it (mgpuModuleUnload).
  handle->setModule(*loaded);
  return handle.release();
}

void *mlaModuleLoad(void *image, size_t) {
  if (!usable())
    return nullptr;
  auto handle = std::make_unique<KernelModule>();
  CUmodule module = nullptr;
  failed(fn().cuModuleLoadData(&module, image), "cuModuleLoadData");
  handle->module = module;
  return handle.release();
}

void mlaModuleUnload(void *module) {
  // Runs from the JIT's static destructors, possibly with no active call:
  // use the process-wide driver, which is never unloaded.
  std::unique_ptr<KernelModule> handle(static_cast<KernelModule *>(module));
  if (!handle)
    return;
  auto driver = Driver::get();
  if (!driver) {
    llvm::consumeError(driver.takeError());
    return;
  }
  handle->replaced.push_back(handle->module.load());
  for (CUmodule loaded : handle->replaced)
    if (loaded)
      driver->fn.cuModuleUnload(loaded);
}

/// Whether the active call's stream is capturing a graph (where a failed
/// query counts as capturing: waiting is then the safe side).
static bool capturing() {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  return fn().cuStreamIsCapturing(activeCall->stream, &status) !=
             CUDA_SUCCESS ||
         status != CU_STREAM_CAPTURE_STATUS_NONE;
}

/// `current`, or the handle's upgraded module once the background load
/// has made it (waited for when the launch goes into a graph, which keeps
/// its code). A failed upgrade keeps the linked module.
static CUmodule upgradedModule(KernelModule &handle, CUmodule current) {
  if (!handle.upgradePending.load(std::memory_order_acquire))
    return current;
  std::shared_ptr<ModuleUpgrade> upgrade;
  {
    std::lock_guard<std::mutex> lock(handle.loading);
    upgrade = handle.upgrade;
  }
  if (!upgrade || !(upgrade->ready.load() || capturing()))
    return handle.module.load(std::memory_order_acquire);
  LoadedModule loaded = upgrade->take(); // waits when not ready
  std::lock_guard<std::mutex> lock(handle.loading);
  if (handle.upgrade == upgrade) {
    handle.upgrade = nullptr;
    handle.upgradePending.store(false, std::memory_order_release);
    if (loaded.error.empty()) {
      handle.replaced.push_back(handle.module.load());
      handle.module.store(loaded.module.releaseHandle(),
                          std::memory_order_release);
    }
  }
  return handle.module.load(std::memory_order_acquire);
}

/// The handle's module, loaded now if it was deferred to this first launch
/// (on the calling thread's context, which runs the kernel; in relaxed
/// capture mode, as a graph may be capturing the launch). Null after a
/// failure, recorded on the call; a later call tries again.
CUmodule loadedModule(KernelModule &handle, const char *kernel) {
  if (CUmodule module = handle.module.load(std::memory_order_acquire))
    return upgradedModule(handle, module);
  if (!handle.deferredPtx)
    return nullptr;
  std::unique_lock<std::mutex> lock(handle.loading);
  if (CUmodule module = handle.module.load(std::memory_order_acquire)) {
    lock.unlock(); // loaded by another thread meanwhile
    return upgradedModule(handle, module);
  }
  LoadedModule loaded;
  llvm::Error error =
      inRelaxedCaptureMode(activeCall->driver, [&]() -> llvm::Error {
        loaded = loadPtxModule(handle.deferredPtx);
        return llvm::Error::success();
      });
  std::string why = error ? llvm::toString(std::move(error)) : loaded.error;
  if (!why.empty()) {
    if (activeCall->error.empty())
      activeCall->error = std::string("loading the module of kernel '") +
                          kernel + "' at its first launch: " + why;
    return nullptr;
  }
  handle.setModule(loaded);
  lock.unlock();
  return upgradedModule(handle, handle.module.load());
}

void *mlaModuleGetFunction(void *module, const char *name) {
  if (!usable() || !module)
    return nullptr;
  activeCall->kernel = name;
  CUmodule loaded = loadedModule(*static_cast<KernelModule *>(module), name);
  if (!loaded) {
    // A module whose load failed when the kernel was compiled (that
    // compile reported it) must not make a later launch a silent no-op.
    if (activeCall->error.empty())
      activeCall->error =
          std::string("the module of kernel '") + name + "' is not loaded";
    return nullptr;
  }
  CUfunction function = nullptr;
  if (failed(fn().cuModuleGetFunction(&function, loaded, name),
             "cuModuleGetFunction"))
    activeCall->error += std::string(" (kernel '") + name + "')";
  return function;
}

void mlaLaunchKernel(void *function, intptr_t gridX, intptr_t gridY,
                     intptr_t gridZ, intptr_t blockX, intptr_t blockY,
                     intptr_t blockZ, int32_t sharedBytes, void *stream,
                     void **params, void **extra, size_t) {
  if (!usable() || !function)
    return;
  // An empty grid is an empty batch: nothing to do (the driver would call
  // it an invalid value).
  if (gridX <= 0 || gridY <= 0 || gridZ <= 0)
    return;
  if (gridX > kMaxGridX || gridY > kMaxGridYZ || gridZ > kMaxGridYZ) {
    activeCall->error = "kernel grid (" + std::to_string(gridX) + ", " +
                        std::to_string(gridY) + ", " + std::to_string(gridZ) +
                        ") exceeds CUDA's limits (2^31-1, 65535, 65535): the "
                        "batch is too large for one launch";
    return;
  }
  auto f = static_cast<CUfunction>(function);
  // Above 48 KiB of shared memory in all a kernel must opt in. The static
  // part counts too: a kernel addressing dynamic shared memory declares a
  // 1-byte static symbol for it, so exactly 48 KiB of dynamic memory
  // already needs the opt-in. (The static size is only asked for near the
  // limit, to keep the common launch to one driver call.)
  if (sharedBytes > kDefaultSharedLimit - kStaticSharedQueryMargin) {
    auto optIn = [&](int limit) {
      int staticBytes = 0;
      if (failed(fn().cuFuncGetAttribute(&staticBytes,
                                         CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
                                         f),
                 "cuFuncGetAttribute(SHARED_SIZE_BYTES)"))
        return false;
      return !(limit + staticBytes > kDefaultSharedLimit &&
               failed(fn().cuFuncSetAttribute(
                          f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                          limit),
                      "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)"));
    };
    // With the kernel's record, the driver is asked once per function.
    SharedMemoryOptIns *optIns = activeCall->optIns;
    if (!(optIns ? optIns->ensure(f, sharedBytes, optIn) : optIn(sharedBytes)))
      return;
  }
  auto launch = [&] {
    return fn().cuLaunchKernel(f, gridX, gridY, gridZ, blockX, blockY, blockZ,
                               sharedBytes, static_cast<CUstream>(stream),
                               params, extra);
  };
  CUresult launched;
  if (launchTimers > 0) {
    auto start = std::chrono::steady_clock::now();
    launched = launch();
    launchNanoseconds += std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::steady_clock::now() - start)
                             .count();
  } else {
    launched = launch();
  }
  if (failed(launched, "cuLaunchKernel"))
    activeCall->error += " (kernel '" +
                         std::string(activeCall->kernel ? activeCall->kernel
                                                        : "?") +
                         "', grid (" + std::to_string(gridX) + ", " +
                         std::to_string(gridY) + ", " + std::to_string(gridZ) +
                         "), block (" + std::to_string(blockX) + ", " +
                         std::to_string(blockY) + ", " +
                         std::to_string(blockZ) + "), " +
                         std::to_string(sharedBytes) +
                         " bytes of dynamic shared memory)";
}

/// Every stream the host code asks for is the caller's: its launches run in
/// order on it, after whatever the caller queued before.
void *mlaStreamCreate() { return activeCall ? activeCall->stream : nullptr; }

void mlaStreamDestroy(void *) {}

void mlaStreamSynchronize(void *stream) {
  if (activeCall)
    failed(fn().cuStreamSynchronize(static_cast<CUstream>(stream)),
           "cuStreamSynchronize");
}

void *mlaMemAlloc(uint64_t bytes, void *stream, bool) {
  if (!usable() || bytes == 0)
    return nullptr;
  CUdeviceptr pointer = 0;
  auto s = static_cast<CUstream>(stream);
  if (CUmemoryPool pool = activeCall->scratchPool)
    failed(fn().cuMemAllocFromPoolAsync(&pointer, bytes, pool, s),
           "cuMemAllocFromPoolAsync");
  else
    failed(fn().cuMemAllocAsync(&pointer, bytes, s), "cuMemAllocAsync");
  return reinterpret_cast<void *>(pointer);
}

void mlaMemFree(void *pointer, void *stream) {
  if (activeCall && pointer)
    failed(fn().cuMemFreeAsync(reinterpret_cast<CUdeviceptr>(pointer),
                               static_cast<CUstream>(stream)),
           "cuMemFreeAsync");
}

void mlaMemcpy(void *destination, void *source, size_t bytes, void *stream) {
  if (!usable() || bytes == 0)
    return;
  failed(fn().cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(destination),
                            reinterpret_cast<CUdeviceptr>(source), bytes,
                            static_cast<CUstream>(stream)),
         "cuMemcpyAsync");
}

void *mlaEventCreate() {
  CUevent event = nullptr;
  if (usable())
    failed(fn().cuEventCreate(&event, CU_EVENT_DISABLE_TIMING),
           "cuEventCreate");
  return event;
}

void mlaEventDestroy(void *event) {
  if (activeCall && event)
    fn().cuEventDestroy(static_cast<CUevent>(event));
}

void mlaEventRecord(void *event, void *stream) {
  if (usable())
    failed(fn().cuEventRecord(static_cast<CUevent>(event),
                              static_cast<CUstream>(stream)),
           "cuEventRecord");
}

void mlaEventSynchronize(void *event) {
  if (activeCall)
    failed(fn().cuEventSynchronize(static_cast<CUevent>(event)),
           "cuEventSynchronize");
}

void mlaStreamWaitEvent(void *stream, void *event) {
  // One stream per call: ordering is already the stream's.
  (void)stream;
  mlaEventSynchronize(event);
}

void mlaSetDefaultDevice(int32_t) {}

} // extern "C"
} // namespace

std::uint64_t driverLaunchNanoseconds() { return launchNanoseconds; }

void timeDriverLaunches(bool on) { launchTimers += on ? 1 : -1; }

GpuCall::GpuCall(const Driver &driver, CUstream stream)
    : driver(driver), stream(stream), previous(activeCall) {
  activeCall = this;
}

GpuCall::~GpuCall() { activeCall = previous; }

GpuCall *GpuCall::active() { return activeCall; }

llvm::Error GpuCall::takeError() {
  if (error.empty())
    return llvm::Error::success();
  std::string text = std::move(error);
  error.clear();
  return llvm::createStringError(llvm::inconvertibleErrorCode(), text);
}

llvm::orc::SymbolMap launchShimSymbols(llvm::orc::MangleAndInterner interner) {
  llvm::orc::SymbolMap map;
  auto add = [&](const char *name, auto *function) {
    map[interner(name)] = {llvm::orc::ExecutorAddr::fromPtr(function),
                           llvm::JITSymbolFlags::Exported};
  };
  add("mgpuModuleLoadJIT", &mlaModuleLoadJIT);
  add("mgpuModuleLoad", &mlaModuleLoad);
  add("mgpuModuleUnload", &mlaModuleUnload);
  add("mgpuModuleGetFunction", &mlaModuleGetFunction);
  add("mgpuLaunchKernel", &mlaLaunchKernel);
  add("mgpuStreamCreate", &mlaStreamCreate);
  add("mgpuStreamDestroy", &mlaStreamDestroy);
  add("mgpuStreamSynchronize", &mlaStreamSynchronize);
  add("mgpuStreamWaitEvent", &mlaStreamWaitEvent);
  add("mgpuEventCreate", &mlaEventCreate);
  add("mgpuEventDestroy", &mlaEventDestroy);
  add("mgpuEventRecord", &mlaEventRecord);
  add("mgpuEventSynchronize", &mlaEventSynchronize);
  add("mgpuMemAlloc", &mlaMemAlloc);
  add("mgpuMemFree", &mlaMemFree);
  add("mgpuMemcpy", &mlaMemcpy);
  add("mgpuSetDefaultDevice", &mlaSetDefaultDevice);
  add("mlaTiledTensorMap", &mlaTiledTensorMap);
  return map;
}

} // namespace mla::gpu
