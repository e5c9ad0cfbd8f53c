//===- CpuKernel.h - mla modules JIT-compiled for the host CPU --*- C++ -*-===//
//
// Compiles a module of mla ops (inside func.func) with the CPU pipeline to
// host object code, through the kernel cache when one is given, links it
// into the process and runs its entry function on caller buffers. Arguments
// are checked against the entry's signature (count, element type, rank,
// static sizes, layout) before every call.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_CPUKERNEL_H
#define MLA_RUNTIME_CPUKERNEL_H

#include "mla/Pipelines/Pipelines.h"
#include "mla/Runtime/BufferView.h"
#include "mla/Runtime/CompiledModule.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <string>
#include <vector>

namespace mla {

class CpuKernel {
public:
  ~CpuKernel();

  /// Verifies `module`, then finds its object code in `cache` (when given)
  /// or lowers (consuming the module) and compiles it, and links it.
  /// `entry` must be a func.func whose arguments are all memrefs.
  static llvm::Expected<std::unique_ptr<CpuKernel>>
  compile(mlir::OwningOpRef<mlir::ModuleOp> module, llvm::StringRef entry,
          const CpuPipelineOptions &options = {},
          runtime::KernelCache *cache = nullptr);

  /// Runs the entry on `args` (one per entry argument, in order).
  llvm::Error run(const std::vector<BufferView> &args) const;

  const std::vector<ArgumentSpec> &signature() const {
    return compiled.entry.arguments();
  }
  const std::string &entryName() const { return compiled.entry.name(); }
  /// Where the object code came from and how long getting it took.
  const CompileEvent &compileEvent() const { return compiled.event; }

private:
  CpuKernel() = default;

  CompiledModule compiled;
};

/// The recipe of the CPU pipeline with `options` for this host.
CompileRecipe cpuCompileRecipe(const CpuPipelineOptions &options = {});

/// Initializes LLVM's native target once per process (thread-safe).
void initializeNativeTarget();

} // namespace mla

#endif // MLA_RUNTIME_CPUKERNEL_H
