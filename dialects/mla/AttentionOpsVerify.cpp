//===- AttentionOpsVerify.cpp - Verifiers of the attention ops ------------===//

#include "OperandChecker.h"
#include "mla/Dialect/MLADialect.h"
#include "mla/Support/MlaDims.h"

#include "llvm/Support/InterleavedRange.h"

using namespace mlir;
using namespace mla;
using namespace mla::detail;

/// Decode kernels tile heads in groups of 64 rows; 128 heads per device is
/// the largest DeepSeek configuration (no tensor parallelism).
static constexpr int64_t kMaxDecodeHeads = 128;

LogicalResult PrefillAttentionOp::verify() {
  if (failed(verifyNoUnknownAttributes(*this)))
    return failure();
  if (failed(verifySoftmaxScale(*this, getSoftmaxScale().convertToFloat())))
    return failure();
  int64_t heads = getNumHeads(), qk = getQkHeadDim(), vd = getVHeadDim();
  OperandChecker c(*this);
  if (failed(c.check(getQ(), "q",
                     {sym("tokens"), fixed("heads", heads, "num_heads"),
                      fixed("qk_head_dim", qk, "qk_head_dim")},
                     ElementKind::Activation)) ||
      failed(c.check(getK(), "k",
                     {sym("kv_tokens"), fixed("heads", heads, "num_heads"),
                      fixed("qk_head_dim", qk, "qk_head_dim")},
                     ElementKind::Activation)) ||
      failed(c.check(getV(), "v",
                     {sym("kv_tokens"), fixed("heads", heads, "num_heads"),
                      fixed("v_head_dim", vd, "v_head_dim")},
                     ElementKind::Activation)) ||
      failed(c.check(getCuSeqlensQ(), "cu_seqlens_q", {symPlusOne("batch")},
                     ElementKind::I32)) ||
      failed(c.check(getCuSeqlensK(), "cu_seqlens_k", {symPlusOne("batch")},
                     ElementKind::I32)) ||
      failed(c.check(getOut(), "out",
                     {sym("tokens"), fixed("heads", heads, "num_heads"),
                      fixed("v_head_dim", vd, "v_head_dim")},
                     ElementKind::Activation)) ||
      failed(c.check(getLse(), "lse",
                     {fixed("heads", heads, "num_heads"), sym("tokens")},
                     ElementKind::F32)))
    return failure();
  return success();
}

LogicalResult DecodeAttentionOp::verify() {
  if (failed(verifyNoUnknownAttributes(*this)))
    return failure();
  int64_t heads = getNumHeads(), latent = getKvLoraRank(),
          rope = getRopeDim(), page = getBlockSize();
  if (heads > kMaxDecodeHeads)
    return emitOpError() << "num_heads must be at most " << kMaxDecodeHeads
                         << ", got " << heads;
  if (failed(verifySoftmaxScale(*this, getSoftmaxScale().convertToFloat())) ||
      failed(verifyCacheDtype(*this, getCacheDtype())))
    return failure();
  if (std::optional<ArrayRef<int64_t>> share = getKvShare()) {
    // W ranks of runs of I tokens: W I stays far from index overflow.
    if (share->size() != 2 || (*share)[0] < 1 || (*share)[0] > 65536 ||
        (*share)[1] < 1 || (*share)[1] > (int64_t(1) << 20))
      return emitOpError() << "kv_share must be [ranks, run length] with "
                              "ranks in [1, 65536] and run length in [1, "
                              "2^20], got "
                           << llvm::interleaved_array(*share);
  }
  int64_t entry = latent + rope;
  OperandChecker c(*this);
  if (failed(c.check(getQ(), "q",
                     {sym("batch"), sym("query_len"),
                      fixed("heads", heads, "num_heads"),
                      fixed("qk_dim", entry, "kv_lora_rank + rope_dim")},
                     ElementKind::Activation)) ||
      failed(c.latentCache(getKvCache(), latent, rope, page,
                           getCacheDtype())) ||
      failed(c.kvScale(getKvScale(), getCacheDtype())) ||
      failed(c.check(getBlockTable(), "block_table",
                     {sym("batch"), sym("max_blocks")}, ElementKind::I32)) ||
      failed(c.check(getSeqLens(), "seq_lens", {sym("batch")},
                     ElementKind::I32)) ||
      failed(c.check(getOut(), "out",
                     {sym("batch"), sym("query_len"),
                      fixed("heads", heads, "num_heads"),
                      fixed("kv_lora_rank", latent, "kv_lora_rank")},
                     ElementKind::Activation)) ||
      failed(c.check(getLse(), "lse",
                     {sym("batch"), fixed("heads", heads, "num_heads"),
                      sym("query_len")},
                     ElementKind::F32)))
    return failure();

  // The split-KV schedule: all three operands or none.
  Value numSplits = getNumSplits(), splitOut = getSplitOut(),
        splitLse = getSplitLse();
  if (!numSplits && !splitOut && !splitLse)
    return success();
  if (!numSplits || !splitOut || !splitLse)
    return emitOpError() << "'num_splits', 'split_out' and 'split_lse' must "
                            "be given together (got "
                         << (numSplits ? "" : "no ") << "'num_splits', "
                         << (splitOut ? "" : "no ") << "'split_out', "
                         << (splitLse ? "" : "no ") << "'split_lse')";
  if (failed(c.check(numSplits, "num_splits", {sym("batch")},
                     ElementKind::I32)) ||
      failed(c.check(splitOut, "split_out",
                     {sym("batch"), sym("query_len"),
                      fixed("heads", heads, "num_heads"), sym("splits"),
                      fixed("kv_lora_rank", latent, "kv_lora_rank")},
                     ElementKind::F32)) ||
      failed(c.check(splitLse, "split_lse",
                     {sym("batch"), sym("query_len"),
                      fixed("heads", heads, "num_heads"), sym("splits")},
                     ElementKind::F32)))
    return failure();
  return success();
}

