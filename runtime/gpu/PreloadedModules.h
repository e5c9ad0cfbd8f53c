//===- PreloadedModules.h - Modules loaded while others compile -*- C++ -*-===//
//
// A module of small kernels is serialized long before its largest kernel
// is, so each kernel module is handed to the driver (DriverCompiles.h) as
// soon as its PTX exists, on a thread of its own: the driver's work on the
// small kernels then overlaps the code generation of the large one, and
// the large one's overlaps the host code's. The host code's constructors
// take the loaded modules instead of loading them.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_GPU_PRELOADEDMODULES_H
#define MLA_RUNTIME_GPU_PRELOADEDMODULES_H

#include "DriverCompiles.h"
#include "mla/Runtime/CompiledModule.h"
#include "mla/Runtime/CudaDevice.h"

#include "llvm/ADT/StringRef.h"

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace mla::gpu {

/// The modules of one compile, loaded on `device` as they are announced.
/// Thread-safe. Modules never taken are unloaded on destruction, which
/// waits for every load in flight.
class PreloadedModules {
public:
  /// Times are taken from `start` (the start of the compile).
  PreloadedModules(const cuda::Device &device,
                   std::chrono::steady_clock::time_point start)
      : device(device), start(start) {}
  ~PreloadedModules();
  PreloadedModules(const PreloadedModules &) = delete;
  PreloadedModules &operator=(const PreloadedModules &) = delete;

  /// Starts loading `ptx`, the PTX of kernel module `name`, on a thread of
  /// its own; nothing for a module marked to load at its kernel's first
  /// launch (mla/Target/KernelLoading.h).
  void load(llvm::StringRef name, llvm::StringRef ptx);

  /// The module loaded from exactly `ptx` (NUL-terminated), once its load
  /// ends; the caller owns it from then on. None when that text was never
  /// announced (or was already taken).
  std::optional<LoadedModule> take(const char *ptx);

  /// When each announced module's load started and how long it took (to
  /// now for loads still running), in the order they were announced.
  std::vector<CompileEvent::DriverCompile> timeline();

private:
  struct Load {
    std::string name;
    std::string ptx; // NUL-terminated for the driver
    /// Moved out (invalid) once taken.
    std::future<LoadedModule> result;
    std::chrono::steady_clock::time_point started;
    /// Set by the loading thread when the driver returns.
    std::atomic<std::chrono::steady_clock::rep> finished{0};
    /// Whether the driver's linker compiled it (DriverCompiles.h).
    std::atomic<bool> linked{false};
  };

  const cuda::Device &device;
  const std::chrono::steady_clock::time_point start;
  std::mutex mutex;
  std::vector<std::unique_ptr<Load>> loads;
};

} // namespace mla::gpu

#endif // MLA_RUNTIME_GPU_PRELOADEDMODULES_H
