//===- EntryPoint.h - Calling a JIT-compiled entry on buffers ---*- C++ -*-===//
//
// What every JIT-compiled kernel module shares, whatever runs its kernels:
// the entry function's signature read before lowering, the check of caller
// buffers against it, and the call through the C interface with one memref
// descriptor per buffer.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_ENTRYPOINT_H
#define MLA_RUNTIME_ENTRYPOINT_H

#include "mla/Runtime/ArgumentSpec.h"
#include "mla/Runtime/BufferView.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace mla {

/// Checks that `view` is a contiguous `dtype` buffer of `shape` (-1: any
/// size; with `minRows` >= 0, dimension 0 at least that) with data, naming
/// it `what` in the ArgumentError otherwise, e.g. "'q' must be a contiguous
/// bf16[>= 7, 4, 96], got bf16[7, 4, 64]: dimension 2 should be 96".
llvm::Error checkContiguousBuffer(llvm::StringRef what, const BufferView &view,
                                  DType dtype,
                                  const std::vector<int64_t> &shape,
                                  int64_t minRows = -1);

class EntryPoint {
public:
  /// Reads the signature of func.func `name` in `module` (all arguments
  /// memrefs, no results) and marks it for a C interface. Call before
  /// lowering.
  static llvm::Expected<EntryPoint> prepare(mlir::ModuleOp module,
                                            llvm::StringRef name);

  /// Verifies `module` and prepares `name` (see prepare); failures return
  /// the collected diagnostics.
  static llvm::Expected<EntryPoint> verifyAndPrepare(mlir::ModuleOp module,
                                                     llvm::StringRef name);

  /// Lowers `module` in place with the pipeline `buildPipeline` makes;
  /// failures return the collected diagnostics prefixed with `what`.
  static llvm::Error
  lower(mlir::ModuleOp module,
        llvm::function_ref<void(mlir::OpPassManager &)> buildPipeline,
        const llvm::Twine &what);

  /// Checks `args` against the signature: count, element type, rank, static
  /// sizes, strides, non-null data. Mismatches are ArgumentErrors.
  llvm::Error check(const std::vector<BufferView> &args) const;

  /// Calls the entry through its packed wrapper (see JitObject.h) on
  /// `args`, checked first.
  llvm::Error invoke(void (*packed)(void **),
                     const std::vector<BufferView> &args) const;

  const std::string &name() const { return entry; }
  const std::vector<ArgumentSpec> &arguments() const { return specs; }

private:
  std::string entry;
  std::vector<ArgumentSpec> specs;
};

} // namespace mla

#endif // MLA_RUNTIME_ENTRYPOINT_H
