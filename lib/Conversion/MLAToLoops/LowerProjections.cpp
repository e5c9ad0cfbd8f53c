//===- LowerProjections.cpp - The up-projections to loops -----------------===//
//
// All three up-projections are, per head, a row vector times a matrix:
// out[t, h, :] = x[t, h?, :] x W_h. They share rowTimesMatrix, which
// accumulates axpy updates of the weight's rows into an f32 buffer. Heads
// are the outer loop so that one head's weight slice (128 to 256 KiB in
// bf16 for DeepSeek) stays in cache while every token streams past it.
//
//===----------------------------------------------------------------------===//

#include "Lowerings.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;

namespace mla::loops {

/// acc[0:width] = sum_r x[r] * matrixRow(r)[0:width], r in [0, depth).
static void rowTimesMatrix(KernelEmitter &e, const Row &acc, const Row &x,
                           int64_t depth,
                           const std::function<Row(Value)> &matrixRow,
                           int64_t width) {
  e.fill(acc, e.f32(0.0), width);
  e.forLoop(e.index(0), e.index(depth), 1, [&](Value r) {
    Row xr = x;
    Value column = r;
    if (x.firstColumn != 0)
      column = arith::AddIOp::create(e.builder(), e.location(), r,
                                     e.index(x.firstColumn));
    xr.prefix.push_back(column);
    e.axpy(acc, e.loadF32(xr.memref, xr.prefix), matrixRow(r), width);
  });
}

void lowerKvUpProj(KvUpProjOp op, KernelEmitter &e) {
  int64_t heads = op.getNumHeads(), latent = op.getKvLoraRank(),
          nope = op.getQkNopeHeadDim(), rope = op.getRopeDim(),
          vDim = op.getVHeadDim();
  Row acc{e.allocaF32(nope + vDim), {}, 0};
  Value zero = e.index(0);
  Value numTokens = e.dim(op.getKvC(), 0);
  e.forLoop(zero, e.index(heads), 1, [&](Value h) {
    e.forLoop(zero, numTokens, 1, [&](Value s) {
      rowTimesMatrix(
          e, acc, Row{op.getKvC(), {s}}, latent,
          [&](Value l) { return Row{op.getKvBProj(), {l, h}}; }, nope + vDim);
      Row k{op.getK(), {s, h}};
      e.copy(k, acc, nope);
      e.copy(k.shifted(nope), Row{op.getKPe(), {s}}, rope);
      e.copy(Row{op.getV(), {s, h}}, acc.shifted(nope), vDim);
    });
  });
}

/// out[t, h, :] = x[t, h, :] x w[h] for x [T, N, depth], w [N, depth, width].
static void perHeadProduct(KernelEmitter &e, Value x, Value w, Value out,
                           int64_t heads, int64_t depth, int64_t width) {
  Row acc{e.allocaF32(width), {}, 0};
  Value zero = e.index(0);
  Value numTokens = e.dim(x, 0);
  e.forLoop(zero, e.index(heads), 1, [&](Value h) {
    e.forLoop(zero, numTokens, 1, [&](Value t) {
      rowTimesMatrix(
          e, acc, Row{x, {t, h}}, depth,
          [&](Value r) { return Row{w, {h, r}}; }, width);
      e.copy(Row{out, {t, h}}, acc, width);
    });
  });
}

void lowerQAbsorb(QAbsorbOp op, KernelEmitter &e) {
  int64_t nope = op.getQkNopeHeadDim(), latent = op.getKvLoraRank();
  perHeadProduct(e, op.getQNope(), op.getWUkT(), op.getQlNope(),
                 op.getNumHeads(), nope, latent);
  std::optional<int64_t> rope = op.getRopeDim();
  if (!rope)
    return;
  // The decode query's q_pe columns: the query's, copied.
  Value zero = e.index(0);
  e.forLoop(zero, e.dim(op.getQNope(), 0), 1, [&](Value t) {
    e.forLoop(zero, e.index(op.getNumHeads()), 1, [&](Value h) {
      e.copy(Row{op.getQlNope(), {t, h}}.shifted(latent),
             Row{op.getQNope(), {t, h}}.shifted(nope), *rope);
    });
  });
}

void lowerVUpProj(VUpProjOp op, KernelEmitter &e) {
  perHeadProduct(e, op.getOLatent(), op.getWUv(), op.getOut(),
                 op.getNumHeads(), op.getKvLoraRank(), op.getVHeadDim());
}

} // namespace mla::loops
