//===- GpuPrefillMma.cpp - Tensor-core prefill attention (mma.sync) -------===//
//
// The `mma-sync` strategy's kernel for mla.prefill_attention with bf16 or
// f16 q, k, v and out (FlashAttention-2 style). A block computes a 128-row
// tile of one sequence's queries for one head, 32 rows (two m16 tiles) per
// warp, and walks the sequence's keys in 32-key tiles that all four warps
// share:
//
//  - Tiles of K (32 x Dqk) and V (32 x Dv) are copied with 16-byte cp.async
//    into a two-stage ring: tile t + 1 is in flight while tile t is used
//    (one stage where shared memory is short). Rows past the keys are
//    zero-filled without being read.
//  - A warp scores its 32 rows against the tile's keys with m16n8k16
//    mma.sync (Q and K through ldmatrix; each K fragment feeds both of the
//    warp's row tiles, which halves the shared-memory reads per mma, the
//    kernel's busiest pipe), so the row statistics never leave the warp:
//    quad shuffles give row maxima, the online softmax runs in base 2.
//  - P stays in registers: the accumulator fragment of S is the A fragment
//    of P V once packed to the input type, and V comes through
//    ldmatrix.trans (each fragment again feeding both row tiles). O (32 x
//    Dv per warp) lives in registers.
//  - Causal masking (bottom-right aligned) costs nothing on tiles every row
//    of the block sees whole; only tiles crossing the diagonal (or the end
//    of the keys) are masked, and tiles past the block's last visible key
//    are never loaded.
//
// Varlen: blocks find their sequence and row tile as PrefillTileBlock.h
// describes.
//
// Rows past a sequence's queries are padding (zero queries, never
// written). A row that sees no key gets out = 0 and lse = -inf. out
// leaves through shared memory: staged as rows, copied out by the block in
// 16-byte pieces (element by element where out is not aligned). Where q,
// k or v is not 16-byte aligned the tiles are copied element by element.
//
//===----------------------------------------------------------------------===//

#include "Tiles/FragmentSoftmax.h"
#include "Tiles/PrefillTileBlock.h"
#include "mla/Target/SharedRegions.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>

using namespace mlir;
using mlir::gpu::Dimension;

namespace mla::gpu {

namespace {

/// 16-row mma tiles of queries per warp: every K and V fragment a warp
/// loads from shared memory serves this many mma.
constexpr int64_t kWarpRowTiles = 2;
constexpr int64_t kWarpRows = 16 * kWarpRowTiles;
/// Rows of a lane: group and group + 8 of each of the warp's row tiles.
constexpr int64_t kLaneRows = 2 * kWarpRowTiles;
/// Query rows of a block.
constexpr int64_t kBlockRows = kWarpRows * kBlockWarps;
/// Keys of one shared-memory tile, and its n8 tiles.
constexpr int64_t kTileKeys = 32;
constexpr int64_t kKeyTiles = kTileKeys / 8;
/// Padding after each shared row (16 bytes), so that ldmatrix's eight row
/// addresses fall in different banks.
constexpr int64_t kRowPad = 8;
/// The largest v head dim: a warp holds 32 x Dv f32 of O in registers.
constexpr int64_t kMaxVDim = 128;
/// The largest qk head dim (shared memory, unrolled k-steps).
constexpr int64_t kMaxQkDim = 256;

/// The block's dynamic shared memory (bytes): the Q tile, then `stages` K
/// tiles, then `stages` V tiles, 2-byte elements, rows padded.
struct PrefillLayout {
  int64_t qkStride, vStride; ///< elements per shared row
  int64_t stages;
  int64_t q, k, kStage, v, vStage, entryWeights, bytes;

