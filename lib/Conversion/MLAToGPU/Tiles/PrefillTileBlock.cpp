//===- PrefillTileBlock.cpp - What the tensor-core prefill kernels share --===//

#include "Tiles/PrefillTileBlock.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"

using namespace mlir;
using mlir::gpu::Dimension;

namespace mla::gpu {

bool hasTensorCoreOperands(PrefillAttentionOp op) {
  Type element = cast<MemRefType>(op.getQ().getType()).getElementType();
  if (!(element.isBF16() || element.isF16()))
    return false;
  for (Value operand : {op.getK(), op.getV(), op.getOut()})
    if (cast<MemRefType>(operand.getType()).getElementType() != element)
      return false;
  for (Value operand : {op.getQ(), op.getK(), op.getV()})
    if (!GpuEmitter::hasVectorRows(operand))
      return false;
  return true;
}

PrefillTileBlock::PrefillTileBlock(MmaEmitter &e, PrefillAttentionOp op,
                                   ValueRange args, int64_t tileRows)
    : q(args[0]), k(args[1]), v(args[2]), cuQ(args[3]), cuK(args[4]),
      out(args[5]), lse(args[6]), e(e), tileRows(tileRows),
      causal(op.getCausal()) {
  // Causal: grid (heads of a group, row tiles, head groups), so that
  // blocks start group by group, a group's tiles from the last, its heads
  // inner. Otherwise (row tiles, heads). See PrefillTileBlock.h.
  Dimension tileDim = causal ? Dimension::y : Dimension::x;
  head = causal ? e.add(e.mul(e.blockId(Dimension::z), e.gridDim(Dimension::x)),
                        e.blockId(Dimension::x))
                : e.blockId(Dimension::y);
  tileIndex = e.sub(e.sub(e.gridDim(tileDim), e.index(1)), e.blockId(tileDim));
}

void PrefillTileBlock::run(const std::function<void()> &body) {
  Value zero = e.index(0), one = e.index(1);
  Value numTokens = e.dim(q, 0), numKv = e.dim(k, 0);
  Value numSeqs =
      e.minIndex(e.sub(e.dim(cuQ, 0), one), e.sub(e.dim(cuK, 0), one));
  auto queryRange = [&](Value seq) {
    Value begin = e.clampIndex(e.loadIndex(cuQ, {seq}), zero, numTokens);
    Value end =
        e.clampIndex(e.loadIndex(cuQ, {e.add(seq, one)}), begin, numTokens);
    return std::pair{begin, end};
  };
  // (row tiles before the sequence, the block's sequence or -1, its tile)
  SmallVector<Value> found = e.forLoop(
      zero, numSeqs, 1, {zero, e.index(-1), zero},
      [&](Value s, ValueRange it) -> SmallVector<Value> {
        auto [begin, end] = queryRange(s);
        Value next = e.add(it[0], e.ceilDiv(e.sub(end, begin), tileRows));
        Value hit =
            e.andi(e.lessThan(it[1], zero), e.lessThan(tileIndex, next));
        return {next, e.select(hit, s, it[1]),
                e.select(hit, e.sub(tileIndex, it[0]), it[2])};
      });
  Value seq = found[1];
  Value hasTile = arith::CmpIOp::create(e.builder(), e.location(),
                                        arith::CmpIPredicate::sge, seq, zero);
  e.ifThen(hasTile, [&] {
    auto [begin, end] = queryRange(seq);
    qBegin = begin;
    sq = e.sub(end, begin);
    kBegin = e.clampIndex(e.loadIndex(cuK, {seq}), zero, numKv);
    skv = e.sub(
        e.clampIndex(e.loadIndex(cuK, {e.add(seq, one)}), kBegin, numKv),
        kBegin);
    row0 = e.mul(found[2], e.index(tileRows));
    body();
  });
}

Value PrefillTileBlock::keysOf(Value row) {
  return e.visibleKeys(causal, row, sq, skv);
}

std::pair<Value, Value> PrefillTileBlock::keyRange(Value first,
                                                   int64_t count) {
  Value begin = e.add(row0, first);
  Value last =
      e.minIndex(e.add(begin, e.index(count - 1)), e.sub(sq, e.index(1)));
  // No real row: no keys.
  Value needed = e.select(e.lessThan(begin, sq), keysOf(last), e.index(0));
  return {needed, keysOf(begin)};
}

MmaEmitter::SourceRow PrefillTileBlock::queryRow(Value tileRow) {
  Value r = e.add(row0, tileRow);
  Value rc = e.minIndex(r, e.sub(sq, e.index(1)));
  return {e.lessThan(r, sq), {e.add(qBegin, rc), head}};
}

MmaEmitter::SourceRow PrefillTileBlock::keyRow(Value key, Value keyLimit) {
  Value kc = e.minIndex(key, e.sub(keyLimit, e.index(1)));
  return {e.lessThan(key, keyLimit), {e.add(kBegin, kc), head}};
}

void launchPrefillTiles(PrefillAttentionOp op, OpBuilder &host,
                        mlir::gpu::GPUFuncOp kernel, int64_t tileRows,
                        int64_t sharedBytes) {
  LoopBuilder hb(host, op.getLoc());
  Value numSeqs = hb.maxIndex(
      hb.sub(hb.dim(op.getCuSeqlensQ(), 0), hb.index(1)), hb.index(0));
  Value tiles = hb.add(hb.ceilDiv(hb.dim(op.getQ(), 0), tileRows), numSeqs);
  const int64_t heads = op.getNumHeads();
  if (!op.getCausal()) {
    KernelFactory::launch(host, op.getLoc(), kernel,
                          {tiles, hb.index(heads), hb.index(1)},
                          op->getOperands(), sharedBytes);
    return;
  }
  // Heads a group: the largest divisor of the head count whose K and V fit
  // the L2 budget together (at least one head).
  const int64_t rowBytes =
      (op.getQkHeadDim() + op.getVHeadDim()) *
      cast<MemRefType>(op.getK().getType()).getElementTypeBitWidth() / 8;
  Value headBytes = hb.maxIndex(
      hb.mul(hb.dim(op.getK(), 0), hb.index(rowBytes)), hb.index(1));
  Value fitting = arith::DivUIOp::create(
      host, op.getLoc(), hb.index(PrefillTileBlock::kL2BudgetBytes), headBytes);
  Value groupHeads = hb.index(1);
  for (int64_t d = 2; d <= heads; ++d)
    if (heads % d == 0)
      groupHeads = arith::SelectOp::create(host, op.getLoc(),
                                           hb.lessThan(fitting, hb.index(d)),
                                           groupHeads, hb.index(d));
  Value groups =
      arith::DivUIOp::create(host, op.getLoc(), hb.index(heads), groupHeads);
  KernelFactory::launch(host, op.getLoc(), kernel, {groupHeads, tiles, groups},
                        op->getOperands(), sharedBytes);
}

SmallVector<FragmentRowEnd, 4>
PrefillTileBlock::finishRows(ValueRange maxes, ValueRange sums, ValueRange rows,
                             bool accumulate) {
  SmallVector<FragmentRowEnd, 4> ends;
  for (auto [max, sum, row] : llvm::zip_equal(maxes, sums, rows)) {
    FragmentRowEnd end = FragmentSoftmax::finishRow(e, max, sum);
    if (accumulate) {
      Value entryLse = e.selectValues(
          e.lessThan(row, sq), {e.builder().getF32Type()},
          [&] {
            return SmallVector<Value>{
                e.loadF32(lse, {head, e.add(qBegin, row)})};
          },
          [&] { return SmallVector<Value>{e.negInf()}; })[0];
      end = FragmentSoftmax::mergeIntoEntry(e, end, entryLse);
    }
    ends.push_back(end);
  }
  return ends;
}

void PrefillTileBlock::storeEntryWeights(ArrayRef<FragmentRowEnd> ends,
                                         ValueRange rows, Value quad,
                                         Value entryWeights) {
  Value leader = e.eqIndex(quad, 0);
  for (auto [end, row] : llvm::zip_equal(ends, rows))
    e.ifThen(leader, [&] {
      e.storeF32(end.entryWeight, entryWeights, {e.sub(row, row0)});
    });
}

void PrefillTileBlock::storeLse(ArrayRef<FragmentRowEnd> ends,
                                ValueRange rows, Value quad) {
  Value leader = e.eqIndex(quad, 0);
  for (auto [end, row] : llvm::zip_equal(ends, rows))
    e.ifThen(e.andi(leader, e.lessThan(row, sq)), [&] {
      e.storeF32(end.lse, lse, {head, e.add(qBegin, row)});
    });
}

} // namespace mla::gpu
