//===- CpuKernel.h - mla modules JIT-compiled for the host CPU --*- C++ -*-===//
//
// Compiles a module of mla ops (inside func.func) with the CPU pipeline and
// LLVM's ORC JIT through mlir::ExecutionEngine, then runs its entry function
// on caller buffers. Arguments are checked against the entry's signature
// (count, element type, rank, static sizes, layout) before every call.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_CPUKERNEL_H
#define MLA_RUNTIME_CPUKERNEL_H

#include "mla/Pipelines/Pipelines.h"
#include "mla/Runtime/BufferView.h"
#include "mla/Runtime/EntryPoint.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <string>
#include <vector>

namespace mlir {
class ExecutionEngine;
} // namespace mlir

namespace mla {

class CpuKernel {
public:
  ~CpuKernel();

  /// Verifies `module`, lowers it (consuming it) and JIT-compiles it.
  /// `entry` must be a func.func whose arguments are all memrefs.
  static llvm::Expected<std::unique_ptr<CpuKernel>>
  compile(mlir::OwningOpRef<mlir::ModuleOp> module, llvm::StringRef entry,
          const CpuPipelineOptions &options = {});

  /// Runs the entry on `args` (one per entry argument, in order).
  llvm::Error run(const std::vector<BufferView> &args) const;

  const std::vector<ArgumentSpec> &signature() const {
    return entryPoint.arguments();
  }
  const std::string &entryName() const { return entryPoint.name(); }

private:
  CpuKernel() = default;

  std::unique_ptr<mlir::ExecutionEngine> engine;
  EntryPoint entryPoint;
};

/// Initializes LLVM's native target once per process (thread-safe).
void initializeNativeTarget();

} // namespace mla

#endif // MLA_RUNTIME_CPUKERNEL_H