  PrefillLayout(int64_t qkDim, int64_t vDim, int64_t stages)
      : qkStride(qkDim + kRowPad), vStride(vDim + kRowPad), stages(stages) {
    SharedRegions r;
    q = r.tiles(1, kBlockRows, qkStride, 2);
    kStage = SharedRegions::tileBytes(kTileKeys, qkStride, 2);
    k = r.tiles(stages, kTileKeys, qkStride, 2);
    vStage = SharedRegions::tileBytes(kTileKeys, vStride, 2);
    v = r.tiles(stages, kTileKeys, vStride, 2);
    // The results are staged as out's rows over all of it at the end,
    // followed (accumulate) by an f32 entry weight a row.
    entryWeights = SharedRegions::tileBytes(kBlockRows, vStride, 2);
    r.overlay(entryWeights + kBlockRows * 4);
    bytes = r.total();
  }
};

/// Two stages where they fit the chip's shared memory, else one.
std::optional<PrefillLayout> chooseLayout(int64_t qkDim, int64_t vDim,
                                          const GpuTarget &target) {
  for (int64_t stages : {2, 1}) {
    PrefillLayout layout(qkDim, vDim, stages);
    if (layout.bytes <= target.maxSharedBytesPerBlock())
      return layout;
  }
  return std::nullopt;
}

/// The kernel of a block with a row tile (inside PrefillTileBlock::run),
/// one method a step. The constructor finds the keys the block sees, the
/// thread's place, the lane's rows and its ldmatrix addresses, and starts
/// the copies of the Q tile and the first key tile.
class RowTileBody {
public:
  RowTileBody(MmaEmitter &e, PrefillTileBlock &block, PrefillAttentionOp op,
              const PrefillLayout &layout)
      : e(e), b(e.builder()), l(e.location()), block(block), layout(layout),
        qkDim(op.getQkHeadDim()), vDim(op.getVHeadDim()), vTiles(vDim / 8),
        accumulate(op.getAccumulate()),
        // Scores in base 2: exp(x * scale) = exp2(x * scale * log2(e)).
        scaleLog2(op.getSoftmaxScale().convertToDouble() * M_LOG2E),
        sFragment{kWarpRowTiles, kKeyTiles}, oFragment{kWarpRowTiles, vTiles} {
    zero = e.index(0);
    one = e.index(1);
    // Keys the block needs at all (its last row's), and the keys every row
    // of it sees (its first row's): tiles below the latter need no mask.
    std::pair<Value, Value> keys = block.keyRange(zero, kBlockRows);
    keyLimit = keys.first;
    Value sharedKeys = keys.second;
    unmaskedEnd =
        e.mul(arith::DivUIOp::create(b, l, sharedKeys, e.index(kTileKeys)),
              e.index(kTileKeys));

    Value tid = e.threadId();
    lane = e.remui(tid, kWarpSize);
    warp = e.divui(tid, kWarpSize);
    group = e.divui(lane, 4);
    quad = e.remui(lane, 4);
    aligned = e.vectorAligned({block.q, block.k, block.v});

    raw = e.dynamicShared();
    qS = e.sharedView(raw, layout.q, {kBlockRows, layout.qkStride}, e.element);
    copyFirstTiles();
    findLaneRows();
    ldmatrixLanes();
    fzero = e.f32(0.0);
  }

  /// The loop over the key tiles the block needs; returns the lane's
  /// state: its rows' maxima (base 2), their partial sums (the lane's
  /// columns only), then O in oFragment's order.
  SmallVector<Value> walkKeyTiles();
  /// out and lse of the tile's real rows (see the file comment).
  void writeResults(ArrayRef<Value> state);

private:
  MmaEmitter &e;
  OpBuilder &b;
  Location l;
  PrefillTileBlock &block;
  const PrefillLayout &layout;
  const int64_t qkDim, vDim;
  const int64_t vTiles; ///< n8 tiles of O per warp
  const bool accumulate;
  const double scaleLog2;
  /// The warp's 32 x 32 scores and 32 x Dv output.
  const AccumulatorFragment sFragment, oFragment;
  Value zero, one, keyLimit, unmaskedEnd;
  Value lane, warp, group, quad, aligned;
  Value raw, qS;
  /// The lane's rows (in the sequence) and the keys each sees.
  SmallVector<Value, kLaneRows> rowOf, rowEnd;
  Value half, odd, qRow, kRow, vRow;
  Value fzero;

