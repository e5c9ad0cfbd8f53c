//===- RuntimeCompile.h - Kernels a runtime compiles from modules -*- C++ -*-===//
//
// For compiler-side users of the runtime (the MLA layer's own kernels,
// mla-cache, tools and tests that build kernel modules in MLIR): a kernel
// on a runtime's device for a module built in MLIR, through the runtime's
// kernels, kernel cache and compiler. Runtime.h itself stays free of MLIR;
// IR given as text goes through Runtime::compileSource.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_RUNTIMECOMPILE_H
#define MLA_RUNTIME_RUNTIMECOMPILE_H

#include "mla/Runtime/Runtime.h"
#include "mla/Target/KernelStrategy.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mlir {
class MLIRContext;
} // namespace mlir

namespace mla::runtime {

/// Builds a kernel module in the context it is given.
using ModuleBuilder =
    llvm::function_ref<mlir::OwningOpRef<mlir::ModuleOp>(mlir::MLIRContext &)>;

/// A kernel for the module `build` creates (in a context of `runtime`'s),
/// entry `entry`: the one this process already compiled for the same
/// module, else from the kernel cache, else compiled. On a GPU, `strategy`
/// is the kernel strategy (a backend's kernelStrategy; none: generic); the
/// CPU ignores it. May be called from several threads at once.
llvm::Expected<std::shared_ptr<Kernel>>
compile(Runtime &runtime, ModuleBuilder build, llvm::StringRef entry,
        std::optional<KernelStrategy> strategy = std::nullopt);

/// One module to compile: what `compile` takes.
struct CompileRequest {
  std::function<mlir::OwningOpRef<mlir::ModuleOp>(mlir::MLIRContext &)> build;
  std::string entry;
  std::optional<KernelStrategy> strategy;
};

/// How many modules compileAll compiles at once: MLA_COMPILE_THREADS when
/// set to a positive number (1 compiles one after another), else the
/// hardware threads.
size_t compileThreads();

/// The kernels of `requests`, in order, compiled at the same time on up to
/// compileThreads() threads (a layer's modules: its creation then takes
/// about as long as its slowest module). Every failure is returned, joined.
llvm::Expected<std::vector<std::shared_ptr<Kernel>>>
compileAll(Runtime &runtime, llvm::ArrayRef<CompileRequest> requests);

} // namespace mla::runtime

#endif // MLA_RUNTIME_RUNTIMECOMPILE_H
