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
#include "MmaEmitter.h"

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
  /// Whether its tokens come in prefill numbers (thousands), where the
  /// wgmma kernel's 128-token tiles pay; decode-sized products keep the
  /// mma.sync kernel's 64-token tiles.
  bool prefillSized = false;
};

/// The tensor-core kernels: whether each takes `p` on `target`, given
/// `op`'s operands, and the kernel, launched in place of `op`. The mma.sync
/// one (GpuProjectionsMma.cpp) serves sm_80 and later; the wgmma one
/// (GpuProjectionsWgmma.cpp, sm_90a) the products of prefill size.
bool useMmaProduct(const PerHeadProduct &p, mlir::Operation *op,
                   const GpuTarget &target);
void lowerMmaProduct(const PerHeadProduct &p, mlir::Operation *op,
                     KernelFactory &kernels, llvm::StringRef name);
bool useWgmmaProduct(const PerHeadProduct &p, mlir::Operation *op,
                     const GpuTarget &target);
void lowerWgmmaProduct(const PerHeadProduct &p, mlir::Operation *op,
                       KernelFactory &kernels, llvm::StringRef name);

//===----------------------------------------------------------------------===//
// What the tensor-core product kernels share (PerHeadProduct.cpp)
//===----------------------------------------------------------------------===//

/// The widest column tile, 128 or 64, that splits the product's width and
/// every output's range into whole tiles; 0 if neither does.
int64_t productTileColumns(const PerHeadProduct &p);

/// Whether `op`'s operands suit a tensor-core product: all bf16 or all
/// f16, x and W with rows of whole 16-byte vectors, a depth of whole
/// `sliceDepth`-deep slices and whole column tiles.
bool hasTensorCoreProductOperands(const PerHeadProduct &p, mlir::Operation *op,
                                  int64_t sliceDepth);

/// Writes a `tileTokens` x `tileColumns` tile of the product, staged in
/// shared memory as rows of the element type (`staging`, past a barrier),
/// to the output holding its columns, and makes the column copy for the
/// tile's tokens (by the blocks of column tile 0), with the block's
/// `threads` threads (`tid` this one's) in 16-byte pieces where the
/// layouts and alignment allow.
void storeProductTile(MmaEmitter &e, mlir::ValueRange args,
                      const PerHeadProduct &p, mlir::Value staging,
                      int64_t tileTokens, int64_t tileColumns,
                      mlir::Value token0, mlir::Value column0,
                      mlir::Value numTokens, mlir::Value head, mlir::Value tid,
                      int64_t threads);

/// Launches a product kernel in place of `op` on grid (ceil(T /
/// tileTokens), heads, width / tileColumns).
void launchProduct(const PerHeadProduct &p, mlir::Operation *op,
                   mlir::gpu::GPUFuncOp kernel, int64_t tileTokens,
                   int64_t tileColumns, int64_t sharedBytes);

} // namespace mla::gpu

#endif // MLA_LIB_CONVERSION_MLATOGPU_PERHEADPRODUCT_H
