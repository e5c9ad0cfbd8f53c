//===- MmaDecodeRows.cpp - The online softmax of the mma.sync decodes -----===//

#include "MmaSync/MmaDecodeRows.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;

namespace mla::gpu {

using mma_decode::kTileRows;
using mma_decode::kTileTokens;
using mma_decode::kWarps;
static_assert(kBlockWarps == kWarps,
              "the shared layout counts one row-statistics slot per warp");
constexpr int64_t kWarpTokens = kTileTokens / kWarps;

WarpLane::WarpLane(MmaEmitter &e) {
  Value tid = e.threadId();
  lane = e.remui(tid, kWarpSize);
  warp = e.divui(tid, kWarpSize);
  group = e.divui(lane, 4);
  quad = e.remui(lane, 4);
}

MmaDecodeRows::MmaDecodeRows(MmaEmitter &e, DecodeSplitBlock &block,
                             const WarpLane &thread, int64_t latent, Value raw,
                             int64_t maxAt, int64_t sumAt, double scaleLog2)
    : sFragment{1, kWarpTokens / 8}, oFragment{1, latent / kWarps / 8},
      warpColumns(latent / kWarps), latent(latent), e(e), block(block),
      thread(thread) {
  Type f32 = e.builder().getF32Type();
  maxS = e.sharedView(raw, maxAt, {kWarps * kTileRows}, f32);
  sumS = e.sharedView(raw, sumAt, {kWarps * kTileRows}, f32);
  scoreScale = block.scoresScale(scaleLog2);
  for (int64_t i = 0; i < 2; ++i)
    laneRows.push_back(block.laneRow(e.add(thread.group, e.index(8 * i))));
  negInf = e.negInf();
  fzero = e.f32(0.0);
}

SmallVector<Value> MmaDecodeRows::walkTiles() {
  SmallVector<Value> init{negInf, negInf, fzero, fzero};
  init.append(oFragment.size(), fzero);
  return e.forLoop(block.first, block.kvEnd, e.index(kTileTokens), init,
                   [&](Value tile, ValueRange it) -> SmallVector<Value> {
                     return kvTile(tile, it);
                   });
}

void MmaDecodeRows::writeResults(ArrayRef<Value> state) {
  SmallVector<FragmentRowEnd, 2> ends = finishRows(state);
  Value staging = stageOutput(state, ends);
  // The rows' LSE from the quad leaders of warp 0.
  Value writesLse =
      e.andi(e.eqIndex(thread.quad, 0), e.eqIndex(thread.warp, 0));
  block.writeStagedRows(laneRows, ends, writesLse, staging, latent,
                        e.threadId(), kWarps * kWarpSize);
}

SmallVector<Value> MmaDecodeRows::softmaxStep(Value warpToken0,
                                              MutableArrayRef<Value> s,
                                              ValueRange it,
                                              MutableArrayRef<Value> next) {
  FragmentSoftmax softmax(e, sFragment, scoreScale, thread.quad);
  softmax.mask(s, warpToken0, {laneRows[0].end, laneRows[1].end});
  // The tile's row maxima: over the quads, then across the warps through
  // shared memory.
  SmallVector<Value> warpMax;
  for (int64_t i = 0; i < 2; ++i)
    warpMax.push_back(softmax.rowMax(s, i));
  publishRows(maxS, warpMax);
  SmallVector<Value> p(sFragment.size()), alpha;
  for (int64_t i = 0; i < 2; ++i) {
    Value tileMax = negInf;
    for (int64_t w = 0; w < kWarps; ++w)
      tileMax = e.maxf(tileMax, warpValue(maxS, w, i));
    OnlineMax row = softmax.advance(it[i], tileMax);
    next[i] = row.max;
    auto keepP = [&](int64_t, int64_t nt, Value p0, Value p1) {
      p[sFragment.at(0, nt, i, 0)] = p0;
      p[sFragment.at(0, nt, i, 1)] = p1;
    };
    next[2 + i] = softmax.exponentiate(s, i, row, it[2 + i], keepP);
    alpha.push_back(row.alpha);
  }
  SmallVector<Value> scaledO = FragmentSoftmax::rescale(
      e, it.drop_front(4), oFragment, alpha, /*onlyIfMoved=*/false);
  std::copy(scaledO.begin(), scaledO.end(), next.begin() + 4);
  return p;
}

SmallVector<FragmentRowEnd, 2>
MmaDecodeRows::finishRows(ArrayRef<Value> state) {
  SmallVector<Value> warpSum;
  for (int64_t i = 0; i < 2; ++i)
    warpSum.push_back(e.quadSum(state[2 + i]));
  publishRows(sumS, warpSum);
  SmallVector<FragmentRowEnd, 2> ends;
  for (int64_t i = 0; i < 2; ++i) {
    Value sum = fzero;
    for (int64_t w = 0; w < kWarps; ++w)
      sum = e.addf(sum, warpValue(sumS, w, i));
    ends.push_back(FragmentSoftmax::finishRow(e, state[i], sum));
    block.scaleOutput(ends.back());
  }
  return ends;
}

void MmaDecodeRows::publishRows(Value buffer, ArrayRef<Value> perRow) {
  Value slot = e.add(e.mul(thread.warp, e.index(kTileRows)), thread.group);
  e.ifThen(e.eqIndex(thread.quad, 0), [&] {
    for (int64_t i = 0; i < 2; ++i)
      memref::StoreOp::create(e.builder(), e.location(), perRow[i], buffer,
                              ValueRange{e.add(slot, e.index(8 * i))});
  });
  e.barrier();
}

Value MmaDecodeRows::warpValue(Value buffer, int64_t w, int64_t i) {
  return memref::LoadOp::create(
      e.builder(), e.location(), buffer,
      ValueRange{e.add(thread.group, e.index(w * kTileRows + 8 * i))});
}

} // namespace mla::gpu
