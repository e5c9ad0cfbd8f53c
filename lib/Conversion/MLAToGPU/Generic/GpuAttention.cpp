//===- GpuAttention.cpp - Prefill and decode attention kernels ------------===//
//
// Generic strategy: one warp per attention row (a query and a head), the
// row's head dim spread over the lanes (column c in lane c % 32). Each key
// is scored with a warp-wide dot product reduced through shuffles, and the
// online-softmax state (running max, sum, and the lane's output columns)
// stays in registers.
//
// Decode splits each request's keys: a block handles one split for four
// heads (the heads share the cache rows through L1), writes a normalized
// partial output and its LSE, and a combine kernel merges the splits. Long
// contexts so spread over all SMs whatever the batch size. By default every
// request is cut into chunks of 256 tokens per 16 heads, in partials
// allocated per call; with the op's split plan (num_splits, split_out,
// split_lse) each request gets its own split count, its pages dealt evenly
// over its splits, in the caller's workspaces.
//
//===----------------------------------------------------------------------===//

#include "KernelDispatch.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
using mlir::gpu::Dimension;

namespace mla::gpu {

namespace {

/// Keys a warp scores together (independent work in flight).
constexpr int64_t kKeysPerStep = 4;

/// A row of a memref: memref[prefix..., column].
struct RowRef {
  Value memref;
  SmallVector<Value, 5> prefix;
};

struct WarpAttention {
  RowRef query;
  int64_t qkDim, vDim;
  float scale;
  Value firstKey, endKey; ///< keys [firstKey, endKey)
  std::function<RowRef(Value key)> keyRow, valueRow;
  /// An FP8 cache's scale (keys and values read x scale), or null.
  Value kvScale = {};
};

/// Online-softmax state at the end of a row.
struct RowState {
  Value max, sum;
  SmallVector<Value> acc; ///< the lane's output columns, unnormalized
};

RowState emitWarpAttention(GpuEmitter &e, const WarpAttention &w) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  Value lane = e.laneId();
  int64_t qCols = GpuEmitter::columnsPerLane(w.qkDim);
  int64_t vCols = GpuEmitter::columnsPerLane(w.vDim);

  // The query stays in registers for the whole row.
  SmallVector<Value> q;
  SmallVector<std::pair<Value, Value>> qColumns, vColumns;
  for (int64_t k = 0; k < qCols; ++k) {
    qColumns.push_back(e.laneColumn(lane, k, w.qkDim));
    q.push_back(e.loadColumn(w.query.memref, w.query.prefix,
                             qColumns.back().first, qColumns.back().second,
                             w.qkDim));
  }
  for (int64_t k = 0; k < vCols; ++k)
    vColumns.push_back(e.laneColumn(lane, k, w.vDim));

