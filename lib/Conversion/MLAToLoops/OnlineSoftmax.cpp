//===- OnlineSoftmax.cpp - One attention row, blocked online softmax ------===//

#include "OnlineSoftmax.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;

namespace mla::loops {

void emitAttentionRow(KernelEmitter &e, const AttentionRow &row,
                      const AttentionScratch &scratch, const Row &out,
                      Value lse, ValueRange lseIndices, bool accumulate) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  Row acc{scratch.accumulator, {}, 0};
  e.fill(acc, e.f32(0.0), row.vDim);

  Value scale = e.f32(row.softmaxScale);
  Value block = e.index(scratch.keyBlock);
  SmallVector<Value> state = e.forLoop(
      e.index(0), row.numKeys, scratch.keyBlock, {e.negInf(), e.f32(0.0)},
      [&](Value kb, ValueRange iter) -> SmallVector<Value> {
        Value runningMax = iter[0], runningSum = iter[1];
        Value remaining = arith::SubIOp::create(b, loc, row.numKeys, kb);
        Value count = e.minIndex(block, remaining);

        // Score the block and find its maximum.
        Value blockMax =
            e.forLoop(e.index(0), count, 1, {e.negInf()},
                      [&](Value j, ValueRange it) -> SmallVector<Value> {
                        Value key = arith::AddIOp::create(b, loc, kb, j);
                        Value s = e.dot(row.query, row.keyRow(key), row.qkDim);
                        s = arith::MulFOp::create(b, loc, s, scale);
                        e.storeF32(s, scratch.scores, {j});
                        return {e.foldMax(it[0], s)};
                      })[0];

        // Rescale what was accumulated under the old maximum. The new
        // maximum is finite (the block is not empty), so a first block
        // turns exp(-inf) into a harmless 0.
        Value newMax = e.foldMax(runningMax, blockMax);
        auto [alpha, sum] = e.rescaleToMax(runningMax, newMax, runningSum);
        e.scaledCopy(acc, alpha, acc, row.vDim);

        sum = e.forLoop(
            e.index(0), count, 1, {sum},
            [&](Value j, ValueRange it) -> SmallVector<Value> {
              Value key = arith::AddIOp::create(b, loc, kb, j);
              Value s = e.loadF32(scratch.scores, {j});
              Value p = e.softmaxWeight(s, newMax);
              e.axpy(acc, p, row.valueRow(key), row.vDim);
              return {arith::AddFOp::create(b, loc, it[0], p)};
            })[0];
        return {newMax, sum};
      });

  // Normalize. An empty row has sum 0 and a zero accumulator.
  Value zero = e.f32(0.0);
  LoopBuilder::RowEnd end = e.rowEnd(state[0], state[1]);
  Value inverse = end.inverse, rowLse = end.lse;
  if (!accumulate) {
    e.scaledCopy(out, inverse, acc, row.vDim);
    e.storeF32(rowLse, lse, lseIndices);
    return;
  }
  // Merged into the entry state; an empty one (weight 0) is not read.
  LoopBuilder::MergeWeights w =
      e.mergeWeights(e.loadF32(lse, lseIndices), rowLse);
  Value ownScale = arith::MulFOp::create(b, loc, inverse, w.suffix);
  auto weightIs = [&](arith::CmpFPredicate predicate) {
    return arith::CmpFOp::create(b, loc, predicate, w.prefix, zero);
  };
  e.ifThen(weightIs(arith::CmpFPredicate::OEQ),
           [&] { e.scaledCopy(out, ownScale, acc, row.vDim); });
  e.ifThen(weightIs(arith::CmpFPredicate::UNE), [&] {
    e.linearCombination(out, ownScale, acc, w.prefix, out, row.vDim);
  });
  e.storeF32(w.lse, lse, lseIndices);
}

} // namespace mla::loops
