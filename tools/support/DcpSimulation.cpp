//===- DcpSimulation.cpp - A DCP group's decode step in one process -------===//

#include "DcpSimulation.h"

#include "HostTensor.h"
#include "MlaReference.h"
#include "StepSupport.h"
#include "mla/Support/Diagnostics.h"

#include <algorithm>
#include <numeric>

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

/// A cache for `share` of every request (block tables `width` wide), its
/// context tokens' rows from `contextRows` (request b's position p at row
/// offsets[b] + p), every other row random.
llvm::Expected<PagedCache>
buildCache(Runtime &runtime, const DcpSimulationConfig &config,
           const TokenShare &share, llvm::ArrayRef<int32_t> seqLens,
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
    for (int64_t p = 0; p + 1 < seqLens[b]; ++p) {
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

} // namespace

llvm::Expected<DcpSimulationReport>
runDcpSimulation(const DcpSimulationConfig &config, Runtime &runtime,
                 const std::function<void(const std::string &)> &progress) {
  const MlaDims &d = config.dims;
  const int64_t n = d.numHeads, v = d.vHeadDim, entry = d.cacheEntry(),
                page = config.blockSize, w = config.worldSize,
                requests = int64_t(config.decodeContexts.size());
  const DType act = config.activation;
  if (llvm::Error e = runtime::checkDcp({w, 0, config.interleave}, page))
    return std::move(e);
  if (requests == 0)
    return makeError("the DCP simulation needs at least one decode request");
  std::mt19937 rng(config.seed);
  DcpSimulationReport report;
  report.tolerance = outputTolerance(act);

  // --- The batch and its tokens ------------------------------------------
  std::vector<int32_t> seqLens, queryLens(requests, 1);
  std::vector<int64_t> offsets;
  int64_t contextTokens = 0;
  for (int32_t c : config.decodeContexts) {
    if (c < 0)
      return makeError("negative decode context length");
    seqLens.push_back(c + 1);
    offsets.push_back(contextTokens);
    contextTokens += c;
  }
  HostTensor contextHost(config.cache, {std::max<int64_t>(contextTokens, 1), entry});
  contextHost.fillRandom(rng);
  std::vector<double> contextRows = contextHost.toDouble();
  int64_t width = 1;
  for (int32_t s : seqLens)
    width = std::max<int64_t>(width, (s + page - 1) / page);

  progress("filling the caches of one layer without DCP and of " +
           std::to_string(w) + " ranks on " + runtime.deviceDescription());
  TokenShare everything{[](int64_t) { return true; },
                        [](int64_t p) { return p; },
                        [](int64_t s) { return s; }};
  auto single = buildCache(runtime, config, everything, seqLens, contextRows,
                           offsets, width, rng);
  if (!single)
    return single.takeError();
  std::vector<PagedCache> rankCaches;
  std::vector<DcpConfig> groups;
  for (int64_t r = 0; r < w; ++r) {
    DcpConfig dcp{w, r, config.interleave};
    groups.push_back(dcp);
    TokenShare share{[dcp](int64_t p) { return dcp.ownerOf(p) == dcp.rank; },
                     [dcp](int64_t p) { return dcp.localPosition(p); },
                     [dcp](int64_t s) { return dcp.localLength(s); }};
    auto cache = buildCache(runtime, config, share, seqLens, contextRows,
                            offsets, width, rng);
    if (!cache)
      return cache.takeError();
    rankCaches.push_back(std::move(*cache));
  }
  auto weights = makeWeights(runtime, d, act, rng);
  if (!weights)
    return weights.takeError();

  // --- The step's inputs, shared by every layer ---------------------------
  HostTensor qH(act, {requests, n, d.qkHeadDim()});
  HostTensor kvcH(act, {requests, d.kvLoraRank}), kpeH(act, {requests, d.ropeDim});
  qH.fillRandom(rng, -2.0, 2.0);
  kvcH.fillRandom(rng);
  kpeH.fillRandom(rng);
  auto q = mirror(runtime, std::move(qH));
  auto kvc = mirror(runtime, std::move(kvcH));
  auto kpe = mirror(runtime, std::move(kpeH));
  for (auto *t : {&q, &kvc, &kpe})
    if (!*t)
      return t->takeError();

  // --- One layer without DCP, then each rank's -----------------------------
  runtime::MlaLayerConfig layerConfig =
      checkedLayerConfig(d, act, config.cache, page, config.backend,
                         config.prefillBackend);
  // Runs `layer`'s decode step on `cache` with `m`: output rows and LSE;
  // its plan into `plan`.
  auto runStep = [&](runtime::MlaLayer &layer,
                     const runtime::CommonAttentionMetadata &m,
                     PagedCache &cache, runtime::MlaStepPlan &planned)
      -> llvm::Expected<std::vector<Mirrored>> {
    auto plan = layer.plan(m, cache.numBlocks);
    if (!plan)
      return plan.takeError();
    planned = *plan;
    auto rowsAndLse = poisonedRows(runtime, act, requests, n, v);
    if (!rowsAndLse)
      return rowsAndLse.takeError();
    Mirrored *out = &rowsAndLse->first, *lse = &rowsAndLse->second;
    if (llvm::Error e = layer.forward(
            *plan, {q->deviceView(), kvc->deviceView(), kpe->deviceView(),
                    cache.tensor.deviceView(), out->deviceView(),
                    lse->deviceView()}))
      return std::move(e);
    for (Mirrored *t : {out, lse, &cache.tensor})
      if (llvm::Error e = download(runtime, *t))
        return std::move(e);
    std::vector<Mirrored> results;
    results.push_back(std::move(*out));
    results.push_back(std::move(*lse));
    return results;
  };

  progress("the step on a layer without DCP");
  auto singleLayer = runtime::MlaLayer::create(runtime, layerConfig,
                                               weights->views());
  if (!singleLayer)
    return singleLayer.takeError();
  report.selection = (*singleLayer)->selection();
  (*singleLayer)->setPhaseTiming(true);
  runtime::CommonAttentionMetadata m = runtime::makeCommonAttentionMetadata(
      queryLens, seqLens, single->table, width, page);
  runtime::MlaStepPlan singlePlan;
  auto singleResult = runStep(**singleLayer, m, *single, singlePlan);
  if (!singleResult)
    return singleResult.takeError();
  report.singleAttentionMs = phaseMs(**singleLayer, "decode attention");

  std::vector<std::unique_ptr<runtime::MlaLayer>> rankLayers;
  std::vector<runtime::MlaStepPlan> rankPlans;
  std::vector<std::vector<double>> rankOut, rankLse;
  for (int64_t r = 0; r < w; ++r) {
    progress("the step on rank " + std::to_string(r) + " of " +
             std::to_string(w));
    runtime::MlaLayerConfig rankConfig = layerConfig;
    rankConfig.dcp = groups[r];
    auto layer = runtime::MlaLayer::create(runtime, rankConfig,
                                           weights->views());
    if (!layer)
      return layer.takeError();
    (*layer)->setPhaseTiming(true);
    PagedCache &cache = rankCaches[r];
    runtime::CommonAttentionMetadata rm = runtime::makeCommonAttentionMetadata(
        queryLens, seqLens, cache.table, width, page);
    auto slots = runtime::dcpLocalSlotMapping(rm, page, groups[r]);
    if (!slots)
      return slots.takeError();
    rm.slotMapping = *slots;
    std::vector<double> before = cache.tensor.host.toDouble();
    runtime::MlaStepPlan plan;
    auto result = runStep(**layer, rm, cache, plan);
    if (!result)
      return result.takeError();
    report.rankAttentionMs.push_back(phaseMs(**layer, "decode attention"));
    rankOut.push_back((*result)[0].host.toDouble());
    rankLse.push_back((*result)[1].host.toDouble());

    // Only the new tokens this rank owns were written, each its latent row.
    std::vector<double> after = cache.tensor.host.toDouble();
    std::vector<double> kvcv = kvc->host.toDouble(), kpev = kpe->host.toDouble();
    HostTensor expectRow(config.cache, {1, entry});
    for (int64_t t = 0; t < requests; ++t) {
      int64_t slot = rm.slotMapping[t];
      if (slot == runtime::kPaddingSlot)
        continue;
      std::vector<double> row = rows(kvcv, t, 1, d.kvLoraRank);
      std::vector<double> pe = rows(kpev, t, 1, d.ropeDim);
      row.insert(row.end(), pe.begin(), pe.end());
      expectRow.fromDouble(row);
      std::vector<double> want = expectRow.toDouble();
      std::copy(want.begin(), want.end(), before.begin() + slot * entry);
    }
    for (size_t i = 0; i < after.size(); i += entry)
      if (!std::equal(after.begin() + i, after.begin() + i + entry,
                      before.begin() + i))
        ++report.cacheMismatches;
    int64_t held = 0;
    for (int32_t s : seqLens)
      held += groups[r].localLength(s);
    report.rankTokens.push_back(held);
    rankLayers.push_back(std::move(*layer));
    rankPlans.push_back(std::move(plan));
  }

  // --- The all-gather, then the merges ------------------------------------
  auto gatheredOut = stack(runtime, act, {requests, n, v}, rankOut);
  auto gatheredLse = stack(runtime, DType::F32, {requests, n, 1}, rankLse);
  if (!gatheredOut || !gatheredLse)
    return gatheredOut ? gatheredLse.takeError() : gatheredOut.takeError();
  // Rank `r` merges `heads` heads into fresh poisoned buffers.
  auto merge = [&](int64_t r, int64_t heads)
      -> llvm::Expected<std::pair<std::vector<double>, std::vector<double>>> {
    auto rowsAndLse = poisonedRows(runtime, act, requests, heads, v);
    if (!rowsAndLse)
      return rowsAndLse.takeError();
    Mirrored *out = &rowsAndLse->first, *lse = &rowsAndLse->second;
    if (llvm::Error e = rankLayers[r]->mergeDcpPartials(
            rankPlans[r], {gatheredOut->deviceView(), gatheredLse->deviceView(),
                           out->deviceView(), lse->deviceView()}))
      return std::move(e);
    for (Mirrored *t : {out, lse})
      if (llvm::Error e = download(runtime, *t))
        return std::move(e);
    return std::make_pair(out->host.toDouble(), lse->host.toDouble());
  };
  progress("merging the " + std::to_string(w) + " ranks' partial rows");
  auto merged = merge(0, n);
  if (!merged)
    return merged.takeError();
  report.mergeMs = phaseMs(*rankLayers[0], "dcp merge");

  // --- Checks against the float64 reference --------------------------------
  progress("checking against the float64 reference");
  std::vector<double> outRef, lseRef;
  referenceDecode(q->host.toDouble(), single->tensor.host.toDouble(), *weights,
                  d, single->table, seqLens, width, single->numBlocks, page,
                  /*queryLen=*/1, layerConfig.effectiveScale(), outRef, lseRef);
  std::vector<double> singleOut = (*singleResult)[0].host.toDouble();
  report.singleError = ref::relativeL2Error(singleOut, outRef);
  report.singleLseError =
      maxLseError((*singleResult)[1].host.toDouble(), lseRef);
  report.mergedError = ref::relativeL2Error(merged->first, outRef);
  report.mergedLseError = maxLseError(merged->second, lseRef);
  report.mergedVsSingle = ref::relativeL2Error(merged->first, singleOut);
  if (n % w == 0) {
    // Every rank's own heads, put back in head order.
    int64_t share = n / w;
    std::vector<double> assembled(requests * n * v);
    for (int64_t r = 0; r < w; ++r) {
      auto own = merge(r, share);
      if (!own)
        return own.takeError();
      for (int64_t t = 0; t < requests; ++t)
        std::copy_n(own->first.begin() + t * share * v, share * v,
                    assembled.begin() + (t * n + r * share) * v);
    }
    report.rankHeadsError = ref::relativeL2Error(assembled, outRef);
  }
  report.passed = report.singleError <= report.tolerance &&
                  report.mergedError <= report.tolerance &&
                  report.mergedLseError <= kLseTolerance &&
                  report.singleLseError <= kLseTolerance &&
                  (!report.rankHeadsError ||
                   *report.rankHeadsError <= report.tolerance) &&
                  report.cacheMismatches == 0;
  return report;
}

} // namespace mla
