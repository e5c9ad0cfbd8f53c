//===- LaunchShims.cpp - The mgpu* entry points of JIT-compiled host code -===//

#include "LaunchShims.h"
#include "PreloadedModules.h"
#include "TensorMaps.h"

#include "llvm/ExecutionEngine/Orc/Shared/ExecutorAddress.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
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

namespace {
thread_local GpuCall *activeCall = nullptr;

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
  std::optional<LoadedModule> loaded;
  if (activeCall->preloadedModules)
    loaded = activeCall->preloadedModules->take(text);
  if (!loaded)
    loaded = loadPtxModule(text);
  if (!loaded->error.empty() && activeCall->error.empty())
    activeCall->error = loaded->error;
  // The host code's destructors unload it (mgpuModuleUnload).
  return loaded->module.releaseHandle();
}

void *mlaModuleLoad(void *image, size_t) {
  if (!usable())
    return nullptr;
  CUmodule module = nullptr;
  failed(fn().cuModuleLoadData(&module, image), "cuModuleLoadData");
  return module;
}

void mlaModuleUnload(void *module) {
  // Runs from the JIT's static destructors, possibly with no active call:
  // use the process-wide driver, which is never unloaded.
  if (!module)
    return;
  if (auto driver = Driver::get())
    driver->fn.cuModuleUnload(static_cast<CUmodule>(module));
  else
    llvm::consumeError(driver.takeError());
}

void *mlaModuleGetFunction(void *module, const char *name) {
  if (!usable() || !module)
    return nullptr;
  CUfunction function = nullptr;
  activeCall->kernel = name;
  if (failed(fn().cuModuleGetFunction(&function, static_cast<CUmodule>(module),
                                      name),
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
  if (failed(fn().cuLaunchKernel(f, gridX, gridY, gridZ, blockX, blockY,
                                 blockZ, sharedBytes,
                                 static_cast<CUstream>(stream), params, extra),
             "cuLaunchKernel"))
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