  // Keys are scored kKeysPerStep at a time: their loads, dot products and
  // shuffle reductions are independent, which hides their latency. Keys
  // past the end are clamped to the last key (valid memory, never a
  // poisoned row) and weighted 0.
  Value scale = e.f32(w.scale);
  // An FP8 cache's scale: once into the scores' scale and into each key's
  // weight on its values, rather than into every loaded entry.
  if (w.kvScale)
    scale = arith::MulFOp::create(b, loc, scale, w.kvScale);
  Value lastKey = e.sub(w.endKey, e.index(1));
  SmallVector<Value> init{e.negInf(), e.f32(0.0)};
  init.append(vCols, e.f32(0.0));
  SmallVector<Value> state = e.forLoop(
      w.firstKey, w.endKey, kKeysPerStep, init,
      [&](Value j0, ValueRange it) -> SmallVector<Value> {
        SmallVector<Value> keys, valid, scores;
        for (int64_t u = 0; u < kKeysPerStep; ++u) {
          Value j = e.add(j0, e.index(u));
          valid.push_back(e.lessThan(j, w.endKey));
          keys.push_back(e.minIndex(j, lastKey));
        }
        for (int64_t u = 0; u < kKeysPerStep; ++u) {
          RowRef key = w.keyRow(keys[u]);
          Value partial = e.f32(0.0);
          for (int64_t k = 0; k < qCols; ++k)
            partial = math::FmaOp::create(
                b, loc, q[k],
                e.loadColumn(key.memref, key.prefix, qColumns[k].first,
                             qColumns[k].second, w.qkDim),
                partial);
          scores.push_back(partial);
        }
        // Clamped keys score -inf and get no weight.
        Value max = it[0];
        for (int64_t u = 0; u < kKeysPerStep; ++u) {
          Value s = arith::MulFOp::create(b, loc, e.warpSum(scores[u]), scale);
          scores[u] = arith::SelectOp::create(b, loc, valid[u], s, e.negInf());
          max = e.foldMax(max, scores[u]);
        }
        auto [alpha, sum] = e.rescaleToMax(it[0], max, it[1]);
        SmallVector<Value> p;
        for (int64_t u = 0; u < kKeysPerStep; ++u) {
          p.push_back(e.softmaxWeight(scores[u], max));
          sum = arith::AddFOp::create(b, loc, sum, p[u]);
        }
        SmallVector<Value> next{max, sum};
        for (int64_t k = 0; k < vCols; ++k)
          next.push_back(arith::MulFOp::create(b, loc, it[2 + k], alpha));
        for (int64_t u = 0; u < kKeysPerStep; ++u) {
          RowRef value = w.valueRow(keys[u]);
          Value weight = w.kvScale
                             ? arith::MulFOp::create(b, loc, p[u], w.kvScale)
                                   .getResult()
                             : p[u];
          for (int64_t k = 0; k < vCols; ++k) {
            Value v = e.loadColumn(value.memref, value.prefix,
                                   vColumns[k].first, vColumns[k].second,
                                   w.vDim);
            next[2 + k] = math::FmaOp::create(b, loc, weight, v, next[2 + k]);
          }
        }
        return next;
      });
  return {state[0], state[1], SmallVector<Value>(state.begin() + 2, state.end())};
}

/// Writes a finished row: out = acc / sum (0 for an empty row) over the
/// lane's columns of `out`, and lse = max + log(sum) (-inf when empty)
/// through `storeLse`, from lane 0. With `entryLse` (the LSE `out` and the
/// row's LSE hold on entry, read by every lane before lane 0 writes), the
/// row is merged into that state instead (an empty one is not read).
void emitRowOutput(GpuEmitter &e, const RowState &state, int64_t vDim,
                   const RowRef &out,
                   const std::function<void(Value lse)> &storeLse,
                   Value entryLse = {}) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  LoopBuilder::RowEnd end = e.rowEnd(state.max, state.sum);
  Value inverse = end.inverse, lse = end.lse;
  Value entryWeight;
  if (entryLse) {
    LoopBuilder::MergeWeights w = e.mergeWeights(entryLse, lse);
    inverse = arith::MulFOp::create(b, loc, inverse, w.suffix);
    entryWeight = w.prefix;
    lse = w.lse;
  }
  Value lane = e.laneId();
  for (int64_t k = 0; k < (int64_t)state.acc.size(); ++k) {
    auto [column, inside] = e.laneColumn(lane, k, vDim);
    Value value = arith::MulFOp::create(b, loc, state.acc[k], inverse);
    if (entryWeight)
      value = e.mergeIntoEntryOutput(
          value, e.loadColumn(out.memref, out.prefix, column, inside, vDim),
          entryWeight);
    e.storeColumn(value, out.memref, out.prefix, column, inside);
  }
  Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane,
                                      e.index(0));
  e.ifThen(first, [&] { storeLse(lse); });
}

} // namespace

