//===- LoopBuilder.cpp - Scalar and loop helpers for lowerings ------------===//

#include "LoopBuilder.h"

#include "Fp8Convert.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/TypeUtilities.h"

#include <cassert>
#include <limits>

using namespace mlir;

namespace mla {

Value LoopBuilder::index(int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

Value LoopBuilder::f32(double v) {
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
}

Value LoopBuilder::negInf() {
  return f32(-std::numeric_limits<double>::infinity());
}

Value LoopBuilder::loadIndex(Value memref, ValueRange indices) {
  Value v = memref::LoadOp::create(b, loc, memref, indices);
  return arith::IndexCastOp::create(b, loc, b.getIndexType(), v);
}

Value LoopBuilder::loadF32(Value memref, ValueRange indices) {
  Value v = memref::LoadOp::create(b, loc, memref, indices);
  return toF32(v);
}

void LoopBuilder::storeF32(Value value, Value memref, ValueRange indices) {
  Type element = cast<MemRefType>(memref.getType()).getElementType();
  memref::StoreOp::create(b, loc, fromF32(value, element), memref, indices);
}

Value LoopBuilder::toF32(Value v) {
  Type element = getElementTypeOrSelf(v.getType());
  if (element.isF32())
    return v;
  if (isFp8Type(element))
    return fp8ToF32(b, loc, v);
  Type f32 = b.getF32Type();
  if (auto vector = dyn_cast<VectorType>(v.getType()))
    f32 = vector.clone(f32);
  return arith::ExtFOp::create(b, loc, f32, v);
}

Value LoopBuilder::cacheScale(Value kvScale) {
  if (!kvScale)
    return {};
  return loadF32(kvScale, {index(0)});
}

Value LoopBuilder::fromF32(Value v, Type element) {
  if (element.isF32())
    return v;
  if (isFp8Type(element))
    return f32ToFp8(b, loc, v, element);
  Type type = element;
  if (auto vector = dyn_cast<VectorType>(v.getType()))
    type = vector.clone(element);
  return arith::TruncFOp::create(b, loc, type, v);
}

Value LoopBuilder::lessThan(Value a, Value c) {
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, a, c);
}

Value LoopBuilder::eqIndex(Value a, int64_t v) {
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, a, index(v));
}

Value LoopBuilder::add(Value a, Value c) {
  return arith::AddIOp::create(b, loc, a, c);
}
Value LoopBuilder::sub(Value a, Value c) {
  return arith::SubIOp::create(b, loc, a, c);
}
Value LoopBuilder::mul(Value a, Value c) {
  return arith::MulIOp::create(b, loc, a, c);
}
Value LoopBuilder::minIndex(Value a, Value c) {
  return arith::MinSIOp::create(b, loc, a, c);
}
Value LoopBuilder::maxIndex(Value a, Value c) {
  return arith::MaxSIOp::create(b, loc, a, c);
}
Value LoopBuilder::clampIndex(Value v, Value lo, Value hi) {
  return minIndex(maxIndex(v, lo), hi);
}
Value LoopBuilder::ceilDiv(Value a, int64_t divisor) {
  return arith::CeilDivSIOp::create(b, loc, a, index(divisor));
}
Value LoopBuilder::dim(Value memref, int64_t d) {
  return memref::DimOp::create(b, loc, memref, d);
}

Value LoopBuilder::pagedCapacity(Value blockTable, Value cache,
                                 Value pageSize) {
  Value hasPages = lessThan(index(0), dim(cache, 0));
  return arith::SelectOp::create(b, loc, hasPages,
                                 mul(dim(blockTable, 1), pageSize), index(0));
}

void LoopBuilder::forLoop(Value lb, Value ub, Value step,
                          const std::function<void(Value)> &body) {
  auto loop = scf::ForOp::create(b, loc, lb, ub, step);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  body(loop.getInductionVar());
}

void LoopBuilder::forLoop(Value lb, Value ub, int64_t step,
                          const std::function<void(Value)> &body) {
  forLoop(lb, ub, index(step), body);
}

SmallVector<Value> LoopBuilder::forLoop(
    Value lb, Value ub, Value step, ValueRange init,
    const std::function<SmallVector<Value>(Value, ValueRange)> &body) {
  auto loop = scf::ForOp::create(b, loc, lb, ub, step, init);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    SmallVector<Value> next =
        body(loop.getInductionVar(), loop.getRegionIterArgs());
    scf::YieldOp::create(b, loc, next);
  }
  return SmallVector<Value>(loop.getResults());
}

SmallVector<Value> LoopBuilder::forLoop(
    Value lb, Value ub, int64_t step, ValueRange init,
    const std::function<SmallVector<Value>(Value, ValueRange)> &body) {
  return forLoop(lb, ub, index(step), init, body);
}

