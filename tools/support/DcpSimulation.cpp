//===- DcpSimulation.cpp - A DCP group's decode step in one process -------===//

#include "DcpSimulation.h"

#include "HostTensor.h"
#include "MlaReference.h"
#include "StepSupport.h"
#include "mla/Support/Diagnostics.h"

#include <algorithm>
#include <numeric>
#include <optional>

namespace mla {
namespace {

using runtime::DcpConfig;
using runtime::Runtime;
using namespace step;

/// A paged cache holding some of each request's tokens: the pages of each
/// request (a row of the block table) and the cache on the device.
struct PagedCache {
  std::vector<int32_t> table; ///< [requests, width]
  int64_t numBlocks = 0;
  Mirrored tensor;
};

/// Which of a sequence's tokens a cache holds, and where among them.
struct TokenShare {
  std::function<bool(int64_t)> holds;
  std::function<int64_t(int64_t)> localPosition;
  std::function<int64_t(int64_t)> localLength;
};

/// A cache for `share` of every request (block tables `width` wide, pages
/// for `seqLens` tokens), its context tokens' rows (the first contexts[b]
/// of request b) from `contextRows` (request b's position p at row
/// offsets[b] + p), every other row random.
llvm::Expected<PagedCache>
buildCache(Runtime &runtime, const DcpSimulationConfig &config,
           const TokenShare &share, llvm::ArrayRef<int32_t> seqLens,
           llvm::ArrayRef<int32_t> contexts,
           const std::vector<double> &contextRows,
           llvm::ArrayRef<int64_t> offsets, int64_t width, std::mt19937 &rng) {
  const int64_t page = config.blockSize, entry = config.dims.cacheEntry(),
                requests = int64_t(seqLens.size());
  std::vector<int64_t> pages(requests);
  int64_t total = 0;
  for (int64_t b = 0; b < requests; ++b) {
    pages[b] = (share.localLength(seqLens[b]) + page - 1) / page;
    total += pages[b];
  }
  const int64_t numBlocks = total + 2;
  std::vector<int32_t> table(requests * width, 0);
  std::vector<int32_t> pool(numBlocks);
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  for (int64_t b = 0; b < requests; ++b)
    for (int64_t j = 0; j < pages[b]; ++j) {
      table[b * width + j] = pool.back();
      pool.pop_back();
    }
  HostTensor host(config.cache, {numBlocks, page, entry});
  host.fillRandom(rng);
  std::vector<double> values = host.toDouble();
  for (int64_t b = 0; b < requests; ++b)
    for (int64_t p = 0; p < contexts[b]; ++p) {
      if (!share.holds(p))
        continue;
      int64_t local = share.localPosition(p);
      int64_t slot = table[b * width + local / page] * page + local % page;
      std::copy_n(contextRows.begin() + (offsets[b] + p) * entry, entry,
                  values.begin() + slot * entry);
    }
  host.fromDouble(values);
  auto mirrored = mirror(runtime, std::move(host));
  if (!mirrored)
    return mirrored.takeError();
  return PagedCache{std::move(table), numBlocks, std::move(*mirrored)};
}

/// Stacks `parts` (equal sizes) into one [parts, ...] tensor on the device.
llvm::Expected<Mirrored> stack(Runtime &runtime, DType dtype,
                               std::vector<int64_t> partShape,
                               const std::vector<std::vector<double>> &parts) {
  std::vector<double> all;
  for (const std::vector<double> &p : parts)
    all.insert(all.end(), p.begin(), p.end());
  partShape.insert(partShape.begin(), int64_t(parts.size()));
  HostTensor t(dtype, partShape);
  t.fromDouble(all);
  return mirror(runtime, std::move(t));
}

double phaseMs(const runtime::MlaLayer &layer, llvm::StringRef phase) {
  for (const runtime::PhaseTiming &t : layer.phaseTimings())
    if (t.phase == phase)
      return t.milliseconds;
  return 0;
}

/// The batch as every rank sees it: decodes of `queryLen` new tokens each,
/// then the prefills; the context rows every cache takes its share of.
struct Batch {
  std::vector<int32_t> queryLens, seqLens, contexts;
  std::vector<int64_t> offsets;
  std::vector<double> contextRows;
  int64_t decodes = 0, queryLen = 1, tokens = 0, width = 1;
  /// Rows of the decodes' tokens, decodes x queryLen.
  int64_t decodeTokens() const { return decodes * queryLen; }
};

llvm::Expected<Batch> makeBatch(const DcpSimulationConfig &config,
                                std::mt19937 &rng) {
  Batch batch;
  if (config.prefillContexts.size() != config.prefillNewTokens.size())
    return makeError("the DCP simulation needs as many prefill contexts as "
                     "prefill new-token counts");
  batch.decodes = int64_t(config.decodeContexts.size());
  batch.queryLen = config.decodeQueryLen;
  if (batch.queryLen < 1)
    return makeError("decodes of the DCP simulation have at least 1 new token");
  for (int32_t c : config.decodeContexts) {
    batch.contexts.push_back(c);
    batch.queryLens.push_back(int32_t(batch.queryLen));
  }
  for (size_t p = 0; p < config.prefillContexts.size(); ++p) {
    if (config.prefillNewTokens[p] <= batch.queryLen)
      return makeError("a prefill of the DCP simulation has more new tokens "
                       "than a decode (" + llvm::Twine(config.decodeQueryLen) +
                       ")");
    batch.contexts.push_back(config.prefillContexts[p]);
    batch.queryLens.push_back(config.prefillNewTokens[p]);
  }
  if (batch.contexts.empty())
    return makeError("the DCP simulation needs at least one request");
  int64_t contextTokens = 0;
  for (size_t b = 0; b < batch.contexts.size(); ++b) {
    if (batch.contexts[b] < 0)
      return makeError("negative context length");
    batch.seqLens.push_back(batch.contexts[b] + batch.queryLens[b]);
    batch.offsets.push_back(contextTokens);
    contextTokens += batch.contexts[b];
    batch.tokens += batch.queryLens[b];
    batch.width = std::max<int64_t>(
        batch.width, (batch.seqLens[b] + config.blockSize - 1) /
                         config.blockSize);
  }
  HostTensor contextHost(config.cache, {std::max<int64_t>(contextTokens, 1),
                                        config.dims.cacheEntry()});
  contextHost.fillRandom(rng);
  batch.contextRows = contextHost.toDouble();
  return batch;
}

/// A layer's run of the step: its plan, output rows, decode LSE and cache
/// after the step (host copies).
struct StepRun {
  runtime::MlaStepPlan plan;
  std::vector<double> out, lse;
};

class Simulation {
public:
  Simulation(const DcpSimulationConfig &config, Runtime &runtime,
             const std::function<void(const std::string &)> &progress)
      : config(config), runtime(runtime), progress(progress),
        d(config.dims), rng(config.seed) {}

