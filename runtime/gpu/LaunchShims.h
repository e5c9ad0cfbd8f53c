//===- LaunchShims.h - mgpu* entry points of JIT host code ------*- C++ -*-===//
//
// Host code lowered from gpu.launch_func, gpu.alloc and gpu.memcpy calls
// mgpuModuleLoadJIT, mgpuLaunchKernel, mgpuMemAlloc and friends. These are
// their implementations over the run-time-loaded CUDA driver, handed to the
// JIT as a symbol map (no CUDA runtime library is involved). They cannot
// return errors through that ABI, so the first failure of a call is kept in
// the thread's active GpuCall and reported when the call returns; later
// launches of that call are skipped.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_GPU_LAUNCHSHIMS_H
#define MLA_RUNTIME_GPU_LAUNCHSHIMS_H

#include "mla/Runtime/CudaDriver.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ExecutionEngine/Orc/Core.h"
#include "llvm/ExecutionEngine/Orc/Mangling.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace mla::gpu {

class PreloadedModules;

/// The dynamic shared memory each kernel function of one loaded module may
/// launch with without asking the driver again: what it was opted in to
/// (or found to need no opt-in for). One per GpuKernel, which outlives its
/// module's function handles, so a handle is never reused within one.
/// Thread-safe: a kernel may run on several threads.
class SharedMemoryOptIns {
public:
  /// Makes sure `function` may launch with `bytes`: nothing to do when it
  /// already may; else `optIn(limit)` asks the driver for the largest size
  /// it is known to launch with (so that a smaller request on another
  /// thread never lowers the limit), and success is remembered. One
  /// thread at a time. False when `optIn` fails.
  bool ensure(cuda::CUfunction function, int bytes,
              llvm::function_ref<bool(int limit)> optIn);

private:
  mutable std::mutex mutex;
  std::vector<std::pair<cuda::CUfunction, int>> known;
};

/// The driver and stream the shims use on this thread while alive.
class GpuCall {
public:
  GpuCall(const cuda::Driver &driver, cuda::CUstream stream);
  ~GpuCall();

  /// The first failure recorded during the call, if any.
  llvm::Error takeError();

  /// The innermost GpuCall alive on this thread, or null: where shims
  /// outside this file record their failures.
  static GpuCall *active();

  const cuda::Driver &driver;
  cuda::CUstream stream;
  std::string error;
  /// The kernel the launch code looked up last (the one it launches next),
  /// named in launch errors.
  const char *kernel = nullptr;
  /// The calling kernel's opt-ins (none: ask the driver every launch).
  SharedMemoryOptIns *optIns = nullptr;
  /// Where the call's scratch buffers come from (none: the default pool).
  cuda::CUmemoryPool scratchPool = nullptr;
  /// Kernel modules already being loaded, which module loads take instead
  /// of loading their PTX again (none: every load compiles its PTX).
  PreloadedModules *preloadedModules = nullptr;

private:
  GpuCall *previous;
};

/// Nanoseconds this thread has spent in cuLaunchKernel while timed, and
/// turning the timing on (counted, for nesting) and off.
std::uint64_t driverLaunchNanoseconds();
void timeDriverLaunches(bool on);

/// Runs `body` with this thread in relaxed stream-capture mode, then puts
/// the caller's mode back whatever happened. A thread capturing a graph in
/// global or thread-local mode may not allocate, copy synchronously or
/// load modules; relaxed mode allows those calls, which touch no captured
/// stream. The first error wins.
llvm::Error inRelaxedCaptureMode(const cuda::Driver &driver,
                                 llvm::function_ref<llvm::Error()> body);

/// The mgpu* symbols, and mlaTiledTensorMap (TensorMaps.h), for
/// ExecutionEngine::registerSymbols. The module handles the host code
/// holds are the shims' own: a module the driver has loaded, or one marked
/// to load at its kernel's first launch (mla/Target/KernelLoading.h),
/// which mgpuModuleGetFunction loads then.
llvm::orc::SymbolMap launchShimSymbols(llvm::orc::MangleAndInterner interner);

} // namespace mla::gpu

#endif // MLA_RUNTIME_GPU_LAUNCHSHIMS_H
