//===- GpuPrefillWgmma.cpp - Hopper prefill attention (wgmma) -------------===//
//
// The `wgmma` strategy's kernel for mla.prefill_attention (sm_90a) with
// bf16 or f16 q, k, v and out and head dims in whole 64-column blocks
// (DeepSeek's qk 192 / v 128 among them). A block computes a 128-row tile
// of one sequence's queries for one head (PrefillTileBlock.h) with two
// consumer warpgroups, warpgroup g owning rows [64 g, 64 g + 64), which
// walk the sequence's keys in 128-key tiles both share (FlashAttention-3's
// tile for these head dims), and a producer warpgroup that only copies
// (384 threads, warp-specialized):
//  - the producer copies Q, then each tile's K (128 x Dqk) and V (128 x
//    Dv) with 16-byte cp.async into rings of their own, two K stages and
//    two V stages (one V stage for qk 256), each tile announced on its
//    stage's "landed" mbarrier (cp.async.mbarrier.arrive); it refills a
//    stage once every consumer thread has arrived at its "read" mbarrier.
//    K and V have separate rings because a K tile is done an iteration
//    before its V. setmaxnreg gives the producer 40 registers and the
//    consumers 232. The consumers neither copy nor wait at a block
//    barrier, so they run out of step: causal blocks, whose second
//    warpgroup sees more keys, got 6 to 8% faster than with both
//    warpgroups copying in step (benchmarks.md). Keys past the block's
//    last visible key are zero-filled, tiles past it never loaded;
//  - S = Q K^T: Dqk / 16 wgmma m64n128k16 per warpgroup, Q and K read from
//    shared memory through descriptors (both K-major);
//  - online softmax in base 2: a row lives in one warp's quad, so its max
//    and sum need quad shuffles only, never another warpgroup; the scale
//    is folded into the exponent (p = exp2(s c - m), c > 0), and O is
//    rescaled only when some row max of the warp moved;
//  - O += P V: 8 wgmma m64n(Dv)k16 with P in registers (its accumulator
//    layout is wgmma's A register layout: rounded to bf16/f16 pairs, no
//    value moves; InlinePtx.h, MLIR 22's NVVM wgmma taking A from shared
//    memory only), V read N-major straight from its tile; no shared P
//    tile, no barrier between the softmax and the product; O (64 x Dv
//    f32) stays in registers;
//  - the schedule (FlashAttention-3's intra-warpgroup overlap): iteration
//    t issues tile t's scores, then tile t - 1's P V (O still at tile
//    t - 1's row max), waits for the scores alone, releases tile t's K,
//    runs tile t's softmax under the P V, waits for it, releases tile
//    t - 1's V and rescales O to tile t's max. Tile 0 commits an empty
//    group in place of a P V, so that one wait count fits every
//    iteration; the last tile's P V follows the loop. Nothing is in
//    flight across the loop's back edge (ptxas would serialize every
//    wgmma, C7514). (Tile 0 peeled out of the loop ran as fast and
//    doubled the softmax's code: lowering 60 to 80% and ptxas about 20%
//    slower.)
//    The live registers of a consumer thread: O (Dv / 2),
//    the scores (64), P of the previous tile in flight and of this one
//    (32 each). Measured on an H200 against 64-key tiles with the next
//    tile's scores and the previous P V in flight during the softmax:
//    10 to 13% faster (benchmarks.md).
// Causal masking (bottom-right aligned) is applied on the tiles that cross
// a warpgroup's diagonal (or the end of the keys) only; past a
// warpgroup's last visible key every score is masked (P = 0), the other
// warpgroup, 64 rows later, still needing the tile.

// Shared memory (mla/Target/WgmmaSwizzle.h layout, from the first
// 1024-byte boundary): Q as two 64-row tiles, the K ring, the V ring,
// the mbarriers. Rows past a sequence's
// queries are padding (zero queries, never written). A row that sees no key
// gets out = 0 and lse = -inf. Where q, k or v is not 16-byte aligned the
// launch takes the generic kernel instead (KernelDispatch checks on
// the host), so the tiles are copied in 16-byte vectors only.
//
//===----------------------------------------------------------------------===//

