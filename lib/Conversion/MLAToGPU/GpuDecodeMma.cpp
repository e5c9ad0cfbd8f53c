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
//     mma do not depend on each other); scaled by softmax_scale * log2(e);
//     tokens a row cannot see (causal, or past the split) are -inf.
//  3. row maxima of the tile: quad shuffles, then across the warps through
//     shared memory (a barrier); online softmax in base 2 (running max m,
//     the lane's partial sum l, O rescaled by exp2(m_old - m_new)).
//  4. P = exp2(S - m) to shared memory in the input type; a barrier.
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

#include "DecodeSplitBlock.h"
#include "FragmentSoftmax.h"
#include "mla/Target/MmaDecodeShape.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
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
static_assert(kBlockWarps == kWarps,
              "the shared layout counts one row-statistics slot per warp");
constexpr int64_t kWarpTokens = kTileTokens / kWarps;
} // namespace

bool useMmaDecodeSplit(DecodeAttentionOp op, const GpuTarget &target) {
  if (!target.usesMmaSync())
    return false;
  // 16-byte copies need row-major rows of whole vectors.
  return mma_decode::runsOn(hasSameTwoByteTypes(op), op.getKvLoraRank(),
                            op.getRopeDim(), target.maxSharedBytesPerBlock()) &&
         GpuEmitter::hasVectorRows(op.getQ()) &&
         GpuEmitter::hasVectorRows(op.getKvCache());
}