void LoopBuilder::ifThen(Value cond, const std::function<void()> &body) {
  auto ifOp = scf::IfOp::create(b, loc, cond, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  body();
}

Value LoopBuilder::visibleKeys(bool causal, Value i, Value numQueries,
                               Value numKeys) {
  if (!causal)
    return numKeys;
  // i + (numKeys - numQueries) + 1, within [0, numKeys].
  Value count = add(add(i, sub(numKeys, numQueries)), index(1));
  return clampIndex(count, index(0), numKeys);
}

/// Of the first `n` >= 0 tokens, those in runs 0, W, 2W, ... of I tokens.
static Value heldTokens(LoopBuilder &e, ArrayRef<int64_t> share, Value n) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  Value cycle = e.index(share[0] * share[1]), run = e.index(share[1]);
  Value cycles = arith::DivUIOp::create(b, loc, n, cycle);
  Value rest = arith::RemUIOp::create(b, loc, n, cycle);
  return e.add(arith::MulIOp::create(b, loc, cycles, run),
               e.minIndex(rest, run));
}

Value LoopBuilder::decodeKeys(std::optional<ArrayRef<int64_t>> share,
                              Value counted, Value capacity) {
  Value zero = index(0);
  if (!share)
    return clampIndex(counted, zero, capacity);
  return minIndex(heldTokens(*this, *share, maxIndex(counted, zero)),
                  capacity);
}

Value LoopBuilder::decodeVisibleKeys(bool causal,
                                     std::optional<ArrayRef<int64_t>> share,
                                     Value i, Value numQueries, Value counted,
                                     Value keys) {
  if (!share)
    return visibleKeys(causal, i, numQueries, keys);
  if (!causal)
    return keys;
  Value prefix = add(add(i, sub(counted, numQueries)), index(1));
  return minIndex(heldTokens(*this, *share, maxIndex(prefix, index(0))),
                  keys);
}

Value LoopBuilder::foldMax(Value init, ValueRange values) {
  Value max = init;
  for (Value v : values)
    max = arith::MaximumFOp::create(b, loc, max, v);
  return max;
}

LoopBuilder::RescaledSum LoopBuilder::rescaleToMax(Value oldMax, Value newMax,
                                                   Value sum) {
  Value alpha = softmaxWeight(oldMax, newMax);
  return {alpha, arith::MulFOp::create(b, loc, sum, alpha)};
}

Value LoopBuilder::softmaxWeight(Value score, Value max) {
  return math::ExpOp::create(b, loc,
                             arith::SubFOp::create(b, loc, score, max));
}

LoopBuilder::RowEnd LoopBuilder::rowEnd(Value max, Value sum) {
  Value zero = f32(0.0);
  // Unordered: a NaN sum has keys.
  Value hasKeys =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE, sum, zero);
  Value inverse = arith::SelectOp::create(
      b, loc, hasKeys, arith::DivFOp::create(b, loc, f32(1.0), sum), zero);
  Value lse = arith::SelectOp::create(
      b, loc, hasKeys,
      arith::AddFOp::create(b, loc, max, math::LogOp::create(b, loc, sum)),
      negInf());
  return {inverse, lse};
}

LoopBuilder::StateWeights LoopBuilder::mergeWeights(ArrayRef<Value> lses) {
  assert(!lses.empty() && "merging no states");
  Value neg = negInf();
  Value pos = f32(std::numeric_limits<double>::infinity());
  Value zero = f32(0.0);
  SmallVector<Value, 4> read;
  for (Value v : lses) {
    Value isPosInf =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, v, pos);
    read.push_back(arith::SelectOp::create(b, loc, isPosInf, neg, v));
  }
  Value m;
  for (Value l : read)
    m = m ? arith::MaximumFOp::create(b, loc, m, l).getResult() : l;
  Value empty =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, m, neg);
  // With every state empty, m - m would be NaN: use weights of zero.
  SmallVector<Value, 4> raw;
  for (Value l : read) {
    Value w =
        math::ExpOp::create(b, loc, arith::SubFOp::create(b, loc, l, m));
    raw.push_back(arith::SelectOp::create(b, loc, empty, zero, w));
  }
  Value sum;
  for (Value w : raw)
    sum = sum ? arith::AddFOp::create(b, loc, sum, w).getResult() : w;
  Value inverse = arith::SelectOp::create(
      b, loc, empty, zero, arith::DivFOp::create(b, loc, f32(1.0), sum));
  Value merged =
      arith::AddFOp::create(b, loc, m, math::LogOp::create(b, loc, sum));
  StateWeights result;
  for (Value w : raw)
    result.weights.push_back(arith::MulFOp::create(b, loc, w, inverse));
  result.lse = arith::SelectOp::create(b, loc, empty, neg, merged);
  return result;
}

LoopBuilder::MergeWeights LoopBuilder::mergeWeights(Value prefixLse,
                                                    Value suffixLse) {
  StateWeights w = mergeWeights({prefixLse, suffixLse});
  return {w.weights[0], w.weights[1], w.lse};
}

} // namespace mla
