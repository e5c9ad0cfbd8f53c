//===- HostBufferKernel.h - Run a module on host buffers, anywhere -*- C++ -*-===//
//
// For tools and tests that keep their data on the host: compiles a module
// for the CPU or for a GPU, and runs it on host buffers. On a GPU every
// buffer is copied to the device before the run and back after it (so
// elements a kernel does not write keep their host values, poison
// included).
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_HOSTBUFFERKERNEL_H
#define MLA_RUNTIME_HOSTBUFFERKERNEL_H

#include "mla/Runtime/BufferView.h"
#include "mla/Runtime/CudaDevice.h"
#include "mla/Target/GpuTarget.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mla {

class HostBufferKernel {
public:
  virtual ~HostBufferKernel() = default;
  virtual llvm::Error run(const std::vector<BufferView> &hostArgs) = 0;
  /// "host CPU" or the GPU's chip, for reports.
  virtual std::string where() const = 0;

  /// Compiles `module` for `device`, or for the host CPU when null. On a
  /// GPU, `target` (by default the best one for the device, with the
  /// generic strategy) chooses the chip and the kernel strategy.
  static llvm::Expected<std::unique_ptr<HostBufferKernel>>
  compile(mlir::OwningOpRef<mlir::ModuleOp> module, llvm::StringRef entry,
          const cuda::Device *device,
          std::optional<GpuTarget> target = std::nullopt);
};

} // namespace mla

#endif // MLA_RUNTIME_HOSTBUFFERKERNEL_H
