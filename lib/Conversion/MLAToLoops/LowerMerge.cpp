//===- LowerMerge.cpp - merge_attn_states to loops ------------------------===//

#include "Lowerings.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"

#include <limits>

using namespace mlir;

namespace mla::loops {

void lowerMergeAttnStates(MergeAttnStatesOp op, KernelEmitter &e) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  auto outType = cast<MemRefType>(op.getOutput().getType());
  int64_t headDim = outType.getDimSize(2);
  Value zero = e.index(0);
  Value numTokens = e.dim(op.getOutput(), 0), heads = e.dim(op.getOutput(), 1);
  Value negInf = e.negInf();
  Value posInf = e.f32(std::numeric_limits<double>::infinity());
  Value fzero = e.f32(0.0);

  // +inf marks an empty state in some kernels' output: read it as -inf.
  auto readLse = [&](Value memref, Value h, Value t) {
    Value v = e.loadF32(memref, {h, t});
    Value isPosInf =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, v, posInf);
    return arith::SelectOp::create(b, loc, isPosInf, negInf, v).getResult();
  };

  e.forLoop(zero, numTokens, 1, [&](Value t) {
    e.forLoop(zero, heads, 1, [&](Value h) {
      Value lp = readLse(op.getPrefixLse(), h, t);
      Value ls = readLse(op.getSuffixLse(), h, t);
      Value m = arith::MaximumFOp::create(b, loc, lp, ls);
      Value empty =
          arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, m, negInf);
      // With both states empty, m - m would be NaN: use weights of zero.
      auto weight = [&](Value l) {
        Value w = math::ExpOp::create(b, loc,
                                      arith::SubFOp::create(b, loc, l, m));
        return arith::SelectOp::create(b, loc, empty, fzero, w).getResult();
      };
      Value wp = weight(lp), ws = weight(ls);
      Value sum = arith::AddFOp::create(b, loc, wp, ws);
      Value inverse = arith::SelectOp::create(
          b, loc, empty, fzero,
          arith::DivFOp::create(b, loc, e.f32(1.0), sum));
      e.linearCombination(Row{op.getOutput(), {t, h}},
                          arith::MulFOp::create(b, loc, wp, inverse),
                          Row{op.getPrefixOutput(), {t, h}},
                          arith::MulFOp::create(b, loc, ws, inverse),
                          Row{op.getSuffixOutput(), {t, h}}, headDim);
      if (Value outLse = op.getOutputLse()) {
        Value merged = arith::AddFOp::create(
            b, loc, m, math::LogOp::create(b, loc, sum));
        e.storeF32(arith::SelectOp::create(b, loc, empty, negInf, merged),
                   outLse, {h, t});
      }
    });
  });
}

} // namespace mla::loops