/// The CUDA-core prefill kernel, a warp per (token, head) row, launched
/// from `host`.
void lowerGenericPrefill(PrefillAttentionOp op, KernelFactory &kernels,
                         OpBuilder &host) {
  int64_t heads = op.getNumHeads(), qkDim = op.getQkHeadDim(),
          vDim = op.getVHeadDim();
  float scale = op.getSoftmaxScale().convertToFloat();
  bool causal = op.getCausal(), accumulate = op.getAccumulate();
  auto kernel = kernels.create(
      "prefill_attention", op->getOperandTypes(),
      [&](GpuEmitter &e, ValueRange a) {
        Value q = a[0], k = a[1], v = a[2], cuQ = a[3], cuK = a[4],
              out = a[5], lse = a[6];
        Value zero = e.index(0), one = e.index(1);
        Value token = e.add(
            e.mul(e.blockId(Dimension::x), e.index(kBlockWarps)),
            e.warpId());
        Value h = e.blockId(Dimension::y);
        Value numTokens = e.dim(q, 0), numKv = e.dim(k, 0);
        Value numSeqs = e.minIndex(e.sub(e.dim(cuQ, 0), one),
                                   e.sub(e.dim(cuK, 0), one));
        // The sequence owning this token: the last b with cu_q[b] <= token
        // (offsets are non-decreasing).
        Value seq = e.forLoop(zero, numSeqs, 1, {e.index(-1)},
                              [&](Value b, ValueRange it) -> SmallVector<Value> {
                                Value starts = arith::CmpIOp::create(
                                    e.builder(), e.location(),
                                    arith::CmpIPredicate::sle,
                                    e.loadIndex(cuQ, {b}), token);
                                return {arith::SelectOp::create(
                                    e.builder(), e.location(), starts, b,
                                    it[0])};
                              })[0];
        Value found = arith::CmpIOp::create(e.builder(), e.location(),
                                            arith::CmpIPredicate::sge, seq,
                                            zero);
        Value seqSafe = e.maxIndex(seq, zero);
        Value next = e.add(seqSafe, one);
        Value qBegin =
            e.clampIndex(e.loadIndex(cuQ, {seqSafe}), zero, numTokens);
        Value qEnd =
            e.clampIndex(e.loadIndex(cuQ, {next}), qBegin, numTokens);
        Value kBegin = e.clampIndex(e.loadIndex(cuK, {seqSafe}), zero, numKv);
        Value kEnd = e.clampIndex(e.loadIndex(cuK, {next}), kBegin, numKv);
        Value inSequence = arith::AndIOp::create(
            e.builder(), e.location(), found,
            arith::AndIOp::create(e.builder(), e.location(),
                                  e.lessThan(token, qEnd),
                                  e.lessThan(token, numTokens)));
        e.ifThen(inSequence, [&] {
          Value i = e.sub(token, qBegin);
          Value visible = e.visibleKeys(causal, i, e.sub(qEnd, qBegin),
                                        e.sub(kEnd, kBegin));
          auto kvRow = [&](Value memref) {
            return [&, memref](Value j) {
              return RowRef{memref, {e.add(kBegin, j), h}};
            };
          };
          WarpAttention w{RowRef{q, {token, h}}, qkDim, vDim, scale, zero,
                          visible, kvRow(k), kvRow(v)};
          RowState state = emitWarpAttention(e, w);
          emitRowOutput(
              e, state, vDim, RowRef{out, {token, h}},
              [&](Value l) {
                e.storeF32(l, lse, {h, token});
              },
              accumulate ? e.loadF32(lse, {h, token}) : Value());
        });
      });
  LoopBuilder hb(host, op.getLoc());
  KernelFactory::launch(host, op.getLoc(), kernel,
                        {hb.ceilDiv(hb.dim(op.getQ(), 0), kBlockWarps),
                         hb.index(heads), hb.index(1)},
                        op->getOperands());
}


Value DecodeSchedule::activeSplits(GpuEmitter &e, Value numSplits, Value req,
                                   Value capacity) const {
  if (!planned)
    return capacity;
  return e.clampIndex(e.loadIndex(numSplits, {req}), e.index(1), capacity);
}

