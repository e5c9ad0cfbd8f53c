//===- GpuDecodeCombine.cpp - Merging the split-KV decode partials --------===//
//
// The second kernel of a split decode (both strategies): out = Σ_i w_i o_i
// with w_i = exp(lse_i - max) / Σ_j exp(lse_j - max) over the request's n
// active splits, and lse = max + log Σ_j exp(lse_j - max).
//
// A small batch with a long context has few rows and many splits (one
// request, 16 heads, 256 splits: 16 rows of 256 x 512 f32 partials), so
// the kernel is built to keep many loads in flight per row rather than to
// rely on many rows: the time of a row is about its chain of dependent
// loads, n / 32 steps.
//  - a block merges one row's 128-column chunk (grid: rows x heads x
//    ceil(Lkv / 128));
//  - its four warps take every fourth split, each lane 4 columns (coalesced
//    128-byte rows), eight splits per step: 32 independent loads in flight
//    per lane;
//  - the split LSEs are reduced by the whole block (max, then the sum of
//    weights), and the warps' column sums are added through shared memory.
// A row with no keys (every split LSE -inf, or no split) gets out = 0 and
// lse = -inf.
//
//===----------------------------------------------------------------------===//

#include "GpuDecode.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using mlir::gpu::Dimension;

namespace mla::gpu {

namespace {

/// Columns of a lane, 32 apart (a warp reads whole 128-byte rows).
constexpr int64_t kLaneColumns = 4;
/// Columns a block merges.
constexpr int64_t kChunkColumns = kWarpSize * kLaneColumns;
/// Splits a warp loads per step.
constexpr int64_t kSplitsPerStep = 8;

/// Shared memory: the per-warp slots of a block reduction, then each warp's
/// column sums.
constexpr int64_t kReduceBytes = kBlockWarps * 4;
constexpr int64_t kSharedBytes = kReduceBytes + kBlockWarps * kChunkColumns * 4;

/// `value` reduced (max or sum) over the block, in every thread. `slots`
/// holds one f32 per warp; it is free again when this returns.
Value blockReduce(GpuEmitter &e, Value value, bool max, Value slots,
                  Value warp, Value lane) {
  OpBuilder &b = e.builder();
  Location l = e.location();
  Value warpValue = max ? e.warpMax(value) : e.warpSum(value);
  Value firstLane = arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq,
                                          lane, e.index(0));
  e.ifThen(firstLane, [&] {
    memref::StoreOp::create(b, l, warpValue, slots, ValueRange{warp});
  });
  e.barrier();
  Value total;
  for (int64_t w = 0; w < kBlockWarps; ++w) {
    Value v = memref::LoadOp::create(b, l, slots, ValueRange{e.index(w)});
    total = !total ? v
            : max  ? arith::MaximumFOp::create(b, l, total, v).getResult()
                   : arith::AddFOp::create(b, l, total, v).getResult();
  }
  e.barrier();
  return total;
}

} // namespace