#include "Tiles/FragmentSoftmax.h"
#include "Tiles/PrefillTileBlock.h"
#include "Emitters/WgmmaEmitter.h"
#include "mla/Target/WgmmaPrefillShape.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

#include <cmath>

using namespace mlir;

namespace mla::gpu {

namespace {
using namespace wgmma;
using namespace wgmma_prefill;
/// Bytes of one 64-column block of a warpgroup's Q tile and of a K or V
/// tile: rows of 128 bytes.
constexpr int64_t kQBlockBytes = kGroupRows * kRowBytes;
constexpr int64_t kKeyBlockBytes = kTileKeys * kRowBytes;

/// A ring of tiles in shared memory with two mbarriers a stage: "landed"
/// (the producer's 128 threads' copies of a tile) and "read" (every
/// consumer thread past the tile). Tile t goes to stage t % stages as its
/// use t / stages; each use completes one phase of both (but the last V
/// tile's "read", which no copy waits for and the consumers skip).
struct Ring {
  int64_t stages, area, stageBytes, firstBarrier;
};
} // namespace

bool useWgmmaPrefill(PrefillAttentionOp op, const GpuTarget &target) {
  return target.strategy == KernelStrategy::Warpgroup &&
         hasTensorCoreOperands(op) &&
         takesDims(op.getQkHeadDim(), op.getVHeadDim(),
                   target.maxSharedBytesPerBlock());
}

namespace {

/// The lane's two rows of its warpgroup's tile (16 w + g and + 8): their
/// row in the tile of the warpgroup, in the block's tile and the keys each
/// sees.
struct LaneRows {
  SmallVector<Value, 2> local, ofBlock, end;
};

/// One block of the wgmma prefill (see the file comment): the shared
/// memory, the producer's copies, the consumers' tile steps and results.
/// Values are created in the order the steps run, as the kernel's code.
class WgmmaPrefillBlock {
public:
  WgmmaPrefillBlock(WgmmaEmitter &e, PrefillTileBlock &block,
                    PrefillAttentionOp op, const SharedLayout &layout,
                    const WgmmaEmitter::WarpgroupThread &thread, Value zero,
                    Value one);

  /// The mbarriers, initialized before any copy or wait; then the third
  /// warpgroup produces, the first two consume.
  void run();

private:
  WgmmaEmitter &e;
  OpBuilder &b;
  Location l;
  PrefillTileBlock &block;
  const SharedLayout &layout;
  const WgmmaEmitter::WarpgroupThread &thread;
  const int64_t qkDim, vDim, sRegs, oRegs, qTileBytes;
  const Ring kRing, vRing;
  const bool accumulate;
  const AccumulatorFragment sFragment, oFragment;
  const FragmentSoftmax softmax;
  const Value zero, one;
  Value raw, pad, base, tiles, blockKeys, groupRow0, unmaskedEnd,
      numTiles, producerWarp, qLanded, descQ;
  // q, k and v are 16-byte aligned (checked before the launch): the tiles
  // are copied in 16-byte vectors only.
  const Value aligned = {};