std::pair<Value, Value> DecodeSchedule::tokenRange(GpuEmitter &e, Value split,
                                                   Value n,
                                                   Value seqLen) const {
  if (!planned) {
    Value first = e.mul(split, e.index(splitTokens));
    return {first, e.add(first, e.index(splitTokens))};
  }
  OpBuilder &b = e.builder();
  Location l = e.location();
  // blocks = cdiv(seqLen, page) dealt out: the first blocks % n splits
  // get one block more than the others.
  Value blocks = e.ceilDiv(seqLen, page);
  Value base = arith::DivUIOp::create(b, l, blocks, n);
  Value rem = arith::RemUIOp::create(b, l, blocks, n);
  Value firstBlock = e.add(e.mul(split, base), e.minIndex(split, rem));
  Value extra = arith::SelectOp::create(b, l, e.lessThan(split, rem),
                                        e.index(1), e.index(0));
  Value endBlock = e.add(e.add(firstBlock, base), extra);
  Value pageSize = e.index(page);
  return {e.mul(firstBlock, pageSize), e.mul(endBlock, pageSize)};
}

/// The CUDA-core split kernel of `op` (a warp per (row, head), four heads a
/// block), launched from `host` on grid (B * Sq, ceil(N / 4), splits) with
/// the split kernel's operands `splitArgs`.
void launchGenericDecodeSplit(DecodeAttentionOp op, KernelFactory &kernels,
                              const DecodeSchedule &schedule, OpBuilder &host,
                              ValueRange splitArgs, Value splits) {
  int64_t heads = op.getNumHeads(), latent = op.getKvLoraRank(),
          page = op.getBlockSize();
  int64_t qkDim = latent + op.getRopeDim();
  float scale = op.getSoftmaxScale().convertToFloat();
  bool causal = op.getCausal();
  Location loc = op.getLoc();
  LoopBuilder hb(host, loc);
  Value batch = hb.dim(op.getQ(), 0), queryLen = hb.dim(op.getQ(), 1);
  auto splitKernel = kernels.create(
      "decode_attention_split", ValueRange(splitArgs).getTypes(),
      [&](GpuEmitter &e, ValueRange a) {
        Value q = a[0], cache = a[1], table = a[2], lens = a[3];
        // An FP8 cache's scale, then the schedule's split counts.
        size_t next = 4;
        Value kvScale = op.getKvScale() ? e.cacheScale(a[next++]) : Value();
        Value numSplits = schedule.planned ? a[next] : Value();
        Value part = a[a.size() - 4], partLse = a[a.size() - 3],
              out = a[a.size() - 2], lse = a[a.size() - 1];
        OpBuilder &b = e.builder();
        Location l = e.location();
        Value zero = e.index(0), one = e.index(1), pageSize = e.index(page);
        Value sq = e.dim(q, 1);
        Value row = e.blockId(Dimension::x);
        Value req = arith::DivUIOp::create(b, l, row, sq);
        Value s = arith::RemUIOp::create(b, l, row, sq);
        Value h = e.add(e.mul(e.blockId(Dimension::y), e.index(kBlockWarps)),
                        e.warpId());
        Value split = e.blockId(Dimension::z);
        Value capacity = e.pagedCapacity(table, cache, pageSize);
        Value lastBlock = e.sub(e.dim(cache, 0), one);
        Value active = e.lessThan(h, e.index(heads));
        Value n = schedule.activeSplits(e, numSplits, req, e.dim(partLse, 3));
        if (schedule.planned) {
          // A split past the request's count writes nothing: the combine
          // reads only the first n partials.
          active = arith::AndIOp::create(b, l, active, e.lessThan(split, n));
        }
        e.ifThen(active, [&] {
          Value counted = e.loadIndex(lens, {req});
          Value seqLen = e.decodeKeys(op.getKvShare(), counted, capacity);
          Value visible = e.decodeVisibleKeys(causal, op.getKvShare(), s, sq,
                                              counted, seqLen);
          auto [first, last] = schedule.tokenRange(e, split, n, seqLen);
          Value end = e.clampIndex(last, zero, visible);
          auto cacheRow = [&](Value j) {
            Value blockIdx = arith::DivUIOp::create(b, l, j, pageSize);
            Value offset = arith::RemUIOp::create(b, l, j, pageSize);
            Value blockId = e.clampIndex(e.loadIndex(table, {req, blockIdx}),
                                         zero, lastBlock);
            return RowRef{cache, {blockId, offset}};
          };
          WarpAttention w{RowRef{q, {req, s, h}},
                          qkDim,
                          latent,
                          scale,
                          first,
                          end,
                          cacheRow,
                          cacheRow,
                          kvScale};
          RowState state = emitWarpAttention(e, w);
          writeSplitResults(
              e, e.eqIndex(n, 1), req, split, part, partLse, out, lse,
              [&](const SplitResults &to) {
                emitRowOutput(e, state, latent,
                              RowRef{to.values, to.rowIndex(s, h)},
                              [&](Value rowLse) {
                                e.storeF32(rowLse, to.lse, to.lseIndex(s, h));
                              });
              });
        });
      });
  KernelFactory::launch(host, loc, splitKernel,
                        {hb.mul(batch, queryLen),
                         hb.index((heads + kBlockWarps - 1) / kBlockWarps),
                         splits},
                        splitArgs);
}

