//===- GpuDataMovement.cpp - merge, gather and concat kernels -------------===//
//
// Bandwidth-bound kernels. A group of `lanes` threads (a warp, or a part of
// a block) owns one row (token and head, or cache entry) and moves it in
// 16-byte vectors: lane i takes vectors i, i + lanes, ... so every warp-wide
// access covers consecutive 16-byte words. The vector path needs rows whose
// width is a multiple of 8 elements and 16-byte aligned bases (checked once
// per kernel, at run time); otherwise the same threads move single elements.
//
//===----------------------------------------------------------------------===//

#include "GpuKernels.h"
#include "Emitters/RowMove.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <functional>

using namespace mlir;
using mlir::gpu::Dimension;

namespace mla::gpu {

namespace {
/// The gather's grid is (request, blocks per request); each block's warps
/// loop over the request's rows. A request gets a block per
/// kBlockWarps x rowsPerWarp of the workspace's rows (one pass of its
/// warps, were they all its own), but at most the larger of
/// kGatherBlocksPerRequest and a kGatherGridBlocks grid shared out over the
/// requests: a lone long chunk is spread over the whole GPU, many requests
/// keep a bounded grid.
constexpr int64_t kGatherBlocksPerRequest = 32;
constexpr int64_t kGatherGridBlocks = 1024;
constexpr int64_t kWidth = GpuEmitter::kVectorWidth;

/// `scalar` broadcast to vector<8xf32> when `like` is a vector.
Value splatLike(GpuEmitter &e, Value scalar, Value like) {
  auto type = dyn_cast<VectorType>(like.getType());
  if (!type)
    return scalar;
  return vector::BroadcastOp::create(e.builder(), e.location(), type, scalar);
}

/// The RowMove combine of an FP8 cache's rows (none without a `scale`):
/// moved in, value / scale; moved out, entry x scale.
enum class CacheSide { Into, OutOf };
std::function<Value(GpuEmitter &, ArrayRef<Value>)> scaledMove(Value scale,
                                                              CacheSide side) {
  if (!scale)
    return nullptr;
  return [scale, side](GpuEmitter &e, ArrayRef<Value> v) -> Value {
    OpBuilder &b = e.builder();
    Value s = splatLike(e, scale, v[0]);
    if (side == CacheSide::Into)
      return arith::DivFOp::create(b, e.location(), v[0], s);
    return arith::MulFOp::create(b, e.location(), v[0], s);
  };
}
} // namespace

namespace {
/// The grid of the merges: `lanes` threads a merged row (a token and head),
/// enough for one vector each, a power of two up to the whole block; a
/// block holds kBlockThreads / lanes rows.
struct MergeRowGrid {
  int64_t lanes = 1, rowsPerBlock = 0;

  explicit MergeRowGrid(int64_t headDim) {
    while (lanes < kBlockThreads && lanes * kWidth < headDim)
      lanes *= 2;
    rowsPerBlock = kBlockThreads / lanes;
  }

  /// The calling thread's row of `rows`, clamped to the last one (rows past
  /// the end read in bounds and write nothing), its lane, and whether the
  /// row is real.
  struct Thread {
    Value row, lane, inside;
  };
  Thread thread(GpuEmitter &e, Value rows) const {
    OpBuilder &b = e.builder();
    Location loc = e.location();
    Value row = e.add(e.mul(e.blockId(Dimension::x), e.index(rowsPerBlock)),
                      arith::DivUIOp::create(b, loc, e.threadId(),
                                             e.index(lanes)));
    Value lane = arith::RemUIOp::create(b, loc, e.threadId(), e.index(lanes));
    Value inside =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, row, rows);
    return {e.minIndex(row, e.sub(rows, e.index(1))), lane, inside};
  }

