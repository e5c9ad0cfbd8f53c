//===- GpuKernel.h - mla modules JIT-compiled for an NVIDIA GPU -*- C++ -*-===//
//
// Compiles a module of mla ops for the device it will run on: kernels to
// PTX through LLVM's NVPTX backend, in process, loaded by the CUDA driver;
// the host code that sizes and launches them to machine code through the
// LLVM JIT. Running the entry queues the kernels on the caller's stream and
// returns without waiting for them (unless the module's host code reads
// device results, as the chunked prefill's plan copy does).
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_GPUKERNEL_H
#define MLA_RUNTIME_GPUKERNEL_H

#include "mla/Runtime/BufferView.h"
#include "mla/Runtime/CompiledModule.h"
#include "mla/Runtime/CudaDevice.h"
#include "mla/Target/GpuTarget.h"
#include "mla/Transforms/SerializedKernelObserver.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace mla {

namespace gpu {
class SharedMemoryOptIns;
} // namespace gpu

class GpuKernel {
public:
  ~GpuKernel();

  /// Verifies `module`, then finds its compiled form in `cache` (when
  /// given) or lowers it (consuming it) for `target` (by default the best
  /// target for `device`'s compute capability) and compiles it, links the
  /// host code and loads the kernels on `device`.
  static llvm::Expected<std::unique_ptr<GpuKernel>>
  compile(mlir::OwningOpRef<mlir::ModuleOp> module, llvm::StringRef entry,
          const cuda::Device &device,
          std::optional<GpuTarget> target = std::nullopt,
          runtime::KernelCache *cache = nullptr);

  /// Lowers and compiles `module` (consuming it) for `target` into `cache`,
  /// with no device: nothing is loaded. What a GPU runtime's compile of the
  /// same module for the same target finds in the cache later (mla-cache
  /// fill). The event says whether it was compiled or already there.
  static llvm::Expected<CompileEvent>
  compileToCache(mlir::OwningOpRef<mlir::ModuleOp> module,
                 llvm::StringRef entry, const GpuTarget &target,
                 runtime::KernelCache &cache);

  /// Runs the entry on device buffers `args` (one per entry argument) on
  /// `stream` (the legacy default stream when null). The work is queued;
  /// synchronize the stream before reading results. Driver failures of the
  /// calls made come back as errors naming the call; faults inside kernels
  /// surface at the next synchronization.
  llvm::Error run(const std::vector<BufferView> &args,
                  cuda::CUstream stream = nullptr) const;

  const GpuTarget &target() const { return gpuTarget; }
  /// The PTX of each kernel module, as the driver compiled it.
  const std::vector<std::string> &kernelPtx() const {
    return compiled.kernelPtx;
  }
  const std::vector<ArgumentSpec> &signature() const {
    return compiled.entry.arguments();
  }
  /// Where the compiled module came from and how long getting it took.
  const CompileEvent &compileEvent() const { return compiled.event; }

private:
  GpuKernel() = default;

  const cuda::Device *device = nullptr;
  GpuTarget gpuTarget;
  CompiledModule compiled;
  /// Shared-memory opt-ins of the module's kernels, so that a launch above
  /// 48 KiB asks the driver only the first time.
  std::unique_ptr<gpu::SharedMemoryOptIns> optIns;
};

/// Times the driver's kernel launches (cuLaunchKernel) made on this thread
/// while it is alive: what of a call's host time the driver took to queue
/// its kernels. Launches outside one read no clock. Scopes may nest.
class DriverLaunchTimer {
public:
  DriverLaunchTimer();
  ~DriverLaunchTimer();
  DriverLaunchTimer(const DriverLaunchTimer &) = delete;
  DriverLaunchTimer &operator=(const DriverLaunchTimer &) = delete;

  /// Milliseconds spent in this thread's launches since construction.
  double milliseconds() const;

private:
  std::uint64_t startNanoseconds;
};

/// Blocks until every kernel module this process has linked for a quick
/// start has its module-load code, which the kernel's next launch then
/// uses (tiered driver compiles, runtime/gpu/DriverCompiles.h). Returns at
/// once when nothing is pending.
void waitForKernelUpgrades();

/// The recipe of the GPU pipeline for `target` (kernels) and this host
/// (launch code). Each kernel's PTX also goes to `onKernelSerialized`
/// (when set) as soon as it is ready; it does not change the kernels or
/// their cache key.
CompileRecipe
gpuCompileRecipe(const GpuTarget &target,
                 SerializedKernelObserver onKernelSerialized = {});

} // namespace mla

#endif // MLA_RUNTIME_GPUKERNEL_H
