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

#include "Emitters/Fp8Dequant.h"
#include "Tiles/DecodeSplitBlock.h"
#include "Tiles/FragmentSoftmax.h"
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
/// 16-byte vectors of codes a thread holds in one round of the in-place
/// dequantization (40 registers): two rounds cover a 576-wide tile.
constexpr int64_t kCodeVectorsPerThread = 10;

/// The thread's lane and warp, and its place in the mma fragments: group
/// lane / 4 (the rows it holds) and quad lane % 4 (their columns).
struct WarpLane {
  explicit WarpLane(MmaEmitter &e) {
    Value tid = e.threadId();
    lane = e.remui(tid, kWarpSize);
    warp = e.divui(tid, kWarpSize);
    group = e.divui(lane, 4);
    quad = e.remui(lane, 4);
  }
  Value lane, warp, group, quad;
};

/// The kernel of a split the request uses (inside DecodeSplitBlock::run),
/// one method a step of the file comment. The constructor views the shared
/// memory, finds the lane's rows and its ldmatrix addresses and starts the
/// Q tile's copy.
class SplitBody {
public:
  SplitBody(MmaEmitter &e, DecodeSplitBlock &block, DecodeAttentionOp op,
            const SharedLayout &layout, const WarpLane &thread)
      : e(e), b(e.builder()), l(e.location()), block(block), layout(layout),
        thread(thread), latent(op.getKvLoraRank()),
        qkDim(latent + op.getRopeDim()), vectorsPerRow(qkDim / kCopyElems),
        warpColumns(latent / kWarps), warpNTiles(warpColumns / 8),
        // Scores in base 2: exp(x * scale) = exp2(x * scale * log2(e)).
        scaleLog2(op.getSoftmaxScale().convertToDouble() * M_LOG2E),
        sFragment{1, kWarpTokens / 8}, oFragment{1, warpNTiles} {
    viewSharedMemory();
    // The lane's two rows: group and group + 8 of the tile.
    for (int64_t i = 0; i < 2; ++i)
      laneRows.push_back(block.laneRow(e.add(thread.group, e.index(8 * i))));
    copyQ();
    ldmatrixLanes();
    negInf = e.negInf();
    fzero = e.f32(0.0);
    scoreScale = block.scoresScale(scaleLog2);
  }

  /// The loop over the split's KV tiles; returns the lane's state: its two
  /// rows' maxima (base 2) and partial sums, then O in oFragment's order.
  SmallVector<Value> walkTiles();
  /// out = O / l and lse, to the split partials or the final outputs.
  void writeResults(ArrayRef<Value> state);

private:
  MmaEmitter &e;
  OpBuilder &b;
  Location l;
  DecodeSplitBlock &block;
  const SharedLayout &layout;
  const WarpLane &thread;
  const int64_t latent, qkDim, vectorsPerRow;
  const int64_t warpColumns; ///< O columns of a warp
  const int64_t warpNTiles;  ///< its n8 tiles
  const double scaleLog2;
  /// The warp's 16 x 16 scores and its 16 x Lkv/4 of O.
  const AccumulatorFragment sFragment, oFragment;
  Value raw, qS, kvS, pS, maxS, sumS;
  /// Over an FP8 cache: the codes as a tile and flat, the KV tile flat.
  Value codesS, codesFlat, kvFlat;
  SmallVector<DecodeSplitBlock::LaneRow, 2> laneRows;
  Value lane16, half, odd, kRow, vRow, warpCol0;
  Value negInf, fzero;
  /// DecodeSplitBlock::scoresScale.
  Value scoreScale;

  /// Views of the shared memory: the Q, KV and P tiles and the warps' row
  /// maxima and sums.
  void viewSharedMemory() {
    raw = e.dynamicShared();
    qS = e.sharedView(raw, layout.q, {kTileRows, layout.rowStride}, e.element);
    kvS = e.sharedView(raw, layout.kv, {kTileTokens, layout.rowStride},
                       e.element);
    pS = e.sharedView(raw, layout.p, {kTileRows, layout.pStride}, e.element);
    maxS = e.sharedView(raw, layout.max, {kWarps * kTileRows}, b.getF32Type());
    sumS = e.sharedView(raw, layout.sum, {kWarps * kTileRows}, b.getF32Type());
    if (block.kvScale) {
      Type code = cast<MemRefType>(block.cache.getType()).getElementType();
      codesS = e.sharedView(raw, layout.codes, {kTileTokens, layout.rowStride},
                            code);
      codesFlat = e.sharedView(raw, layout.codes,
                               {kTileTokens * layout.rowStride}, code);
      kvFlat = e.sharedView(raw, layout.kv, {kTileTokens * layout.rowStride},
                            e.element);
    }
  }
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
  /// The online softmax of the warp's scores.
  FragmentSoftmax softmaxOf() const {
    return FragmentSoftmax(e, sFragment, scoreScale, thread.quad);
  }