  /// The K and V tiles of ring stage `stage`.
  Value kTile(Value stage) {
    return e.sharedView(
        raw, e.add(e.index(layout.k), e.mul(stage, e.index(layout.kStage))),
        {kTileKeys, layout.qkStride}, e.element);
  }
  Value vTile(Value stage) {
    return e.sharedView(
        raw, e.add(e.index(layout.v), e.mul(stage, e.index(layout.vStage))),
        {kTileKeys, layout.vStride}, e.element);
  }
  /// Copies the K and V rows of keys [first, first + kTileKeys) into
  /// `stage`; keys past keyLimit are zero-filled.
  void copyKeys(Value first, Value stage) {
    auto source = [&](Value row) {
      return block.keyRow(e.add(first, row), keyLimit);
    };
    e.copyTile(aligned, kTile(stage), block.k, kTileKeys, qkDim / kCopyElems,
               warp, lane, source);
    e.copyTile(aligned, vTile(stage), block.v, kTileKeys, vDim / kCopyElems,
               warp, lane, source);
  }
  /// The Q tile (padding rows zero) and the first key tile, committed.
  void copyFirstTiles() {
    e.copyTile(aligned, qS, block.q, kBlockRows, qkDim / kCopyElems, warp, lane,
               [&](Value row) { return block.queryRow(row); });
    e.ifThen(e.lessThan(zero, keyLimit), [&] { copyKeys(zero, zero); });
    e.commitCopies();
  }
  /// The lane's rows: group and group + 8 of each of the warp's 16-row
  /// tiles (lane row 2 m + i is row 16 m + group + 8 i of the warp's), and
  /// the keys each sees.
  void findLaneRows() {
    Value warpRow0 = e.add(block.row0, e.mul(warp, e.index(kWarpRows)));
    for (int64_t m = 0; m < kWarpRowTiles; ++m)
      for (int64_t i = 0; i < 2; ++i) {
        Value r = e.add(warpRow0, e.add(group, e.index(16 * m + 8 * i)));
        rowOf.push_back(r);
        rowEnd.push_back(block.keysOf(r));
      }
  }
  /// ldmatrix lane addresses. A (Q): row lane % 16 of the row tile, column
  /// + (lane / 16) * 8. B of S (K): key (lane / 16) * 8 + lane % 8 of each
  /// 16, column + ((lane / 8) % 2) * 8. B of O (V, transposed): key ((lane
  /// / 8) % 2) * 8 + lane % 8 of each 16, column + (lane / 16) * 8.
  void ldmatrixLanes() {
    Value lane8 = e.remui(lane, 8);
    half = e.mul(e.divui(lane, 16), e.index(8));
    odd = e.mul(e.remui(e.divui(lane, 8), 2), e.index(8));
    qRow = e.add(e.mul(warp, e.index(kWarpRows)), e.remui(lane, 16));
    kRow = e.add(half, lane8);
    vRow = e.add(odd, lane8);
  }
  /// The online softmax of the warp's scores.
  FragmentSoftmax softmaxOf() const {
    return FragmentSoftmax(e, sFragment, scaleLog2, quad);
  }

  /// One key tile, keys [first, first + kTileKeys): from the state `it` to
  /// the one returned.
  SmallVector<Value> keyTile(Value first, ValueRange it);
  /// Waits for tile `tileNo`'s copies (with two stages, after starting
  /// those of the tile at `next` into the other stage); a barrier.
  void awaitTile(Value tileNo, Value next);
  /// S = Q K^T against the K tile `kS`.
  SmallVector<Value> scores(Value kS);
  /// One k-step of scores(): columns [col, col + 16) into `s`.
  void scoreStep(Value col, Value kS, MutableArrayRef<Value> s);
  /// The online softmax of the tile's scores `s` from the state `it`: the
  /// rows' new maxima and sums and the rescaled O into `next`; returns P
  /// in sFragment's order.
  SmallVector<Value> softmaxStep(const FragmentSoftmax &softmax,
                                 ArrayRef<Value> s, ValueRange it,
                                 MutableArrayRef<Value> next);
  /// O += P V against the V tile `vS` (`o` in oFragment's order).
  void addPv(ArrayRef<Value> p, Value vS, MutableArrayRef<Value> o);
  /// The end of the tile's use of its stage; with one stage, the copy of
  /// the tile at `next` into it.
  void releaseStage(Value next);

