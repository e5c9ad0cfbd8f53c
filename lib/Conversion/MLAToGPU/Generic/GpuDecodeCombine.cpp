//===- GpuDecodeCombine.cpp - Merging the split-KV decode partials --------===//
//
// The second kernel of a split decode (every strategy): out = Σ_i w_i o_i
// with w_i = exp(lse_i - max) / Σ_j exp(lse_j - max) over the request's n
// active splits, and lse = max + log Σ_j exp(lse_j - max). A request of
// one split is skipped: its split kernel wrote out and lse itself.
//
// The kernel reads what the split kernel just wrote (mostly from L2) and
// is latency-bound, so its shape follows the workspace's split count S
// (known on the host, which launches one of two kernels):
//  - S <= 4 (a large batch: each request's splits are few and short): a
//    warp merges a (row, head) row over all its columns, its lanes 4
//    adjacent columns of each 128 in 16-byte loads; 4 splits are
//    unrolled (clamped to n - 1 and weighted 0 past n), so every load is
//    in flight at once and there is no block barrier (grid: rows x
//    ceil(N / 4), four warps a block);
//  - else (a small batch with a long context: few rows, many splits; one
//    request, 16 heads, 128 splits: 16 rows of 128 x 512 f32 partials) the
//    chain of dependent loads of a row is kept short by spreading it over
//    a block: eight warps merge one row's 128-column chunk (grid: rows x
//    heads x ceil(Lkv / 128)). A warp takes every eighth split, eight
//    splits a step, each lane 4 adjacent columns in one 16-byte load, and
//    merges them online against its own running max, so that no barrier
//    and no other warp's loads stand between the kernel's start and its
//    partial rows' loads; the eight warps' states (max, weight sum, column
//    sums) are merged once at the end through shared memory.
// Partial rows that are not 16-byte aligned are read element by element.
// A row with no keys (every split LSE -inf, or no split) gets out = 0 and
// lse = -inf.
//
//===----------------------------------------------------------------------===//

#include "Tiles/GpuDecode.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using mlir::gpu::Dimension;

namespace mla::gpu {

namespace {

/// The most splits a workspace may have for the narrow kernel.
constexpr int64_t kNarrowMaxSplits = 4;
/// Warps of a narrow block: a (row, head) row each.
constexpr int64_t kNarrowWarps = 4;

/// Warps and threads of a wide block.
constexpr int64_t kWarps = 8;
constexpr int64_t kThreads = kWarps * kWarpSize;
/// Adjacent columns of a lane: one 16-byte load of f32.
constexpr int64_t kLaneColumns = 4;
/// Columns a block merges.
constexpr int64_t kChunkColumns = kWarpSize * kLaneColumns;
/// Splits a warp loads per step.
constexpr int64_t kSplitsPerStep = 8;

/// Shared memory: each warp's running max and weight sum, then its column
/// sums.
constexpr int64_t kMaxOffset = 0;
constexpr int64_t kSumOffset = kMaxOffset + kWarps * 4;
constexpr int64_t kColumnsOffset = kSumOffset + kWarps * 4;
constexpr int64_t kSharedBytes = kColumnsOffset + kWarps * kChunkColumns * 4;

/// Columns [first, first + kLaneColumns) of partial row `row` (the
/// partial's indices but the column): one 16-byte load where
/// `vectorLoads` (the caller checked alignment; Lkv is then a multiple of
/// 8), else element by element. Columns past Lkv are clamped into the row
/// (the callers never write them out).
SmallVector<Value, kLaneColumns> loadLaneColumns(GpuEmitter &e, Value part,
                                                 ValueRange row, Value first,
                                                 int64_t latent,
                                                 bool vectorLoads) {
  OpBuilder &b = e.builder();
  Location l = e.location();
  SmallVector<Value> idx(row.begin(), row.end());
  SmallVector<Value, kLaneColumns> values;
  if (vectorLoads) {
    idx.push_back(e.minIndex(first, e.index(latent - kLaneColumns)));
    auto type = VectorType::get({kLaneColumns}, b.getF32Type());
    Value v = vector::LoadOp::create(b, l, type, part, idx,
                                     /*nontemporal=*/false,
                                     llvm::MaybeAlign(kLaneColumns * 4));
    for (int64_t k = 0; k < kLaneColumns; ++k)
      values.push_back(vector::ExtractOp::create(b, l, v, k));
    return values;
  }
  idx.push_back(Value());
  for (int64_t k = 0; k < kLaneColumns; ++k) {
    idx.back() = e.minIndex(e.add(first, e.index(k)), e.index(latent - 1));
    values.push_back(e.loadF32(part, idx));
  }
  return values;
}

/// The combine's operands (the split kernel's order: the plan's num_splits
/// if any, the partials and their LSEs, out and lse) and the (request,
/// query) row block x merges.
struct CombineRow {
  Value part, partLse, out, lse, req, s;
  /// The request's active splits.
  Value n;

