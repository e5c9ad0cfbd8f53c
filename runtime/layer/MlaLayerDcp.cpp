//===- MlaLayerDcp.cpp - The layer under decode context parallelism -------===//
//
// A rank of a DCP group holds its share of every request's tokens (see
// MetadataDcp.h). Its plan checks the batch against that share and runs
// each decode over the rank's tokens only; its forward writes partial
// decode rows with their LSEs, and mergeDcpPartials turns the group's
// all-gathered partials into the exact rows with merge_attn_states_n.
// Prefills attend over their whole context: each context chunk's rows are
// gathered by every rank from its share, all-gathered by the engine's
// collective and read back in token order (DcpContextPlan).
//
//===----------------------------------------------------------------------===//

#include "mla/Runtime/MlaLayer.h"

#include "StepMetadata.h"

#include "mla/Runtime/EntryPoint.h"
#include "mla/Support/Diagnostics.h"

#include <algorithm>
#include <chrono>

namespace mla::runtime {

llvm::Error MlaLayer::checkDcpConfig(const MlaLayerConfig &config) {
  const DcpConfig &dcp = config.dcp;
  if (llvm::Error error = checkDcp(dcp, config.blockSize))
    return makeArgumentError("MLA layer: " + llvm::toString(std::move(error)));
  if (dcp.worldSize == 1)
    return llvm::Error::success();
  // merge_attn_states_n unrolls its states (the dialect's bound).
  if (dcp.worldSize > kMaxMergedStates)
    return makeArgumentError(
        "MLA layer: decode context parallelism merges at most " +
        llvm::Twine(kMaxMergedStates) + " ranks, got dcp_world_size = " +
        llvm::Twine(dcp.worldSize));
  return llvm::Error::success();
}

int64_t MlaLayer::storedLength(int64_t seqLen) const {
  const DcpConfig &dcp = layerConfig.dcp;
  return dcp.worldSize > 1 ? dcp.localLength(seqLen) : seqLen;
}

int64_t MlaLayer::decodeCountedLength(int64_t seqLen) const {
  const DcpConfig &dcp = layerConfig.dcp;
  // The decode kernel's kv_share counts from the rank's first run, so that
  // every rank runs the same kernel.
  return dcp.worldSize > 1
             ? std::max<int64_t>(seqLen - dcp.rank * dcp.interleave, 0)
             : seqLen;
}

llvm::Error MlaLayer::validateStep(const CommonAttentionMetadata &m,
                                   int64_t numCacheBlocks) const {
  if (layerConfig.dcp.worldSize > 1)
    return validateDcp(m, numCacheBlocks, layerConfig.blockSize,
                       layerConfig.dcp);
  return validate(m, numCacheBlocks, layerConfig.blockSize);
}

llvm::Error MlaLayer::mergeDcpPartials(const MlaStepPlan &plan,
                                       const DcpMergeArgs &args,
                                       Stream stream) {
  const DcpConfig &dcp = layerConfig.dcp;
  if (!dcpMerge)
    return makeArgumentError(
        "mergeDcpPartials: the layer runs without decode context "
        "parallelism (dcp.worldSize = 1)");
  const MlaDims &d = layerConfig.dims;
  const DType act = layerConfig.activation;
  const int64_t w = dcp.worldSize, n = d.numHeads, v = d.vHeadDim;
  const int64_t b = plan.split.numDecodes, sq = plan.decodeQueryLen,
                td = plan.split.numDecodeTokens;
  if (llvm::Error e = checkContiguousBuffer("gathered_output",
                                            args.gatheredOutput, act,
                                            {w, td, n, v}))
    return e;
  if (llvm::Error e = checkContiguousBuffer("gathered_lse", args.gatheredLse,
                                            DType::F32, {w, b, n, sq}))
    return e;
  // Every head, or this rank's share of them.
  int64_t heads = args.output.rank() == 3 ? args.output.shape[1] : n;
  if (heads != n && (n % w != 0 || heads != n / w))
    return makeArgumentError(
        "'output' must hold every head (" + llvm::Twine(n) + ")" +
        (n % w == 0 ? " or this rank's share (" + llvm::Twine(n / w) + ")"
                    : llvm::Twine(" (the heads do not divide among ") +
                          llvm::Twine(w) + " ranks)") +
        ", got " + args.output.describe());
  if (llvm::Error e =
          checkContiguousBuffer("output", args.output, act, {td, heads, v}))
    return e;
  bool withLse = args.lse.data || !args.lse.shape.empty();
  if (withLse)
    if (llvm::Error e = checkContiguousBuffer("lse", args.lse, DType::F32,
                                              {b, heads, sq}))
      return e;
  // The kernel reads every partial of a row before writing it, but rows
  // are spread over blocks: a merge in place would race.
  auto bytes = [](const BufferView &view) {
    const char *first = static_cast<const char *>(view.data);
    return std::make_pair(first, first + view.numElements() *
                                             byteWidth(view.dtype));
  };
  for (const BufferView *out : {&args.output, &args.lse})
    for (const BufferView *in : {&args.gatheredOutput, &args.gatheredLse}) {
      if (!out->data)
        continue;
      auto [outFirst, outEnd] = bytes(*out);
      auto [inFirst, inEnd] = bytes(*in);
      if (outFirst < inEnd && inFirst < outEnd)
        return makeArgumentError(
            "mergeDcpPartials: '" +
            llvm::Twine(out == &args.output ? "output" : "lse") +
            "' overlaps '" +
            (in == &args.gatheredOutput ? "gathered_output" : "gathered_lse") +
            "': the merge cannot run in place");
    }
  if (b == 0)
    return llvm::Error::success();

  int64_t firstHead = heads == n ? 0 : dcp.rank * heads;
  auto at = [](const BufferView &view, int64_t elements) {
    return static_cast<void *>(static_cast<char *>(view.data) +
                               elements * byteWidth(view.dtype));
  };
  // The partials as [W, B, Sq, H, V] and [W, B, H, Sq] views of the
  // gathered buffers, starting at the first merged head.
  BufferView partials{at(args.gatheredOutput, firstHead * v),
                      act,
                      {w, b, sq, heads, v},
                      {td * n * v, sq * n * v, n * v, v, 1}};
  BufferView lses{at(args.gatheredLse, firstHead * sq),
                  DType::F32,
                  {w, b, heads, sq},
                  {b * n * sq, n * sq, sq, 1}};
  void *mergedLse = args.lse.data;
  if (!withLse) {
    auto scratch =
        reserve(dcpMergeLse, size_t(b * heads * sq) * sizeof(float), stream);
    if (!scratch)
      return scratch.takeError();
    mergedLse = *scratch;
  }
  std::vector<BufferView> kernelArgs{
      partials, lses,
      BufferView::contiguous(args.output.data, act, {b, sq, heads, v}),
      BufferView::contiguous(mergedLse, DType::F32, {b, heads, sq})};
  timings.clear();
  hostParts.clear();
  return runPhase("dcp merge", *dcpMerge, kernelArgs, stream);
}

//===----------------------------------------------------------------------===//
// Prefill context chunks across the group
//===----------------------------------------------------------------------===//

/// Row `index` of a contiguous [rows, ...] view, without its first
/// dimension.
static BufferView rowOf(const BufferView &view, int64_t index) {
  BufferView row = view.rows(index, 1);
  row.shape.erase(row.shape.begin());
  row.strides.erase(row.strides.begin());
  return row;
}

llvm::Error MlaLayer::queueDcpContextGather(const MlaStepPlan &plan,
                                            int64_t chunk,
                                            const BufferView &kvCache,
                                            const BufferView &kvScale,
                                            const BufferView &rows,
                                            char *metadataBlock,
                                            Stream stream) {
  using namespace detail;
  auto layout = StepMetadataLayout::of(plan);
  const int64_t b = plan.split.numPrefills,
                chunks = plan.prefill.chunks.numChunks;
  BufferView cu = layout.view(metadataBlock, DcpLocalCuSeqLens, DType::I32,
                              {chunks, b + 1});
  BufferView starts =
      layout.view(metadataBlock, DcpLocalStarts, DType::I32, {chunks, b});
  std::vector<BufferView> args{
      kvCache,
      layout.view(metadataBlock, PrefillBlockTable, DType::I32,
                  {b, plan.prefill.maxBlocks}),
      rowOf(cu, chunk), rowOf(starts, chunk)};
  if (kvScale.data)
    args.push_back(kvScale);
  args.push_back(rows);
  return runPhase("dcp context gather", *dcpContextGather, args, stream);
}

llvm::Error MlaLayer::runDcpContextChunks(
    const MlaStepPlan &plan, const MlaForwardArgs &args, char *metadataBlock,
    const detail::ScratchPointers &scratch, Stream stream) {
  using namespace detail;
  const MlaDims &d = layerConfig.dims;
  const DType act = layerConfig.activation;
  const DcpContextPlan &context = plan.dcpContext;
  const int64_t b = plan.split.numPrefills,
                chunks = plan.prefill.chunks.numChunks,
                first = plan.split.numDecodeTokens,
                count = plan.split.numPrefillTokens;
  auto layout = StepMetadataLayout::of(plan);
  auto array = [&](MetadataArray a, DType type, std::vector<int64_t> shape) {
    return layout.view(metadataBlock, a, type, std::move(shape));
  };
  BufferView sent = BufferView::contiguous(
      scratch[DcpSendRows], act, {context.rowsPerRank, d.cacheEntry()});
  // The group's rows as pages of one token, for the chunk's block table.
  BufferView gathered = BufferView::contiguous(
      scratch[DcpGatheredRows], act,
      {context.gatheredRows(layerConfig.dcp), 1, d.cacheEntry()});
  BufferView order = array(DcpGatherOrder, DType::I32,
                           {chunks, b, context.orderWidth});
  BufferView chunkCu =
      array(ChunkCuSeqLens, DType::I32, {chunks, b + 1});
  for (int64_t c = 0; c < chunks; ++c) {
    if (llvm::Error error =
            queueDcpContextGather(plan, c, args.kvCache, args.kvScale, sent,
                                  metadataBlock, stream))
      return error;
    auto start = std::chrono::steady_clock::now();
    size_t bytes = size_t(sent.numElements()) * byteWidth(act);
    if (llvm::Error error =
            dcpAllGather(sent.data, gathered.data, bytes, stream))
      return makeError("the DCP group's all-gather of context chunk " +
                       llvm::Twine(c) + ": " +
                       llvm::toString(std::move(error)));
    if (timePhases) {
      if (llvm::Error error = runtime.synchronize(stream))
        return error;
      timings.push_back(
          {"dcp all-gather",
           std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now() - start)
               .count()});
    }
    if (llvm::Error error = runPhase(
            "dcp context chunk", *dcpContextChunk,
            {args.q.rows(first, count), args.kvC.rows(first, count),
             args.kPe.rows(first, count),
             array(PrefillCuSeqlensQ, DType::I32, {b + 1}), gathered,
             rowOf(order, c), chunkCu.rows(c, 1),
             array(DcpOrderStarts, DType::I32, {1, b}), weights.kvBProj,
             BufferView::contiguous(scratch[ContextWorkspace], act,
                                    {workspaceTokens, d.cacheEntry()}),
             args.output.rows(first, count),
             BufferView::contiguous(scratch[PrefillLse], DType::F32,
                                    {d.numHeads, count})},
            stream))
      return error;
  }
  return llvm::Error::success();
}

