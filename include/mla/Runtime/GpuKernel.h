//===- GpuKernel.h - mla modules JIT-compiled for an NVIDIA GPU -*- C++ -*-===//
//
// Compiles a module of mla ops for the device it will run on: kernels to
// PTX through LLVM's NVPTX backend, in process, loaded by the CUDA driver;
// the host code that sizes and launches them to machine code through the
// LLVM JIT. Running the entry launches the kernels on the caller's stream
// and returns once they have finished.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_GPUKERNEL_H
#define MLA_RUNTIME_GPUKERNEL_H

#include "mla/Runtime/BufferView.h"
#include "mla/Runtime/CudaDevice.h"
#include "mla/Runtime/EntryPoint.h"
#include "mla/Target/GpuTarget.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <optional>
#include <string>

namespace mlir {
class ExecutionEngine;
} // namespace mlir

namespace mla {

class GpuKernel {
public:
  ~GpuKernel();

  /// Verifies `module`, lowers it (consuming it) for `target` (by default
  /// the best target for `device`'s compute capability), JIT-compiles the
  /// host code and loads the kernels on `device`.
  static llvm::Expected<std::unique_ptr<GpuKernel>>
  compile(mlir::OwningOpRef<mlir::ModuleOp> module, llvm::StringRef entry,
          const cuda::Device &device,
          std::optional<GpuTarget> target = std::nullopt);

  /// Runs the entry on device buffers `args` (one per entry argument) on
  /// `stream` (the legacy default stream when null) and waits for it.
  /// Driver failures, kernel faults included, come back as errors naming
  /// the call.
  llvm::Error run(const std::vector<BufferView> &args,
                  cuda::CUstream stream = nullptr) const;

  const GpuTarget &target() const { return gpuTarget; }
  /// The PTX of the kernels, as loaded.
  const std::string &ptx() const { return ptxText; }
  const std::vector<ArgumentSpec> &signature() const {
    return entryPoint.arguments();
  }

private:
  GpuKernel() = default;

  const cuda::Device *device = nullptr;
  GpuTarget gpuTarget;
  std::string ptxText;
  EntryPoint entryPoint;
  std::unique_ptr<mlir::ExecutionEngine> engine;
};

} // namespace mla

#endif // MLA_RUNTIME_GPUKERNEL_H
