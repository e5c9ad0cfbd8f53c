//===- PerHeadProduct.cpp - What the tensor-core products share ----------===//

#include "PerHeadProduct.h"

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

/// The column copy for the tile's tokens: the threads take 8-column
/// pieces in turn, moved as 16-byte vectors where both rows allow it and
/// both first elements are aligned, else element by element.
static void copyTileColumns(MmaEmitter &e, ValueRange a,
                            const PerHeadProduct::ColumnCopy &c,
                            int64_t tileTokens, Value token0, Value numTokens,
                            Value h, Value tid, int64_t threads) {
  Value src = a[c.srcArg], dst = a[c.dstArg];
  const int64_t width = GpuEmitter::kVectorWidth;
  bool vectors = c.count % width == 0 && c.srcFirst % width == 0 &&
                 c.dstFirst % width == 0 && GpuEmitter::hasVectorRows(src) &&
                 GpuEmitter::hasVectorRows(dst);
  const int64_t pieceColumns = vectors ? width : 1;
  const int64_t perRow = c.count / pieceColumns;
  Value aligned = vectors ? e.vectorAligned({src, dst}) : Value();
  e.forLoop(tid, e.index(tileTokens * perRow), threads, [&](Value piece) {
    Value t = e.add(token0, e.divui(piece, perRow));
    Value column = e.mul(e.remui(piece, perRow), e.index(pieceColumns));
    e.ifThen(e.lessThan(t, numTokens), [&] {
      SmallVector<Value> from(c.srcRow(e, t, h));
      from.push_back(e.add(column, e.index(c.srcFirst)));
      SmallVector<Value> to{t, h, e.add(column, e.index(c.dstFirst))};
      auto elements = [&](int64_t count) {
        for (int64_t k = 0; k < count; ++k) {
          SmallVector<Value> f(from), d(to);
          f.back() = e.add(f.back(), e.index(k));
          d.back() = e.add(d.back(), e.index(k));
          e.storeF32(e.loadF32(src, f), dst, d);
        }
      };
      if (!vectors)
        return elements(1);
      e.ifThenElse(
          aligned, [&] { e.storeVector(e.loadVector(src, from), dst, to); },
          [&] { elements(width); });
    });
  });
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
  if (p.copy)
    e.ifThen(e.eqIndex(e.blockId(Dimension::z), 0), [&] {
      copyTileColumns(e, args, *p.copy, tileTokens, token0, numTokens, head,
                      tid, threads);
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
