//===- KernelDispatch.h - Which strategy's kernel an op gets -----*- C++ -*-===//
//
// The ops with a kernel per strategy (prefill attention, the decode's split
// kernel, the per-head products of the up-projections) list their kernels
// in KernelDispatch.cpp, best first: each entry says whether its kernel
// takes the op on the module's target (strategy, chip, dims, dtypes,
// static layouts) and which operands it reads in 16-byte vectors only.
// The first entry that takes the op is launched; where it needs vector
// operands, the host checks their alignment at run time and launches the
// last entry, the generic kernel (compiled at its first launch), instead
// where they are not aligned.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_LIB_CONVERSION_MLATOGPU_KERNELDISPATCH_H
#define MLA_LIB_CONVERSION_MLATOGPU_KERNELDISPATCH_H

#include "Tiles/GpuDecode.h"
#include "Tiles/PerHeadProduct.h"

namespace mla::gpu {

/// One strategy's kernel in an op's list.
struct KernelEntry {
  /// The strategy's name (mla.target's): the last entry is "generic".
  llvm::StringLiteral strategy;
  /// Whether the kernel takes the op on the module's target.
  bool takes;
  /// Emits the kernel and its launch at the host builder's position.
  std::function<void()> launch;
  /// Operands the kernel reads in 16-byte vectors only (none: any
  /// alignment).
  llvm::SmallVector<mlir::Value, 3> vectorOperands = {};
};

/// Launches the first entry of `entries` that takes the op (the last, the
/// generic kernel, takes every op), as the file comment says.
void launchFirstTaking(mlir::OpBuilder &host, mlir::Location loc,
                       KernelFactory &kernels,
                       llvm::ArrayRef<KernelEntry> entries);

/// The generic kernels, the last entry of each list.
void lowerGenericPrefill(PrefillAttentionOp op, KernelFactory &kernels,
                         mlir::OpBuilder &host);
void launchGenericDecodeSplit(DecodeAttentionOp op, KernelFactory &kernels,
                              const DecodeSchedule &schedule,
                              mlir::OpBuilder &host, mlir::ValueRange splitArgs,
                              mlir::Value splits);
void emitCudaCoreProduct(mlir::Operation *op, const PerHeadProduct &p,
                         KernelFactory &kernels, llvm::StringRef name);

/// The decode's split kernel of `op` with the split kernel's operands
/// `splitArgs` (lowerDecodeAttention launches the combine after it).
void launchDecodeSplit(DecodeAttentionOp op, KernelFactory &kernels,
                       const DecodeSchedule &schedule, mlir::OpBuilder &host,
                       mlir::ValueRange splitArgs, mlir::Value splits);
/// A per-head product (q_absorb, v_up_proj, kv_up_proj) named `name`.
void lowerProduct(mlir::Operation *op, const PerHeadProduct &p,
                  KernelFactory &kernels, llvm::StringRef name);

} // namespace mla::gpu

#endif // MLA_LIB_CONVERSION_MLATOGPU_KERNELDISPATCH_H
