//===- MlaLayer.cpp - The MLA attention layer of a serving engine ---------===//

#include "mla/Runtime/MlaLayer.h"

#include "MetadataStaging.h"
#include "StepMetadata.h"

#include "mla/Runtime/GpuKernel.h"
#include "mla/Runtime/MlaLayerKernels.h"
#include "mla/Runtime/RuntimeCompile.h"
#include "mla/Support/Diagnostics.h"
#include "mla/Target/GpuTarget.h"

#include "llvm/Support/Format.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

namespace mla::runtime {

//===----------------------------------------------------------------------===//
// Configuration
//===----------------------------------------------------------------------===//

float MlaLayerConfig::effectiveScale() const {
  if (softmaxScale > 0)
    return softmaxScale;
  return 1.0f / std::sqrt(static_cast<float>(dims.qkHeadDim()));
}

AttentionConfig MlaLayerConfig::attentionConfig(const Runtime &runtime) const {
  return runtime.onThisDevice(selectionKey());
}

AttentionConfig MlaLayerConfig::selectionKey() const {
  AttentionConfig c;
  c.dtype = activation;
  c.kvCacheDType = cacheDType;
  c.blockSize = static_cast<int>(blockSize);
  c.dims = dims;
  c.maxQueryLen = static_cast<int>(decodeThreshold);
  // A DCP rank's partial decode rows merge by their LSEs.
  c.needsDecodeLse = needsDecodeLse || dcp.worldSize > 1;
  c.wantsCudaGraphs = wantsCudaGraphs;
  return c;
}

std::string MlaStepPlan::str() const {
  std::string s = std::to_string(split.numDecodes) + " decodes (" +
                  std::to_string(split.numDecodeTokens) + " tokens";
  if (split.numDecodes)
    s += ", " + std::to_string(decodeSplits.totalSplits()) + " KV splits";
  s += "), " + std::to_string(split.numPrefills) + " prefills (" +
       std::to_string(split.numPrefillTokens) + " tokens";
  if (split.numPrefills)
    s += ", " + std::to_string(prefill.chunks.numChunks) + " context chunks";
  return s + ")";
}

//===----------------------------------------------------------------------===//
// Creation
//===----------------------------------------------------------------------===//

MlaLayer::MlaLayer(Runtime &runtime, MlaLayerConfig config,
                   MlaLayerWeights weights)
    : runtime(runtime), layerConfig(std::move(config)),
      weights(std::move(weights)), scratch(detail::NumScratchBuffers),
      staging(std::make_unique<detail::MetadataStaging>()) {}

MlaLayer::~MlaLayer() {
  // Scratch and staging may still be in use by queued work, on streams the
  // caller may have destroyed since; the staging's page-locked memory and
  // events go with the GPU's context current.
  llvm::consumeError(runtime.synchronizeDevice());
  if (const cuda::Device *gpu = runtime.gpu())
    llvm::consumeError(gpu->makeCurrent());
}

llvm::Expected<std::unique_ptr<MlaLayer>>
MlaLayer::create(Runtime &runtime, MlaLayerConfig config,
                 MlaLayerWeights weights) {
  const MlaDims &d = config.dims;
  if (d.numHeads < 1 || d.kvLoraRank < 1 || d.ropeDim < 1 ||
      d.qkNopeHeadDim < 1 || d.vHeadDim < 1 || config.blockSize < 1)
    return makeArgumentError("MLA layer: heads, dims and block size must be "
                             "positive, got " +
                             config.attentionConfig(runtime).str());
  if (config.decodeThreshold < 1)
    return makeArgumentError(
        "MLA layer: decodeThreshold must be at least 1, got " +
        llvm::Twine(config.decodeThreshold));
  DType act = config.activation;
  if (act != DType::BF16 && act != DType::F16 && act != DType::F32)
    return makeArgumentError("MLA layer: activations must be bf16, f16 or "
                             "f32");
  if (llvm::Error e = checkDcpConfig(config))
    return std::move(e);
  if (llvm::Error e = checkContiguousBuffer(
          "kv_b_proj", weights.kvBProj, act,
          {d.kvLoraRank, d.numHeads, d.qkNopeHeadDim + d.vHeadDim}))
    return std::move(e);
  if (llvm::Error e = checkContiguousBuffer(
          "w_uk_t", weights.wUkT, act,
          {d.numHeads, d.qkNopeHeadDim, d.kvLoraRank}))
    return std::move(e);
  if (llvm::Error e = checkContiguousBuffer(
          "w_uv", weights.wUv, act, {d.numHeads, d.kvLoraRank, d.vHeadDim}))
    return std::move(e);

  std::unique_ptr<MlaLayer> layer(
      new MlaLayer(runtime, std::move(config), std::move(weights)));
  const AttentionConfig key = layer->layerConfig.attentionConfig(runtime);
  auto selection = runtime.selectBackend(key, layer->layerConfig.backend);
  if (!selection)
    return selection.takeError();
  layer->chosen = std::move(*selection);
  // The chunked prefill's backend, chosen by its own priorities and
  // override, whatever the decode's.
  auto prefillSelection = runtime.selectBackend(
      key, layer->layerConfig.prefillBackend, BackendRole::Prefill);
  if (!prefillSelection)
    return prefillSelection.takeError();
  layer->chosenPrefill = std::move(*prefillSelection);
  const MlaLayerConfig &c = layer->layerConfig;
  layer->workspaceTokens =
      c.workspaceTokens > 0
          ? c.workspaceTokens
          : defaultContextWorkspaceTokens(c.maxModelLen, c.maxNumSeqs,
                                          c.blockSize);
  if (llvm::Error error = layer->compileKernels())
    return std::move(error);
  return layer;
}

llvm::Error MlaLayer::compileKernels() {
  // In the order layerKernelModules lists them.
  std::vector<std::shared_ptr<Kernel> *> slots{&cacheWrite, &prefill,
                                               &decodeQuery, &decode, &vUpProj};
  static_assert(NumLayerModules == 5 && NumDcpLayerModules == 8);
  if (layerConfig.dcp.worldSize > 1)
    slots.insert(slots.end(), {&dcpMerge, &dcpContextGather, &dcpContextChunk});
  auto kernels = compileAll(
      runtime, layerKernelModules(
                   layerConfig, LayerStrategies::of(chosen, chosenPrefill)));
  if (!kernels)
    return kernels.takeError();
  for (size_t i = 0; i < slots.size(); ++i)
    *slots[i] = std::move((*kernels)[i]);
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Planning
//===----------------------------------------------------------------------===//

DecodeSplitConfig MlaLayer::decodeSchedule(int64_t queryLen) const {
  const MlaLayerConfig &c = layerConfig;
  DecodeKernelShape shape;
  // The chosen backend's strategy (none on the CPU, which ignores it).
  shape.strategy =
      chosen.backend->kernelStrategy.value_or(KernelStrategy::Generic);
  shape.operandTypes = decodeOperandTypes(c.activation, c.cacheDType);
  shape.dims = c.dims;
  shape.queryLen = queryLen;
  shape.blockSize = c.blockSize;
  shape.numSms = runtime.parallelism();
  shape.sharedBytesPerSm = runtime.sharedMemoryPerSm();
  shape.maxSharedBytesPerBlock = runtime.maxSharedBytesPerBlock();
  return decodeScheduleFor(shape);
}

llvm::Error MlaLayer::planDecodes(const CommonAttentionMetadata &m,
                                  int64_t numDecodes, int64_t rows,
                                  int64_t tableWidth, int64_t maxSplits,
                                  MlaStepPlan &plan) const {
  plan.decodeTableWidth = tableWidth;
  plan.decodeSeqLens.assign(rows, 0);
  plan.decodeBlockTable.assign(rows * tableWidth, 0);
  // Splits divide the tokens the cache holds.
  std::vector<int32_t> held(rows, 0);
  for (int64_t b = 0; b < numDecodes; ++b) {
    plan.decodeSeqLens[b] = decodeCountedLength(m.seqLens[b]);
    held[b] = storedLength(m.seqLens[b]);
    llvm::ArrayRef<int32_t> row = m.blockTableRow(b);
    std::copy(row.begin(), row.end(),
              plan.decodeBlockTable.begin() + b * tableWidth);
  }
  DecodeSplitConfig schedule = decodeSchedule(plan.decodeQueryLen);
  schedule.maxSplitsPerRequest = maxSplits;
  auto splits = planDecodeSplits(held, schedule);
  if (!splits)
    return splits.takeError();
  plan.decodeSplits = std::move(*splits);
  // The CPU computes each row in one pass; it reads no partials.
  if (runtime.deviceKind() == DeviceKind::CPU)
    plan.splitCapacity = 1;
  else if (maxSplits > 0)
    plan.splitCapacity = maxSplits;
  else
    plan.splitCapacity = *std::max_element(plan.decodeSplits.numSplits.begin(),
                                           plan.decodeSplits.numSplits.end());
  return llvm::Error::success();
}

llvm::Expected<MlaStepPlan>
MlaLayer::plan(const CommonAttentionMetadata &m, int64_t numCacheBlocks) const {
  const MlaLayerConfig &c = layerConfig;
  if (llvm::Error error = validateStep(m, numCacheBlocks))
    return std::move(error);
  auto split = splitDecodesAndPrefills(m, c.decodeThreshold);
  if (!split)
    return split.takeError();
  MlaStepPlan plan;
  plan.split = *split;
  plan.numActualTokens = m.numActualTokens;
  plan.numCacheBlocks = numCacheBlocks;
  plan.slotMapping.assign(m.slotMapping.begin(),
                          m.slotMapping.begin() + m.numActualTokens);

  if (split->numDecodes > 0) {
    plan.decodeQueryLen = m.queryLen(0);
    for (int64_t b = 1; b < split->numDecodes; ++b)
      if (m.queryLen(b) != plan.decodeQueryLen)
        return makeError(
            "decode requests must all have the same number of new tokens: "
            "request 0 has " +
            llvm::Twine(plan.decodeQueryLen) + ", request " + llvm::Twine(b) +
            " has " + llvm::Twine(m.queryLen(b)));
    if (llvm::Error error =
            planDecodes(m, split->numDecodes, split->numDecodes,
                        std::max<int64_t>(m.maxBlocks, 1), 0, plan))
      return std::move(error);
  }
  if (split->numPrefills > 0) {
    auto prefill = buildChunkedPrefillMetadata(m, workspaceTokens,
                                               c.blockSize, c.decodeThreshold);
    if (!prefill)
      return prefill.takeError();
    plan.prefill = std::move(*prefill);
    if (c.dcp.worldSize > 1) {
      auto context = planDcpContext(plan.prefill.chunks, c.dcp);
      if (!context)
        return context.takeError();
      plan.dcpContext = std::move(*context);
    }
  }
  return plan;
}

//===----------------------------------------------------------------------===//
// Running
//===----------------------------------------------------------------------===//

llvm::Error MlaLayer::checkArgs(const MlaStepPlan &plan,
                                const MlaForwardArgs &args) const {
  const MlaDims &d = layerConfig.dims;
  DType act = layerConfig.activation;
  int64_t t = plan.numActualTokens;
  if (llvm::Error e = checkContiguousBuffer("q", args.q, act,
                                   {-1, d.numHeads, d.qkHeadDim()}, t))
    return e;
  if (llvm::Error e = checkContiguousBuffer("kv_c", args.kvC, act, {-1, d.kvLoraRank}, t))
    return e;
  if (llvm::Error e = checkContiguousBuffer("k_pe", args.kPe, act, {-1, d.ropeDim}, t))
    return e;
  if (llvm::Error e = checkContiguousBuffer(
          "kv_cache", args.kvCache, layerConfig.cacheDType,
          {plan.numCacheBlocks, layerConfig.blockSize, d.cacheEntry()}))
    return e;
  if (llvm::Error e = checkContiguousBuffer("output", args.output, act,
                                   {-1, d.numHeads, d.vHeadDim}, t))
    return e;
  if (layerConfig.dcp.worldSize > 1 && plan.split.numDecodes > 0 &&
      !args.decodeLse.data)
    return makeArgumentError(
        "decode_lse is required under decode context parallelism: the "
        "group's partial decode rows merge by it");
  if (llvm::Error e = checkKvScale(args.kvScale))
    return e;
  if (plan.dcpContext.rowsPerRank > 0 && !dcpAllGather)
    return makeArgumentError(
        "the step's prefills read context chunks that the decode context "
        "parallel group holds: set the group's all-gather "
        "(setDcpAllGather) first");
  if (args.decodeLse.data || !args.decodeLse.shape.empty())
    if (llvm::Error e = checkContiguousBuffer(
            "decode_lse", args.decodeLse, DType::F32,
            {plan.split.numDecodes, d.numHeads, plan.decodeQueryLen}))
      return e;
  return llvm::Error::success();
}

llvm::Error MlaLayer::checkKvScale(const BufferView &kvScale) const {
  const DType cache = layerConfig.cacheDType;
  if (!isFp8(cache)) {
    if (kvScale.data)
      return makeArgumentError("kv_scale is for FP8 caches; this layer's "
                               "cache is " +
                               std::string(name(cache)));
    return llvm::Error::success();
  }
  if (!kvScale.data)
    return makeArgumentError("kv_scale is required with an " +
                             std::string(name(cache)) +
                             " cache: its entries are stored as value / "
                             "kv_scale");
  if (llvm::Error e = checkContiguousBuffer("kv_scale", kvScale, DType::F32, {1}))
    return e;
  // A host-readable scale is checked here; a device one is the caller's.
  if (runtime.deviceKind() == DeviceKind::CPU) {
    float scale = *static_cast<const float *>(kvScale.data);
    if (!std::isfinite(scale) || scale <= 0)
      return makeArgumentError("kv_scale must be finite and positive, got " +
                               std::to_string(scale));
  }
  return llvm::Error::success();
}

llvm::Expected<void *> MlaLayer::reserve(DeviceAllocation &slot, size_t bytes,
                                         Stream stream) {
  if (slot.size() >= bytes && slot.data())
    return slot.data();
  // The old buffer may still be read by queued work.
  if (slot.data())
    if (llvm::Error error = runtime.synchronize(stream))
      return std::move(error);
  auto fresh = runtime.allocate(std::max<size_t>(bytes, 256));
  if (!fresh)
    return fresh.takeError();
  slot = std::move(*fresh);
  return slot.data();
}

static double millisecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - start)
      .count();
}

