//===- GpuProjections.cpp - The up-projection kernels ---------------------===//
//
// All three up-projections are per-head products out[t, h, :] =
// x[t, h?, :] x W_h. One kernel shape serves them: a block owns 128 output
// columns of one head for 8 tokens; each thread accumulates one column for
// the 8 tokens in registers, reading the weight row coalesced across the
// warp and the token's input value as a broadcast.
//
//===----------------------------------------------------------------------===//

#include "GpuKernels.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using mlir::gpu::Dimension;

namespace mla::gpu {

namespace {

constexpr int64_t kTokensPerBlock = 8;

struct PerHeadProduct {
  int64_t heads, depth, width;
  /// Input value x[t, h, r] as f32.
  std::function<Value(GpuEmitter &, ValueRange, Value t, Value h, Value r)>
      loadInput;
  /// Weight value W_h[r, c] as f32.
  std::function<Value(GpuEmitter &, ValueRange, Value h, Value r, Value c)>
      loadWeight;
  /// Stores output column c of token t, head h.
  std::function<void(GpuEmitter &, ValueRange, Value t, Value h, Value c,
                     Value v)>
      store;
  /// Extra per-(token, head) work done by the blocks of column tile 0.
  std::function<void(GpuEmitter &, ValueRange, Value t, Value h)> extra;
};

void emitPerHeadProduct(Operation *op, Value tokensOperand,
                        const PerHeadProduct &p, KernelFactory &kernels,
                        StringRef name) {
  auto kernel = kernels.create(
      name, op->getOperandTypes(), [&](GpuEmitter &e, ValueRange a) {
        OpBuilder &b = e.builder();
        Location loc = e.location();
        // Tokens on grid x (up to 2^31 - 1 blocks), column tiles on z.
        Value column = e.add(e.mul(e.blockId(Dimension::z),
                                   e.index(kBlockThreads)),
                             e.threadId());
        Value h = e.blockId(Dimension::y);
        Value firstToken =
            e.mul(e.blockId(Dimension::x), e.index(kTokensPerBlock));
        Value numTokens = e.dim(a[0], 0);
        Value lastToken = e.sub(numTokens, e.index(1));
        Value inside = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                             column, e.index(p.width));
        Value c = e.minIndex(column, e.index(p.width - 1));
        SmallVector<Value> tokens;
        for (int64_t i = 0; i < kTokensPerBlock; ++i)
          tokens.push_back(
              e.minIndex(e.add(firstToken, e.index(i)), lastToken));

        SmallVector<Value> zeros(kTokensPerBlock, e.f32(0.0));
        SmallVector<Value> acc = e.forLoop(
            e.index(0), e.index(p.depth), 1, zeros,
            [&](Value r, ValueRange sums) -> SmallVector<Value> {
              Value w = p.loadWeight(e, a, h, r, c);
              SmallVector<Value> next;
              for (int64_t i = 0; i < kTokensPerBlock; ++i)
                next.push_back(math::FmaOp::create(
                    b, loc, p.loadInput(e, a, tokens[i], h, r), w, sums[i]));
              return next;
            });
        for (int64_t i = 0; i < kTokensPerBlock; ++i) {
          Value t = e.add(firstToken, e.index(i));
          Value valid = arith::AndIOp::create(
              b, loc, inside,
              arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, t,
                                    numTokens));
          e.ifThen(valid, [&] { p.store(e, a, t, h, c, acc[i]); });
          if (p.extra) {
            Value firstTile = arith::CmpIOp::create(
                b, loc, arith::CmpIPredicate::eq, e.blockId(Dimension::z),
                e.index(0));
            Value tokenValid = arith::CmpIOp::create(
                b, loc, arith::CmpIPredicate::slt, t, numTokens);
            e.ifThen(arith::AndIOp::create(b, loc, firstTile, tokenValid),
                     [&] { p.extra(e, a, t, h); });
          }
        }
      });
  OpBuilder host(op);
  LoopBuilder hb(host, op->getLoc());
  KernelFactory::launch(host, op->getLoc(), kernel,
                        {hb.ceilDiv(hb.dim(tokensOperand, 0), kTokensPerBlock),
                         hb.index(p.heads),
                         hb.index((p.width + kBlockThreads - 1) / kBlockThreads)},
                        op->getOperands());
}

