//===- MmaEmitter.h - Tensor-core building blocks for mma-sync kernels ----===//
//
// What the `mma-sync` strategy's kernels (decode split, prefill) are made
// of: shared-memory views, 16-byte cp.async tile copies with an element
// fallback, ldmatrix, m16n8k16 mma.sync with f32 accumulators and quad
// reductions (the four lanes holding one row of an accumulator fragment).
//
// Fragment layout of m16n8k16 (PTX ISA, "mma.m16n8k16"): lane = 4 g + q
// (group g = lane / 4, quad q = lane % 4) holds accumulator elements
// c[2 i + c'] at row g + 8 i, column 2 q + c'.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_LIB_CONVERSION_MLATOGPU_MMAEMITTER_H
#define MLA_LIB_CONVERSION_MLATOGPU_MMAEMITTER_H

#include "GpuKernels.h"

namespace mla::gpu {

/// Elements of one 16-byte copy of a 2-byte type.
inline constexpr int64_t kCopyElems = 8;

class MmaEmitter : public GpuEmitter {
public:
  MmaEmitter(mlir::OpBuilder &b, mlir::Location loc, mlir::Type element)
      : GpuEmitter(b, loc), element(element) {}

  mlir::Type element; ///< bf16 or f16

  mlir::Value shuffleXor(mlir::Value v, int64_t offset);
  /// Max (or sum) over the four lanes of a quad (lanes sharing lane / 4).
  mlir::Value quadMax(mlir::Value v);
  mlir::Value quadSum(mlir::Value v);

  mlir::Value select(mlir::Value c, mlir::Value t, mlir::Value f);
  mlir::Value divui(mlir::Value a, int64_t d);
  mlir::Value remui(mlir::Value a, int64_t d);
  mlir::Value mulf(mlir::Value a, mlir::Value c);
  mlir::Value addf(mlir::Value a, mlir::Value c);
  mlir::Value subf(mlir::Value a, mlir::Value c);
  mlir::Value maxf(mlir::Value a, mlir::Value c);
  /// a * c + d in one rounding.
  mlir::Value fma(mlir::Value a, mlir::Value c, mlir::Value d);
  /// The max (or sum) of `values` as a balanced tree: log2(n) dependent
  /// steps instead of n.
  mlir::Value maxTree(llvm::ArrayRef<mlir::Value> values);
  mlir::Value sumTree(llvm::ArrayRef<mlir::Value> values);
  /// Whether `pred` (i1) holds in any lane of the (whole, converged) warp.
  mlir::Value warpAny(mlir::Value pred);
  mlir::Value andi(mlir::Value a, mlir::Value c);
  /// Whether the f32 `x` is -inf.
  mlir::Value isNegInf(mlir::Value x);

  /// A tile row's source: whether it holds data (else it is zero-filled
  /// and not read) and the indices of its first element in `src` but the
  /// innermost (in bounds either way). Tile column c comes from source
  /// column `column0` + c (null: 0), for tiles that are a column range of
  /// their source (a multiple of 8, so 16-byte copies stay aligned).
  struct SourceRow {
    mlir::Value valid;
    llvm::SmallVector<mlir::Value, 3> prefix;
    mlir::Value column0 = {};
  };

  /// Where element (row, col) of a tile goes in its shared memref.
  using SharedIndex = std::function<llvm::SmallVector<mlir::Value, 2>(
      mlir::Value row, mlir::Value col)>;

  /// Copies `rowCount` rows of `vectors` 16-byte vectors from `src` into
  /// shared `dst`: at [row, col] of a 2-D `dst`, or where `at` says. Of
  /// `warps` warps, warp w copies rows [w rowCount / warps, (w + 1)
  /// rowCount / warps), four at a time: lanes 8g .. 8g + 7 take row 4i + g
  /// and its vectors 8k + lane % 8, so each instruction moves four whole
  /// 128-byte lines, and a row's source (a page lookup) is computed once.
  /// Where `aligned` (i1) holds, 16-byte cp.async (L2 only; 8-byte ones
  /// through L1 for one-byte elements) whose source size is 0 for invalid
  /// rows; otherwise element by element. A null
  /// `aligned` emits the cp.async path alone (the caller guarantees the
  /// alignment). With `firstVector`, the vectors [firstVector, firstVector
  /// + vectors) of each row (a column range; a multiple of 8 keeps each
  /// instruction on whole lines). A vector is `elementsPerCopy` elements:
  /// 16 one-byte codes make a 16-byte copy too.
  void copyTile(mlir::Value aligned, mlir::Value dst, mlir::Value src,
                int64_t rowCount, int64_t vectors, mlir::Value warp,
                mlir::Value lane,
                const std::function<SourceRow(mlir::Value row)> &source,
                int64_t warps = kBlockWarps, const SharedIndex &at = {},
                int64_t firstVector = 0, int64_t elementsPerCopy = kCopyElems);

  /// Commits the copies issued so far as a group (possibly empty); returns
  /// its token.
  mlir::Value commitCopies();
  /// Waits until at most `pending` of the committed groups (the most
  /// recent ones) are in flight; `group` is the last committed.
  void waitCopies(mlir::Value group, int64_t pending);
  /// Waits until at most `pending` committed groups are in flight, for
  /// pipelines whose last commit is in an earlier loop iteration.
  void waitPendingCopies(int64_t pending);
  /// Commits the copies issued so far and waits for all of them.
  void waitAllCopies() { waitCopies(commitCopies(), 0); }

  /// ldmatrix of `tiles` 8x8 matrices; lane i gives the address of row
  /// i % 8 of matrix i / 8. Returns the lane's 32-bit pieces (two elements
  /// each), one per matrix.
  llvm::SmallVector<mlir::Value> ldmatrix(mlir::Value smem,
                                          mlir::ValueRange idx, int64_t tiles,
                                          bool transpose);

  /// Two f32 values as one 2-element piece of the element type.
  mlir::Value pack(mlir::Value lo, mlir::Value hi);

  /// Stages one accumulator row of the lane into the shared matrix
  /// `staging` (f32 or the element type) for the block to copy out
  /// (GpuEmitter::copyStagedRows): `value(j, c)` goes to row `row`, column
  /// `column0` + 8 j + 2 quad + c (the fragment layout), for j < `tiles`,
  /// the two of a j in one store.
  void stageFragmentRow(
      mlir::Value staging, mlir::Value row, mlir::Value column0,
      mlir::Value quad, int64_t tiles,
      const std::function<mlir::Value(int64_t j, int64_t c)> &value);

  /// D = A (16x16) B (16x8) + C with m16n8k16 mma.sync, f32 accumulators.
  /// `c` holds the four accumulators, updated in place.
  void mma(llvm::ArrayRef<mlir::Value> a, mlir::Value b0, mlir::Value b1,
           llvm::MutableArrayRef<mlir::Value> c);

private:
  /// A 2-element piece as an mma operand: vector<2xf16> as is, bf16 as i32.
  mlir::Value operand(mlir::Value piece);
};

} // namespace mla::gpu

#endif // MLA_LIB_CONVERSION_MLATOGPU_MMAEMITTER_H
