//===- GpuDataMovement.cpp - merge, gather and concat kernels -------------===//
//
// Bandwidth-bound kernels: one block per row (token and head, or cache
// entry), threads striding over the row's columns so warps read and write
// consecutive elements.
//
//===----------------------------------------------------------------------===//

#include "GpuKernels.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using mlir::gpu::Dimension;

namespace mla::gpu {

namespace {
/// Rows of the latent cache's workspace/gather loops per block.
constexpr int64_t kGatherBlocksPerRequest = 32;

/// dst[dstPrefix..., c] = src[srcPrefix..., c] for c in [0, length),
/// spread over the block's threads.
void copyRow(GpuEmitter &e, Value dst, ValueRange dstPrefix,
             int64_t dstFirstColumn, Value src, ValueRange srcPrefix,
             int64_t length) {
  e.blockStridedLoop(e.index(0), e.index(length), [&](Value c) {
    SmallVector<Value> s(srcPrefix.begin(), srcPrefix.end());
    s.push_back(c);
    SmallVector<Value> d(dstPrefix.begin(), dstPrefix.end());
    d.push_back(dstFirstColumn ? e.add(c, e.index(dstFirstColumn)) : c);
    e.storeF32(e.loadF32(src, s), dst, d);
  });
}
} // namespace

void lowerMergeAttnStates(MergeAttnStatesOp op, KernelFactory &kernels) {
  int64_t headDim =
      cast<MemRefType>(op.getOutput().getType()).getDimSize(2);
  bool withLse = static_cast<bool>(op.getOutputLse());
  auto kernel = kernels.create(
      "merge_attn_states", op->getOperandTypes(),
      [&](GpuEmitter &e, ValueRange a) {
        Value t = e.blockId(Dimension::x), h = e.blockId(Dimension::y);
        Value prefixLse = e.loadF32(a[1], {h, t});
        Value suffixLse = e.loadF32(a[3], {h, t});
        auto w = e.mergeWeights(prefixLse, suffixLse);
        e.blockStridedLoop(e.index(0), e.index(headDim), [&](Value d) {
          Value p = e.loadF32(a[0], {t, h, d});
          Value s = e.loadF32(a[2], {t, h, d});
          OpBuilder &b = e.builder();
          Location loc = e.location();
          Value v = arith::AddFOp::create(
              b, loc, arith::MulFOp::create(b, loc, w.prefix, p),
              arith::MulFOp::create(b, loc, w.suffix, s));
          e.storeF32(v, a[4], {t, h, d});
        });
        if (withLse) {
          // The output LSE may alias an input LSE (in-place merges): every
          // thread has read the inputs before thread 0 overwrites them.
          mlir::gpu::BarrierOp::create(e.builder(), e.location());
          Value first = arith::CmpIOp::create(e.builder(), e.location(),
                                              arith::CmpIPredicate::eq,
                                              e.threadId(), e.index(0));
          e.ifThen(first, [&] { e.storeF32(w.lse, a[5], {h, t}); });
        }
      });
  OpBuilder host(op);
  LoopBuilder h(host, op.getLoc());
  KernelFactory::launch(host, op.getLoc(), kernel,
                        {h.dim(op.getOutput(), 0), h.dim(op.getOutput(), 1),
                         h.index(1)},
                        op->getOperands());
}

void lowerGatherCache(GatherCacheOp op, KernelFactory &kernels) {
  int64_t entry =
      cast<MemRefType>(op.getWorkspace().getType()).getDimSize(1);
  int64_t page = op.getBlockSize();
  auto kernel = kernels.create(
      "gather_cache", op->getOperandTypes(), [&](GpuEmitter &e, ValueRange a) {
        Value cache = a[0], table = a[1], cu = a[2], starts = a[3],
              workspace = a[4];
        Value req = e.blockId(Dimension::x);
        Value zero = e.index(0), one = e.index(1), pageSize = e.index(page);
        Value rows = e.dim(workspace, 0);
        Value lastBlock = e.sub(e.dim(cache, 0), one);
        Value capacity = e.mul(e.dim(table, 1), pageSize);
        Value begin = e.clampIndex(e.loadIndex(cu, {req}), zero, rows);
        Value end =
            e.clampIndex(e.loadIndex(cu, {e.add(req, one)}), begin, rows);
        Value start =
            e.clampIndex(e.loadIndex(starts, {req}), zero, capacity);
        Value count = e.minIndex(e.sub(end, begin), e.sub(capacity, start));
        e.forLoop(e.blockId(Dimension::y), count,
                  e.gridDim(Dimension::y), [&](Value j) {
                    Value token = e.add(start, j);
                    OpBuilder &b = e.builder();
                    Location loc = e.location();
                    Value blockIdx =
                        arith::DivUIOp::create(b, loc, token, pageSize);
                    Value offset =
                        arith::RemUIOp::create(b, loc, token, pageSize);
                    Value blockId = e.clampIndex(
                        e.loadIndex(table, {req, blockIdx}), zero, lastBlock);
                    copyRow(e, workspace, {e.add(begin, j)}, 0, cache,
                            {blockId, offset}, entry);
                  });
      });
  OpBuilder host(op);
  LoopBuilder h(host, op.getLoc());
  KernelFactory::launch(host, op.getLoc(), kernel,
                        {h.dim(op.getSeqStarts(), 0),
                         h.index(kGatherBlocksPerRequest), h.index(1)},
                        op->getOperands());
}

void lowerConcatAndCache(ConcatAndCacheOp op, KernelFactory &kernels) {
  int64_t latent = op.getKvLoraRank(), rope = op.getRopeDim(),
          page = op.getBlockSize();
  auto kernel = kernels.create(
      "concat_and_cache", op->getOperandTypes(),
      [&](GpuEmitter &e, ValueRange a) {
        Value kvC = a[0], kPe = a[1], slots = a[2], cache = a[3];
        Value t = e.blockId(Dimension::x);
        OpBuilder &b = e.builder();
        Location loc = e.location();
        Value pageSize = e.index(page);
        Value capacity = e.mul(e.dim(cache, 0), pageSize);
        Value slot = e.loadIndex(slots, {t});
        // Padding (-1) and slots past the cache are skipped.
        Value valid = arith::AndIOp::create(
            b, loc,
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, slot,
                                  e.index(0)),
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, slot,
                                  capacity));
        e.ifThen(valid, [&] {
          Value blockId = arith::DivUIOp::create(b, loc, slot, pageSize);
          Value offset = arith::RemUIOp::create(b, loc, slot, pageSize);
          copyRow(e, cache, {blockId, offset}, 0, kvC, {t}, latent);
          copyRow(e, cache, {blockId, offset}, latent, kPe, {t}, rope);
        });
      });
  OpBuilder host(op);
  LoopBuilder h(host, op.getLoc());
  KernelFactory::launch(host, op.getLoc(), kernel,
                        {h.dim(op.getSlotMapping(), 0), h.index(1),
                         h.index(1)},
                        op->getOperands());
}

} // namespace mla::gpu
