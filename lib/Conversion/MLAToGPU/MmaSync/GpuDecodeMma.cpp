//===- GpuDecodeMma.cpp - Tensor-core decode split kernel (mma.sync) ------===//
//
// The `mma-sync` strategy's split kernel of mla.decode_attention, for bf16
// or f16 queries over a cache of the same type (Ampere-style FlashDecoding).
// Every head row of a request reads the same latent cache, so a block
// handles a 16-row M tile of one request and one split: rows
// r = s * N + h (query s, head h) in [16 * tile, 16 * tile + 16); rows past
// Sq * N are padding (zero queries, results dropped). Four warps.
//
// Shared memory (dynamic): the Q tile 16 x (Lkv + R) and a KV tile of 64
// tokens x (Lkv + R), rows padded by 8 elements so that ldmatrix reads are
// free of bank conflicts; a P tile 16 x 64 (+8); the warps' row maxima and
// row sums (f32). Per KV tile:
//  1. the tile is copied with 16-byte cp.async (cp.async.cg): warp w
//     copies rows [16w, 16w + 16), each group of 8 lanes one row at a time
//     (one page lookup per row, whole 128-byte lines per instruction); rows
//     past the split or the sequence are zero-filled without being read
//     (tail pages may hold NaN); a barrier.
//  2. warp w scores its 16 tokens [16w, 16w + 16) against the 16 rows:
//     m16n8k16 mma.sync over Lkv + R, A (Q) and B (K) through ldmatrix,
//     f32 accumulators in two sets (even and odd k16 steps, so consecutive
//     mma do not depend on each other); tokens a row cannot see (causal,
//     or past the split) are -inf.
//  3. row maxima of the tile (scaled by c = softmax_scale * log2(e)):
//     quad shuffles, then across the warps through shared memory (a
//     barrier); the online softmax of FragmentSoftmax (running max m, the
//     lane's partial sum l, O rescaled by exp2(m_old - m_new)).
//  4. P = exp2(c S - m) to shared memory in the input type; a barrier.
//  5. warp w accumulates O[:, w Lkv/4 .. (w+1) Lkv/4) += P (16 x 64) x V,
//     V being the tile's first Lkv columns (B through ldmatrix.trans): each
//     warp keeps 16 rows x Lkv/4 columns of O in registers (Lkv = 512: 64
//     f32 per lane). A barrier before the next tile is copied.
// At the end the warps' row sums are added through shared memory, and
// out = O / l (0 when l = 0) and lse = m ln 2 + log(l) (-inf when l = 0)
// are written to the split partials of the real rows (or out and lse for
// a request of one split), exactly as the generic split kernel writes
// them: the rows staged as f32 in shared memory, then copied out by the
// block in 16-byte pieces (element by element where the destination is
// not vector-aligned). Where q or the cache is not 16-byte
// aligned, the tiles are copied element by element instead.
//
//===----------------------------------------------------------------------===//

#include "MmaSync/MmaDecodeRows.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>

using namespace mlir;

namespace mla::gpu {

namespace {

using mma_decode::kRowPad;
using mma_decode::kTileRows;
using mma_decode::kTileTokens;
using mma_decode::kWarps;
using mma_decode::SharedLayout;
constexpr int64_t kWarpTokens = kTileTokens / kWarps;

/// The kernel of a split the request uses (inside DecodeSplitBlock::run),
/// one method a step of the file comment (the softmax's are
/// MmaDecodeRows'). The constructor views the shared memory, finds the
/// lane's ldmatrix addresses and starts the Q tile's copy.
class SplitBody : public MmaDecodeRows {
public:
  SplitBody(MmaEmitter &e, DecodeSplitBlock &block, DecodeAttentionOp op,
            const SharedLayout &layout, const WarpLane &thread, Value raw)
      : MmaDecodeRows(e, block, thread, op.getKvLoraRank(), raw, layout.max,
                      layout.sum,
                      // Scores in base 2: exp(x * scale) = exp2(x * scale *
                      // log2(e)).
                      op.getSoftmaxScale().convertToDouble() * M_LOG2E),
        b(e.builder()), l(e.location()), layout(layout), raw(raw),
        qkDim(op.getKvLoraRank() + op.getRopeDim()),
        vectorsPerRow(qkDim / kCopyElems), warpNTiles(warpColumns / 8) {
    qS = e.sharedView(raw, layout.q, {kTileRows, layout.rowStride}, e.element);
    kvS = e.sharedView(raw, layout.kv, {kTileTokens, layout.rowStride},
                       e.element);
    pS = e.sharedView(raw, layout.p, {kTileRows, layout.pStride}, e.element);
    copyQ();
    ldmatrixLanes();
  }

private:
  OpBuilder &b;
  Location l;
  const SharedLayout &layout;
  Value raw;
  const int64_t qkDim, vectorsPerRow;
  const int64_t warpNTiles; ///< n8 tiles of the warp's O columns
  Value qS, kvS, pS;
  Value lane16, half, odd, kRow, vRow, warpCol0;

