//===- DriverCompiles.h - How kernel PTX becomes machine code ---*- C++ -*-===//
//
// The runtime hands each kernel module's PTX to the CUDA driver, which has
// two ways to compile it:
//
// - a module load (cuModuleLoadDataEx): the code every timing in the docs
//   is measured with, but the driver compiles one module at a time in a
//   process, whatever the number of threads loading;
// - its JIT linker (cuLinkAddData, cuLinkComplete): compiles on every
//   thread at once, but as relocatable code, which the H200 runs up to
//   1.75x slower for the tensor-core kernels (more registers, spills).
//
// Tiered (the default) takes both: each module is linked at once, so a
// layer is ready in the time of its slowest link, and the same PTX is
// queued for a module load on a background thread; the host code's next
// launch of the kernel switches to that code once it is there. A launch
// into a CUDA graph being captured waits for it, so graphs always hold the
// module-load code. MLA_DRIVER_COMPILE picks "tiered", "load" (module
// loads only, the layer waits for all of them) or "link" (linked code
// only, for measurements).
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_GPU_DRIVERCOMPILES_H
#define MLA_RUNTIME_GPU_DRIVERCOMPILES_H

#include "mla/Runtime/CudaDevice.h"

#include "llvm/ADT/StringRef.h"

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

namespace mla::gpu {

/// MLA_DRIVER_COMPILE, read once.
enum class DriverCompileMode { Tiered, Load, Link };
DriverCompileMode driverCompileMode();

struct ModuleUpgrade;

/// A module the driver compiled from PTX (unloaded with this object
/// unless its handle is released), or why it could not.
struct LoadedModule {
  cuda::Module module;
  /// Empty on success; else the failed call, the driver's reason and the
  /// JIT's log.
  std::string error;
  /// Compiled by the linker (relocatable code).
  bool linked = false;
  /// The module-load code of the same PTX, being compiled in the
  /// background (tiered mode; null otherwise).
  std::shared_ptr<ModuleUpgrade> upgrade;
};

/// The module-load code of a linked module, compiled in the background.
struct ModuleUpgrade {
  /// Set once `result` is final; read without the lock by launches.
  std::atomic<bool> ready{false};
  /// Blocks until the background load has ended, then hands its module
  /// over (an error when it failed or was never run).
  LoadedModule take();

private:
  friend class UpgradeQueue;
  void finish(LoadedModule loaded);

  std::mutex mutex;
  std::condition_variable finished;
  LoadedModule result;
  bool taken = false;
};

/// Compiles `ptx` (NUL-terminated) on the current context as the mode
/// says: in tiered mode the linked module with its upgrade queued; a
/// failed link falls back to a module load (whose error is the one told).
LoadedModule loadPtxModule(const char *ptx);

/// Blocks until every upgrade queued so far has been compiled (or
/// skipped because nothing holds it any more).
void waitForModuleUpgrades();

} // namespace mla::gpu

#endif // MLA_RUNTIME_GPU_DRIVERCOMPILES_H