  /// The ends of the lane's rows (finishRows, with accumulate merged into
  /// the entry state).
  SmallVector<FragmentRowEnd, 4> rowEnds(ArrayRef<Value> state);
  /// The lane's rows of out = O / l to `staging` (tile rows, out's type).
  void stageOutput(Value staging, ArrayRef<Value> state,
                   ArrayRef<FragmentRowEnd> ends);
};

SmallVector<Value> RowTileBody::walkKeyTiles() {
  SmallVector<Value> init(kLaneRows, e.negInf());
  init.append(kLaneRows, fzero);
  init.append(kWarpRowTiles * vTiles * 4, fzero);
  return e.forLoop(zero, keyLimit, e.index(kTileKeys), init,
                   [&](Value first, ValueRange it) -> SmallVector<Value> {
                     return keyTile(first, it);
                   });
}

SmallVector<Value> RowTileBody::keyTile(Value first, ValueRange it) {
  Value tileNo = e.divui(first, kTileKeys);
  Value stage = e.remui(tileNo, layout.stages);
  Value next = e.add(first, e.index(kTileKeys));
  awaitTile(tileNo, next);
  Value kS = kTile(stage), vS = vTile(stage);
  SmallVector<Value> s = scores(kS);
  // Only tiles crossing the diagonal or the end of the keys are masked.
  FragmentSoftmax softmax = softmaxOf();
  softmax.maskWhere(e.lessThan(unmaskedEnd, e.add(first, e.index(1))), s, first,
                    rowEnd);
  SmallVector<Value> nextState(it.begin(), it.end());
  SmallVector<Value> p = softmaxStep(softmax, s, it, nextState);
  addPv(p, vS, MutableArrayRef<Value>(nextState).drop_front(2 * kLaneRows));
  releaseStage(next);
  return nextState;
}

void RowTileBody::awaitTile(Value tileNo, Value next) {
  if (layout.stages == 2) {
    // Prefetch the next tile into the other stage, then wait for this one
    // (all but the newest group).
    e.ifThen(e.lessThan(next, keyLimit),
             [&] { copyKeys(next, e.remui(e.add(tileNo, one), 2)); });
    e.waitCopies(e.commitCopies(), 1);
  } else {
    e.waitAllCopies();
  }
  e.barrier();
}

SmallVector<Value> RowTileBody::scores(Value kS) {
  // Per row tile, kKeyTiles n8 tiles of keys; each K fragment serves all
  // the warp's row tiles, and the accumulations are independent of each
  // other (sFragment: column 8 nt + 2 quad + c is key first + 8 nt + 2 quad
  // + c). The k-steps are a loop (its body 8 mma) rather than unrolled
  // here: LLVM unrolls it the same way, and the MLIR passes see a fifth of
  // the code (the JIT's cold compile is shorter).
  return e.forLoop(zero, e.index(qkDim), 16,
                   SmallVector<Value>(kWarpRowTiles * kKeyTiles * 4, fzero),
                   [&](Value col, ValueRange acc) -> SmallVector<Value> {
                     SmallVector<Value> next(acc.begin(), acc.end());
                     scoreStep(col, kS, next);
                     return next;
                   });
}

void RowTileBody::scoreStep(Value col, Value kS, MutableArrayRef<Value> s) {
  SmallVector<SmallVector<Value>> qa;
  for (int64_t m = 0; m < kWarpRowTiles; ++m)
    qa.push_back(e.ldmatrix(
        qS, {e.add(qRow, e.index(16 * m)), e.add(col, half)}, 4, false));
  for (int64_t p = 0; p < kTileKeys / 16; ++p) {
    SmallVector<Value> kb = e.ldmatrix(
        kS, {e.add(kRow, e.index(16 * p)), e.add(col, odd)}, 4, false);
    for (int64_t m = 0; m < kWarpRowTiles; ++m) {
      e.mma(qa[m], kb[0], kb[1], s.slice(sFragment.at(m, 2 * p, 0, 0), 4));
      e.mma(qa[m], kb[2], kb[3], s.slice(sFragment.at(m, 2 * p + 1, 0, 0), 4));
    }
  }
}

SmallVector<Value> RowTileBody::softmaxStep(const FragmentSoftmax &softmax,
                                            ArrayRef<Value> s, ValueRange it,
                                            MutableArrayRef<Value> next) {
  // Online softmax over each lane row's new scores; P stays in registers,
  // in S's fragment.
  SmallVector<Value> p(s.size()), alpha;
  for (int64_t row = 0; row < kLaneRows; ++row) {
    auto keepP = [&](int64_t m, int64_t j, Value p0, Value p1) {
      p[sFragment.at(m, j, row % 2, 0)] = p0;
      p[sFragment.at(m, j, row % 2, 1)] = p1;
    };
    FragmentSoftmax::RowStep step =
        softmax.step(s, row, it[row], it[kLaneRows + row], keepP);
    next[row] = step.max;
    next[kLaneRows + row] = step.sum;
    alpha.push_back(step.alpha);
  }
  SmallVector<Value> scaledO = FragmentSoftmax::rescale(
      e, it.drop_front(2 * kLaneRows), oFragment, alpha, /*onlyIfMoved=*/false);
  std::copy(scaledO.begin(), scaledO.end(), next.begin() + 2 * kLaneRows);
  return p;
}

void RowTileBody::addPv(ArrayRef<Value> p, Value vS, MutableArrayRef<Value> o) {
  // P's A fragment for keys [16 kk, 16 kk + 16) is the S fragments of n8
  // tiles 2 kk and 2 kk + 1; each V fragment serves all the warp's row
  // tiles.
  for (int64_t kk = 0; kk < kTileKeys / 16; ++kk) {
    SmallVector<SmallVector<Value>> pa;
    for (int64_t m = 0; m < kWarpRowTiles; ++m) {
      int64_t lo = sFragment.at(m, 2 * kk, 0, 0);
      int64_t hi = sFragment.at(m, 2 * kk + 1, 0, 0);
      pa.push_back({e.pack(p[lo], p[lo + 1]), e.pack(p[lo + 2], p[lo + 3]),
                    e.pack(p[hi], p[hi + 1]), e.pack(p[hi + 2], p[hi + 3])});
    }
    for (int64_t t = 0; t < vTiles; t += 2) {
      SmallVector<Value> vb = e.ldmatrix(
          vS, {e.add(vRow, e.index(16 * kk)), e.add(half, e.index(8 * t))}, 4,
          true);
      for (int64_t m = 0; m < kWarpRowTiles; ++m) {
        e.mma(pa[m], vb[0], vb[1], o.slice(oFragment.at(m, t, 0, 0), 4));
        e.mma(pa[m], vb[2], vb[3], o.slice(oFragment.at(m, t + 1, 0, 0), 4));
      }
    }
  }
}

void RowTileBody::releaseStage(Value next) {
  // The next copy overwrites this stage.
  e.barrier();
  if (layout.stages == 1) {
    e.ifThen(e.lessThan(next, keyLimit), [&] { copyKeys(next, zero); });
    e.commitCopies();
  }
}

SmallVector<FragmentRowEnd, 4> RowTileBody::rowEnds(ArrayRef<Value> state) {
  SmallVector<Value> maxes, sums;
  for (int64_t row = 0; row < kLaneRows; ++row) {
    maxes.push_back(state[row]);
    sums.push_back(e.quadSum(state[kLaneRows + row]));
  }
  return block.finishRows(maxes, sums, rowOf, accumulate);
}

void RowTileBody::stageOutput(Value staging, ArrayRef<Value> state,
                              ArrayRef<FragmentRowEnd> ends) {
  ArrayRef<Value> o = state.drop_front(2 * kLaneRows);
  for (int64_t m = 0; m < kWarpRowTiles; ++m)
    for (int64_t i = 0; i < 2; ++i) {
      int64_t row = 2 * m + i;
      e.stageFragmentRow(staging, e.sub(rowOf[row], block.row0), e.index(0),
                         quad, vTiles, [&](int64_t t, int64_t c) {
                           return e.mulf(o[oFragment.at(m, t, i, c)],
                                         ends[row].inverse);
                         });
    }
}

void RowTileBody::writeResults(ArrayRef<Value> state) {
  auto realRow = [&](Value r) {
    return e.lessThan(e.add(block.row0, r), block.sq);
  };
  auto outRow = [&](Value r) {
    return SmallVector<Value, 4>{e.add(block.qBegin, e.add(block.row0, r)),
                                 block.head};
  };
  const int64_t threads = kBlockWarps * kWarpSize;
  SmallVector<FragmentRowEnd, 4> ends = rowEnds(state);
  // Without accumulate lse is stored now; with it past the next barrier,
  // after every lane's read of the entry LSEs.
  if (!accumulate)
    block.storeLse(ends, rowOf, quad);

  // out = O / l (0 when l = 0), lse = m ln 2 + log(l) (-inf when l = 0),
  // for the real rows (with accumulate merged into the entry state, whose
  // LSEs finishRows read): out staged as rows of its type over the block's
  // shared memory (dead once every warp is past its last tile and the Q
  // copies; rows padded by 8 elements), then lse by the quads' leaders and
  // out copied out by the block in 16-byte pieces (copyStagedRows), where a
  // 2-byte store a value queued on the load/store unit. With accumulate,
  // the rows' entry weights follow the staged rows.
  e.barrier();
  Value staging = e.sharedView(raw, 0, {kBlockRows, layout.vStride}, e.element);
  Value entryWeights;
  if (accumulate) {
    entryWeights =
        e.sharedView(raw, layout.entryWeights, {kBlockRows}, b.getF32Type());
    block.storeEntryWeights(ends, rowOf, quad, entryWeights);
  }
  stageOutput(staging, state, ends);
  // With accumulate, the pieces of out this thread merges into are read
  // now, all at once, under the barrier and the LSEs' stores (O's
  // registers are free by now: read with O live, they spilled).
  GpuEmitter::EntryState entry;
  if (accumulate) {
    entry.weights = entryWeights;
    entry.pieces = e.loadEntryPieces(kBlockRows, vDim, e.threadId(), threads,
                                     realRow, outRow, block.out);
  }
  e.barrier();
  if (accumulate)
    block.storeLse(ends, rowOf, quad);
  e.copyStagedRows(staging, kBlockRows, vDim, e.threadId(), threads, realRow,
                   outRow, block.out, Value(), accumulate ? &entry : nullptr);
}

} // namespace

bool useMmaPrefill(PrefillAttentionOp op, const GpuTarget &target) {
  if (!target.usesMmaSync() || !hasTensorCoreOperands(op))
    return false;
  int64_t qkDim = op.getQkHeadDim(), vDim = op.getVHeadDim();
  if (qkDim % 16 || vDim % 16 || qkDim > kMaxQkDim || vDim > kMaxVDim)
    return false;
  return chooseLayout(qkDim, vDim, target).has_value();
}

void lowerMmaPrefill(PrefillAttentionOp op, KernelFactory &kernels,
                     OpBuilder &host) {
  Type element = cast<MemRefType>(op.getQ().getType()).getElementType();
  const PrefillLayout layout =
      *chooseLayout(op.getQkHeadDim(), op.getVHeadDim(), kernels.target());

  auto kernel = kernels.create(
      "prefill_attention_mma", op->getOperandTypes(),
      [&](GpuEmitter &base, ValueRange a) {
        MmaEmitter e(base.builder(), base.location(), element);
        PrefillTileBlock block(e, op, a, kBlockRows);
        block.run([&] {
          RowTileBody body(e, block, op, layout);
          SmallVector<Value> state = body.walkKeyTiles();
          // Copies still in flight when no tile ran (the Q tile).
          e.waitAllCopies();
          body.writeResults(state);
        });
      });

  // Ask ptxas to fit two blocks an SM (up to 255 registers each, which two
  // blocks of 128 threads can hold), instead of its default cap of 168,
  // under which the kernel spills. Where the chip's shared memory holds
  // only one block this only lifts the cap.
  kernel->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(),
                  IntegerAttr::get(IntegerType::get(op.getContext(), 32), 2));

  launchPrefillTiles(op, host, kernel, kBlockRows, layout.bytes);
}

} // namespace mla::gpu
