//===- FragmentSoftmax.cpp - Online softmax over accumulator fragments ----===//

#include "Tiles/FragmentSoftmax.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include <cmath>

using namespace mlir;

namespace mla::gpu {

void FragmentSoftmax::mask(MutableArrayRef<Value> s, Value firstKey,
                           ArrayRef<Value> rowEnds) const {
  Value key0 = e.add(firstKey, e.mul(quad, e.index(2)));
  for (int64_t j = 0; j < layout.columnTiles; ++j)
    for (int64_t c = 0; c < 2; ++c) {
      Value key = e.add(key0, e.index(8 * j + c));
      for (int64_t m = 0; m < layout.rowTiles; ++m)
        for (int64_t i = 0; i < 2; ++i) {
          Value &v = s[layout.at(m, j, i, c)];
          v = e.select(e.lessThan(key, rowEnds[2 * m + i]), v, e.negInf());
        }
    }
}

void FragmentSoftmax::maskWhere(Value needed, MutableArrayRef<Value> s,
                                Value firstKey,
                                ArrayRef<Value> rowEnds) const {
  SmallVector<Type> types(s.size(), e.builder().getF32Type());
  SmallVector<Value> out = e.selectValues(
      needed, types,
      [&] {
        SmallVector<Value> masked(s.begin(), s.end());
        mask(masked, firstKey, rowEnds);
        return masked;
      },
      [&] { return SmallVector<Value>(s.begin(), s.end()); });
  std::copy(out.begin(), out.end(), s.begin());
}

Value FragmentSoftmax::rowMax(ArrayRef<Value> s, int64_t row) const {
  SmallVector<Value> values;
  for (int64_t j = 0; j < layout.columnTiles; ++j)
    for (int64_t c = 0; c < 2; ++c)
      values.push_back(s[layout.at(row / 2, j, row % 2, c)]);
  // c > 0: the max of the scaled scores is the scaled max.
  return e.mulf(e.quadMax(e.maxTree(values)), scaleLog2);
}

OnlineMax FragmentSoftmax::advance(Value old, Value tileMax) const {
  Value m = e.maxf(old, tileMax);
  Value safe = e.select(e.isNegInf(m), e.f32(0.0), m);
  return {m, safe, e.exp2(e.subf(old, safe))};
}

Value FragmentSoftmax::exponentiate(ArrayRef<Value> s, int64_t row,
                                    const OnlineMax &step, Value oldSum,
                                    const PairSink &sink) const {
  Value scale = scaleLog2;
  Value shift = arith::NegFOp::create(e.builder(), e.location(), step.safe);
  int64_t m = row / 2, i = row % 2;
  SmallVector<Value> p;
  for (int64_t j = 0; j < layout.columnTiles; ++j) {
    Value p0 = e.exp2(e.fma(s[layout.at(m, j, i, 0)], scale, shift));
    Value p1 = e.exp2(e.fma(s[layout.at(m, j, i, 1)], scale, shift));
    p.append({p0, p1});
    sink(m, j, p0, p1);
  }
  return e.fma(oldSum, step.alpha, e.sumTree(p));
}

FragmentSoftmax::RowStep FragmentSoftmax::step(ArrayRef<Value> s, int64_t row,
                                               Value oldMax, Value oldSum,
                                               const PairSink &sink) const {
  OnlineMax next = advance(oldMax, rowMax(s, row));
  Value sum = exponentiate(s, row, next, oldSum, sink);
  return {next.max, sum, next.alpha};
}

SmallVector<Value> FragmentSoftmax::rescale(MmaEmitter &e, ValueRange acc,
                                            AccumulatorFragment layout,
                                            ArrayRef<Value> alpha,
                                            bool onlyIfMoved) {
  auto scaled = [&] {
    SmallVector<Value> out;
    for (auto [k, v] : llvm::enumerate(acc))
      out.push_back(e.mulf(v, alpha[layout.laneRowOf(k)]));
    return out;
  };
  if (!onlyIfMoved)
    return scaled();
  OpBuilder &b = e.builder();
  Value moved;
  for (Value a : alpha) {
    Value m = arith::CmpFOp::create(b, e.location(), arith::CmpFPredicate::UNE,
                                    a, e.f32(1.0));
    moved = moved ? arith::OrIOp::create(b, e.location(), moved, m) : m;
  }
  SmallVector<Type> types(acc.size(), b.getF32Type());
  return e.selectValues(e.warpAny(moved), types, scaled,
                        [&] { return SmallVector<Value>(acc.begin(), acc.end()); });
}

FragmentRowEnd FragmentSoftmax::finishRow(MmaEmitter &e, Value max, Value sum) {
  // The running max is in log2 units.
  LoopBuilder::RowEnd end = e.rowEnd(e.mulf(max, e.f32(M_LN2)), sum);
  return {end.inverse, end.lse, Value()};
}

FragmentRowEnd FragmentSoftmax::mergeIntoEntry(MmaEmitter &e,
                                               const FragmentRowEnd &end,
                                               Value entryLse) {
  LoopBuilder::MergeWeights w = e.mergeWeights(entryLse, end.lse);
  return {e.mulf(end.inverse, w.suffix), w.lse, w.prefix};
}

} // namespace mla::gpu
