//===- LowerAttention.cpp - Prefill and decode attention to loops ---------===//
//
// Both attention ops visit (sequence, query, head) rows and hand each row to
// emitAttentionRow; they differ only in where a row's keys live (a packed
// key buffer, or pages of the latent cache) and how many it sees.
//
// Offsets and lengths read from buffers are clamped to the buffers' extents
// so that inconsistent metadata can never make a kernel touch memory outside
// its operands; the runtime reports such metadata before launching.
//
//===----------------------------------------------------------------------===//

#include "Lowerings.h"
#include "OnlineSoftmax.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;

namespace mla::loops {

static AttentionScratch makeScratch(KernelEmitter &e, int64_t vDim,
                                    const LoweringOptions &options) {
  return {e.allocaF32(options.keyBlock), e.allocaF32(vDim), options.keyBlock};
}

void lowerPrefillAttention(PrefillAttentionOp op, KernelEmitter &e,
                           const LoweringOptions &options) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  int64_t heads = op.getNumHeads(), qkDim = op.getQkHeadDim(),
          vDim = op.getVHeadDim();
  AttentionScratch scratch = makeScratch(e, vDim, options);

  Value zero = e.index(0), one = e.index(1);
  Value numTokens = e.dim(op.getQ(), 0), numKv = e.dim(op.getK(), 0);
  Value numSeqs = arith::SubIOp::create(b, loc, e.dim(op.getCuSeqlensQ(), 0),
                                        one);
  numSeqs = e.minIndex(numSeqs, arith::SubIOp::create(
                                    b, loc, e.dim(op.getCuSeqlensK(), 0), one));

  e.forLoop(zero, numSeqs, 1, [&](Value seq) {
    Value next = arith::AddIOp::create(b, loc, seq, one);
    Value qBegin = e.clampIndex(e.loadIndex(op.getCuSeqlensQ(), {seq}), zero,
                                numTokens);
    Value qEnd = e.clampIndex(e.loadIndex(op.getCuSeqlensQ(), {next}), qBegin,
                              numTokens);
    Value kBegin =
        e.clampIndex(e.loadIndex(op.getCuSeqlensK(), {seq}), zero, numKv);
    Value kEnd =
        e.clampIndex(e.loadIndex(op.getCuSeqlensK(), {next}), kBegin, numKv);
    Value numQueries = arith::SubIOp::create(b, loc, qEnd, qBegin);
    Value numKeys = arith::SubIOp::create(b, loc, kEnd, kBegin);

    e.forLoop(zero, numQueries, 1, [&](Value i) {
      Value token = arith::AddIOp::create(b, loc, qBegin, i);
      Value visible = e.visibleKeys(op.getCausal(), i, numQueries, numKeys);
      e.forLoop(zero, e.index(heads), 1, [&](Value h) {
        auto kvRow = [&](Value memref) {
          return [&, memref](Value j) {
            return Row{memref, {arith::AddIOp::create(b, loc, kBegin, j), h}};
          };
        };
        AttentionRow row{Row{op.getQ(), {token, h}},
                         qkDim,
                         vDim,
                         op.getSoftmaxScale().convertToFloat(),
                         visible,
                         kvRow(op.getK()),
                         kvRow(op.getV())};
        emitAttentionRow(e, row, scratch, Row{op.getOut(), {token, h}},
                         op.getLse(), {h, token}, op.getAccumulate());
      });
    });
  });
}

void lowerDecodeAttention(DecodeAttentionOp op, KernelEmitter &e,
                          const LoweringOptions &options) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  int64_t heads = op.getNumHeads(), latent = op.getKvLoraRank(),
          page = op.getBlockSize();
  int64_t qkDim = latent + op.getRopeDim();
  AttentionScratch scratch = makeScratch(e, latent, options);
  // The split-KV schedule (num_splits, split_out, split_lse), when present,
  // is ignored: it only says how a GPU kernel spreads a request's keys over
  // thread blocks and where their partials go, never what the result is. A
  // host loop computes each row over its whole visible range in one pass,
  // which needs no partials and no combine.

  Value zero = e.index(0), one = e.index(1);
  Value pageSize = e.index(page);
  Value batch = e.dim(op.getQ(), 0), queryLen = e.dim(op.getQ(), 1);
  Value lastBlock =
      arith::SubIOp::create(b, loc, e.dim(op.getKvCache(), 0), one);
  Value capacity =
      e.pagedCapacity(op.getBlockTable(), op.getKvCache(), pageSize);
  Value scale = e.cacheScale(op.getKvScale());

  e.forLoop(zero, batch, 1, [&](Value req) {
    Value counted = e.loadIndex(op.getSeqLens(), {req});
    Value seqLen = e.decodeKeys(op.getKvShare(), counted, capacity);
    // Cache row of token j of this request.
    auto cacheRow = [&](Value j) {
      Value blockIdx = arith::DivUIOp::create(b, loc, j, pageSize);
      Value offset = arith::RemUIOp::create(b, loc, j, pageSize);
      Value blockId = e.clampIndex(
          e.loadIndex(op.getBlockTable(), {req, blockIdx}), zero, lastBlock);
      return Row{op.getKvCache(), {blockId, offset}, 0, scale};
    };
    e.forLoop(zero, queryLen, 1, [&](Value s) {
      Value visible = e.decodeVisibleKeys(op.getCausal(), op.getKvShare(), s,
                                          queryLen, counted, seqLen);
      e.forLoop(zero, e.index(heads), 1, [&](Value h) {
        AttentionRow row{Row{op.getQ(), {req, s, h}},
                         qkDim,
                         latent,
                         op.getSoftmaxScale().convertToFloat(),
                         visible,
                         cacheRow,
                         cacheRow};
        emitAttentionRow(e, row, scratch, Row{op.getOut(), {req, s, h}},
                         op.getLse(), {req, h, s});
      });
    });
  });
}

} // namespace mla::loops
