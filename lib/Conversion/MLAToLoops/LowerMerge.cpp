//===- LowerMerge.cpp - merge_attn_states to loops ------------------------===//

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

} // namespace mla::loops
