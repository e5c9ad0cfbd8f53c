//===- LowerCache.cpp - gather_cache and concat_and_cache to loops --------===//

#include "Lowerings.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;

namespace mla::loops {

void lowerGatherCache(GatherCacheOp op, KernelEmitter &e) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  int64_t entry =
      cast<MemRefType>(op.getWorkspace().getType()).getDimSize(1);
  Value zero = e.index(0), one = e.index(1);
  Value pageSize = e.index(op.getBlockSize());
  Value batch = e.dim(op.getSeqStarts(), 0);
  Value rows = e.dim(op.getWorkspace(), 0);
  Value lastBlock =
      arith::SubIOp::create(b, loc, e.dim(op.getKvCache(), 0), one);
  Value capacity =
      e.pagedCapacity(op.getBlockTable(), op.getKvCache(), pageSize);
  Value scale = e.cacheScale(op.getKvScale());

  e.forLoop(zero, batch, 1, [&](Value req) {
    Value next = arith::AddIOp::create(b, loc, req, one);
    Value begin =
        e.clampIndex(e.loadIndex(op.getCuSeqLens(), {req}), zero, rows);
    Value end =
        e.clampIndex(e.loadIndex(op.getCuSeqLens(), {next}), begin, rows);
    Value start =
        e.clampIndex(e.loadIndex(op.getSeqStarts(), {req}), zero, capacity);
    // Never read past the request's pages.
    Value count = e.minIndex(arith::SubIOp::create(b, loc, end, begin),
                             arith::SubIOp::create(b, loc, capacity, start));
    e.forLoop(zero, count, 1, [&](Value j) {
      Value token = arith::AddIOp::create(b, loc, start, j);
      Value blockIdx = arith::DivUIOp::create(b, loc, token, pageSize);
      Value offset = arith::RemUIOp::create(b, loc, token, pageSize);
      Value blockId = e.clampIndex(
          e.loadIndex(op.getBlockTable(), {req, blockIdx}), zero, lastBlock);
      e.copy(Row{op.getWorkspace(), {arith::AddIOp::create(b, loc, begin, j)}},
             Row{op.getKvCache(), {blockId, offset}, 0, scale}, entry);
    });
  });
}

void lowerConcatAndCache(ConcatAndCacheOp op, KernelEmitter &e) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  int64_t latent = op.getKvLoraRank(), rope = op.getRopeDim();
  Value zero = e.index(0);
  Value pageSize = e.index(op.getBlockSize());
  Value numTokens = e.dim(op.getSlotMapping(), 0);
  Value capacity = arith::MulIOp::create(
      b, loc, e.dim(op.getKvCache(), 0), pageSize);
  Value scale = e.cacheScale(op.getKvScale());

  e.forLoop(zero, numTokens, 1, [&](Value t) {
    Value slot = e.loadIndex(op.getSlotMapping(), {t});
    // Padding (-1) and slots past the cache are skipped.
    Value valid = arith::AndIOp::create(
        b, loc,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, slot, zero),
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, slot,
                              capacity));
    auto ifOp = scf::IfOp::create(b, loc, valid, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    Value blockId = arith::DivUIOp::create(b, loc, slot, pageSize);
    Value offset = arith::RemUIOp::create(b, loc, slot, pageSize);
    Row dst{op.getKvCache(), {blockId, offset}, 0, scale};
    e.copy(dst, Row{op.getKvC(), {t}}, latent);
    e.copy(dst.shifted(latent), Row{op.getKPe(), {t}}, rope);
  });
}

} // namespace mla::loops