  /// Moves the merged row: destination columns = sum_i weights[i] *
  /// sources[i]'s, then the merged LSE by `storeLse` from the row's first
  /// lane (if given), past a block barrier where it may overwrite an input
  /// LSE (`lseInPlace`).
  void writeRow(GpuEmitter &e, const Thread &t,
                const LoopBuilder::StateWeights &w, RowMove move,
                Value vectorOk, const std::function<void()> &storeLse,
                bool lseInPlace) const {
    move.combine = [&](GpuEmitter &e, ArrayRef<Value> v) -> Value {
      OpBuilder &b = e.builder();
      Location loc = e.location();
      // Products made last first, summed first to last: the two-way
      // merge's PTX as it was measured.
      SmallVector<Value, 4> terms(v.size());
      for (size_t i = v.size(); i-- > 0;)
        terms[i] = arith::MulFOp::create(
            b, loc, splatLike(e, w.weights[i], v[i]), v[i]);
      Value sum = terms[0];
      for (Value term : ArrayRef<Value>(terms).drop_front())
        sum = arith::AddFOp::create(b, loc, sum, term);
      return sum;
    };
    e.ifThen(t.inside, [&] { move.emit(e, t.lane, lanes, vectorOk); });
    if (!storeLse)
      return;
    // In place, every thread of the block has read its row's LSEs before
    // the first lane of each row overwrites them. Rows never share LSEs
    // across blocks.
    OpBuilder &b = e.builder();
    Location loc = e.location();
    if (lseInPlace)
      mlir::gpu::BarrierOp::create(b, loc);
    Value first = arith::AndIOp::create(
        b, loc, t.inside,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, t.lane,
                              e.index(0)));
    e.ifThen(first, storeLse);
  }

  /// Launches `kernel` over `rows` merged rows, from the host code at `op`.
  void launch(Operation *op, mlir::gpu::GPUFuncOp kernel,
              const std::function<Value(LoopBuilder &)> &rows) const {
    OpBuilder host(op);
    LoopBuilder h(host, op->getLoc());
    KernelFactory::launch(
        host, op->getLoc(), kernel,
        {h.ceilDiv(rows(h), rowsPerBlock), h.index(1), h.index(1)},
        op->getOperands());
  }
};
} // namespace

void lowerMergeAttnStates(MergeAttnStatesOp op, KernelFactory &kernels) {
  int64_t headDim =
      cast<MemRefType>(op.getOutput().getType()).getDimSize(2);
  bool withLse = static_cast<bool>(op.getOutputLse());
  MergeRowGrid grid(headDim);
  auto kernel = kernels.create(
      "merge_attn_states", op->getOperandTypes(),
      [&](GpuEmitter &e, ValueRange a) {
        OpBuilder &b = e.builder();
        Location loc = e.location();
        Value numTokens = e.dim(a[4], 0), numHeads = e.dim(a[4], 1);
        MergeRowGrid::Thread thread = grid.thread(e, e.mul(numTokens, numHeads));
        Value t = arith::DivUIOp::create(b, loc, thread.row, numHeads);
        Value h = arith::RemUIOp::create(b, loc, thread.row, numHeads);
        LoopBuilder::MergeWeights two =
            e.mergeWeights(e.loadF32(a[1], {h, t}), e.loadF32(a[3], {h, t}));
        LoopBuilder::StateWeights w{{two.prefix, two.suffix}, two.lse};
        Value vectorOk = vectorPathFlag(e, {a[0], a[2], a[4]});
        RowMove move{a[4], {t, h}, 0, {{a[0], {t, h}}, {a[2], {t, h}}},
                     headDim};
        std::function<void()> storeLse;
        if (withLse)
          storeLse = [&] { e.storeF32(w.lse, a[5], {h, t}); };
        // merge_attn_states may run in place (its output LSE an input's).
        grid.writeRow(e, thread, w, move, vectorOk, storeLse,
                      /*lseInPlace=*/true);
      });
  grid.launch(op, kernel, [&](LoopBuilder &h) {
    Value numTokens = h.dim(op.getOutput(), 0);
    Value numHeads = h.dim(op.getOutput(), 1);
    return h.mul(numTokens, numHeads);
  });
}

