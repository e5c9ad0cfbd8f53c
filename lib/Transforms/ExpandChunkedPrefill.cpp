//===- ExpandChunkedPrefill.cpp - mla.chunked_prefill to its loop ---------===//
//
// Writes out the chunked-context prefill as primitive mla ops:
//
//   kv_up_proj(new tokens) ; prefill_attention causal      -> running state
//     (skipped with `context_only`: out/lse hold the running state)
//   for c in chunks:
//     gather_cache(chunk c) -> workspace[0:total_c]
//     kv_up_proj(workspace)  -> k_ctx, v_ctx
//     prefill_attention non-causal accumulate (new-token queries over the
//       chunk, merged into the running state)
//
// The running state lives in the op's own out/lse buffers. Each chunk's
// attention merges into it as it writes its rows (`accumulate`), so no
// chunk output is written, read back and merged by a separate pass.
//
//===----------------------------------------------------------------------===//

#include "mla/Dialect/MLADialect.h"
#include "mla/Transforms/Passes.h"

namespace mla {
#define GEN_PASS_DEF_EXPANDCHUNKEDPREFILL
#include "mla/Transforms/Passes.h.inc"
} // namespace mla

using namespace mlir;

namespace mla {
namespace {

/// Rows [0, rows) of a rank-2 or rank-3 buffer, all other dims whole;
/// for rank 2, columns [firstColumn, firstColumn + columns) only.
Value leadingRows(OpBuilder &b, Location loc, Value source, Value rows,
                  int64_t firstColumn = 0, int64_t columns = -1) {
  auto type = cast<MemRefType>(source.getType());
  SmallVector<OpFoldResult> offsets(type.getRank(), b.getIndexAttr(0));
  SmallVector<OpFoldResult> sizes, strides(type.getRank(), b.getIndexAttr(1));
  sizes.push_back(rows);
  for (int64_t d = 1; d < type.getRank(); ++d)
    sizes.push_back(b.getIndexAttr(type.getDimSize(d)));
  if (columns >= 0) {
    offsets.back() = b.getIndexAttr(firstColumn);
    sizes.back() = b.getIndexAttr(columns);
  }
  return memref::SubViewOp::create(b, loc, source, offsets, sizes, strides);
}

/// Row `index` of a rank-2 buffer as a rank-1 view.
Value rowOf(OpBuilder &b, Location loc, Value source, Value index) {
  auto type = cast<MemRefType>(source.getType());
  SmallVector<OpFoldResult> offsets{index, b.getIndexAttr(0)};
  SmallVector<OpFoldResult> sizes{b.getIndexAttr(1),
                                  memref::getMixedSize(b, loc, source, 1)};
  SmallVector<OpFoldResult> strides(2, b.getIndexAttr(1));
  auto resultType = memref::SubViewOp::inferRankReducedResultType(
      {type.getDimSize(1)}, type, offsets, sizes, strides);
  return memref::SubViewOp::create(b, loc, cast<MemRefType>(resultType),
                                   source, offsets, sizes, strides);
}

Value allocLike(OpBuilder &b, Location loc, ArrayRef<Value> dynamicSizes,
                ArrayRef<int64_t> shape, Type element) {
  return memref::AllocOp::create(b, loc, MemRefType::get(shape, element),
                                 dynamicSizes);
}

void expand(ChunkedPrefillOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  int64_t heads = op.getNumHeads(), latent = op.getKvLoraRank(),
          nope = op.getQkNopeHeadDim(), rope = op.getRopeDim(),
          vDim = op.getVHeadDim();
  int64_t dyn = ShapedType::kDynamic;
  Type act = cast<MemRefType>(op.getQ().getType()).getElementType();
  IntegerAttr headsAttr = b.getI64IntegerAttr(heads);
  auto scale = op.getSoftmaxScaleAttr();

  auto upProject = [&](Value kvC, Value kPe, Value k, Value v) {
    KvUpProjOp::create(b, loc, kvC, kPe, op.getKvBProj(), k, v, headsAttr,
                       op.getKvLoraRankAttr(), op.getQkNopeHeadDimAttr(),
                       op.getRopeDimAttr(), op.getVHeadDimAttr());
  };
  // The new tokens' causal attention starts the running state; each
  // chunk's merges into it.
  auto attend = [&](Value k, Value v, Value cuK, bool newTokens) {
    PrefillAttentionOp::create(
        b, loc, op.getQ(), k, v, op.getCuSeqlensQ(), cuK, op.getOut(),
        op.getLse(), headsAttr, b.getI64IntegerAttr(nope + rope),
        op.getVHeadDimAttr(), scale, newTokens ? b.getUnitAttr() : UnitAttr(),
        newTokens ? UnitAttr() : b.getUnitAttr());
  };

  // New tokens: causal attention over themselves is the initial state
  // (already in out/lse when only context chunks are asked for).
  SmallVector<Value> buffers;
  if (!op.getContextOnly()) {
    Value numTokens = memref::DimOp::create(b, loc, op.getQ(), 0);
    Value kNew =
        allocLike(b, loc, {numTokens}, {dyn, heads, nope + rope}, act);
    Value vNew = allocLike(b, loc, {numTokens}, {dyn, heads, vDim}, act);
    upProject(op.getKvC(), op.getKPe(), kNew, vNew);
    attend(kNew, vNew, op.getCuSeqlensQ(), /*newTokens=*/true);
    buffers.append({kNew, vNew});
  }

  // Context chunks, each merged into the running state.
  Value rows = memref::DimOp::create(b, loc, op.getWorkspace(), 0);
  Value kCtx = allocLike(b, loc, {rows}, {dyn, heads, nope + rope}, act);
  Value vCtx = allocLike(b, loc, {rows}, {dyn, heads, vDim}, act);
  buffers.append({kCtx, vCtx});

  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value numChunks = memref::DimOp::create(b, loc, op.getChunkStarts(), 0);
  Value batch = memref::DimOp::create(b, loc, op.getChunkStarts(), 1);
  auto loop = scf::ForOp::create(b, loc, zero, numChunks, one);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value c = loop.getInductionVar();
    Value cuChunk = rowOf(b, loc, op.getChunkCuSeqLens(), c);
    Value startsChunk = rowOf(b, loc, op.getChunkStarts(), c);
    Value total = arith::IndexCastOp::create(
        b, loc, b.getIndexType(),
        memref::LoadOp::create(b, loc, cuChunk, ValueRange{batch}));
    // A plan that overflows the workspace is cut to it rather than
    // written past it; the runtime rejects such plans before this point.
    total = arith::MinSIOp::create(
        b, loc, arith::MaxSIOp::create(b, loc, total, zero), rows);

    Value chunkRows = leadingRows(b, loc, op.getWorkspace(), total);
    GatherCacheOp::create(b, loc, op.getKvCache(), op.getBlockTable(),
                          cuChunk, startsChunk, op.getKvScale(), chunkRows,
                          op.getBlockSizeAttr());
    Value kChunk = leadingRows(b, loc, kCtx, total);
    Value vChunk = leadingRows(b, loc, vCtx, total);
    upProject(leadingRows(b, loc, chunkRows, total, 0, latent),
              leadingRows(b, loc, chunkRows, total, latent, rope), kChunk,
              vChunk);
    attend(kChunk, vChunk, cuChunk, /*newTokens=*/false);
  }

  for (Value buffer : buffers)
    memref::DeallocOp::create(b, loc, buffer);
  op.erase();
}

struct ExpandChunkedPrefill
    : public impl::ExpandChunkedPrefillBase<ExpandChunkedPrefill> {
  void runOnOperation() override {
    SmallVector<ChunkedPrefillOp> ops;
    getOperation()->walk([&](ChunkedPrefillOp op) { ops.push_back(op); });
    for (ChunkedPrefillOp op : ops)
      expand(op);
  }
};

} // namespace
} // namespace mla