  CombineRow(GpuEmitter &e, const DecodeSchedule &schedule, ValueRange a) {
    OpBuilder &b = e.builder();
    Location l = e.location();
    Value numSplits = schedule.planned ? a.front() : Value();
    a = a.take_back(4);
    part = a[0];
    partLse = a[1];
    out = a[2];
    lse = a[3];
    Value sq = e.dim(out, 1);
    Value row = e.blockId(Dimension::x);
    req = arith::DivUIOp::create(b, l, row, sq);
    s = arith::RemUIOp::create(b, l, row, sq);
    n = schedule.activeSplits(e, numSplits, req, e.dim(partLse, 3));
  }
};

/// The largest split LSE, or 0 when every one is -inf (no keys), so that
/// the weights exp(lse_i - max) stay finite.
Value safeMaxOf(GpuEmitter &e, Value max) {
  OpBuilder &b = e.builder();
  Location l = e.location();
  Value empty =
      arith::CmpFOp::create(b, l, arith::CmpFPredicate::OEQ, max, e.negInf());
  return arith::SelectOp::create(b, l, empty, e.f32(0.0), max);
}

/// exp(lse - safeMax): a split's weight, or the factor that moves sums
/// kept relative to max `lse` onto `safeMax` (0 for lse = -inf).
Value weightOf(GpuEmitter &e, Value lse, Value safeMax) {
  OpBuilder &b = e.builder();
  Location l = e.location();
  return math::ExpOp::create(b, l, arith::SubFOp::create(b, l, lse, safeMax));
}

/// The warps' values `slots[w]` (or `slots[w, column]`), w = 0..kWarps-1,
/// folded by max or by sum, read from shared memory after a barrier.
Value foldWarps(GpuEmitter &e, Value slots, bool max, Value column = {}) {
  OpBuilder &b = e.builder();
  Location l = e.location();
  Value total = max ? e.negInf() : e.f32(0.0);
  for (int64_t w = 0; w < kWarps; ++w) {
    SmallVector<Value, 2> at{e.index(w)};
    if (column)
      at.push_back(column);
    Value v = memref::LoadOp::create(b, l, slots, at);
    total = max ? arith::MaximumFOp::create(b, l, total, v).getResult()
                : arith::AddFOp::create(b, l, total, v).getResult();
  }
  return total;
}


/// One block of the wide combine kernel.
class WideCombineBlock : public CombineRow {
public:
  WideCombineBlock(GpuEmitter &e, const DecodeSchedule &schedule, ValueRange a,
                   int64_t latent)
      : CombineRow(e, schedule, a), e(e), b(e.builder()), l(e.location()),
        latent(latent) {
    h = e.blockId(Dimension::y);
    chunk = e.blockId(Dimension::z);
    tid = e.threadId();
    warp = e.warpId();
    lane = e.laneId();
    Value raw = e.dynamicShared();
    warpMax = e.sharedView(raw, kMaxOffset, {kWarps}, b.getF32Type());
    warpSum = e.sharedView(raw, kSumOffset, {kWarps}, b.getF32Type());
    columnSums = e.sharedView(raw, kColumnsOffset, {kWarps, kChunkColumns},
                              b.getF32Type());
    chunkColumn0 = e.mul(chunk, e.index(kChunkColumns));
  }