void lowerMergeAttnStatesN(MergeAttnStatesNOp op, KernelFactory &kernels) {
  auto partialType = cast<MemRefType>(op.getPartialOutputs().getType());
  int64_t numStates = partialType.getDimSize(0);
  int64_t headDim = partialType.getDimSize(4);
  bool withLse = static_cast<bool>(op.getOutputLse());
  MergeRowGrid grid(headDim);
  auto kernel = kernels.create(
      "merge_attn_states_n", op->getOperandTypes(),
      [&](GpuEmitter &e, ValueRange a) {
        OpBuilder &b = e.builder();
        Location loc = e.location();
        Value partials = a[0], lses = a[1], out = a[2];
        // Rows in output order: (request, query, head).
        Value queries = e.dim(out, 1), heads = e.dim(out, 2);
        MergeRowGrid::Thread thread = grid.thread(
            e, e.mul(e.mul(e.dim(out, 0), queries), heads));
        Value h = arith::RemUIOp::create(b, loc, thread.row, heads);
        Value token = arith::DivUIOp::create(b, loc, thread.row, heads);
        Value q = arith::RemUIOp::create(b, loc, token, queries);
        Value request = arith::DivUIOp::create(b, loc, token, queries);
        SmallVector<Value, 4> stateLses;
        RowMove move{out, {request, q, h}, 0, {}, headDim};
        for (int64_t s = 0; s < numStates; ++s) {
          Value state = e.index(s);
          stateLses.push_back(e.loadF32(lses, {state, request, h, q}));
          move.sources.push_back({partials, {state, request, q, h}});
        }
        LoopBuilder::StateWeights w = e.mergeWeights(stateLses);
        Value vectorOk = vectorPathFlag(e, {partials, out});
        std::function<void()> storeLse;
        if (withLse)
          storeLse = [&] { e.storeF32(w.lse, a[3], {request, h, q}); };
        grid.writeRow(e, thread, w, move, vectorOk, storeLse,
                      /*lseInPlace=*/false);
      });
  grid.launch(op, kernel, [&](LoopBuilder &h) {
    Value out = op.getOutput();
    Value requests = h.dim(out, 0), queries = h.dim(out, 1),
          heads = h.dim(out, 2);
    return h.mul(h.mul(requests, queries), heads);
  });
}

