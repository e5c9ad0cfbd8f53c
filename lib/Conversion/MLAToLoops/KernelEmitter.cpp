//===- KernelEmitter.cpp - Vectorized loop building blocks ----------------===//

#include "KernelEmitter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"


using namespace mlir;

namespace mla::loops {

Value KernelEmitter::allocaF32(int64_t length) {
  OpBuilder entry = OpBuilder::atBlockBegin(scratchBlock);
  return memref::AllocaOp::create(
      entry, loc, MemRefType::get({length}, b.getF32Type()));
}

SmallVector<Value> KernelEmitter::indices(const Row &row, Value column) {
  SmallVector<Value> idx(row.prefix.begin(), row.prefix.end());
  if (row.firstColumn != 0)
    column = arith::AddIOp::create(b, loc, column, index(row.firstColumn));
  idx.push_back(column);
  return idx;
}

Value KernelEmitter::load(const Row &row, Value column, int64_t lanes) {
  SmallVector<Value> idx = indices(row, column);
  Type element = cast<MemRefType>(row.memref.getType()).getElementType();
  Value v = lanes == 1 ? loadF32(row.memref, idx)
                       : toF32(vector::LoadOp::create(
                             b, loc, VectorType::get({lanes}, element),
                             row.memref, idx));
  if (row.scale)
    v = arith::MulFOp::create(b, loc, v, splat(row.scale, lanes));
  return v;
}

void KernelEmitter::store(Value value, const Row &row, Value column,
                          int64_t lanes) {
  SmallVector<Value> idx = indices(row, column);
  Type element = cast<MemRefType>(row.memref.getType()).getElementType();
  if (row.scale)
    value = arith::DivFOp::create(b, loc, value, splat(row.scale, lanes));
  if (lanes == 1)
    return storeF32(value, row.memref, idx);
  vector::StoreOp::create(b, loc, fromF32(value, element), row.memref, idx);
}

Value KernelEmitter::splat(Value scalar, int64_t lanes) {
  if (lanes == 1)
    return scalar;
  return vector::BroadcastOp::create(
      b, loc, VectorType::get({lanes}, scalar.getType()), scalar);
}

void KernelEmitter::columns(int64_t length,
                            const std::function<void(Value, int64_t)> &body) {
  int64_t full = (length / width) * width;
  if (full > 0)
    forLoop(index(0), index(full), width,
            [&](Value c) { body(c, width); });
  if (full < length)
    forLoop(index(full), index(length), 1, [&](Value c) { body(c, 1); });
}

Value KernelEmitter::dot(const Row &x, const Row &y, int64_t length) {
  int64_t full = (length / width) * width;
  Value sum = f32(0.0);
  if (full > 0) {
    Value zero = splat(f32(0.0), width);
    Value acc = forLoop(index(0), index(full), width, {zero},
                        [&](Value c, ValueRange iter) -> SmallVector<Value> {
                          Value p = load(x, c, width), q = load(y, c, width);
                          return {vector::FMAOp::create(b, loc, p, q,
                                                        iter[0])};
                        })[0];
    sum = vector::ReductionOp::create(b, loc, vector::CombiningKind::ADD, acc);
  }
  if (full < length)
    sum = forLoop(index(full), index(length), 1, {sum},
                  [&](Value c, ValueRange iter) -> SmallVector<Value> {
                    Value p = load(x, c, 1), q = load(y, c, 1);
                    return {math::FmaOp::create(b, loc, p, q, iter[0])};
                  })[0];
  return sum;
}

void KernelEmitter::axpy(const Row &acc, Value alpha, const Row &x,
                         int64_t length) {
  columns(length, [&](Value c, int64_t lanes) {
    Value a = splat(alpha, lanes);
    Value updated = lanes == 1
                        ? math::FmaOp::create(b, loc, a, load(x, c, 1),
                                              load(acc, c, 1))
                              .getResult()
                        : vector::FMAOp::create(b, loc, a, load(x, c, lanes),
                                                load(acc, c, lanes))
                              .getResult();
    store(updated, acc, c, lanes);
  });
}

void KernelEmitter::scaledCopy(const Row &dst, Value alpha, const Row &src,
                               int64_t length) {
  columns(length, [&](Value c, int64_t lanes) {
    Value v = arith::MulFOp::create(b, loc, splat(alpha, lanes),
                                    load(src, c, lanes));
    store(v, dst, c, lanes);
  });
}

void KernelEmitter::copy(const Row &dst, const Row &src, int64_t length) {
  columns(length, [&](Value c, int64_t lanes) {
    store(load(src, c, lanes), dst, c, lanes);
  });
}

void KernelEmitter::linearCombination(const Row &dst, Value alpha,
                                      const Row &x, Value beta, const Row &y,
                                      int64_t length) {
  linearCombination(dst, {alpha, beta}, {x, y}, length);
}

void KernelEmitter::linearCombination(const Row &dst, ArrayRef<Value> weights,
                                      ArrayRef<Row> rows, int64_t length) {
  columns(length, [&](Value c, int64_t lanes) {
    SmallVector<Value, 4> terms;
    for (auto [w, row] : llvm::zip_equal(weights, rows))
      terms.push_back(arith::MulFOp::create(b, loc, splat(w, lanes),
                                            load(row, c, lanes)));
    Value sum = terms[0];
    for (Value t : ArrayRef<Value>(terms).drop_front())
      sum = arith::AddFOp::create(b, loc, sum, t);
    store(sum, dst, c, lanes);
  });
}

void KernelEmitter::fill(const Row &dst, Value value, int64_t length) {
  columns(length, [&](Value c, int64_t lanes) {
    store(splat(value, lanes), dst, c, lanes);
  });
}

} // namespace mla::loops