  llvm::Expected<DcpSimulationReport> run();

private:
  llvm::Error setUp();
  /// The step on `layer` over `cache` with `m`, planned into `into.plan`;
  /// the cache's host copy is refreshed.
  llvm::Error runStep(runtime::MlaLayer &layer,
                      const runtime::CommonAttentionMetadata &m,
                      PagedCache &cache, StepRun &into);
  llvm::Error createRanks();
  /// What the engine's all-gather does for rank `r`'s forward: each call
  /// is the next context chunk; every rank's layer gathers its rows of it.
  runtime::DcpAllGather allGatherFor(int64_t r);
  llvm::Error runRanks();
  /// Rank `r`'s merge of `heads` heads of the gathered decode partials.
  llvm::Expected<std::pair<std::vector<double>, std::vector<double>>>
  merge(int64_t r, int64_t heads);
  llvm::Error check();
  /// A decode LSE buffer of decodes x Sq rows (poisonedRows' [rows, heads,
  /// 1]) as the layer takes it, [decodes, heads, Sq].
  BufferView lseView(Mirrored &lse, int64_t heads) const {
    return BufferView::contiguous(lse.device.data(), DType::F32,
                                  {batch.decodes, heads, batch.queryLen});
  }

  const DcpSimulationConfig &config;
  Runtime &runtime;
  const std::function<void(const std::string &)> &progress;
  const MlaDims &d;
  std::mt19937 rng;
  DcpSimulationReport report;