void lowerGatherCache(GatherCacheOp op, KernelFactory &kernels) {
  int64_t entry =
      cast<MemRefType>(op.getWorkspace().getType()).getDimSize(1);
  int64_t page = op.getBlockSize();
  // Rows a warp moves together: the fewest whose vectors fill whole
  // warp-wide passes (at most 8).
  int64_t vectorsPerRow = entry % kWidth == 0 ? entry / kWidth : 0;
  int64_t rowsPerWarp = 1;
  while (vectorsPerRow && rowsPerWarp < 8 &&
         (rowsPerWarp * vectorsPerRow) % kWarpSize != 0)
    rowsPerWarp *= 2;
  auto kernel = kernels.create(
      "gather_cache", op->getOperandTypes(), [&](GpuEmitter &e, ValueRange a) {
        // An FP8 cache's scale comes right before the workspace.
        Value cache = a[0], table = a[1], cu = a[2], starts = a[3],
              workspace = a.back();
        Value scale = op.getKvScale() ? e.cacheScale(a[4]) : Value();
        Value req = e.blockId(Dimension::x);
        Value zero = e.index(0), one = e.index(1), pageSize = e.index(page);
        Value rows = e.dim(workspace, 0);
        Value lastBlock = e.sub(e.dim(cache, 0), one);
        Value capacity = e.pagedCapacity(table, cache, pageSize);
        Value begin = e.clampIndex(e.loadIndex(cu, {req}), zero, rows);
        Value end =
            e.clampIndex(e.loadIndex(cu, {e.add(req, one)}), begin, rows);
        Value start =
            e.clampIndex(e.loadIndex(starts, {req}), zero, capacity);
        Value count = e.minIndex(e.sub(end, begin), e.sub(capacity, start));
        // A warp moves `rowsPerWarp` consecutive token rows as one flat run
        // of 16-byte vectors: enough rows that the run is a whole number of
        // warp-wide passes (72 vectors a 576-wide bf16 row: 4 rows, 9
        // passes), so no lane idles and each lane has several loads in
        // flight.
        Value vectorOk = vectorPathFlag(e, {cache, workspace});
        Value lane = e.laneId();
        Value firstRow = e.mul(e.add(e.mul(e.blockId(Dimension::y),
                                           e.index(kBlockWarps)),
                                     e.warpId()),
                               e.index(rowsPerWarp));
        Value rowStep = e.mul(e.gridDim(Dimension::y),
                              e.index(kBlockWarps * rowsPerWarp));
        e.forLoop(firstRow, count, rowStep, [&](Value j0) {
          OpBuilder &b = e.builder();
          Location loc = e.location();
          // Where each of the warp's rows lives in the cache (rows past
          // `count` read the last row's place and are not written).
          SmallVector<Value> pages, offsets, valid;
          for (int64_t r = 0; r < rowsPerWarp; ++r) {
            Value j = e.add(j0, e.index(r));
            valid.push_back(e.lessThan(j, count));
            Value token = e.add(start, e.minIndex(j, e.sub(count, one)));
            Value blockIdx = arith::DivUIOp::create(b, loc, token, pageSize);
            offsets.push_back(arith::RemUIOp::create(b, loc, token, pageSize));
            pages.push_back(e.clampIndex(e.loadIndex(table, {req, blockIdx}),
                                         zero, lastBlock));
          }
          auto rowMove = [&](int64_t r) {
            return RowMove{workspace, {e.add(begin, e.add(j0, e.index(r)))},
                           0, {{cache, {pages[r], offsets[r]}}}, entry,
                           scaledMove(scale, CacheSide::OutOf)};
          };
          auto elementwise = [&] {
            for (int64_t r = 0; r < rowsPerWarp; ++r)
              e.ifThen(valid[r],
                       [&] { rowMove(r).emit(e, lane, kWarpSize, Value()); });
          };
          if (!vectorOk || !rowMove(0).vectorizable()) {
            elementwise();
            return;
          }
          e.ifThenElse(
              vectorOk,
              [&] {
                // Every load of the warp's run first, then the stores:
                // each lane has all its 16-byte loads in flight at once
                // instead of one round trip to memory per pass.
                OpBuilder &b = e.builder();
                Location loc = e.location();
                int64_t runVectors = rowsPerWarp * vectorsPerRow;
                int64_t passes = llvm::divideCeil(runVectors, kWarpSize);
                SmallVector<Value> values, destRows, columns, stores;
                for (int64_t p = 0; p < passes; ++p) {
                  Value v = e.add(lane, e.index(p * kWarpSize));
                  Value inRun;
                  if ((p + 1) * kWarpSize > runVectors) {
                    inRun = e.lessThan(v, e.index(runVectors));
                    v = e.minIndex(v, e.index(runVectors - 1));
                  }
                  Value r =
                      arith::DivUIOp::create(b, loc, v, e.index(vectorsPerRow));
                  Value c = e.mul(
                      arith::RemUIOp::create(b, loc, v, e.index(vectorsPerRow)),
                      e.index(kWidth));
                  // The row's page, offset and validity, chosen among the
                  // warp's rows (rows past `count` read a valid place).
                  Value page = pages[0], offset = offsets[0], ok = valid[0];
                  for (int64_t k = 1; k < rowsPerWarp; ++k) {
                    Value isK = arith::CmpIOp::create(
                        b, loc, arith::CmpIPredicate::eq, r, e.index(k));
                    page = arith::SelectOp::create(b, loc, isK, pages[k], page);
                    offset = arith::SelectOp::create(b, loc, isK, offsets[k],
                                                     offset);
                    ok = arith::SelectOp::create(b, loc, isK, valid[k], ok);
                  }
                  values.push_back(e.loadVector(cache, {page, offset, c}));
                  destRows.push_back(e.add(begin, e.add(j0, r)));
                  columns.push_back(c);
                  stores.push_back(
                      inRun ? arith::AndIOp::create(b, loc, ok, inRun) : ok);
                }
                // An FP8 cache's codes are dequantized and scaled once
                // loaded (other caches move as they are).
                auto combine = scaledMove(scale, CacheSide::OutOf);
                for (int64_t p = 0; p < passes; ++p)
                  e.ifThen(stores[p], [&] {
                    Value v = combine ? combine(e, {e.vectorF32(values[p])})
                                      : values[p];
                    e.storeVector(v, workspace, {destRows[p], columns[p]});
                  });
              },
              elementwise);
        });
      });
  OpBuilder host(op);
  LoopBuilder h(host, op.getLoc());
  Value requests = h.dim(op.getSeqStarts(), 0);
  Value shareOfGrid =
      arith::CeilDivUIOp::create(host, op.getLoc(), h.index(kGatherGridBlocks),
                                 h.maxIndex(requests, h.index(1)));
  Value blocksPerRequest = h.clampIndex(
      h.ceilDiv(h.dim(op.getWorkspace(), 0), kBlockWarps * rowsPerWarp),
      h.index(1), h.maxIndex(shareOfGrid, h.index(kGatherBlocksPerRequest)));
  KernelFactory::launch(host, op.getLoc(), kernel,
                        {requests, blocksPerRequest, h.index(1)},
                        op->getOperands());
}

