//===- CacheOpsVerify.cpp - Verifiers of the paged-cache ops --------------===//

#include "OperandChecker.h"
#include "mla/Dialect/MLADialect.h"

using namespace mlir;
using namespace mla;
using namespace mla::detail;

LogicalResult GatherCacheOp::verify() {
  if (failed(verifyNoUnknownAttributes(*this)))
    return failure();
  OperandChecker c(*this);
  int64_t page = getBlockSize();
  if (failed(c.check(getKvCache(), "kv_cache",
                     {sym("num_blocks"),
                      fixed("block_size", page, "block_size"), staticSym("entry")},
                     ElementKind::Cache)) ||
      failed(c.kvScale(getKvScale(), cast<MemRefType>(getKvCache().getType())
                                         .getElementType())) ||
      failed(c.check(getBlockTable(), "block_table",
                     {sym("batch"), sym("max_blocks")}, ElementKind::I32)) ||
      failed(c.check(getCuSeqLens(), "cu_seq_lens", {symPlusOne("batch")},
                     ElementKind::I32)) ||
      failed(c.check(getSeqStarts(), "seq_starts", {sym("batch")},
                     ElementKind::I32)) ||
      failed(c.check(getWorkspace(), "workspace",
                     {sym("workspace_rows"), staticSym("entry")},
                     ElementKind::Float)))
    return failure();
  return success();
}

LogicalResult ConcatAndCacheOp::verify() {
  if (failed(verifyNoUnknownAttributes(*this)))
    return failure();
  if (failed(verifyCacheDtype(*this, getCacheDtype())))
    return failure();
  int64_t latent = getKvLoraRank(), rope = getRopeDim(),
          page = getBlockSize();
  OperandChecker c(*this);
  if (failed(c.latentRows(getKvC(), getKPe(), latent, rope)) ||
      failed(c.check(getSlotMapping(), "slot_mapping", {sym("tokens")},
                     ElementKind::I64)) ||
      failed(c.latentCache(getKvCache(), latent, rope, page,
                           getCacheDtype())) ||
      failed(c.kvScale(getKvScale(), getCacheDtype())))
    return failure();
  return success();
}
