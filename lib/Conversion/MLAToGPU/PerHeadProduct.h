//===- PerHeadProduct.h - The up-projections as one product shape -*- C++
//-*-===//
//
// All three up-projections are per-head products out[t, h, :] = x[t, h?, :]
// W_h with a [depth, width] weight slice W_h per head. Each op's lowering
// describes its operands as a PerHeadProduct (where the rows of x and W_h
// are, which product columns go to which output, what else is copied) and
// one of two kernels computes it: the tensor-core kernel
// (GpuProjectionsMma.cpp, mma.sync) where the strategy has tensor cores
// and the operands suit them, else the CUDA-core kernel
// (GpuProjections.cpp), which takes any float types and dims.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_LIB_CONVERSION_MLATOGPU_PERHEADPRODUCT_H
#define MLA_LIB_CONVERSION_MLATOGPU_PERHEADPRODUCT_H

#include "GpuKernels.h"

namespace mla::gpu {

struct PerHeadProduct {
  int64_t heads, depth, width;
  /// The kernel arguments (the op's operands, in order) of x and W.
  unsigned inputArg, weightArg;
  /// The indices of x[t, h, 0] but the innermost: x's rows are contiguous.
  std::function<llvm::SmallVector<mlir::Value, 3>(
      GpuEmitter &, mlir::ValueRange args, mlir::Value t, mlir::Value h)>
      inputRow;
  /// The indices of W_h[r, 0] but the innermost: W_h's rows are contiguous.
  std::function<llvm::SmallVector<mlir::Value, 3>(
      GpuEmitter &, mlir::ValueRange args, mlir::Value h, mlir::Value r)>
      weightRow;
  /// Product columns [first, first + count) go to columns [0, count) of
  /// output argument `arg`, an [tokens, heads, >= count] memref.
  struct Output {
    unsigned arg;
    int64_t first, count;
  };
  llvm::SmallVector<Output, 2> outputs;
  /// Columns copied alongside the product (the rope columns): for each
  /// token t and head h, columns [srcFirst, srcFirst + count) of row
  /// srcRow(t, h) of argument `srcArg` go to columns [dstFirst, dstFirst +
  /// count) of dst[t, h]. Done by the blocks of the first column tile.
  struct ColumnCopy {
    unsigned srcArg;
    std::function<llvm::SmallVector<mlir::Value, 3>(
        GpuEmitter &, mlir::Value t, mlir::Value h)>
        srcRow;
    int64_t srcFirst;
    unsigned dstArg;
    int64_t dstFirst, count;
  };
  std::optional<ColumnCopy> copy;
};

/// Whether the tensor-core kernel takes `p` on `target`, given `op`'s
/// operands (all of them bf16, or all f16), and the kernel, launched in
/// place of `op`.
bool useMmaProduct(const PerHeadProduct &p, mlir::Operation *op,
                   const GpuTarget &target);
void lowerMmaProduct(const PerHeadProduct &p, mlir::Operation *op,
                     KernelFactory &kernels, llvm::StringRef name);

} // namespace mla::gpu

#endif // MLA_LIB_CONVERSION_MLATOGPU_PERHEADPRODUCT_H