  /// Merges the row's splits, reading partial rows in 16-byte vectors when
  /// `vectorLoads` (the caller checked their alignment).
  void emit(bool vectorLoads) {
    Value fzero = e.f32(0.0);
    Value lastSplit = e.sub(n, e.index(1));
    Value laneColumn0 = e.add(chunkColumn0, e.mul(lane, e.index(kLaneColumns)));
    // The warp's running state: max (the same in every lane), weight sum
    // and the lane's column sums, both relative to that max.
    SmallVector<Value> init{e.negInf(), fzero};
    init.append(kLaneColumns, fzero);
    SmallVector<Value> state = e.forLoop(
        warp, n, kWarps * kSplitsPerStep, init,
        [&](Value j0, ValueRange it) -> SmallVector<Value> {
          // Every load of the step first; splits past n are clamped to the
          // last (valid memory) and get LSE -inf, weight 0.
          SmallVector<Value, kSplitsPerStep> splitLse;
          SmallVector<SmallVector<Value, kLaneColumns>, kSplitsPerStep> rows;
          Value max = it[0];
          for (int64_t u = 0; u < kSplitsPerStep; ++u) {
            Value j = e.add(j0, e.index(u * kWarps));
            Value jc = e.minIndex(j, lastSplit);
            splitLse.push_back(arith::SelectOp::create(
                b, l, e.lessThan(j, n), e.loadF32(partLse, {req, s, h, jc}),
                e.negInf()));
            rows.push_back(loadLaneColumns(e, part, {req, s, h, jc},
                                           laneColumn0, latent, vectorLoads));
            max = arith::MaximumFOp::create(b, l, max, splitLse.back());
          }
          Value safeMax = safeMaxOf(e, max);
          Value rescale = weightOf(e, it[0], safeMax);
          SmallVector<Value> next{max,
                                  arith::MulFOp::create(b, l, it[1], rescale)};
          for (int64_t k = 0; k < kLaneColumns; ++k)
            next.push_back(arith::MulFOp::create(b, l, it[2 + k], rescale));
          for (int64_t u = 0; u < kSplitsPerStep; ++u) {
            Value w = weightOf(e, splitLse[u], safeMax);
            next[1] = arith::AddFOp::create(b, l, next[1], w);
            for (int64_t k = 0; k < kLaneColumns; ++k)
              next[2 + k] =
                  math::FmaOp::create(b, l, w, rows[u][k], next[2 + k]);
          }
          return next;
        });

    // The warps' states to the block's max: max first, then the rescaled
    // sums (a warp with no split has max -inf and weight 0).
    e.ifThen(e.eqIndex(lane, 0), [&] {
      memref::StoreOp::create(b, l, state[0], warpMax, ValueRange{warp});
    });
    e.barrier();
    Value safeMax = safeMaxOf(e, foldWarps(e, warpMax, /*max=*/true));
    Value rescale = weightOf(e, state[0], safeMax);
    e.ifThen(e.eqIndex(lane, 0), [&] {
      memref::StoreOp::create(b, l,
                              arith::MulFOp::create(b, l, state[1], rescale),
                              warpSum, ValueRange{warp});
    });
    for (int64_t k = 0; k < kLaneColumns; ++k)
      memref::StoreOp::create(
          b, l, arith::MulFOp::create(b, l, state[2 + k], rescale), columnSums,
          ValueRange{warp,
                     e.add(e.mul(lane, e.index(kLaneColumns)), e.index(k))});
    e.barrier();
    LoopBuilder::RowEnd merged =
        e.rowEnd(safeMax, foldWarps(e, warpSum, /*max=*/false));
    // Thread t < 128 writes column t of the chunk.
    Value column = e.add(chunkColumn0, tid);
    e.ifThen(arith::AndIOp::create(b, l,
                                   e.lessThan(tid, e.index(kChunkColumns)),
                                   e.lessThan(column, e.index(latent))),
             [&] {
               Value total = foldWarps(e, columnSums, /*max=*/false, tid);
               e.storeF32(arith::MulFOp::create(b, l, total, merged.inverse),
                          out, {req, s, h, column});
             });
    e.ifThen(
        arith::AndIOp::create(b, l, e.eqIndex(tid, 0), e.eqIndex(chunk, 0)),
        [&] {
          e.storeF32(merged.lse, lse, {req, h, s});
        });
  }