llvm::Error MlaLayer::runPhase(const char *phase, const Kernel &kernel,
                               const std::vector<BufferView> &args,
                               Stream stream) {
  auto start = std::chrono::steady_clock::now();
  std::optional<DriverLaunchTimer> launches;
  if (timeHost)
    launches.emplace();
  if (llvm::Error error = kernel.run(args, stream))
    return makeError(llvm::Twine(phase) + ": " +
                     llvm::toString(std::move(error)));
  if (timeHost)
    hostParts.push_back(
        {phase, millisecondsSince(start), launches->milliseconds()});
  if (timePhases) {
    if (llvm::Error error = runtime.synchronize(stream))
      return makeError(llvm::Twine(phase) + ": " +
                       llvm::toString(std::move(error)));
    timings.push_back({phase, millisecondsSince(start)});
  }
  return llvm::Error::success();
}

llvm::Error MlaLayer::forward(const MlaStepPlan &plan,
                              const MlaForwardArgs &args, Stream stream) {
  auto start = std::chrono::steady_clock::now();
  if (llvm::Error error = checkArgs(plan, args))
    return error;
  timings.clear();
  hostParts.clear();

  auto block = uploadMetadata(plan, metadata, stream);
  if (!block)
    return block.takeError();
  if (timeHost)
    hostParts.push_back(
        {"checks and metadata upload", millisecondsSince(start)});

  detail::ScratchBytes bytes = detail::scratchBytes(
      layerConfig, workspaceTokens, plan, args.decodeLse.data != nullptr);
  detail::ScratchPointers pointers;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (!bytes[i])
      continue;
    auto at = reserve(scratch[i], bytes[i], stream);
    if (!at)
      return at.takeError();
    pointers.at[i] = *at;
  }
  return launchPhases(plan, args, *block, pointers, stream);
}