void launchMmaDecodeSplit(DecodeAttentionOp op, KernelFactory &kernels,
                          const DecodeSchedule &schedule, OpBuilder &host,
                          ValueRange splitArgs, Value splits) {
  int64_t latent = op.getKvLoraRank();
  int64_t qkDim = latent + op.getRopeDim();
  // Scores in base 2: exp(x * scale) = exp2(x * scale * log2(e)).
  double scaleLog2 = op.getSoftmaxScale().convertToDouble() * M_LOG2E;
  Type element = cast<MemRefType>(op.getQ().getType()).getElementType();
  SharedLayout layout(qkDim, 2);
  const int64_t vectorsPerRow = qkDim / kCopyElems;
  const int64_t warpColumns = latent / kWarps; // O columns of a warp
  const int64_t warpNTiles = warpColumns / 8;  // its n8 tiles

  auto kernel = kernels.create(
      "decode_attention_split_mma", splitArgs.getTypes(),
      [&](GpuEmitter &base, ValueRange a) {
        MmaEmitter e(base.builder(), base.location(), element);
        OpBuilder &b = e.builder();
        Location l = e.location();
        DecodeSplitBlock block(e, op, schedule, a, kTileRows);

        Value tid = e.threadId();
        Value lane = e.remui(tid, kWarpSize), warp = e.divui(tid, kWarpSize);
        Value group = e.divui(lane, 4), quad = e.remui(lane, 4);

        block.run([&] {
          // Shared memory.
          Value raw = e.dynamicShared();
          Value qS = e.sharedView(raw, layout.q, {kTileRows, layout.rowStride},
                                  element);
          Value kvS = e.sharedView(raw, layout.kv,
                                   {kTileTokens, layout.rowStride}, element);
          Value pS =
              e.sharedView(raw, layout.p, {kTileRows, layout.pStride}, element);
          Value maxS = e.sharedView(raw, layout.max, {kWarps * kTileRows},
                                    b.getF32Type());
          Value sumS = e.sharedView(raw, layout.sum, {kWarps * kTileRows},
                                    b.getF32Type());

          // The lane's two rows: group and group + 8 of the tile.
          SmallVector<DecodeSplitBlock::LaneRow, 2> laneRows;
          for (int64_t i = 0; i < 2; ++i)
            laneRows.push_back(block.laneRow(e.add(group, e.index(8 * i))));

          // The Q tile (padding rows zero).
          e.copyTile(block.aligned, qS, block.q, kTileRows, vectorsPerRow,
                     warp, lane, [&](Value row) { return block.queryRow(row); });

          // Lane addresses of the ldmatrix operands.
          Value lane16 = e.remui(lane, 16), lane8 = e.remui(lane, 8);
          Value half = e.mul(e.divui(lane, 16), e.index(8)); // 0 or 8
          Value odd = e.mul(e.remui(e.divui(lane, 8), 2), e.index(8));
          // A (Q or P): row lane % 16, column + (lane / 16) * 8.
          // B of S (K rows): token 16w + (lane / 16) * 8 + lane % 8,
          // column + ((lane / 8) % 2) * 8.
          Value kRow =
              e.add(e.mul(warp, e.index(kWarpTokens)), e.add(half, lane8));
          // B of O (V, transposed): token ((lane / 8) % 2) * 8 + lane % 8,
          // column + (lane / 16) * 8.
          Value vRow = e.add(odd, lane8);
          Value warpCol0 = e.mul(warp, e.index(warpColumns));

          Value negInf = e.negInf(), fzero = e.f32(0.0);
          // The warp's 16 x 16 scores and its 16 x Lkv/4 of O.
          const AccumulatorFragment sFragment{1, kWarpTokens / 8};
          const AccumulatorFragment oFragment{1, warpNTiles};
          FragmentSoftmax softmax(e, sFragment, scaleLog2, quad);
          SmallVector<Value> init{negInf, negInf, fzero, fzero};
          init.append(warpNTiles * 4, fzero);
          SmallVector<Value> state = e.forLoop(
              block.first, block.kvEnd, e.index(kTileTokens), init,
              [&](Value tile, ValueRange it) -> SmallVector<Value> {
                // 1. The KV tile.
                e.copyTile(block.aligned, kvS, block.cache, kTileTokens,
                           vectorsPerRow, warp, lane, [&](Value row) {
                             return block.cacheRow(tile, row);
                           });
                e.waitAllCopies();
                e.barrier();

                // 2. S = Q K^T for the warp's 16 tokens: two n8 tiles,
                // accumulated in two sets (even and odd k16 steps) so that
                // consecutive mma.sync do not wait on each other.
                auto scoreStep = [&](Value k, MutableArrayRef<Value> c) {
                  SmallVector<Value> qa =
                      e.ldmatrix(qS, {lane16, e.add(k, half)}, 4, false);
                  SmallVector<Value> kb =
                      e.ldmatrix(kvS, {kRow, e.add(k, odd)}, 4, false);
                  e.mma(qa, kb[0], kb[1], c.slice(0, 4));
                  e.mma(qa, kb[2], kb[3], c.slice(4, 4));
                };
                const int64_t steps = qkDim / 16;
                SmallVector<Value> sets = e.forLoop(
                    e.index(0), e.index(steps / 2 * 32), 32,
                    SmallVector<Value>(16, fzero),
                    [&](Value k, ValueRange c) -> SmallVector<Value> {
                      SmallVector<Value> next(c.begin(), c.end());
                      MutableArrayRef<Value> all(next);
                      scoreStep(k, all.slice(0, 8));
                      scoreStep(e.add(k, e.index(16)), all.slice(8, 8));
                      return next;
                    });
                if (steps % 2)
                  scoreStep(e.index(qkDim - 16),
                            MutableArrayRef<Value>(sets).slice(0, 8));
                SmallVector<Value> acc;
                for (int64_t i = 0; i < 8; ++i)
                  acc.push_back(e.addf(sets[i], sets[8 + i]));

                // Masked scores (sFragment: column 8 nt + 2 quad + c is
                // token 16 w + 8 nt + 2 quad + c of the tile).
                softmax.mask(acc, e.add(tile, e.mul(warp, e.index(kWarpTokens))),
                             {laneRows[0].end, laneRows[1].end});
                // 3. Row maxima of the tile, across the warps.
                Value leader = e.eqIndex(quad, 0);
                SmallVector<Value> warpMax;
                for (int64_t i = 0; i < 2; ++i)
                  warpMax.push_back(softmax.rowMax(acc, i));
                Value slot = e.add(e.mul(warp, e.index(kTileRows)), group);
                e.ifThen(leader, [&] {
                  for (int64_t i = 0; i < 2; ++i)
                    memref::StoreOp::create(
                        b, l, warpMax[i], maxS,
                        ValueRange{e.add(slot, e.index(8 * i))});
                });
                e.barrier();
                SmallVector<Value> next(it.begin(), it.end());
                SmallVector<OnlineMax, 2> rowSteps;
                for (int64_t i = 0; i < 2; ++i) {
                  Value tileMax = negInf;
                  for (int64_t w = 0; w < kWarps; ++w)
                    tileMax = e.maxf(
                        tileMax, memref::LoadOp::create(
                                     b, l, maxS,
                                     ValueRange{e.add(
                                         group,
                                         e.index(w * kTileRows + 8 * i))}));
                  rowSteps.push_back(softmax.advance(it[i], tileMax));
                  next[i] = rowSteps.back().max;
                }
                // 4. P = exp2(c S - m), the lane's partial sums, O rescaled.
                SmallVector<Value> p(8), alpha;
                for (int64_t i = 0; i < 2; ++i) {
                  auto keepP = [&](int64_t, int64_t nt, Value p0, Value p1) {
                    p[sFragment.at(0, nt, i, 0)] = p0;
                    p[sFragment.at(0, nt, i, 1)] = p1;
                  };
                  next[2 + i] =
                      softmax.exponentiate(acc, i, rowSteps[i], it[2 + i], keepP);
                  alpha.push_back(rowSteps[i].alpha);
                }
                SmallVector<Value> scaledO = FragmentSoftmax::rescale(
                    e, it.drop_front(4), oFragment, alpha,
                    /*onlyIfMoved=*/false);
                std::copy(scaledO.begin(), scaledO.end(), next.begin() + 4);
                for (int64_t nt = 0; nt < 2; ++nt)
                  for (int64_t i = 0; i < 2; ++i) {
                    Value v = e.pack(p[4 * nt + 2 * i], p[4 * nt + 2 * i + 1]);
                    Value col =
                        e.add(e.mul(warp, e.index(kWarpTokens)),
                              e.add(e.index(8 * nt), e.mul(quad, e.index(2))));
                    vector::StoreOp::create(
                        b, l, v, pS,
                        ValueRange{e.add(group, e.index(8 * i)), col},
                        /*nontemporal=*/false, llvm::MaybeAlign(4));
                  }
                e.barrier();

                // 5. O += P V over the warp's columns.
                for (int64_t kk = 0; kk < kTileTokens / 16; ++kk) {
                  SmallVector<Value> pa = e.ldmatrix(
                      pS, {lane16, e.add(e.index(16 * kk), half)}, 4, false);
                  for (int64_t t = 0; t < warpNTiles; t += 2) {
                    SmallVector<Value> vb = e.ldmatrix(
                        kvS,
                        {e.add(vRow, e.index(16 * kk)),
                         e.add(warpCol0, e.add(e.index(8 * t), half))},
                        4, true);
                    e.mma(pa, vb[0], vb[1],
                          MutableArrayRef<Value>(next).slice(4 + 4 * t, 4));
                    e.mma(pa, vb[2], vb[3],
                          MutableArrayRef<Value>(next).slice(8 + 4 * t, 4));
                  }
                }
                // The next tile overwrites the KV and P tiles.
                e.barrier();
                return next;
              });
          // Copies still in flight when no tile ran (the Q tile).
          e.waitAllCopies();

          // Row sums across the warps.
          Value leader = e.eqIndex(quad, 0);
          SmallVector<Value> warpSum;
          for (int64_t i = 0; i < 2; ++i)
            warpSum.push_back(e.quadSum(state[2 + i]));
          Value slot = e.add(e.mul(warp, e.index(kTileRows)), group);
          e.ifThen(leader, [&] {
            for (int64_t i = 0; i < 2; ++i)
              memref::StoreOp::create(b, l, warpSum[i], sumS,
                                      ValueRange{e.add(slot, e.index(8 * i))});
          });
          e.barrier();
          Value writesLse = e.andi(leader, e.eqIndex(warp, 0));
          SmallVector<FragmentRowEnd, 2> ends;
          for (int64_t i = 0; i < 2; ++i) {
            Value sum = fzero;
            for (int64_t w = 0; w < kWarps; ++w)
              sum =
                  e.addf(sum, memref::LoadOp::create(
                                  b, l, sumS,
                                  ValueRange{e.add(
                                      group, e.index(w * kTileRows + 8 * i))}));
            ends.push_back(FragmentSoftmax::finishRow(e, state[i], sum));
          }
          // O / l staged as f32 rows in the Q and KV tiles (every warp is
          // past its last P V), once for either destination; then the
          // block copies the real rows out (copyStagedRows).
          const int64_t stagingStride = latent + kRowPad;
          Value staging =
              e.sharedView(raw, 0, {kTileRows, stagingStride}, b.getF32Type());
          for (int64_t i = 0; i < 2; ++i)
            e.stageFragmentRow(staging, laneRows[i].local, warpCol0, quad,
                               warpNTiles, [&](int64_t t, int64_t c) {
                                 return e.mulf(state[4 + 4 * t + 2 * i + c],
                                               ends[i].inverse);
                               });
          e.barrier();
          block.writeResults([&](const SplitResults &to) {
            for (int64_t i = 0; i < 2; ++i) {
              const DecodeSplitBlock::LaneRow &row = laneRows[i];
              e.ifThen(e.andi(row.real, writesLse), [&] {
                e.storeF32(ends[i].lse, to.lse,
                           to.lseIndex(row.query, row.head));
              });
            }
            e.copyStagedRows(
                staging, kTileRows, latent, e.threadId(), kWarps * kWarpSize,
                [&](Value r) { return block.laneRow(r).real; },
                [&](Value r) {
                  DecodeSplitBlock::LaneRow row = block.laneRow(r);
                  return to.rowIndex(row.query, row.head);
                },
                to.values);
          });
        });
      });
  launchDecodeSplit(op, host, kernel, splitArgs, splits, kTileRows,
                    layout.bytes);
}

} // namespace mla::gpu
