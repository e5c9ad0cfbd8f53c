//===- RuntimeState.h - What a Runtime holds --------------------*- C++ -*-===//
//
// Private to runtime/core: the state behind mla::runtime::Runtime, shared by
// Runtime.cpp (device, memory) and RuntimeCompile.cpp (the kernels it
// compiles and holds).
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_CORE_RUNTIMESTATE_H
#define MLA_RUNTIME_CORE_RUNTIMESTATE_H

#include "mla/Runtime/ContextPool.h"
#include "mla/Runtime/CudaDevice.h"
#include "mla/Runtime/Runtime.h"
#include "mla/Target/GpuTarget.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace mla::runtime {

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

namespace detail {
/// How the compile path (RuntimeCompile.cpp) reaches a runtime's state.
struct RuntimeAccess {
  static Runtime::State &state(const Runtime &runtime) {
    return *runtime.state;
  }
};
} // namespace detail

} // namespace mla::runtime

#endif // MLA_RUNTIME_CORE_RUNTIMESTATE_H