  GpuEmitter &e;
  OpBuilder &b;
  Location l;
  int64_t latent;
  Value h, chunk, tid, warp, lane;
  Value warpMax, warpSum, columnSums, chunkColumn0;
};

/// Emits `merge(vectorLoads)` for the rows of requests of more than one
/// split, with 16-byte loads where the partials allow them.
void forMergedRequests(GpuEmitter &e, Value n, Value part,
                       const std::function<void(bool)> &merge) {
  // A request of one split has its results already.
  Value merges = arith::CmpIOp::create(e.builder(), e.location(),
                                       arith::CmpIPredicate::ne, n, e.index(1));
  e.ifThen(merges, [&] {
    if (GpuEmitter::hasVectorRows(part))
      e.ifThenElse(
          e.vectorAligned({part}), [&] { merge(true); }, [&] { merge(false); });
    else
      merge(false);
  });
}

/// The narrow kernel's warp: (row, head) = (block x, 4 block y + warp),
/// all kNarrowMaxSplits splits unrolled.
void emitNarrowCombine(GpuEmitter &e, const DecodeSchedule &schedule,
                       ValueRange a, int64_t heads, int64_t latent) {
  OpBuilder &b = e.builder();
  Location l = e.location();
  CombineRow row(e, schedule, a);
  Value part = row.part, partLse = row.partLse, out = row.out, lse = row.lse,
        req = row.req, s = row.s, n = row.n;
  Value h =
      e.add(e.mul(e.blockId(Dimension::y), e.index(kNarrowWarps)), e.warpId());
  Value lane = e.laneId();
  e.ifThen(e.lessThan(h, e.index(heads)), [&] {
    // n <= S <= kNarrowMaxSplits: splits past n are clamped to n - 1 and
    // weighted 0.
    forMergedRequests(e, n, part, [&](bool vectorLoads) {
      Value fzero = e.f32(0.0);
      Value lastSplit = e.maxIndex(e.sub(n, e.index(1)), e.index(0));
      SmallVector<Value, kNarrowMaxSplits> splitLse, live;
      Value max = e.negInf();
      for (int64_t j = 0; j < kNarrowMaxSplits; ++j) {
        Value jc = e.minIndex(e.index(j), lastSplit);
        live.push_back(e.lessThan(e.index(j), n));
        splitLse.push_back(arith::SelectOp::create(
            b, l, live.back(), e.loadF32(partLse, {req, s, h, jc}),
            e.negInf()));
        max = arith::MaximumFOp::create(b, l, max, splitLse.back());
      }
      Value safeMax = safeMaxOf(e, max);
      Value sum = fzero;
      SmallVector<Value, kNarrowMaxSplits> weight;
      for (int64_t j = 0; j < kNarrowMaxSplits; ++j) {
        weight.push_back(arith::SelectOp::create(
            b, l, live[j], weightOf(e, splitLse[j], safeMax), fzero));
        sum = arith::AddFOp::create(b, l, sum, weight[j]);
      }
      LoopBuilder::RowEnd merged = e.rowEnd(safeMax, sum);
      // 128-column groups: the lane's 4 columns of each. Every load is
      // issued before the first store (which the compiler may not move
      // them past).
      int64_t groups = (latent + kChunkColumns - 1) / kChunkColumns;
      SmallVector<SmallVector<Value>> sums;
      for (int64_t group = 0; group < groups; ++group) {
        Value first = e.add(e.mul(lane, e.index(kLaneColumns)),
                            e.index(group * kChunkColumns));
        SmallVector<Value> acc(kLaneColumns, fzero);
        for (int64_t j = 0; j < kNarrowMaxSplits; ++j) {
          Value jc = e.minIndex(e.index(j), lastSplit);
          SmallVector<Value, kLaneColumns> v = loadLaneColumns(
              e, part, {req, s, h, jc}, first, latent, vectorLoads);
          for (int64_t k = 0; k < kLaneColumns; ++k)
            acc[k] = math::FmaOp::create(b, l, weight[j], v[k], acc[k]);
        }
        sums.push_back(acc);
      }
      for (int64_t group = 0; group < groups; ++group) {
        Value first = e.add(e.mul(lane, e.index(kLaneColumns)),
                            e.index(group * kChunkColumns));
        const SmallVector<Value> &acc = sums[group];
        for (int64_t k = 0; k < kLaneColumns; ++k) {
          Value column = e.add(first, e.index(k));
          e.ifThen(e.lessThan(column, e.index(latent)), [&] {
            e.storeF32(arith::MulFOp::create(b, l, acc[k], merged.inverse), out,
                       {req, s, h, column});
          });
        }
      }
      e.ifThen(e.eqIndex(lane, 0), [&] {
        e.storeF32(merged.lse, lse, {req, h, s});
      });
    });
  });
}

} // namespace

void launchDecodeCombine(DecodeAttentionOp op, KernelFactory &kernels,
                         const DecodeSchedule &schedule, OpBuilder &host,
                         ValueRange combineArgs) {
  const int64_t heads = op.getNumHeads(), latent = op.getKvLoraRank();
  Location loc = op.getLoc();
  GpuEmitter hb(host, loc);
  Value rows = hb.mul(hb.dim(op.getQ(), 0), hb.dim(op.getQ(), 1));
  Value capacity = hb.dim(combineArgs[combineArgs.size() - 3], 3);
  hb.ifThenElse(
      hb.lessThan(capacity, hb.index(kNarrowMaxSplits + 1)),
      [&] {
        auto kernel = kernels.create(
            "decode_attention_combine_narrow", combineArgs.getTypes(),
            [&](GpuEmitter &e, ValueRange a) {
              emitNarrowCombine(e, schedule, a, heads, latent);
            });
        static_assert(kNarrowWarps == kBlockWarps,
                      "the narrow kernel has the default block");
        KernelFactory::launch(
            host, loc, kernel,
            {rows, hb.index((heads + kNarrowWarps - 1) / kNarrowWarps),
             hb.index(1)},
            combineArgs);
      },
      [&] {
        auto kernel = kernels.create(
            "decode_attention_combine", combineArgs.getTypes(),
            [&](GpuEmitter &e, ValueRange a) {
              WideCombineBlock block(e, schedule, a, latent);
              forMergedRequests(e, block.n, block.part, [&](bool vectorLoads) {
                block.emit(vectorLoads);
              });
            },
            kThreads);
        KernelFactory::launch(
            host, loc, kernel,
            {rows, hb.index(heads),
             hb.index((latent + kChunkColumns - 1) / kChunkColumns)},
            combineArgs, kSharedBytes);
      });
}

} // namespace mla::gpu