  Batch batch;
  runtime::MlaLayerConfig layerConfig;
  std::optional<PagedCache> single;
  std::vector<PagedCache> rankCaches;
  std::vector<DcpConfig> groups;
  std::optional<Weights> weights;
  std::optional<Mirrored> q, kvc, kpe, gatheredOut, gatheredLse;
  /// An FP8 cache's scale (kFp8CacheScale, [1] f32): its entries are the
  /// codes' values times it.
  std::optional<Mirrored> kvScale;
  BufferView kvScaleView() {
    return kvScale ? kvScale->deviceView() : BufferView{};
  }
  /// A cache's values as the kernels read them (FP8 codes x scale).
  std::vector<double> entries(const HostTensor &cache) const {
    return cacheEntries(cache, kvScale.has_value());
  }
  StepRun singleRun;
  std::vector<std::unique_ptr<runtime::MlaLayer>> rankLayers;
  std::vector<runtime::CommonAttentionMetadata> rankMetadata;
  std::vector<StepRun> rankRuns;
  /// Context chunks gathered so far in the forward now running.
  int64_t chunksGathered = 0;
};

llvm::Error Simulation::setUp() {
  const int64_t w = config.worldSize;
  auto made = makeBatch(config, rng);
  if (!made)
    return made.takeError();
  batch = std::move(*made);
  progress("filling the caches of one layer without DCP and of " +
           std::to_string(w) + " ranks on " + runtime.deviceDescription());
  TokenShare everything{[](int64_t) { return true; },
                        [](int64_t p) { return p; },
                        [](int64_t s) { return s; }};
  auto cache = buildCache(runtime, config, everything, batch.seqLens,
                          batch.contexts, batch.contextRows, batch.offsets,
                          batch.width, rng);
  if (!cache)
    return cache.takeError();
  single = std::move(*cache);
  for (int64_t r = 0; r < w; ++r) {
    DcpConfig dcp{w, r, config.interleave};
    groups.push_back(dcp);
    TokenShare share{[dcp](int64_t p) { return dcp.ownerOf(p) == dcp.rank; },
                     [dcp](int64_t p) { return dcp.localPosition(p); },
                     [dcp](int64_t s) { return dcp.localLength(s); }};
    auto rankCache = buildCache(runtime, config, share, batch.seqLens,
                                batch.contexts, batch.contextRows,
                                batch.offsets, batch.width, rng);
    if (!rankCache)
      return rankCache.takeError();
    rankCaches.push_back(std::move(*rankCache));
  }
  auto made2 = makeWeights(runtime, d, config.activation, rng);
  if (!made2)
    return made2.takeError();
  weights = std::move(*made2);
  auto scale = cacheScaleFor(runtime, config.cache);
  if (!scale)
    return scale.takeError();
  kvScale = std::move(*scale);

  // The step's inputs, shared by every layer.
  const DType act = config.activation;
  HostTensor qH(act, {batch.tokens, d.numHeads, d.qkHeadDim()});
  HostTensor kvcH(act, {batch.tokens, d.kvLoraRank}),
      kpeH(act, {batch.tokens, d.ropeDim});
  qH.fillRandom(rng, -2.0, 2.0);
  kvcH.fillRandom(rng);
  kpeH.fillRandom(rng);
  for (auto [into, host] : {std::pair{&q, &qH}, std::pair{&kvc, &kvcH},
                            std::pair{&kpe, &kpeH}}) {
    auto mirrored = mirror(runtime, std::move(*host));
    if (!mirrored)
      return mirrored.takeError();
    *into = std::move(*mirrored);
  }
  layerConfig = checkedLayerConfig(d, act, config.cache, config.blockSize,
                                   config.backend, config.prefillBackend);
  layerConfig.workspaceTokens = config.workspaceTokens;
  layerConfig.decodeThreshold = batch.queryLen;
  return llvm::Error::success();
}

llvm::Error Simulation::runStep(runtime::MlaLayer &layer,
                                const runtime::CommonAttentionMetadata &m,
                                PagedCache &cache, StepRun &into) {
  const DType act = config.activation;
  auto plan = layer.plan(m, cache.numBlocks);
  if (!plan)
    return plan.takeError();
  into.plan = *plan;
  auto out = poisonedRows(runtime, act, batch.tokens, d.numHeads, d.vHeadDim);
  if (!out)
    return out.takeError();
  // The decode LSE [decodes, N, Sq], when the step has decodes.
  std::optional<Mirrored> lse;
  if (batch.decodes > 0) {
    auto lseRows =
        poisonedRows(runtime, act, batch.decodeTokens(), d.numHeads, 1);
    if (!lseRows)
      return lseRows.takeError();
    lse = std::move(lseRows->second);
  }
  runtime::MlaForwardArgs args{q->deviceView(),
                               kvc->deviceView(),
                               kpe->deviceView(),
                               cache.tensor.deviceView(),
                               out->first.deviceView(),
                               lse ? lseView(*lse, d.numHeads) : BufferView{}};
  args.kvScale = kvScaleView();
  if (llvm::Error e = layer.forward(*plan, args))
    return e;
  for (Mirrored *t : {&out->first, &cache.tensor})
    if (llvm::Error e = download(runtime, *t))
      return e;
  into.out = out->first.host.toDouble();
  if (lse) {
    if (llvm::Error e = download(runtime, *lse))
      return e;
    into.lse = lse->host.toDouble();
  }
  return llvm::Error::success();
}

llvm::Error Simulation::createRanks() {
  for (int64_t r = 0; r < config.worldSize; ++r) {
    runtime::MlaLayerConfig rankConfig = layerConfig;
    rankConfig.dcp = groups[r];
    auto layer =
        runtime::MlaLayer::create(runtime, rankConfig, weights->views());
    if (!layer)
      return layer.takeError();
    (*layer)->setPhaseTiming(true);
    (*layer)->setDcpAllGather(allGatherFor(r));
    runtime::CommonAttentionMetadata m = runtime::makeCommonAttentionMetadata(
        batch.queryLens, batch.seqLens, rankCaches[r].table, batch.width,
        config.blockSize);
    auto slots = runtime::dcpLocalSlotMapping(m, config.blockSize, groups[r]);
    if (!slots)
      return slots.takeError();
    m.slotMapping = *slots;
    // Every rank's plan before any forward: a rank's all-gather asks the
    // others for their rows.
    auto plan = (*layer)->plan(m, rankCaches[r].numBlocks);
    if (!plan)
      return plan.takeError();
    rankRuns.push_back({std::move(*plan), {}, {}});
    rankMetadata.push_back(std::move(m));
    rankLayers.push_back(std::move(*layer));
  }
  return llvm::Error::success();
}

runtime::DcpAllGather Simulation::allGatherFor(int64_t r) {
  return [this, r](const void *, void *received, size_t bytesPerRank,
                   runtime::Stream stream) -> llvm::Error {
    const int64_t chunk = chunksGathered++;
    const int64_t rowBytes =
        d.cacheEntry() * int64_t(byteWidth(config.activation));
    for (int64_t from = 0; from < config.worldSize; ++from) {
      const runtime::MlaStepPlan &plan = rankRuns[from].plan;
      if (int64_t(bytesPerRank) != plan.dcpContext.rowsPerRank * rowBytes)
        return makeError("rank " + llvm::Twine(r) + " sends " +
                         llvm::Twine(bytesPerRank) + " bytes, rank " +
                         llvm::Twine(from) + " plans " +
                         llvm::Twine(plan.dcpContext.rowsPerRank * rowBytes));
      BufferView rows = BufferView::contiguous(
          static_cast<char *>(received) + from * bytesPerRank,
          config.activation, {plan.dcpContext.rowsPerRank, d.cacheEntry()});
      if (llvm::Error e = rankLayers[from]->gatherDcpContextChunk(
              plan, chunk, rankCaches[from].tensor.deviceView(), rows,
              stream, kvScaleView()))
        return e;
    }
    return llvm::Error::success();
  };
}

llvm::Error Simulation::runRanks() {
  std::vector<std::vector<double>> decodeRows, decodeLses;
  const int64_t entry = d.cacheEntry(), rowValues = d.numHeads * d.vHeadDim;
  for (int64_t r = 0; r < config.worldSize; ++r) {
    progress("the step on rank " + std::to_string(r) + " of " +
             std::to_string(config.worldSize));
    PagedCache &cache = rankCaches[r];
    std::vector<double> before = cache.tensor.host.toDouble();
    chunksGathered = 0;
    if (llvm::Error e =
            runStep(*rankLayers[r], rankMetadata[r], cache, rankRuns[r]))
      return e;
    report.contextChunks = chunksGathered;
    report.rankAttentionMs.push_back(
        phaseMs(*rankLayers[r], "decode attention"));
    decodeRows.push_back(
        rows(rankRuns[r].out, 0, batch.decodeTokens(), rowValues));
    decodeLses.push_back(rankRuns[r].lse);

    // Only the new tokens this rank owns were written, each its latent row.
    std::vector<double> after = cache.tensor.host.toDouble();
    std::vector<double> kvcv = kvc->host.toDouble(), kpev = kpe->host.toDouble();
    HostTensor expectRow(config.cache, {1, entry});
    for (int64_t t = 0; t < batch.tokens; ++t) {
      int64_t slot = rankMetadata[r].slotMapping[t];
      if (slot == runtime::kPaddingSlot)
        continue;
      std::vector<double> row = rows(kvcv, t, 1, d.kvLoraRank);
      std::vector<double> pe = rows(kpev, t, 1, d.ropeDim);
      row.insert(row.end(), pe.begin(), pe.end());
      // Stored as value / scale in an FP8 cache.
      if (kvScale)
        toFp8CacheUnits(row);
      expectRow.fromDouble(row);
      std::vector<double> want = expectRow.toDouble();
      std::copy(want.begin(), want.end(), before.begin() + slot * entry);
    }
    for (size_t i = 0; i < after.size(); i += entry)
      if (!std::equal(after.begin() + i, after.begin() + i + entry,
                      before.begin() + i))
        ++report.cacheMismatches;
    int64_t held = 0;
    for (int32_t s : batch.seqLens)
      held += groups[r].localLength(s);
    report.rankTokens.push_back(held);
  }
  if (batch.decodes == 0)
    return llvm::Error::success();
  // The decodes' all-gather.
  auto out = stack(runtime, config.activation,
                   {batch.decodeTokens(), d.numHeads, d.vHeadDim},
                   decodeRows);
  auto lse = stack(runtime, DType::F32,
                   {batch.decodes, d.numHeads, batch.queryLen},
                   decodeLses);
  if (!out || !lse)
    return out ? lse.takeError() : out.takeError();
  gatheredOut = std::move(*out);
  gatheredLse = std::move(*lse);
  return llvm::Error::success();
}

llvm::Expected<std::pair<std::vector<double>, std::vector<double>>>
Simulation::merge(int64_t r, int64_t heads) {
  auto rowsAndLse =
      poisonedRows(runtime, config.activation, batch.decodeTokens(), heads,
                   d.vHeadDim);
  if (!rowsAndLse)
    return rowsAndLse.takeError();
  Mirrored *out = &rowsAndLse->first, *lse = &rowsAndLse->second;
  if (llvm::Error e = rankLayers[r]->mergeDcpPartials(
          rankRuns[r].plan, {gatheredOut->deviceView(),
                             gatheredLse->deviceView(), out->deviceView(),
                             lseView(*lse, heads)}))
    return std::move(e);
  for (Mirrored *t : {out, lse})
    if (llvm::Error e = download(runtime, *t))
      return std::move(e);
  return std::make_pair(out->host.toDouble(), lse->host.toDouble());
}

llvm::Error Simulation::check() {
  progress("checking against the float64 reference");
  const int64_t n = d.numHeads, v = d.vHeadDim, w = config.worldSize;
  const int64_t rowValues = n * v;
  std::vector<double> qv = q->host.toDouble();
  std::vector<double> singleCache = entries(single->tensor.host);
  if (batch.decodes > 0) {
    progress("merging the " + std::to_string(w) + " ranks' partial rows");
    auto merged = merge(0, n);
    if (!merged)
      return merged.takeError();
    report.mergeMs = phaseMs(*rankLayers[0], "dcp merge");
    std::vector<double> outRef, lseRef;
    std::vector<int32_t> decodeSeqLens(batch.seqLens.begin(),
                                       batch.seqLens.begin() + batch.decodes);
    llvm::ArrayRef<int32_t> decodeTable =
        llvm::ArrayRef(single->table).take_front(batch.decodes * batch.width);
    referenceDecode(qv, singleCache, *weights, d, decodeTable, decodeSeqLens, batch.width, single->numBlocks,
                    config.blockSize, batch.queryLen,
                    layerConfig.effectiveScale(), outRef, lseRef);
    std::vector<double> singleOut =
        rows(singleRun.out, 0, batch.decodeTokens(), rowValues);
    report.singleError = ref::relativeL2Error(singleOut, outRef);
    report.singleLseError = maxLseError(singleRun.lse, lseRef);
    report.mergedError = ref::relativeL2Error(merged->first, outRef);
    report.mergedLseError = maxLseError(merged->second, lseRef);
    report.mergedVsSingle = ref::relativeL2Error(merged->first, singleOut);
    if (n % w == 0) {
      // Every rank's own heads, put back in head order.
      int64_t share = n / w;
      std::vector<double> assembled(batch.decodeTokens() * rowValues);
      for (int64_t r = 0; r < w; ++r) {
        auto own = merge(r, share);
        if (!own)
          return own.takeError();
        for (int64_t t = 0; t < batch.decodeTokens(); ++t)
          std::copy_n(own->first.begin() + t * share * v, share * v,
                      assembled.begin() + (t * n + r * share) * v);
      }
      report.rankHeadsError = ref::relativeL2Error(assembled, outRef);
    }
  }
  if (int64_t count = batch.tokens - batch.decodeTokens(); count > 0) {
    const runtime::ChunkedPrefillMetadata &pf = singleRun.plan.prefill;
    const int64_t first = batch.decodeTokens(), page = config.blockSize;
    // The gather converts cache rows to the activation type.
    HostTensor cacheAsAct(config.activation,
                          {single->numBlocks, page, d.cacheEntry()});
    cacheAsAct.fromDouble(singleCache);
    std::vector<double> outRef(count * rowValues), lseRef(n * count);
    ref::mlaPrefillWithContext(
        rows(qv, first, count, n * d.qkHeadDim()),
        rows(kvc->host.toDouble(), first, count, d.kvLoraRank),
        rows(kpe->host.toDouble(), first, count, d.ropeDim), pf.cuSeqlensQ,
        pf.chunks.contextLens, cacheAsAct.toDouble(), pf.blockTable,
        weights->kvBProj, single->numBlocks, page, pf.maxBlocks, n,
        d.kvLoraRank, d.qkNopeHeadDim, d.ropeDim, v,
        layerConfig.effectiveScale(), outRef, lseRef);
    std::vector<double> singleRows = rows(singleRun.out, first, count, rowValues);
    report.singlePrefillError = ref::relativeL2Error(singleRows, outRef);
    for (const StepRun &run : rankRuns) {
      std::vector<double> rankRows = rows(run.out, first, count, rowValues);
      report.rankPrefillError = std::max(
          report.rankPrefillError, ref::relativeL2Error(rankRows, outRef));
      report.rankPrefillVsSingle =
          std::max(report.rankPrefillVsSingle,
                   ref::relativeL2Error(rankRows, singleRows));
    }
  }
  const double tol = report.tolerance;
  report.passed = report.singleError <= tol && report.mergedError <= tol &&
                  report.mergedLseError <= kLseTolerance &&
                  report.singleLseError <= kLseTolerance &&
                  (!report.rankHeadsError || *report.rankHeadsError <= tol) &&
                  report.singlePrefillError <= tol &&
                  report.rankPrefillError <= tol &&
                  report.rankPrefillVsSingle <= tol &&
                  report.cacheMismatches == 0;
  return llvm::Error::success();
}

llvm::Expected<DcpSimulationReport> Simulation::run() {
  if (llvm::Error e = runtime::checkDcp(
          {config.worldSize, 0, config.interleave}, config.blockSize))
    return std::move(e);
  report.tolerance = outputTolerance(config.activation);
  if (llvm::Error e = setUp())
    return std::move(e);

  progress("the step on a layer without DCP");
  auto singleLayer =
      runtime::MlaLayer::create(runtime, layerConfig, weights->views());
  if (!singleLayer)
    return singleLayer.takeError();
  report.selection = (*singleLayer)->selection();
  (*singleLayer)->setPhaseTiming(true);
  runtime::CommonAttentionMetadata m = runtime::makeCommonAttentionMetadata(
      batch.queryLens, batch.seqLens, single->table, batch.width,
      config.blockSize);
  if (llvm::Error e = runStep(**singleLayer, m, *single, singleRun))
    return std::move(e);
  report.singleAttentionMs = phaseMs(**singleLayer, "decode attention");

  if (llvm::Error e = createRanks())
    return std::move(e);
  if (llvm::Error e = runRanks())
    return std::move(e);
  if (llvm::Error e = check())
    return std::move(e);
  return report;
}

} // namespace

llvm::Expected<DcpSimulationReport>
runDcpSimulation(const DcpSimulationConfig &config, Runtime &runtime,
                 const std::function<void(const std::string &)> &progress) {
  return Simulation(config, runtime, progress).run();
}

} // namespace mla