  /// The producer's mbarriers: the rings' (see Ring), then Q's landed.
  Value barrierAt(Value slot) {
    return e.add(base,
                 e.add(e.index(layout.barriers), e.mul(slot, e.index(8))));
  }
  Value landed(const Ring &ring, Value t) {
    return barrierAt(
        e.add(e.index(ring.firstBarrier), e.remui(t, ring.stages)));
  }
  Value read(const Ring &ring, Value t) {
    return barrierAt(e.add(e.index(ring.firstBarrier + ring.stages),
                           e.remui(t, ring.stages)));
  }
  /// Tile t of `ring` landed, and made visible to wgmma.
  void waitLanded(const Ring &ring, Value t) {
    e.waitBarrierPhase(landed(ring, t),
                       e.phaseParity(e.divui(t, ring.stages)));
    e.sharedProxyFence();
  }
  /// The producer, before copying tile t into `ring`: the consumers have
  /// released the stage's previous tile. Use u of a stage waits for the
  /// release of use u - 1: phase u - 1, whose parity is u + 1's.
  void waitReleased(const Ring &ring, Value t) {
    e.ifThen(e.lessThan(e.index(ring.stages - 1), t), [&] {
      e.waitBarrierPhase(
          read(ring, t), e.phaseParity(e.add(e.divui(t, ring.stages), one)));
    });
  }
  /// Byte offset of tile t's stage in `ring`.
  Value tileAt(const Ring &ring, Value t) {
    return e.add(e.index(ring.area),
                 e.mul(e.remui(t, ring.stages), e.index(ring.stageBytes)));
  }
  /// The consumers' own named barrier (the producer takes no part).
  void consumersBarrier() {
    e.namedBarrier(1 + kWarpgroups, kThreads, /*wait=*/true);
  }
  /// Element offset of (row, col) of the block's Q, two swizzled 64-row
  /// tiles (one a warpgroup).
  SmallVector<Value, 2> qAt(Value row, Value col) {
    Value tile = e.divui(row, kGroupRows);
    return {e.add(e.mul(tile, e.index(qTileBytes / 2)),
                  e.swizzled(e.remui(row, kGroupRows), col, kGroupRows))};
  }

