//===- LowerMerge.cpp - merge_attn_states(_n) to loops -------------------===//

#include "Lowerings.h"

using namespace mlir;

namespace mla::loops {

void lowerMergeAttnStates(MergeAttnStatesOp op, KernelEmitter &e) {
  auto outType = cast<MemRefType>(op.getOutput().getType());
  int64_t headDim = outType.getDimSize(2);
  Value zero = e.index(0);
  Value numTokens = e.dim(op.getOutput(), 0), heads = e.dim(op.getOutput(), 1);
  e.forLoop(zero, numTokens, 1, [&](Value t) {
    e.forLoop(zero, heads, 1, [&](Value h) {
      Value prefixLse = e.loadF32(op.getPrefixLse(), {h, t});
      Value suffixLse = e.loadF32(op.getSuffixLse(), {h, t});
      auto w = e.mergeWeights(prefixLse, suffixLse);
      e.linearCombination(Row{op.getOutput(), {t, h}}, w.prefix,
                          Row{op.getPrefixOutput(), {t, h}}, w.suffix,
                          Row{op.getSuffixOutput(), {t, h}}, headDim);
      if (Value outLse = op.getOutputLse())
        e.storeF32(w.lse, outLse, {h, t});
    });
  });
}

void lowerMergeAttnStatesN(MergeAttnStatesNOp op, KernelEmitter &e) {
  auto partialType = cast<MemRefType>(op.getPartialOutputs().getType());
  int64_t numStates = partialType.getDimSize(0);
  int64_t headDim = partialType.getDimSize(4);
  Value zero = e.index(0), out = op.getOutput();
  e.forLoop(zero, e.dim(out, 0), 1, [&](Value bi) {
    e.forLoop(zero, e.dim(out, 1), 1, [&](Value q) {
      e.forLoop(zero, e.dim(out, 2), 1, [&](Value h) {
        SmallVector<Value, 4> lses;
        SmallVector<Row, 4> rows;
        for (int64_t s = 0; s < numStates; ++s) {
          Value state = e.index(s);
          lses.push_back(e.loadF32(op.getPartialLses(), {state, bi, h, q}));
          rows.push_back(Row{op.getPartialOutputs(), {state, bi, q, h}});
        }
        auto w = e.mergeWeights(lses);
        e.linearCombination(Row{out, {bi, q, h}}, w.weights, rows, headDim);
        if (Value outLse = op.getOutputLse())
          e.storeF32(w.lse, outLse, {bi, h, q});
      });
    });
  });
}

} // namespace mla::loops
