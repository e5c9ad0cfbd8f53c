//===- PerHeadProduct.cpp - What the tensor-core products share ----------===//

#include "Tiles/PerHeadProduct.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using mlir::gpu::Dimension;

namespace mla::gpu {

int64_t productTileColumns(const PerHeadProduct &p) {
  for (int64_t columns : {128, 64}) {
    bool whole = p.width % columns == 0;
    for (const PerHeadProduct::Output &o : p.outputs)
      whole = whole && o.first % columns == 0 && o.count % columns == 0;
    if (whole)
      return columns;
  }
  return 0;
}

bool hasTensorCoreProductOperands(const PerHeadProduct &p, Operation *op,
                                  int64_t sliceDepth) {
  Type element = cast<MemRefType>(op->getOperand(0).getType()).getElementType();
  if (!(element.isBF16() || element.isF16()))
    return false;
  for (Value operand : op->getOperands())
    if (cast<MemRefType>(operand.getType()).getElementType() != element)
      return false;
  return GpuEmitter::hasVectorRows(op->getOperand(p.inputArg)) &&
         GpuEmitter::hasVectorRows(op->getOperand(p.weightArg)) &&
         p.depth % sliceDepth == 0 && productTileColumns(p) != 0;
}

RowMove PerHeadProduct::columnCopy(GpuEmitter &e, ValueRange args, Value t,
                                   Value h) const {
  RowMove move{
      args[copy->dstArg],
      {t, h},
      copy->dstFirst,
      {{args[copy->srcArg], SmallVector<Value>(copy->srcRow(e, t, h))}},
      copy->count,
      nullptr};
  move.srcFirstColumn = copy->srcFirst;
  return move;
}

ProductTile::ProductTile(MmaEmitter &e, const PerHeadProduct &p,
                         ValueRange args, int64_t tileTokens,
                         int64_t tileColumns)
    : e(e), p(p), args(args), tileTokens(tileTokens), tileColumns(tileColumns) {
  x = args[p.inputArg];
  w = args[p.weightArg];
  numTokens = e.dim(x, 0);
  head = e.blockId(Dimension::y);
  token0 = e.mul(e.blockId(Dimension::x), e.index(tileTokens));
  column0 = e.mul(e.blockId(Dimension::z), e.index(tileColumns));
  lastToken = e.sub(numTokens, e.index(1));
  allRows = arith::ConstantIntOp::create(e.builder(), e.location(), 1, 1);
}

MmaEmitter::SourceRow ProductTile::inputRow(Value row, Value depth0) {
  Value t = e.add(token0, row);
  return {e.lessThan(t, numTokens),
          p.inputRow(e, args, e.minIndex(t, lastToken), head), depth0};
}

MmaEmitter::SourceRow ProductTile::weightRow(Value row, Value depth0) {
  // The kernels' slices lie inside the depth: every row is real.
  return {allRows, p.weightRow(e, args, head, e.add(depth0, row)), column0};
}

void ProductTile::store(Value staging, Value tid, int64_t threads) {
  auto real = [&](Value r) { return e.lessThan(e.add(token0, r), numTokens); };
  auto destRow = [&](Value r) {
    return SmallVector<Value, 4>{e.add(token0, r), head};
  };
  for (const PerHeadProduct::Output &o : p.outputs) {
    // Whether the tile's columns are this output's.
    Value mine = e.lessThan(column0, e.index(o.first + o.count));
    if (o.first > 0)
      mine = e.andi(mine, e.lessThan(e.index(o.first - 1), column0));
    e.ifThen(mine, [&] {
      e.copyStagedRows(staging, tileTokens, tileColumns, tid, threads, real,
                       destRow, args[o.arg], e.sub(column0, e.index(o.first)));
    });
  }
  if (!p.copy)
    return;
  // The column copy of the tile's tokens by the first column tile's blocks:
  // 8 threads a token, a 16-byte vector each where the layouts allow it.
  constexpr int64_t kRowLanes = 8;
  Value vectorOk =
      vectorPathFlag(e, {args[p.copy->srcArg], args[p.copy->dstArg]});
  e.ifThen(e.eqIndex(e.blockId(Dimension::z), 0), [&] {
    e.forLoop(e.divui(tid, kRowLanes), e.index(tileTokens), threads / kRowLanes,
              [&](Value r) {
                Value t = e.add(token0, r);
                e.ifThen(e.lessThan(t, numTokens), [&] {
                  p.columnCopy(e, args, t, head)
                      .emit(e, e.remui(tid, kRowLanes), kRowLanes, vectorOk);
                });
              });
  });
}

void launchProduct(const PerHeadProduct &p, Operation *op,
                   mlir::gpu::GPUFuncOp kernel, int64_t tileTokens,
                   int64_t tileColumns, int64_t sharedBytes) {
  OpBuilder host(op);
  LoopBuilder hb(host, op->getLoc());
  KernelFactory::launch(
      host, op->getLoc(), kernel,
      {hb.ceilDiv(hb.dim(op->getOperand(p.inputArg), 0), tileTokens),
       hb.index(p.heads), hb.index(p.width / tileColumns)},
      op->getOperands(), sharedBytes);
}

} // namespace mla::gpu