  void copyTile(Value src, int64_t dim, const Ring &ring, Value t);
  void produce();
  Value issueScores(Value t);
  LaneRows laneRows();
  /// A tile's softmax: the rows' new maxima and sums (4 values), their
  /// alpha, and P as wgmma A registers.
  struct TileSoftmax {
    SmallVector<Value> rowState;
    SmallVector<Value, 2> alpha;
    SmallVector<Value> p;
  };
  TileSoftmax tileSoftmax(Value t, SmallVector<Value> s, ValueRange state,
                          const LaneRows &rows);
  SmallVector<Value> tileStep(Value t, ValueRange it, const LaneRows &rows);
  Value issueValues(Value t, Value o, mlir::ValueRange p);
  void consume();
  void writeResults(ArrayRef<Value> state, const LaneRows &rows);
};

WgmmaPrefillBlock::WgmmaPrefillBlock(WgmmaEmitter &e, PrefillTileBlock &block,
                                     PrefillAttentionOp op,
                                     const SharedLayout &layout,
                                     const WgmmaEmitter::WarpgroupThread &thread,
                                     Value zero, Value one)
    : e(e), b(e.builder()), l(e.location()), block(block), layout(layout),
      thread(thread), qkDim(op.getQkHeadDim()), vDim(op.getVHeadDim()),
      sRegs(kGroupRows * kTileKeys / 128), oRegs(kGroupRows * vDim / 128),
      qTileBytes(kGroupRows * qkDim * 2),
      kRing{layout.kStages, layout.k, layout.kStage, 0},
      vRing{layout.vStages, layout.v, layout.vStage, 2 * layout.kStages},
      accumulate(op.getAccumulate()),
      // A warpgroup's 64 x 128 scores and 64 x Dv output, per warp.
      sFragment{1, kTileKeys / 8}, oFragment{1, vDim / 8},
      // Scores in base 2: exp(x * scale) = exp2(x * scale * log2(e)).
      softmax(e, sFragment,
              op.getSoftmaxScale().convertToDouble() * M_LOG2E, thread.quad),
      zero(zero), one(one) {
  raw = e.dynamicShared();
  WgmmaEmitter::AlignedShared aligned1k = e.alignedShared(raw);
  pad = aligned1k.offset;
  base = aligned1k.address;
  tiles = e.sharedView(raw, pad, {(layout.bytes - kAtomBytes) / 2},
                       e.element);
  // Keys the block loads (its last row's) and the keys all rows of the
  // warpgroup see (tiles below need no mask).
  blockKeys = block.keyRange(zero, kBlockRows).first;
  groupRow0 = e.mul(thread.group, e.index(kGroupRows));
  Value groupShared = block.keyRange(groupRow0, kGroupRows).second;
  unmaskedEnd = e.mul(e.divui(groupShared, kTileKeys), e.index(kTileKeys));
  numTiles = e.ceilDiv(blockKeys, kTileKeys);
  // The producer's warps copy: warp w of the block is its w - 8.
  producerWarp = e.sub(thread.warp, e.index(kThreads / kWarpSize));
  qLanded = barrierAt(e.index(2 * (kRing.stages + vRing.stages)));
  descQ = e.descriptor(
      e.add(base,
            e.add(e.index(layout.q), e.mul(thread.group, e.index(qTileBytes)))),
      16, kAtomBytes);
}

/// The producer's copy of the rows of tile t (keys from 128 t) of `src`
/// (k or v, `dim` wide) into its stage of `ring`, 64 rows at a time (a
/// loop, not unrolled: the copies of all 128 rows at once would need more
/// than the producer's 40 registers for their addresses).
void WgmmaPrefillBlock::copyTile(Value src, int64_t dim, const Ring &ring,
                                 Value t) {
  const int64_t producerWarps = kProducerThreads / kWarpSize;
  const int64_t rowsAtOnce = 64;
  Value tileBase = e.divui(tileAt(ring, t), 2);
  e.forLoop(zero, e.index(kTileKeys), rowsAtOnce, [&](Value row0) {
    Value first = e.add(e.mul(t, e.index(kTileKeys)), row0);
    e.copyTile(
        aligned, tiles, src, rowsAtOnce, dim / kCopyElems, producerWarp,
        thread.lane,
        [&](Value row) { return block.keyRow(e.add(first, row), blockKeys); },
        producerWarps, [&](Value row, Value col) {
          return SmallVector<Value, 2>{e.add(
              tileBase, e.swizzled(e.add(row0, row), col, kTileKeys))};
        });
  });
}

/// The producer: Q, then the tiles' K and V, each into its ring's stage
/// once the consumers have released the stage's previous tile. With fewer
/// V stages than K stages (one, at qk 256), K runs one tile ahead of V (K
/// 0; then K t + 1 before V t): a V stage is released an iteration after
/// its K stage, and copying V t first would hold K t + 1 back until
/// iteration t had ended. (With two of each, K t then V t measured 0.3 to
/// 1% faster non-causal on an H100, K ahead as much faster causal.)
void WgmmaPrefillBlock::produce() {
  const int64_t producerWarps = kProducerThreads / kWarpSize;
  const int64_t keysAhead = vRing.stages < kRing.stages ? 1 : 0;
  e.copyTile(
      aligned, tiles, block.q, kBlockRows, qkDim / kCopyElems, producerWarp,
      thread.lane, [&](Value row) { return block.queryRow(row); },
      producerWarps, [&](Value row, Value col) { return qAt(row, col); });
  e.arriveWhenCopiesLand(qLanded);
  auto copyKeys = [&](Value t) {
    waitReleased(kRing, t);
    copyTile(block.k, qkDim, kRing, t);
    e.arriveWhenCopiesLand(landed(kRing, t));
  };
  auto copyKeysIfAny = [&](Value t) {
    e.ifThen(e.lessThan(t, numTiles), [&] { copyKeys(t); });
  };
  for (int64_t t = 0; t < keysAhead; ++t)
    copyKeysIfAny(e.index(t));
  e.forLoop(zero, numTiles, 1, [&](Value t) {
    if (keysAhead)
      copyKeysIfAny(e.add(t, e.index(keysAhead)));
    else
      copyKeys(t);
    waitReleased(vRing, t);
    copyTile(block.v, vDim, vRing, t);
    e.arriveWhenCopiesLand(landed(vRing, t));
  });
  // No thread leaves with its copies in flight.
  e.waitAllCopies();
}

/// Issues S = Q K^T of tile t (the first k-step overwrites the
/// accumulator); returns it, in flight until the next wait. A k-step moves
/// 32 bytes inside a column block, a column block 8 KiB in Q's 64-row
/// tile and 16 KiB in K's 128-row one.
Value WgmmaPrefillBlock::issueScores(Value t) {
  Value descK = e.descriptor(e.add(base, tileAt(kRing, t)), 16, kAtomBytes);
  Value acc = e.unsetAccumulator(sRegs);
  e.fence();
  for (int64_t k = 0; k < qkDim / 16; ++k) {
    int64_t inBlock = (k % 4) * 32;
    acc = e.mma(acc, e.advance(descQ, (k / 4) * kQBlockBytes + inBlock),
                e.advance(descK, (k / 4) * kKeyBlockBytes + inBlock),
                kTileKeys, k > 0, false);
  }
  e.commit();
  return acc;
}

LaneRows WgmmaPrefillBlock::laneRows() {
  LaneRows rows;
  for (int64_t i = 0; i < 2; ++i) {
    rows.local.push_back(e.add(e.mul(thread.groupWarp, e.index(16)),
                               e.add(thread.laneGroup, e.index(8 * i))));
    rows.ofBlock.push_back(
        e.add(block.row0, e.add(groupRow0, rows.local[i])));
    rows.end.push_back(block.keysOf(rows.ofBlock[i]));
  }
  return rows;
}

/// Tile t's softmax: its scores `s` masked where the tile crosses the
/// warpgroup's diagonal or the end of the keys (past its last visible key
/// every score is masked: P = 0), then the online softmax from the rows'
/// maxima and sums `state` (4 values). P stays in the lane's registers, as
/// wgmma A registers in the scores' accumulator order.
WgmmaPrefillBlock::TileSoftmax
WgmmaPrefillBlock::tileSoftmax(Value t, SmallVector<Value> s,
                               ValueRange state, const LaneRows &rows) {
  Value first = e.mul(t, e.index(kTileKeys));
  softmax.maskWhere(e.lessThan(unmaskedEnd, e.add(first, one)), s, first,
                    rows.end);
  TileSoftmax out{SmallVector<Value>(state.begin(), state.end()), {},
                  SmallVector<Value>(sRegs / 2)};
  for (int64_t i = 0; i < 2; ++i) {
    auto keepP = [&](int64_t m, int64_t j, Value p0, Value p1) {
      out.p[sFragment.at(m, j, i, 0) / 2] = e.packRegister(p0, p1);
    };
    FragmentSoftmax::RowStep row =
        softmax.step(s, i, state[i], state[2 + i], keepP);
    out.rowState[i] = row.max;
    out.rowState[2 + i] = row.sum;
    out.alpha.push_back(row.alpha);
  }
  return out;
}

/// Tile t of the consumers' loop. `it`: the lane rows' maxima (base 2),
/// their partial sums (the lane's columns), O (accumulator order, at tile
/// t - 1's row max, without tile t - 1's P V yet), then tile t - 1's P as
/// wgmma A registers; returns the same for tile t + 1.
SmallVector<Value> WgmmaPrefillBlock::tileStep(Value t, ValueRange it,
                                               const LaneRows &rows) {
  const int64_t pAt = 4 + oRegs;
  Value previous = e.sub(t, one);
  Value hasPrevious = e.lessThan(zero, t);
  // 1. Tile t's scores, then tile t - 1's P V (before the first tile an
  // empty group, so that one wait count fits every iteration).
  waitLanded(kRing, t);
  Value acc = issueScores(t);
  Value o = e.toAccumulator(SmallVector<Value>(it.slice(4, oRegs)));
  o = e.selectValues(
      hasPrevious, {o.getType()},
      [&] {
        waitLanded(vRing, previous);
        return SmallVector<Value>{
            issueValues(previous, o, it.slice(pAt, sRegs / 2))};
      },
      [&] {
        e.commit();
        return SmallVector<Value>{o};
      })[0];
  // 2. The scores done (P V may still run): tile t's K goes back to the
  // producer; the softmax runs under the P V.
  e.wait(1);
  e.arrive(read(kRing, t));
  TileSoftmax next =
      tileSoftmax(t, e.fromAccumulator(acc, sRegs), it.take_front(4), rows);
  // 3. P V done: tile t - 1's V goes back to the producer, and O, now with
  // tile t - 1's P V, moves to this tile's max.
  e.wait(0);
  e.ifThen(hasPrevious, [&] { e.arrive(read(vRing, previous)); });
  SmallVector<Value> state = next.rowState;
  state.append(FragmentSoftmax::rescale(e, e.fromAccumulator(o, oRegs),
                                        oFragment, next.alpha,
                                        /*onlyIfMoved=*/true));
  state.append(next.p);
  return state;
}

/// Issues O += P V of tile t (`o` the accumulator struct, `p` P as A
/// registers): V N-major, column blocks 16 KiB apart, 8-key atoms 1 KiB
/// apart. Returns the accumulator, in flight until the next wait.
Value WgmmaPrefillBlock::issueValues(Value t, Value o, ValueRange p) {
  Value descV = e.descriptor(e.add(base, tileAt(vRing, t)), kKeyBlockBytes,
                             kAtomBytes);
  return e.issueProductRegisterA(o, SmallVector<Value>(p), descV, kTileKeys,
                                 vDim);
}

/// The two warpgroups of rows: Q landed, the loop over the tiles, the last
/// tile's P V, then the results.
void WgmmaPrefillBlock::consume() {
  LaneRows rows = laneRows();
  Value negInf = e.negInf(), fzero = e.f32(0.0);
  SmallVector<Value> init{negInf, negInf, fzero, fzero};
  init.append(oRegs, fzero);
  init.append(sRegs / 2, arith::ConstantIntOp::create(b, l, 0, 32));
  Value anyTile = e.lessThan(zero, numTiles);
  e.ifThen(anyTile, [&] { e.waitBarrierPhase(qLanded, e.phaseParity(zero)); });
  SmallVector<Value> state = e.forLoop(
      zero, numTiles, one, init,
      [&](Value t, ValueRange it) { return tileStep(t, it, rows); });
  SmallVector<Type> f32s(oRegs, b.getF32Type());
  SmallVector<Value> o = e.selectValues(
      anyTile, f32s,
      [&] {
        Value last = e.sub(numTiles, one);
        waitLanded(vRing, last);
        Value acc = issueValues(
            last, e.toAccumulator(ArrayRef<Value>(state).slice(4, oRegs)),
            ArrayRef<Value>(state).take_back(sRegs / 2));
        e.wait(0);
        return e.fromAccumulator(acc, oRegs);
      },
      [&] {
        return SmallVector<Value>(state.begin() + 4,
                                  state.begin() + 4 + oRegs);
      });
  std::copy(o.begin(), o.end(), state.begin() + 4);
  writeResults(state, rows);
}

/// out = O / l and lse, merged into the entry state with accumulate.
void WgmmaPrefillBlock::writeResults(ArrayRef<Value> state,
                                     const LaneRows &rows) {
  const int64_t elementBytes = 2;
  // Tile row r is out row (qBegin + row0 + r, head).
  auto realRow = [&](Value r) {
    return e.lessThan(e.add(block.row0, r), block.sq);
  };
  auto outRow = [&](Value r) {
    return SmallVector<Value, 4>{e.add(block.qBegin, e.add(block.row0, r)),
                                 block.head};
  };
  // With accumulate, the entry state is read now, under the row ends and
  // the staging: the pieces of out this thread merges into and the rows'
  // LSEs.
  GpuEmitter::EntryState entry;
  if (accumulate)
    entry.pieces = e.loadEntryPieces(kBlockRows, vDim, thread.tid, kThreads,
                                     realRow, outRow, block.out);
  SmallVector<FragmentRowEnd, 4> ends = block.finishRows(
      {state[0], state[1]}, {e.quadSum(state[2]), e.quadSum(state[3])},
      rows.ofBlock, accumulate);
  // lse now, as every prefill did before accumulate existed (moving this
  // store made the non-causal loop 5% slower on the H100); with accumulate
  // past the staging barrier, after every lane's read of the entry LSEs.
  if (!accumulate)
    block.storeLse(ends, rows.ofBlock, thread.quad);

  // out = O / l staged as out's rows in the K and V rings (dead once both
  // warpgroups are past the loop: the last tile's V was there), rows
  // padded by 8 elements so that a warp's 4-byte stores hit distinct banks;
  // then the block copies the real rows out (copyStagedRows). O value
  // 4 j + 2 i + c of the lane is row i, column 8 j + 2 quad + c. With
  // accumulate, the rows' entry weights follow the staged rows.
  const int64_t stride = vDim + 8;
  consumersBarrier();
  Value stagingAt = e.add(pad, e.index(layout.k));
  Value staging =
      e.sharedView(raw, stagingAt, {kBlockRows, stride}, e.element);
  if (accumulate) {
    entry.weights = e.sharedView(
        raw, e.add(stagingAt, e.index(kBlockRows * stride * elementBytes)),
        {kBlockRows}, b.getF32Type());
    block.storeEntryWeights(ends, rows.ofBlock, thread.quad, entry.weights);
  }
  for (int64_t i = 0; i < 2; ++i)
    e.stageFragmentRow(staging, e.add(groupRow0, rows.local[i]), e.index(0),
                       thread.quad, vDim / 8, [&](int64_t j, int64_t c) {
                         return e.mulf(state[4 + 4 * j + 2 * i + c],
                                       ends[i].inverse);
                       });
  consumersBarrier();
  if (accumulate)
    block.storeLse(ends, rows.ofBlock, thread.quad);
  e.copyStagedRows(staging, kBlockRows, vDim, thread.tid, kThreads, realRow,
                   outRow, block.out, Value(), accumulate ? &entry : nullptr);
}

void WgmmaPrefillBlock::run() {
  e.ifThen(e.eqIndex(thread.tid, 0), [&] {
    for (const Ring *ring : {&kRing, &vRing})
      for (int64_t s = 0; s < ring->stages; ++s) {
        e.initBarrier(landed(*ring, e.index(s)), kProducerThreads);
        e.initBarrier(read(*ring, e.index(s)), kThreads);
      }
    e.initBarrier(qLanded, kProducerThreads);
  });
  e.barrier();
  e.ifThenElse(
      e.lessThan(thread.tid, e.index(kThreads)),
      [&] {
        e.setMaxRegisters(kConsumerRegisters, /*increase=*/true);
        consume();
      },
      [&] {
        e.setMaxRegisters(kProducerRegisters, /*increase=*/false);
        produce();
      });
}

} // namespace

void lowerWgmmaPrefill(PrefillAttentionOp op, KernelFactory &kernels,
                       OpBuilder &host) {
  const int64_t qkDim = op.getQkHeadDim(), vDim = op.getVHeadDim();
  Type element = cast<MemRefType>(op.getQ().getType()).getElementType();
  const Stages stages =
      stagesFor(qkDim, vDim, kernels.target().maxSharedBytesPerBlock());
  const SharedLayout layout(qkDim, vDim, stages.k, stages.v);
  // The results are staged in the rings: rows of vDim + 8 elements, then
  // (accumulate) an f32 entry weight a row.
  const int64_t elementBytes = 2;
  if (kBlockRows * ((vDim + 8) * elementBytes + 4) > layout.ringBytes())
    llvm::report_fatal_error("wgmma prefill: results do not fit the stages");

  auto kernel = kernels.create(
      "prefill_attention_wgmma", op->getOperandTypes(),
      [&](GpuEmitter &base, ValueRange a) {
        WgmmaEmitter e(base.builder(), base.location(), element);
        PrefillTileBlock block(e, op, a, kBlockRows);
        Value zero = e.index(0), one = e.index(1);
        WgmmaEmitter::WarpgroupThread thread = e.warpgroupThread();
        block.run([&] {
          WgmmaPrefillBlock(e, block, op, layout, thread, zero, one).run();
        });
      },
      kKernelThreads);
  launchPrefillTiles(op, host, kernel, kBlockRows, layout.bytes);
}

} // namespace mla::gpu