  /// One KV tile starting at token `tile`: steps 1 to 5 of the file
  /// comment, from the state `it` to the one returned.
  SmallVector<Value> kvTile(Value tile, ValueRange it);
  /// 1. The KV tile, copied by the block and waited for; a barrier. An
  /// FP8 cache's codes land in the tile's second half and are dequantized
  /// in place (dequantizeInPlace).
  void copyKv(Value tile) {
    auto source = [&](Value row) { return block.cacheRow(tile, row); };
    if (block.kvScale) {
      e.copyTile(block.aligned, codesS, block.cache, kTileTokens,
                 vectorsPerRow, thread.warp, thread.lane, source);
      e.waitAllCopies();
      e.barrier();
      dequantizeInPlace();
      return;
    }
    e.copyTile(block.aligned, kvS, block.cache, kTileTokens, vectorsPerRow,
               thread.warp, thread.lane, source);
    e.waitAllCopies();
    e.barrier();
  }
  /// The KV tile's codes, one byte an element at the element's index from
  /// the tile's middle byte (SharedLayout::codes), dequantized into the
  /// tile itself, 16 elements a thread at a time in ascending order: the
  /// bytes element i takes, [2i, 2i + 2), hold the codes of elements below
  /// i, so a round that reads all its codes before a barrier and writes
  /// after it overwrites only codes read already. Two rounds, each of at
  /// most kCodeVectorsPerThread 16-byte vectors a thread; a barrier after
  /// the last (the padding columns' codes were never written: they become
  /// padding values, never read).
  void dequantizeInPlace() {
    constexpr int64_t kChunk = 16;
    const int64_t vectors = kTileTokens * layout.rowStride / kChunk;
    const int64_t threads = kWarps * kWarpSize;
    const int64_t perRound = threads * kCodeVectorsPerThread;
    Type code = cast<MemRefType>(codesFlat.getType()).getElementType();
    for (int64_t first = 0; first < vectors; first += perRound) {
      SmallVector<std::pair<Value, Value>> loaded; // (vector, in range)
      for (int64_t k = 0; k < kCodeVectorsPerThread; ++k) {
        int64_t v0 = first + k * threads;
        if (v0 >= vectors)
          break;
        Value v = e.add(e.threadId(), e.index(v0));
        Value inRange = v0 + threads <= vectors
                            ? Value()
                            : e.lessThan(v, e.index(vectors));
        Value at = e.mul(inRange ? e.minIndex(v, e.index(vectors - 1)) : v,
                         e.index(kChunk));
        loaded.push_back(
            {vector::LoadOp::create(b, l, VectorType::get({kChunk}, code),
                                    codesFlat, ValueRange{at}),
             inRange});
      }
      e.barrier();
      for (auto [k, entry] : llvm::enumerate(loaded)) {
        Value v = e.add(e.threadId(), e.index(first + int64_t(k) * threads));
        auto store = [&, entry = entry] {
          Value values = dequantizeFp8(b, l, entry.first, e.element);
          vector::StoreOp::create(b, l, values, kvFlat,
                                  ValueRange{e.mul(v, e.index(kChunk))},
                                  /*nontemporal=*/false, llvm::MaybeAlign(16));
        };
        if (entry.second)
          e.ifThen(entry.second, store);
        else
          store();
      }
    }
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
  /// 3. The lane rows' running maxima `it` advanced by the tile's row
  /// maxima across the warps.
  SmallVector<OnlineMax, 2> advanceMaxima(const FragmentSoftmax &softmax,
                                          ArrayRef<Value> s, ValueRange it);
  /// 4. P = exp2(c S - m) of the lane's rows: returned in sFragment's
  /// order, with their partial sums continued from `it` and O rescaled into
  /// `next`.
  SmallVector<Value> exponentials(const FragmentSoftmax &softmax,
                                  ArrayRef<Value> s, ArrayRef<OnlineMax> rows,
                                  ValueRange it, MutableArrayRef<Value> next);
  /// P to shared memory in the input type, the warp's 16 token columns;
  /// a barrier.
  void storeP(ArrayRef<Value> p);
  /// 5. O += P V over the warp's columns (`o` in oFragment's order).
  void addPv(MutableArrayRef<Value> o);

  /// The lane rows' values `perRow` to this warp's slot of `buffer` (f32
  /// [warp * 16 + row]), stored by the quads' leaders (`leader`); a
  /// barrier.
  void publishRows(Value leader, Value buffer, ArrayRef<Value> perRow) {
    Value slot = e.add(e.mul(thread.warp, e.index(kTileRows)), thread.group);
    e.ifThen(leader, [&] {
      for (int64_t i = 0; i < 2; ++i)
        memref::StoreOp::create(b, l, perRow[i], buffer,
                                ValueRange{e.add(slot, e.index(8 * i))});
    });
    e.barrier();
  }
  /// Warp `w`'s value of lane row `i` in `buffer` (see publishRows).
  Value warpValue(Value buffer, int64_t w, int64_t i) {
    return memref::LoadOp::create(
        b, l, buffer,
        ValueRange{e.add(thread.group, e.index(w * kTileRows + 8 * i))});
  }
  /// O / l staged as f32 rows over the Q and KV tiles, for the block's
  /// copy; returns the staging view.
  Value stageOutput(ArrayRef<Value> state, ArrayRef<FragmentRowEnd> ends);
};

SmallVector<Value> SplitBody::walkTiles() {
  SmallVector<Value> init{negInf, negInf, fzero, fzero};
  init.append(warpNTiles * 4, fzero);
  return e.forLoop(block.first, block.kvEnd, e.index(kTileTokens), init,
                   [&](Value tile, ValueRange it) -> SmallVector<Value> {
                     return kvTile(tile, it);
                   });
}

SmallVector<Value> SplitBody::kvTile(Value tile, ValueRange it) {
  copyKv(tile);
  SmallVector<Value> s = scores();
  // Masked scores (sFragment: column 8 nt + 2 quad + c is token 16 w + 8 nt
  // + 2 quad + c of the tile).
  FragmentSoftmax softmax = softmaxOf();
  softmax.mask(s, e.add(tile, e.mul(thread.warp, e.index(kWarpTokens))),
               {laneRows[0].end, laneRows[1].end});
  SmallVector<OnlineMax, 2> rows = advanceMaxima(softmax, s, it);
  SmallVector<Value> next(it.begin(), it.end());
  for (int64_t i = 0; i < 2; ++i)
    next[i] = rows[i].max;
  SmallVector<Value> p = exponentials(softmax, s, rows, it, next);
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

SmallVector<OnlineMax, 2>
SplitBody::advanceMaxima(const FragmentSoftmax &softmax, ArrayRef<Value> s,
                         ValueRange it) {
  // Row maxima over the quads, then across the warps through shared
  // memory.
  Value leader = e.eqIndex(thread.quad, 0);
  SmallVector<Value> warpMax;
  for (int64_t i = 0; i < 2; ++i)
    warpMax.push_back(softmax.rowMax(s, i));
  publishRows(leader, maxS, warpMax);
  SmallVector<OnlineMax, 2> rows;
  for (int64_t i = 0; i < 2; ++i) {
    Value tileMax = negInf;
    for (int64_t w = 0; w < kWarps; ++w)
      tileMax = e.maxf(tileMax, warpValue(maxS, w, i));
    rows.push_back(softmax.advance(it[i], tileMax));
  }
  return rows;
}

SmallVector<Value> SplitBody::exponentials(const FragmentSoftmax &softmax,
                                           ArrayRef<Value> s,
                                           ArrayRef<OnlineMax> rows,
                                           ValueRange it,
                                           MutableArrayRef<Value> next) {
  SmallVector<Value> p(8), alpha;
  for (int64_t i = 0; i < 2; ++i) {
    auto keepP = [&](int64_t, int64_t nt, Value p0, Value p1) {
      p[sFragment.at(0, nt, i, 0)] = p0;
      p[sFragment.at(0, nt, i, 1)] = p1;
    };
    next[2 + i] = softmax.exponentiate(s, i, rows[i], it[2 + i], keepP);
    alpha.push_back(rows[i].alpha);
  }
  SmallVector<Value> scaledO = FragmentSoftmax::rescale(
      e, it.drop_front(4), oFragment, alpha, /*onlyIfMoved=*/false);
  std::copy(scaledO.begin(), scaledO.end(), next.begin() + 4);
  return p;
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

void SplitBody::writeResults(ArrayRef<Value> state) {
  // Row sums across the warps.
  Value leader = e.eqIndex(thread.quad, 0);
  SmallVector<Value> warpSum;
  for (int64_t i = 0; i < 2; ++i)
    warpSum.push_back(e.quadSum(state[2 + i]));
  publishRows(leader, sumS, warpSum);
  Value writesLse = e.andi(leader, e.eqIndex(thread.warp, 0));
  SmallVector<FragmentRowEnd, 2> ends;
  for (int64_t i = 0; i < 2; ++i) {
    Value sum = fzero;
    for (int64_t w = 0; w < kWarps; ++w)
      sum = e.addf(sum, warpValue(sumS, w, i));
    ends.push_back(FragmentSoftmax::finishRow(e, state[i], sum));
    block.scaleOutput(ends.back());
  }
  Value staging = stageOutput(state, ends);
  block.writeStagedRows(laneRows, ends, writesLse, staging, latent, e.threadId(),
                        kWarps * kWarpSize);
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
          SplitBody body(e, block, op, layout, thread);
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