void lowerConcatAndCache(ConcatAndCacheOp op, KernelFactory &kernels) {
  int64_t latent = op.getKvLoraRank(), rope = op.getRopeDim(),
          page = op.getBlockSize();
  auto kernel = kernels.create(
      "concat_and_cache", op->getOperandTypes(),
      [&](GpuEmitter &e, ValueRange a) {
        // An FP8 cache's scale comes right before the cache.
        const bool scaled = op.getKvScale() != nullptr;
        Value kvC = a[0], kPe = a[1], slots = a[2], cache = a.back();
        Value scale = scaled ? e.cacheScale(a[3]) : Value();
        OpBuilder &b = e.builder();
        Location l = e.location();
        // One warp per token.
        Value t = e.add(e.mul(e.blockId(Dimension::x), e.index(kBlockWarps)),
                        e.warpId());
        Value tokens = e.dim(slots, 0);
        Value vectorOk = vectorPathFlag(e, {kvC, kPe, cache});
        Value lane = e.laneId();
        Value tokenInside = arith::CmpIOp::create(
            b, l, arith::CmpIPredicate::slt, t, tokens);
        t = e.minIndex(t, e.sub(tokens, e.index(1)));
        Location loc = e.location();
        Value pageSize = e.index(page);
        Value capacity = e.mul(e.dim(cache, 0), pageSize);
        Value slot = e.loadIndex(slots, {t});
        // Padding (-1) and slots past the cache are skipped.
        Value valid = arith::AndIOp::create(
            b, loc,
            arith::AndIOp::create(
                b, loc, tokenInside,
                arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, slot,
                                      e.index(0))),
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, slot,
                                  capacity));
        e.ifThen(valid, [&] {
          Value blockId = arith::DivUIOp::create(b, loc, slot, pageSize);
          Value offset = arith::RemUIOp::create(b, loc, slot, pageSize);
          RowMove{cache, {blockId, offset}, 0, {{kvC, {t}}}, latent,
                  scaledMove(scale, CacheSide::Into)}
              .emit(e, lane, kWarpSize, vectorOk);
          RowMove{cache, {blockId, offset}, latent, {{kPe, {t}}}, rope,
                  scaledMove(scale, CacheSide::Into)}
              .emit(e, lane, kWarpSize, vectorOk);
        });
      });
  OpBuilder host(op);
  LoopBuilder h(host, op.getLoc());
  KernelFactory::launch(host, op.getLoc(), kernel,
                        {h.ceilDiv(h.dim(op.getSlotMapping(), 0), kBlockWarps),
                         h.index(1), h.index(1)},
                        op->getOperands());
}

} // namespace mla::gpu
