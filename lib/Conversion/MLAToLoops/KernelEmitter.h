//===- KernelEmitter.h - Vectorized loop building blocks --------*- C++ -*-===//
//
// The CPU lowering of every mla operation is built from a few row-level
// primitives over memrefs: dot products, axpy updates, scaled copies and
// fills, each written as a vector loop of `width` f32 lanes plus a scalar
// tail. Row lengths are static (head dims are attributes), so no masks are
// needed. Values are converted to f32 on load and back on store.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_LIB_CONVERSION_MLATOLOOPS_KERNELEMITTER_H
#define MLA_LIB_CONVERSION_MLATOLOOPS_KERNELEMITTER_H

#include "../Common/LoopBuilder.h"

namespace mla::loops {

/// A contiguous run of elements: memref[prefix..., firstColumn + c] for c
/// in [0, length). The innermost dimension has unit stride (verified).
struct Row {
  mlir::Value memref;
  llvm::SmallVector<mlir::Value, 3> prefix;
  int64_t firstColumn = 0;
  /// An FP8 cache's kv_scale (f32), or null: the row holds value / scale,
  /// so loads multiply by it and stores divide by it.
  mlir::Value scale = {};

  Row shifted(int64_t columns) const {
    Row r = *this;
    r.firstColumn += columns;
    return r;
  }
};

class KernelEmitter : public LoopBuilder {
public:
  /// Scratch allocas go to the start of `scratchBlock`, the entry block of
  /// the enclosing function, so that they are made once even when the
  /// lowered op sits inside a loop.
  KernelEmitter(mlir::OpBuilder &b, mlir::Location loc, int64_t width,
                mlir::Block *scratchBlock)
      : LoopBuilder(b, loc), width(width), scratchBlock(scratchBlock) {}

  /// A stack buffer of `length` f32, allocated once per function call.
  mlir::Value allocaF32(int64_t length);

  // Row primitives (length is static).
  /// sum_c a[c] * b[c], in f32.
  mlir::Value dot(const Row &a, const Row &b, int64_t length);
  /// acc[c] += alpha * x[c]; acc holds f32.
  void axpy(const Row &acc, mlir::Value alpha, const Row &x, int64_t length);
  /// dst[c] = alpha * src[c] (element types converted).
  void scaledCopy(const Row &dst, mlir::Value alpha, const Row &src,
                  int64_t length);
  /// dst[c] = src[c] (element types converted).
  void copy(const Row &dst, const Row &src, int64_t length);
  /// dst[c] = alpha * x[c] + beta * y[c].
  void linearCombination(const Row &dst, mlir::Value alpha, const Row &x,
                         mlir::Value beta, const Row &y, int64_t length);
  /// dst[c] = sum_i weights[i] * rows[i][c] (one weight a row, at least
  /// one). dst may be one of the rows: each column is read before it is
  /// written.
  void linearCombination(const Row &dst, llvm::ArrayRef<mlir::Value> weights,
                         llvm::ArrayRef<Row> rows, int64_t length);
  void fill(const Row &dst, mlir::Value value, int64_t length);

private:
  /// Visits [0, length) as full vectors then scalars: body(column, lanes)
  /// with lanes == width or 1.
  void columns(int64_t length,
               const std::function<void(mlir::Value, int64_t)> &body);
  mlir::Value load(const Row &row, mlir::Value column, int64_t lanes);
  void store(mlir::Value value, const Row &row, mlir::Value column,
             int64_t lanes);
  mlir::Value splat(mlir::Value scalar, int64_t lanes);
  llvm::SmallVector<mlir::Value> indices(const Row &row, mlir::Value column);

  int64_t width;
  mlir::Block *scratchBlock;
};

} // namespace mla::loops

#endif // MLA_LIB_CONVERSION_MLATOLOOPS_KERNELEMITTER_H
