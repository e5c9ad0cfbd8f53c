//===- GpuProjections.cpp - The up-projection kernels ---------------------===//
//
// Each up-projection op described as a PerHeadProduct, and the CUDA-core
// kernel that computes any of them: a block owns 128 output columns of one
// head for 8 tokens; each thread accumulates one column for the 8 tokens
// in registers, reading the weight row coalesced across the warp and the
// token's input value as a broadcast. The tensor-core strategies use
// GpuProjectionsMma.cpp's kernel where it takes the operands.
//
//===----------------------------------------------------------------------===//

#include "KernelDispatch.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using mlir::gpu::Dimension;

namespace mla::gpu {

namespace {

constexpr int64_t kTokensPerBlock = 8;

SmallVector<Value, 4> concat(ArrayRef<Value> prefix, Value last) {
  SmallVector<Value, 4> idx(prefix.begin(), prefix.end());
  idx.push_back(last);
  return idx;
}

/// Stores product column c of (t, h) to the output holding it.
void storeColumn(GpuEmitter &e, ValueRange a,
                 ArrayRef<PerHeadProduct::Output> outputs, Value t, Value h,
                 Value c, Value v) {
  const PerHeadProduct::Output &o = outputs.front();
  auto store = [&] {
    e.storeF32(v, a[o.arg], {t, h, o.first ? e.sub(c, e.index(o.first)) : c});
  };
  if (outputs.size() == 1)
    return store();
  e.ifThenElse(e.lessThan(c, e.index(o.first + o.count)), store,
               [&] { storeColumn(e, a, outputs.drop_front(), t, h, c, v); });
}

} // namespace

void emitCudaCoreProduct(Operation *op, const PerHeadProduct &p,
                         KernelFactory &kernels, StringRef name) {
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
        Value numTokens = e.dim(a[p.inputArg], 0);
        Value lastToken = e.sub(numTokens, e.index(1));
        Value inside = e.lessThan(column, e.index(p.width));
        Value c = e.minIndex(column, e.index(p.width - 1));
        SmallVector<Value> tokens;
        for (int64_t i = 0; i < kTokensPerBlock; ++i)
          tokens.push_back(
              e.minIndex(e.add(firstToken, e.index(i)), lastToken));
        SmallVector<SmallVector<Value, 3>> inputRows;
        for (Value t : tokens)
          inputRows.push_back(p.inputRow(e, a, t, h));

        SmallVector<Value> zeros(kTokensPerBlock, e.f32(0.0));
        SmallVector<Value> acc = e.forLoop(
            e.index(0), e.index(p.depth), 1, zeros,
            [&](Value r, ValueRange sums) -> SmallVector<Value> {
              Value w =
                  e.loadF32(a[p.weightArg], concat(p.weightRow(e, a, h, r), c));
              SmallVector<Value> next;
              for (int64_t i = 0; i < kTokensPerBlock; ++i)
                next.push_back(math::FmaOp::create(
                    b, loc, e.loadF32(a[p.inputArg], concat(inputRows[i], r)),
                    w, sums[i]));
              return next;
            });
        for (int64_t i = 0; i < kTokensPerBlock; ++i) {
          Value t = e.add(firstToken, e.index(i));
          Value tokenValid = e.lessThan(t, numTokens);
          e.ifThen(arith::AndIOp::create(b, loc, inside, tokenValid),
                   [&] { storeColumn(e, a, p.outputs, t, h, c, acc[i]); });
          if (p.copy)
            e.ifThen(
                arith::AndIOp::create(
                    b, loc, e.eqIndex(e.blockId(Dimension::z), 0), tokenValid),
                [&] {
                  // Element by element over the block's threads.
                  p.columnCopy(e, a, t, h)
                      .emit(e, e.threadId(), kBlockThreads, Value());
                });
        }
      });
  OpBuilder host(op);
  LoopBuilder hb(host, op->getLoc());
  KernelFactory::launch(
      host, op->getLoc(), kernel,
      {hb.ceilDiv(hb.dim(op->getOperand(p.inputArg), 0), kTokensPerBlock),
       hb.index(p.heads),
       hb.index((p.width + kBlockThreads - 1) / kBlockThreads)},
      op->getOperands());
}

namespace {

/// x [T, N, >= depth], W [N, depth, width], out [T, N, >= width]: the
/// product of q_absorb and v_up_proj (operands x, W, out).
PerHeadProduct batchedPerHead(int64_t heads, int64_t depth, int64_t width) {
  PerHeadProduct p{heads, depth, width, /*inputArg=*/0, /*weightArg=*/1};
  p.inputRow = [](GpuEmitter &, ValueRange, Value t, Value h) {
    return SmallVector<Value, 3>{t, h};
  };
  p.weightRow = [](GpuEmitter &, ValueRange, Value h, Value r) {
    return SmallVector<Value, 3>{h, r};
  };
  p.outputs = {{/*arg=*/2, 0, width}};
  return p;
}

} // namespace

void lowerQAbsorb(QAbsorbOp op, KernelFactory &kernels) {
  int64_t nope = op.getQkNopeHeadDim(), latent = op.getKvLoraRank();
  PerHeadProduct p = batchedPerHead(op.getNumHeads(), nope, latent);
  // With rope_dim: the decode query's q_pe columns are the query's, copied.
  if (std::optional<int64_t> rope = op.getRopeDim())
    p.copy = PerHeadProduct::ColumnCopy{
        /*srcArg=*/0,
        [](GpuEmitter &, Value t, Value h) {
          return SmallVector<Value, 3>{t, h};
        },
        nope, /*dstArg=*/2, latent, *rope};
  lowerProduct(op, p, kernels, "q_absorb");
}

void lowerVUpProj(VUpProjOp op, KernelFactory &kernels) {
  lowerProduct(
      op,
      batchedPerHead(op.getNumHeads(), op.getKvLoraRank(), op.getVHeadDim()),
      kernels, "v_up_proj");
}

void lowerKvUpProj(KvUpProjOp op, KernelFactory &kernels) {
  int64_t nope = op.getQkNopeHeadDim(), rope = op.getRopeDim(),
          vDim = op.getVHeadDim();
  // Operands: kv_c [T, Lkv], k_pe [T, R], kv_b_proj [Lkv, N, P + V], k, v.
  PerHeadProduct p{int64_t(op.getNumHeads()), int64_t(op.getKvLoraRank()),
                   nope + vDim, /*inputArg=*/0, /*weightArg=*/2};
  p.inputRow = [](GpuEmitter &, ValueRange, Value t, Value) {
    return SmallVector<Value, 3>{t};
  };
  p.weightRow = [](GpuEmitter &, ValueRange, Value h, Value r) {
    return SmallVector<Value, 3>{r, h};
  };
  p.outputs = {{/*arg=*/3, 0, nope}, {/*arg=*/4, nope, vDim}};
  // The keys and values of a prefill's tokens or of a context chunk.
  p.prefillSized = true;
  // The rope key is shared by every head: copied into each head's key.
  p.copy = PerHeadProduct::ColumnCopy{
      /*srcArg=*/1,
      [](GpuEmitter &, Value t, Value) { return SmallVector<Value, 3>{t}; },
      0, /*dstArg=*/3, nope, rope};
  lowerProduct(op, p, kernels, "kv_up_proj");
}

} // namespace mla::gpu
