//===- DecodeSplitBlock.cpp - What the tensor-core split kernels share ----===//

#include "Tiles/DecodeSplitBlock.h"

#include "../../Common/Fp8Convert.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"


using namespace mlir;
using mlir::gpu::Dimension;

namespace mla::gpu {

DecodeOperandTypes decodeOperandTypes(DecodeAttentionOp op) {
  Type element = cast<MemRefType>(op.getQ().getType()).getElementType();
  Type cacheElement =
      cast<MemRefType>(op.getKvCache().getType()).getElementType();
  if (!element.isBF16() && !element.isF16())
    return DecodeOperandTypes::Other;
  if (cacheElement == element)
    return DecodeOperandTypes::SameTwoByte;
  return isFp8Type(cacheElement) ? DecodeOperandTypes::Fp8Cache
                                 : DecodeOperandTypes::Other;
}

DecodeSplitBlock::DecodeSplitBlock(MmaEmitter &e, DecodeAttentionOp op,
                                   const DecodeSchedule &schedule,
                                   ValueRange args, int64_t tileRows)
    : e(e), schedule(schedule), heads(op.getNumHeads()),
      page(op.getBlockSize()), tileRows(tileRows), causal(op.getCausal()),
      share(op.getKvShare()) {
  q = args[0];
  cache = args[1];
  table = args[2];
  lens = args[3];
  int64_t next = 4;
  kvScale = op.getKvScale() ? args[next++] : Value();
  numSplits = schedule.planned ? args[next] : Value();
  part = args[args.size() - 4];
  partLse = args[args.size() - 3];
  out = args[args.size() - 2];
  lse = args[args.size() - 1];
  tileRow0 = e.mul(e.blockId(Dimension::x), e.index(tileRows));
  req = e.blockId(Dimension::y);
  split = e.blockId(Dimension::z);
  queryLen = e.dim(q, 1);
  rows = e.mul(queryLen, e.index(heads));
  capacity = e.pagedCapacity(table, cache, e.index(page));
  lastBlock = e.sub(e.dim(cache, 0), e.index(1));
}

void DecodeSplitBlock::run(const std::function<void()> &body) {
  splitCount = schedule.activeSplits(e, numSplits, req, e.dim(partLse, 3));
  auto withBounds = [&] {
    Value zero = e.index(0);
    counted = e.loadIndex(lens, {req});
    seqLen = e.decodeKeys(share, counted, capacity);
    std::tie(first, last) = schedule.tokenRange(e, split, splitCount, seqLen);
    kvEnd = e.clampIndex(last, zero, seqLen);
    aligned = e.vectorAligned({q, cache});
    loadedKvScale = e.cacheScale(kvScale);
    body();
  };
  if (!schedule.planned)
    return withBounds();
  e.ifThen(e.lessThan(split, splitCount), withBounds);
}

MmaEmitter::SourceRow DecodeSplitBlock::queryRow(Value row) {
  Value r = e.add(tileRow0, row);
  Value rc = e.minIndex(r, e.sub(rows, e.index(1)));
  return {e.lessThan(r, rows), {req, e.divui(rc, heads), e.remui(rc, heads)}};
}

MmaEmitter::SourceRow DecodeSplitBlock::cacheRow(Value tile, Value row) {
  Value j = e.add(tile, row);
  Value jc = e.minIndex(j, e.sub(kvEnd, e.index(1)));
  Value block = e.clampIndex(e.loadIndex(table, {req, e.divui(jc, page)}),
                             e.index(0), lastBlock);
  return {e.lessThan(j, kvEnd), {block, e.remui(jc, page)}};
}

Value DecodeSplitBlock::scoresScale(double scaleLog2) {
  Value scale = e.f32(scaleLog2);
  return loadedKvScale ? e.mulf(scale, loadedKvScale) : scale;
}

void DecodeSplitBlock::scaleOutput(FragmentRowEnd &end) {
  if (loadedKvScale)
    end.inverse = e.mulf(end.inverse, loadedKvScale);
}

DecodeSplitBlock::LaneRow DecodeSplitBlock::laneRow(Value local) {
  Value r = e.add(tileRow0, local);
  Value query = e.divui(r, heads), head = e.remui(r, heads);
  Value visible =
      e.decodeVisibleKeys(causal, share, query, queryLen, counted, seqLen);
  return {local, e.lessThan(r, rows), query, head,
          e.clampIndex(last, e.index(0), visible)};
}

void DecodeSplitBlock::writeResults(
    const std::function<void(const SplitResults &)> &write) {
  writeSplitResults(e, e.eqIndex(splitCount, 1), req, split, part, partLse, out,
                    lse, write);
}

void writeSplitResults(GpuEmitter &e, Value single, Value req, Value split,
                       Value part, Value partLse, Value out, Value lse,
                       const std::function<void(const SplitResults &)> &write) {
  e.ifThenElse(
      single,
      [&] {
        write(SplitResults{out, lse, req, split, false});
      },
      [&] {
        write(SplitResults{part, partLse, req, split, true});
      });
}

void launchSplitGrid(DecodeAttentionOp op, OpBuilder &host,
                       mlir::gpu::GPUFuncOp kernel, ValueRange splitArgs,
                       Value splits, int64_t tileRows, int64_t sharedBytes) {
  LoopBuilder hb(host, op.getLoc());
  Value batch = hb.dim(op.getQ(), 0), queryLen = hb.dim(op.getQ(), 1);
  Value rows = hb.mul(queryLen, hb.index(op.getNumHeads()));
  // The row tiles of a request are adjacent blocks, so that they run
  // together and the later ones read its KV tiles from L2.
  KernelFactory::launch(host, op.getLoc(), kernel,
                        {hb.ceilDiv(rows, tileRows), batch, splits}, splitArgs,
                        sharedBytes);
}

void DecodeSplitBlock::writeStagedRows(ArrayRef<LaneRow> laneRows,
                                       ArrayRef<FragmentRowEnd> ends,
                                       Value writesLse, Value staging,
                                       int64_t columns, Value tid,
                                       int64_t threads) {
  writeResults([&](const SplitResults &to) {
    for (auto [row, end] : llvm::zip_equal(laneRows, ends))
      e.ifThen(e.andi(row.real, writesLse), [&, &row = row, &end = end] {
        e.storeF32(end.lse, to.lse, to.lseIndex(row.query, row.head));
      });
    e.copyStagedRows(
        staging, tileRows, columns, tid, threads,
        [&](Value r) { return laneRow(r).real; },
        [&](Value r) {
          LaneRow row = laneRow(r);
          return to.rowIndex(row.query, row.head);
        },
        to.values);
  });
}

} // namespace mla::gpu