void lowerDecodeAttention(DecodeAttentionOp op, KernelFactory &kernels) {
  int64_t heads = op.getNumHeads(), latent = op.getKvLoraRank(),
          page = op.getBlockSize();
  DecodeSchedule schedule{op.hasSplitPlan(), decodeSplitTokens(heads), page};
  Location loc = op.getLoc();
  OpBuilder host(op);
  LoopBuilder hb(host, loc);
  MLIRContext *ctx = op.getContext();

  // Partial results of every split: [B, Sq, N, splits, Lkv] and
  // [B, Sq, N, splits], the caller's workspaces or allocated here.
  Value batch = hb.dim(op.getQ(), 0), queryLen = hb.dim(op.getQ(), 1);
  Value partial, partialLse, splits;
  if (schedule.planned) {
    partial = op.getSplitOut();
    partialLse = op.getSplitLse();
    splits = hb.dim(partialLse, 3);
  } else {
    splits = hb.ceilDiv(
        hb.mul(hb.dim(op.getBlockTable(), 1), hb.index(page)),
        schedule.splitTokens);
    int64_t dyn = ShapedType::kDynamic;
    auto partialType =
        MemRefType::get({dyn, dyn, heads, dyn, latent}, Float32Type::get(ctx));
    auto partialLseType =
        MemRefType::get({dyn, dyn, heads, dyn}, Float32Type::get(ctx));
    partial = mlir::gpu::AllocOp::create(
                  host, loc, partialType, /*asyncToken=*/Type(), ValueRange{},
                  ValueRange{batch, queryLen, splits}, ValueRange{},
                  /*hostShared=*/false)
                  .getMemref();
    partialLse = mlir::gpu::AllocOp::create(
                     host, loc, partialLseType, Type(), ValueRange{},
                     ValueRange{batch, queryLen, splits}, ValueRange{}, false)
                     .getMemref();
  }
  // The planned schedule's per-request split counts: one more argument of
  // both kernels, right before the partials (the op's operand order).
  SmallVector<Value> plan;
  if (schedule.planned)
    plan.push_back(op.getNumSplits());

  SmallVector<Value> splitArgs{op.getQ(), op.getKvCache(), op.getBlockTable(),
                               op.getSeqLens()};
  if (Value kvScale = op.getKvScale())
    splitArgs.push_back(kvScale);
  llvm::append_range(splitArgs, plan);
  splitArgs.append({partial, partialLse, op.getOut(), op.getLse()});
  launchDecodeSplit(op, kernels, schedule, host, splitArgs, splits);

  // The combine merges the requests of several splits (those of one got
  // their results from the split kernel).
  SmallVector<Value> combineArgs(plan);
  combineArgs.append({partial, partialLse, op.getOut(), op.getLse()});
  launchDecodeCombine(op, kernels, schedule, host, combineArgs);
  if (!schedule.planned) {
    mlir::gpu::DeallocOp::create(host, loc, /*asyncToken=*/Type(),
                                 ValueRange{}, partial);
    mlir::gpu::DeallocOp::create(host, loc, Type(), ValueRange{}, partialLse);
  }
}

} // namespace mla::gpu