void launchDecodeCombine(DecodeAttentionOp op, KernelFactory &kernels,
                         const DecodeSchedule &schedule, OpBuilder &host,
                         ValueRange combineArgs) {
  const int64_t heads = op.getNumHeads(), latent = op.getKvLoraRank();
  auto kernel = kernels.create(
      "decode_attention_combine", combineArgs.getTypes(),
      [&](GpuEmitter &e, ValueRange a) {
        Value numSplits = schedule.planned ? a.front() : Value();
        a = a.take_back(4);
        Value part = a[0], partLse = a[1], out = a[2], lse = a[3];
        OpBuilder &b = e.builder();
        Location l = e.location();
        Value zero = e.index(0), fzero = e.f32(0.0);
        Value sq = e.dim(out, 1);
        Value row = e.blockId(Dimension::x);
        Value req = arith::DivUIOp::create(b, l, row, sq);
        Value s = arith::RemUIOp::create(b, l, row, sq);
        Value h = e.blockId(Dimension::y);
        Value chunk = e.blockId(Dimension::z);
        Value n = schedule.activeSplits(e, numSplits, req, e.dim(partLse, 3));
        Value tid = e.threadId(), warp = e.warpId(), lane = e.laneId();

        Value raw = e.dynamicShared();
        Value slots = e.sharedView(raw, 0, {kBlockWarps}, b.getF32Type());
        Value sums = e.sharedView(raw, kReduceBytes, {kBlockWarps, kChunkColumns},
                                  b.getF32Type());

        auto splitLse = [&](Value i) {
          return e.loadF32(partLse, {req, s, h, i});
        };
        // The largest split LSE, then the sum of the weights.
        Value localMax = e.forLoop(
            tid, n, kBlockThreads, {e.negInf()},
            [&](Value i, ValueRange it) -> SmallVector<Value> {
              return {arith::MaximumFOp::create(b, l, it[0], splitLse(i))};
            })[0];
        Value max = blockReduce(e, localMax, true, slots, warp, lane);
        Value empty = arith::CmpFOp::create(b, l, arith::CmpFPredicate::OEQ,
                                            max, e.negInf());
        Value safeMax = arith::SelectOp::create(b, l, empty, fzero, max);
        auto weightOf = [&](Value i) {
          return math::ExpOp::create(
              b, l, arith::SubFOp::create(b, l, splitLse(i), safeMax));
        };
        Value localSum = e.forLoop(
            tid, n, kBlockThreads, {fzero},
            [&](Value i, ValueRange it) -> SmallVector<Value> {
              return {arith::AddFOp::create(b, l, it[0], weightOf(i))};
            })[0];
        Value sum = blockReduce(e, localSum, false, slots, warp, lane);
        Value hasKeys = arith::CmpFOp::create(b, l, arith::CmpFPredicate::OGT,
                                              sum, fzero);
        Value inverse = arith::SelectOp::create(
            b, l, hasKeys, arith::DivFOp::create(b, l, e.f32(1.0), sum),
            fzero);

        // The warp's splits: warp, warp + 4, ...; kSplitsPerStep at a time,
        // a split past n clamped to n - 1 (valid memory) and weighted 0.
        Value chunkColumn0 = e.mul(chunk, e.index(kChunkColumns));
        // Column masks only where Lkv is not a whole number of chunks.
        SmallVector<Value> columns, inside;
        for (int64_t k = 0; k < kLaneColumns; ++k) {
          Value c = e.add(lane, e.index(k * kWarpSize));
          columns.push_back(c);
          inside.push_back(latent % kChunkColumns == 0
                               ? Value()
                               : e.lessThan(e.add(chunkColumn0, c),
                                            e.index(latent)));
        }
        Value lastSplit = e.sub(n, e.index(1));
        SmallVector<Value> acc = e.forLoop(
            warp, n, kBlockWarps * kSplitsPerStep,
            SmallVector<Value>(kLaneColumns, fzero),
            [&](Value i0, ValueRange it) -> SmallVector<Value> {
              SmallVector<Value> next(it.begin(), it.end());
              for (int64_t u = 0; u < kSplitsPerStep; ++u) {
                Value i = e.add(i0, e.index(u * kBlockWarps));
                Value split = e.minIndex(i, lastSplit);
                Value w = arith::SelectOp::create(b, l, e.lessThan(i, n),
                                                  weightOf(split), fzero);
                for (int64_t k = 0; k < kLaneColumns; ++k) {
                  Value v = e.loadColumn(part, {req, s, h, split},
                                         e.add(chunkColumn0, columns[k]),
                                         inside[k], latent);
                  next[k] = math::FmaOp::create(b, l, w, v, next[k]);
                }
              }
              return next;
            });
        for (int64_t k = 0; k < kLaneColumns; ++k)
          memref::StoreOp::create(b, l, acc[k], sums,
                                  ValueRange{warp, columns[k]});
        e.barrier();
        // Thread t writes column t of the chunk.
        static_assert(kChunkColumns == kBlockThreads,
                      "a thread per column of the chunk");
        Value column = e.add(chunkColumn0, tid);
        e.ifThen(e.lessThan(column, e.index(latent)), [&] {
          Value total = fzero;
          for (int64_t w = 0; w < kBlockWarps; ++w)
            total = arith::AddFOp::create(
                b, l, total,
                memref::LoadOp::create(b, l, sums,
                                       ValueRange{e.index(w), tid}));
          e.storeF32(arith::MulFOp::create(b, l, total, inverse), out,
                     {req, s, h, column});
        });
        Value writesLse = arith::AndIOp::create(
            b, l,
            arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, tid, zero),
            arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, chunk,
                                  zero));
        e.ifThen(writesLse, [&] {
          Value merged = arith::AddFOp::create(
              b, l, safeMax, math::LogOp::create(b, l, sum));
          e.storeF32(
              arith::SelectOp::create(b, l, hasKeys, merged, e.negInf()), lse,
              {req, h, s});
        });
      });
  Location loc = op.getLoc();
  LoopBuilder hb(host, loc);
  Value rows = hb.mul(hb.dim(op.getQ(), 0), hb.dim(op.getQ(), 1));
  KernelFactory::launch(
      host, loc, kernel,
      {rows, hb.index(heads),
       hb.index((latent + kChunkColumns - 1) / kChunkColumns)},
      combineArgs, kSharedBytes);
}

} // namespace mla::gpu