LogicalResult MergeAttnStatesOp::verify() {
  if (failed(verifyNoUnknownAttributes(*this)))
    return failure();
  OperandChecker c(*this);
  auto outputDims = {sym("tokens"), sym("heads"), staticSym("head_dim")};
  auto lseDims = {sym("heads"), sym("tokens")};
  if (failed(c.check(getPrefixOutput(), "prefix_output", outputDims,
                     ElementKind::Activation)) ||
      failed(c.check(getPrefixLse(), "prefix_lse", lseDims,
                     ElementKind::F32)) ||
      failed(c.check(getSuffixOutput(), "suffix_output", outputDims,
                     ElementKind::Activation)) ||
      failed(c.check(getSuffixLse(), "suffix_lse", lseDims,
                     ElementKind::F32)) ||
      failed(c.check(getOutput(), "output", outputDims,
                     ElementKind::Activation)))
    return failure();
  if (getOutputLse() &&
      failed(c.check(getOutputLse(), "output_lse", lseDims, ElementKind::F32)))
    return failure();
  return success();
}

LogicalResult MergeAttnStatesNOp::verify() {
  if (failed(verifyNoUnknownAttributes(*this)))
    return failure();
  OperandChecker c(*this);
  Dim states = staticSym("states"), batch = sym("batch"),
      queries = sym("query_len"), heads = sym("heads"),
      headDim = staticSym("head_dim");
  if (failed(c.check(getPartialOutputs(), "partial_outputs",
                     {states, batch, queries, heads, headDim},
                     ElementKind::Float)) ||
      failed(c.check(getPartialLses(), "partial_lses",
                     {states, batch, heads, queries}, ElementKind::F32)) ||
      failed(c.check(getOutput(), "output", {batch, queries, heads, headDim},
                     ElementKind::Float)))
    return failure();
  if (getOutputLse() &&
      failed(c.check(getOutputLse(), "output_lse", {batch, heads, queries},
                     ElementKind::F32)))
    return failure();
  int64_t numStates =
      cast<MemRefType>(getPartialOutputs().getType()).getDimSize(0);
  if (numStates < 1 || numStates > kMaxMergedStates)
    return emitOpError() << "merges 1 to " << kMaxMergedStates
                         << " states (static dim 0 of partial_outputs), got "
                         << numStates;
  return success();
}

LogicalResult ChunkedPrefillOp::verify() {
  if (failed(verifyNoUnknownAttributes(*this)))
    return failure();
  int64_t heads = getNumHeads(), latent = getKvLoraRank(),
          nope = getQkNopeHeadDim(), rope = getRopeDim(), vd = getVHeadDim(),
          page = getBlockSize();
  if (failed(verifySoftmaxScale(*this, getSoftmaxScale().convertToFloat())) ||
      failed(verifyCacheDtype(*this, getCacheDtype())))
    return failure();
  OperandChecker c(*this);
  Dim headsDim = fixed("heads", heads, "num_heads");
  if (failed(c.check(getQ(), "q",
                     {sym("tokens"), headsDim,
                      fixed("qk_head_dim", nope + rope,
                            "qk_nope_head_dim + rope_dim")},
                     ElementKind::Activation)) ||
      failed(c.latentRows(getKvC(), getKPe(), latent, rope)) ||
      failed(c.check(getCuSeqlensQ(), "cu_seqlens_q", {symPlusOne("batch")},
                     ElementKind::I32)) ||
      failed(c.latentCache(getKvCache(), latent, rope, page,
                           getCacheDtype())) ||
      failed(c.kvScale(getKvScale(), getCacheDtype())) ||
      failed(c.check(getBlockTable(), "block_table",
                     {sym("batch"), sym("max_blocks")}, ElementKind::I32)) ||
      failed(c.check(getChunkCuSeqLens(), "chunk_cu_seq_lens",
                     {sym("chunks"), symPlusOne("batch")},
                     ElementKind::I32)) ||
      failed(c.check(getChunkStarts(), "chunk_starts",
                     {sym("chunks"), sym("batch")}, ElementKind::I32)) ||
      failed(c.kvBProj(getKvBProj(), latent, heads, nope, vd)) ||
      failed(c.check(getWorkspace(), "workspace",
                     {sym("workspace_rows"),
                      fixed("entry", latent + rope,
                            "kv_lora_rank + rope_dim")},
                     ElementKind::Activation)) ||
      failed(c.check(getOut(), "out",
                     {sym("tokens"), headsDim,
                      fixed("v_head_dim", vd, "v_head_dim")},
                     ElementKind::Activation)) ||
      failed(c.check(getLse(), "lse", {headsDim, sym("tokens")},
                     ElementKind::F32)))
    return failure();
  return success();
}