/// The common case: x [T, N, depth], W [N, depth, width], out [T, N, width].
PerHeadProduct batchedPerHead(int64_t heads, int64_t depth, int64_t width) {
  PerHeadProduct p{heads, depth, width, nullptr, nullptr, nullptr, nullptr};
  p.loadInput = [](GpuEmitter &e, ValueRange a, Value t, Value h, Value r) {
    return e.loadF32(a[0], {t, h, r});
  };
  p.loadWeight = [](GpuEmitter &e, ValueRange a, Value h, Value r, Value c) {
    return e.loadF32(a[1], {h, r, c});
  };
  p.store = [](GpuEmitter &e, ValueRange a, Value t, Value h, Value c,
               Value v) { e.storeF32(v, a[2], {t, h, c}); };
  return p;
}

} // namespace

void lowerQAbsorb(QAbsorbOp op, KernelFactory &kernels) {
  int64_t nope = op.getQkNopeHeadDim(), latent = op.getKvLoraRank();
  PerHeadProduct p = batchedPerHead(op.getNumHeads(), nope, latent);
  // With rope_dim: the decode query's q_pe columns are the query's, copied.
  if (std::optional<int64_t> rope = op.getRopeDim())
    p.extra = [nope, latent, rope = *rope](GpuEmitter &e, ValueRange a,
                                           Value t, Value h) {
      e.blockStridedLoop(e.index(0), e.index(rope), [&](Value c) {
        e.storeF32(e.loadF32(a[0], {t, h, e.add(c, e.index(nope))}), a[2],
                   {t, h, e.add(c, e.index(latent))});
      });
    };
  emitPerHeadProduct(op, op.getQNope(), p, kernels, "q_absorb");
}

void lowerVUpProj(VUpProjOp op, KernelFactory &kernels) {
  emitPerHeadProduct(op, op.getOLatent(),
                     batchedPerHead(op.getNumHeads(), op.getKvLoraRank(),
                                    op.getVHeadDim()),
                     kernels, "v_up_proj");
}

void lowerKvUpProj(KvUpProjOp op, KernelFactory &kernels) {
  int64_t nope = op.getQkNopeHeadDim(), rope = op.getRopeDim(),
          vDim = op.getVHeadDim();
  PerHeadProduct p{int64_t(op.getNumHeads()), int64_t(op.getKvLoraRank()),
                   nope + vDim,
                   nullptr, nullptr, nullptr, nullptr};
  // Operands: kv_c, k_pe, kv_b_proj, k, v.
  p.loadInput = [](GpuEmitter &e, ValueRange a, Value t, Value, Value r) {
    return e.loadF32(a[0], {t, r});
  };
  p.loadWeight = [](GpuEmitter &e, ValueRange a, Value h, Value r, Value c) {
    return e.loadF32(a[2], {r, h, c});
  };
  p.store = [nope](GpuEmitter &e, ValueRange a, Value t, Value h, Value c,
                   Value v) {
    Value isKey = arith::CmpIOp::create(e.builder(), e.location(),
                                        arith::CmpIPredicate::slt, c,
                                        e.index(nope));
    auto ifOp = scf::IfOp::create(e.builder(), e.location(), isKey,
                                  /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(e.builder());
    e.builder().setInsertionPointToStart(ifOp.thenBlock());
    e.storeF32(v, a[3], {t, h, c});
    e.builder().setInsertionPointToStart(ifOp.elseBlock());
    e.storeF32(v, a[4], {t, h, e.sub(c, e.index(nope))});
  };
  // The rope key is shared by every head: copied into each head's key.
  p.extra = [nope, rope](GpuEmitter &e, ValueRange a, Value t, Value h) {
    e.blockStridedLoop(e.index(0), e.index(rope), [&](Value c) {
      e.storeF32(e.loadF32(a[1], {t, c}), a[3],
                 {t, h, e.add(c, e.index(nope))});
    });
  };
  emitPerHeadProduct(op, op.getKvC(), p, kernels, "kv_up_proj");
}

} // namespace mla::gpu