llvm::Error MlaLayer::gatherDcpContextChunk(const MlaStepPlan &plan,
                                            int64_t chunk,
                                            const BufferView &kvCache,
                                            const BufferView &rows,
                                            Stream stream,
                                            const BufferView &kvScale) {
  if (!dcpContextGather)
    return makeArgumentError(
        "gatherDcpContextChunk: the layer runs without decode context "
        "parallelism (dcp.worldSize = 1)");
  const int64_t chunks = plan.dcpContext.rowsPerRank > 0
                             ? plan.prefill.chunks.numChunks
                             : 0;
  if (chunk < 0 || chunk >= chunks)
    return makeArgumentError("gatherDcpContextChunk: chunk " +
                             llvm::Twine(chunk) + " of a plan with " +
                             llvm::Twine(chunks) +
                             " context chunks to gather");
  const MlaDims &d = layerConfig.dims;
  if (llvm::Error e = checkContiguousBuffer(
          "kv_cache", kvCache, layerConfig.cacheDType,
          {plan.numCacheBlocks, layerConfig.blockSize, d.cacheEntry()}))
    return e;
  if (llvm::Error e = checkContiguousBuffer(
          "rows", rows, layerConfig.activation,
          {plan.dcpContext.rowsPerRank, d.cacheEntry()}))
    return e;
  if (llvm::Error e = checkKvScale(kvScale))
    return e;
  auto block = uploadMetadata(plan, dcpGatherMetadata, stream);
  if (!block)
    return block.takeError();
  return queueDcpContextGather(plan, chunk, kvCache, kvScale, rows, *block,
                               stream);
}

} // namespace mla::runtime
