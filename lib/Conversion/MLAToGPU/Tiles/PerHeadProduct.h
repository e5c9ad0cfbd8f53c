//===- PerHeadProduct.h - The up-projections as one product ---*- C++ -*-===//
//
// All three up-projections are per-head products out[t, h, :] = x[t, h?, :]
// W_h with a [depth, width] weight slice W_h per head. Each op's lowering
// describes its operands as a PerHeadProduct (where the rows of x and W_h
// are, which product columns go to which output, what else is copied) and
// one of three kernels computes it: the wgmma kernel
// (GpuProjectionsWgmma.cpp) for products of prefill size on sm_90a, the
// mma.sync kernel (GpuProjectionsMma.cpp) where the strategy has tensor
// cores and the operands suit them, else the CUDA-core kernel
// (GpuProjections.cpp), which takes any float types and dims.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_LIB_CONVERSION_MLATOGPU_PERHEADPRODUCT_H
#define MLA_LIB_CONVERSION_MLATOGPU_PERHEADPRODUCT_H

#include "GpuKernels.h"
#include "Emitters/MmaEmitter.h"
#include "Emitters/RowMove.h"

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
  /// The column copy of token t, head h (RowMove.h) by `lanes` threads.
  RowMove columnCopy(GpuEmitter &e, mlir::ValueRange args, mlir::Value t,
                     mlir::Value h) const;
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

/// A product block's tile, on the grid launchProduct makes: one head, the
/// tile's first token and column, where its x and W rows come from, and
/// where its results go.
class ProductTile {
public:
  /// `args` are the kernel's arguments (the op's operands).
  ProductTile(MmaEmitter &e, const PerHeadProduct &p, mlir::ValueRange args,
              int64_t tileTokens, int64_t tileColumns);

  mlir::Value x, w, numTokens, head, token0, column0;

  /// Token row `row` of the tile in x, columns from `depth0` (rows past
  /// the tokens are zero-filled, not read).
  MmaEmitter::SourceRow inputRow(mlir::Value row, mlir::Value depth0);
  /// Row `depth0` + `row` of W_h, columns from the tile's first.
  MmaEmitter::SourceRow weightRow(mlir::Value row, mlir::Value depth0);

  /// Writes the tile, staged in shared memory as rows of the element type
  /// (`staging`, past a barrier), to the output holding its columns, and
  /// makes the column copy for its tokens (blocks of column tile 0), with
  /// the block's `threads` threads (`tid` this one's) in 16-byte pieces
  /// where the layouts and alignment allow.
  void store(mlir::Value staging, mlir::Value tid, int64_t threads);

private:
  MmaEmitter &e;
  const PerHeadProduct &p;
  mlir::ValueRange args;
  int64_t tileTokens, tileColumns;
  mlir::Value lastToken, allRows;
};

/// Launches a product kernel in place of `op` on grid (ceil(T /
/// tileTokens), heads, width / tileColumns).
void launchProduct(const PerHeadProduct &p, mlir::Operation *op,
                   mlir::gpu::GPUFuncOp kernel, int64_t tileTokens,
                   int64_t tileColumns, int64_t sharedBytes);

} // namespace mla::gpu

#endif // MLA_LIB_CONVERSION_MLATOGPU_PERHEADPRODUCT_H