  /// The Q tile (padding rows zero).
  void copyQ() {
    e.copyTile(block.aligned, qS, block.q, kTileRows, vectorsPerRow,
               thread.warp, thread.lane,
               [&](Value row) { return block.queryRow(row); });
  }
  /// Lane addresses of the ldmatrix operands.
  void ldmatrixLanes() {
    lane16 = e.remui(thread.lane, 16);
    Value lane8 = e.remui(thread.lane, 8);
    half = e.mul(e.divui(thread.lane, 16), e.index(8)); // 0 or 8
    odd = e.mul(e.remui(e.divui(thread.lane, 8), 2), e.index(8));
    // A (Q or P): row lane % 16, column + (lane / 16) * 8.
    // B of S (K rows): token 16w + (lane / 16) * 8 + lane % 8,
    // column + ((lane / 8) % 2) * 8.
    kRow = e.add(e.mul(thread.warp, e.index(kWarpTokens)), e.add(half, lane8));
    // B of O (V, transposed): token ((lane / 8) % 2) * 8 + lane % 8,
    // column + (lane / 16) * 8.
    vRow = e.add(odd, lane8);
    warpCol0 = e.mul(thread.warp, e.index(warpColumns));
  }

  /// One KV tile starting at token `tile`: steps 1 to 5 of the file
  /// comment, from the state `it` to the one returned.
  SmallVector<Value> kvTile(Value tile, ValueRange it) override;
  /// 1. The KV tile, copied by the block and waited for; a barrier.
  void copyKv(Value tile) {
    e.copyTile(block.aligned, kvS, block.cache, kTileTokens, vectorsPerRow,
               thread.warp, thread.lane,
               [&](Value row) { return block.cacheRow(tile, row); });
    e.waitAllCopies();
    e.barrier();
  }
  /// 2. S = Q K^T for the warp's 16 tokens: two n8 tiles, accumulated in
  /// two sets (even and odd k16 steps) so that consecutive mma.sync do not
  /// wait on each other, then added.
  SmallVector<Value> scores();
  /// One k16 step of scores() at column `k` into the accumulators `c` of
  /// both n8 tiles.
  void scoreStep(Value k, MutableArrayRef<Value> c) {
    SmallVector<Value> qa = e.ldmatrix(qS, {lane16, e.add(k, half)}, 4, false);
    SmallVector<Value> kb = e.ldmatrix(kvS, {kRow, e.add(k, odd)}, 4, false);
    e.mma(qa, kb[0], kb[1], c.slice(0, 4));
    e.mma(qa, kb[2], kb[3], c.slice(4, 4));
  }
  /// 4. P to shared memory in the input type, the warp's 16 token columns;
  /// a barrier.
  void storeP(ArrayRef<Value> p);
  /// 5. O += P V over the warp's columns (`o` in oFragment's order).
  void addPv(MutableArrayRef<Value> o);
  /// O / l staged as f32 rows over the Q and KV tiles, for the block's
  /// copy; returns the staging view.
  Value stageOutput(ArrayRef<Value> state,
                    ArrayRef<FragmentRowEnd> ends) override;
};

SmallVector<Value> SplitBody::kvTile(Value tile, ValueRange it) {
  copyKv(tile);
  SmallVector<Value> s = scores();
  SmallVector<Value> next(it.begin(), it.end());
  // 3. and 4. (sFragment: column 8 nt + 2 quad + c is token 16 w + 8 nt +
  // 2 quad + c of the tile).
  SmallVector<Value> p = softmaxStep(
      e.add(tile, e.mul(thread.warp, e.index(kWarpTokens))), s, it, next);
  storeP(p);
  addPv(MutableArrayRef<Value>(next).drop_front(4));
  // The next tile overwrites the KV and P tiles.
  e.barrier();
  return next;
}

SmallVector<Value> SplitBody::scores() {
  const int64_t steps = qkDim / 16;
  SmallVector<Value> sets = e.forLoop(
      e.index(0), e.index(steps / 2 * 32), 32, SmallVector<Value>(16, fzero),
      [&](Value k, ValueRange c) -> SmallVector<Value> {
        SmallVector<Value> next(c.begin(), c.end());
        MutableArrayRef<Value> all(next);
        scoreStep(k, all.slice(0, 8));
        scoreStep(e.add(k, e.index(16)), all.slice(8, 8));
        return next;
      });
  if (steps % 2)
    scoreStep(e.index(qkDim - 16), MutableArrayRef<Value>(sets).slice(0, 8));
  SmallVector<Value> acc;
  for (int64_t i = 0; i < 8; ++i)
    acc.push_back(e.addf(sets[i], sets[8 + i]));
  return acc;
}

void SplitBody::storeP(ArrayRef<Value> p) {
  for (int64_t nt = 0; nt < 2; ++nt)
    for (int64_t i = 0; i < 2; ++i) {
      Value v = e.pack(p[4 * nt + 2 * i], p[4 * nt + 2 * i + 1]);
      Value col = e.add(e.mul(thread.warp, e.index(kWarpTokens)),
                        e.add(e.index(8 * nt), e.mul(thread.quad, e.index(2))));
      vector::StoreOp::create(
          b, l, v, pS, ValueRange{e.add(thread.group, e.index(8 * i)), col},
          /*nontemporal=*/false, llvm::MaybeAlign(4));
    }
  e.barrier();
}

void SplitBody::addPv(MutableArrayRef<Value> o) {
  for (int64_t kk = 0; kk < kTileTokens / 16; ++kk) {
    SmallVector<Value> pa =
        e.ldmatrix(pS, {lane16, e.add(e.index(16 * kk), half)}, 4, false);
    for (int64_t t = 0; t < warpNTiles; t += 2) {
      SmallVector<Value> vb =
          e.ldmatrix(kvS,
                     {e.add(vRow, e.index(16 * kk)),
                      e.add(warpCol0, e.add(e.index(8 * t), half))},
                     4, true);
      e.mma(pa, vb[0], vb[1], o.slice(oFragment.at(0, t, 0, 0), 4));
      e.mma(pa, vb[2], vb[3], o.slice(oFragment.at(0, t + 1, 0, 0), 4));
    }
  }
}

Value SplitBody::stageOutput(ArrayRef<Value> state,
                             ArrayRef<FragmentRowEnd> ends) {
  // O / l staged as f32 rows in the Q and KV tiles (every warp is past its
  // last P V), once for either destination; then the block copies the real
  // rows out (DecodeSplitBlock::writeStagedRows).
  const int64_t stagingStride = latent + kRowPad;
  Value staging =
      e.sharedView(raw, 0, {kTileRows, stagingStride}, b.getF32Type());
  for (int64_t i = 0; i < 2; ++i)
    e.stageFragmentRow(staging, laneRows[i].local, warpCol0, thread.quad,
                       warpNTiles, [&](int64_t t, int64_t c) {
                         return e.mulf(state[4 + oFragment.at(0, t, i, c)],
                                       ends[i].inverse);
                       });
  e.barrier();
  return staging;
}

} // namespace

bool useMmaDecodeSplit(DecodeAttentionOp op, const GpuTarget &target) {
  if (!target.usesMmaSync())
    return false;
  // 16-byte copies need row-major rows of whole vectors.
  return mma_decode::runsOn(decodeOperandTypes(op), op.getKvLoraRank(),
                            op.getRopeDim(), target.maxSharedBytesPerBlock()) &&
         GpuEmitter::hasVectorRows(op.getQ()) &&
         GpuEmitter::hasVectorRows(op.getKvCache());
}

void launchMmaDecodeSplit(DecodeAttentionOp op, KernelFactory &kernels,
                          const DecodeSchedule &schedule, OpBuilder &host,
                          ValueRange splitArgs, Value splits) {
  if (decodeOperandTypes(op) == DecodeOperandTypes::Fp8Cache)
    return launchMmaDecodeFp8Split(op, kernels, schedule, host, splitArgs,
                                   splits);
  int64_t qkDim = op.getKvLoraRank() + op.getRopeDim();
  Type element = cast<MemRefType>(op.getQ().getType()).getElementType();
  SharedLayout layout(qkDim, 2);

  auto kernel = kernels.create(
      "decode_attention_split_mma", splitArgs.getTypes(),
      [&](GpuEmitter &base, ValueRange a) {
        MmaEmitter e(base.builder(), base.location(), element);
        DecodeSplitBlock block(e, op, schedule, a, kTileRows);
        WarpLane thread(e);
        block.run([&] {
          Value raw = e.dynamicShared();
          SplitBody body(e, block, op, layout, thread, raw);
          SmallVector<Value> state = body.walkTiles();
          // Copies still in flight when no tile ran (the Q tile).
          e.waitAllCopies();
          body.writeResults(state);
        });
      });
  launchSplitGrid(op, host, kernel, splitArgs, splits, kTileRows,
                  layout.bytes);
}

} // namespace mla::gpu