llvm::Expected<char *> MlaLayer::uploadMetadata(const MlaStepPlan &plan,
                                                DeviceAllocation &slot,
                                                Stream stream) {
  // One upload of every metadata array the kernels read: on a GPU from
  // page-locked slots, so that forward does not wait for the stream's
  // earlier work; on the CPU the block is host memory, written in place.
  auto layout = detail::StepMetadataLayout::of(plan);
  auto block = reserve(slot, layout.bytes, stream);
  if (!block)
    return block.takeError();
  auto fill = [&](char *to) { layout.write(plan, to); };
  if (const cuda::Device *gpu = runtime.gpu()) {
    if (llvm::Error error = gpu->makeCurrent())
      return std::move(error);
    if (llvm::Error error =
            staging->upload(runtime, *block, layout.bytes, fill, stream))
      return std::move(error);
  } else {
    fill(static_cast<char *>(*block));
  }
  return static_cast<char *>(*block);
}

llvm::Error MlaLayer::launchPhases(const MlaStepPlan &plan,
                                   const MlaForwardArgs &args,
                                   char *metadataBlock,
                                   const detail::ScratchPointers &scratch,
                                   Stream stream) {
  using namespace detail;
  const MlaDims &d = layerConfig.dims;
  const DType act = layerConfig.activation;
  const int64_t n = d.numHeads;
  const int64_t tokens = plan.numActualTokens;
  const BatchSplit &s = plan.split;
  const ChunkedPrefillMetadata &pf = plan.prefill;
  const int64_t numChunks = pf.chunks.numChunks;
  auto layout = StepMetadataLayout::of(plan);
  auto array = [&](MetadataArray a, DType type, std::vector<int64_t> shape) {
    return layout.view(metadataBlock, a, type, std::move(shape));
  };
  auto rows = [](const BufferView &v, int64_t first, int64_t count) {
    return v.rows(first, count);
  };

  // An FP8 cache's scale, after each module's cache inputs.
  auto scaled = [&](std::vector<BufferView> kernelArgs, size_t at) {
    if (args.kvScale.data)
      kernelArgs.insert(kernelArgs.begin() + at, args.kvScale);
    return kernelArgs;
  };

  // 1. The new tokens' latent entries into the cache.
  if (llvm::Error error = runPhase(
          "concat_and_cache", *cacheWrite,
          scaled({rows(args.kvC, 0, tokens), rows(args.kPe, 0, tokens),
                  array(SlotMapping, DType::I64, {tokens}), args.kvCache},
                 3),
          stream))
    return error;

  // 2. Prefills: new tokens plus cached context in chunks (under DCP the
  //    chunks come from the group, one by one, after the new tokens).
  if (s.numPrefills > 0) {
    int64_t first = s.numDecodeTokens, count = s.numPrefillTokens;
    const int64_t ownChunks = layerConfig.dcp.worldSize > 1 ? 0 : numChunks;
    if (llvm::Error error = runPhase(
            "prefill", *prefill,
            scaled({rows(args.q, first, count), rows(args.kvC, first, count),
             rows(args.kPe, first, count),
             array(PrefillCuSeqlensQ, DType::I32, {s.numPrefills + 1}),
             args.kvCache,
             array(PrefillBlockTable, DType::I32,
                   {s.numPrefills, pf.maxBlocks}),
             array(ChunkCuSeqLens, DType::I32, {ownChunks, s.numPrefills + 1}),
             array(ChunkStarts, DType::I32, {ownChunks, s.numPrefills}),
             weights.kvBProj,
             BufferView::contiguous(scratch[ContextWorkspace], act,
                                    {workspaceTokens, d.cacheEntry()}),
             rows(args.output, first, count),
             BufferView::contiguous(scratch[PrefillLse], DType::F32,
                                    {n, count})}, 6),
            stream))
      return error;
    if (ownChunks < numChunks)
      if (llvm::Error error =
              runDcpContextChunks(plan, args, metadataBlock, scratch, stream))
        return error;
  }

  // 3. Decodes, absorbed.
  if (s.numDecodes > 0) {
    int64_t b = s.numDecodes, sq = plan.decodeQueryLen, td = s.numDecodeTokens;
    int64_t splits = plan.splitCapacity;
    void *lse = args.decodeLse.data ? args.decodeLse.data : scratch[DecodeLse];
    BufferView q = BufferView::contiguous(scratch[DecodeQuery], act,
                                          {b, sq, n, d.cacheEntry()});
    BufferView latent = BufferView::contiguous(scratch[DecodeLatentOut], act,
                                               {b, sq, n, d.kvLoraRank});
    if (llvm::Error error = runPhase(
            "decode query", *decodeQuery,
            {rows(args.q, 0, td), weights.wUkT,
             BufferView::contiguous(q.data, act, {td, n, d.cacheEntry()})},
            stream))
      return error;
    if (llvm::Error error = runPhase(
            "decode attention", *decode,
            scaled({q, args.kvCache,
             array(DecodeBlockTable, DType::I32, {b, plan.decodeTableWidth}),
             array(DecodeSeqLens, DType::I32, {b}),
             array(DecodeNumSplits, DType::I32, {b}),
             BufferView::contiguous(scratch[DecodeSplitOut], DType::F32,
                                    {b, sq, n, splits, d.kvLoraRank}),
             BufferView::contiguous(scratch[DecodeSplitLse], DType::F32,
                                    {b, sq, n, splits}),
             latent, BufferView::contiguous(lse, DType::F32, {b, n, sq})}, 4),
            stream))
      return error;
    if (llvm::Error error = runPhase(
            "decode v_up_proj", *vUpProj,
            {BufferView::contiguous(latent.data, act, {td, n, d.kvLoraRank}),
             weights.wUv, rows(args.output, 0, td)},
            stream))
      return error;
  }
  return llvm::Error::success();
}

} // namespace mla::runtime
