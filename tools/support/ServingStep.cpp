//===- ServingStep.cpp - DeepSeek-shaped MLA serving steps ----------------===//

#include "ServingStep.h"

#include "HostTensor.h"
#include "StepSupport.h"
#include "MlaReference.h"
#include "mla/Support/Diagnostics.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <random>

namespace mla {
namespace {

using Clock = std::chrono::steady_clock;
using runtime::Runtime;
using namespace step;

/// One request: the step it arrives at, tokens cached before the step,
/// tokens the step adds, and the pages it owns (enough for every step).
struct Request {
  int64_t arrival = 0;
  int32_t context = 0;
  int32_t fresh = 0;
  std::vector<int32_t> pages;
  int32_t total() const { return context + fresh; }
};

/// The q-quantile (0..1, 0.5 the median) of `v`, which it sorts.
double quantile(std::vector<double> &v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(q * double(v.size())))];
}

/// Host times of repeated steps, in microseconds.
struct RepeatSamples {
  std::vector<double> plan, run, step;
};

/// Calls `plan` then `run` (with the plan) `repeats` times, after a few
/// untimed warm-up calls, with nothing waited for inside a repeat; `after`
/// sees each timed repeat. The stream is drained every few repeats, outside
/// the timing, so that the launch queue never fills and a launch never
/// waits for the GPU.
template <typename PlanFn, typename RunFn>
llvm::Expected<RepeatSamples> repeatTimed(
    Runtime &runtime, int64_t repeats, PlanFn plan, RunFn run,
    llvm::function_ref<void()> after = [] {}) {
  constexpr int64_t kWarmup = 8, kDrainEvery = 8;
  RepeatSamples samples;
  for (int64_t i = 0; i < kWarmup + repeats; ++i) {
    if (i % kDrainEvery == 0)
      if (llvm::Error e = runtime.synchronize())
        return std::move(e);
    auto start = Clock::now();
    auto planned = plan();
    if (!planned)
      return planned.takeError();
    auto ran = Clock::now();
    if (llvm::Error e = run(*planned))
      return std::move(e);
    auto end = Clock::now();
    if (i < kWarmup)
      continue;
    using Us = std::chrono::duration<double, std::micro>;
    samples.plan.push_back(Us(ran - start).count());
    samples.run.push_back(Us(end - ran).count());
    samples.step.push_back(Us(end - start).count());
    after();
  }
  if (llvm::Error e = runtime.synchronize())
    return std::move(e);
  return samples;
}

/// Times the host side of the step: validation and planning, then
/// forward's argument checks, metadata copies and launches.
llvm::Expected<HostStepTiming>
timeHostSide(runtime::MlaLayer &layer, Runtime &runtime,
             const runtime::CommonAttentionMetadata &m, int64_t numBlocks,
             const runtime::MlaForwardArgs &args, int64_t repeats) {
  layer.setPhaseTiming(false);
  layer.setHostTiming(true);
  std::vector<HostStepTiming::Part> parts;
  std::vector<std::vector<double>> partUs, partLaunchUs;
  auto samples = repeatTimed(
      runtime, repeats, [&] { return layer.plan(m, numBlocks); },
      [&](const runtime::MlaStepPlan &plan) {
        return layer.forward(plan, args);
      },
      [&] {
        const std::vector<runtime::PhaseTiming> &host = layer.hostTimings();
        if (parts.empty())
          for (const runtime::PhaseTiming &p : host)
            parts.push_back({p.phase, 0});
        partUs.resize(parts.size());
        partLaunchUs.resize(parts.size());
        for (size_t k = 0; k < host.size() && k < parts.size(); ++k) {
          partUs[k].push_back(host[k].milliseconds * 1e3);
          partLaunchUs[k].push_back(host[k].driverLaunchMilliseconds * 1e3);
        }
      });
  layer.setPhaseTiming(true);
  if (!samples)
    return samples.takeError();
  HostStepTiming t;
  t.repeats = repeats;
  t.planMedianUs = quantile(samples->plan, 0.5);
  t.forwardMedianUs = quantile(samples->run, 0.5);
  t.stepMedianUs = quantile(samples->step, 0.5);
  t.stepP90Us = quantile(samples->step, 0.9);
  for (size_t k = 0; k < parts.size(); ++k) {
    parts[k].medianUs = quantile(partUs[k], 0.5);
    parts[k].driverLaunchMedianUs = quantile(partLaunchUs[k], 0.5);
  }
  t.forwardParts = std::move(parts);
  return t;
}

/// Captures the step as a CUDA graph at its own shape and times the host
/// side of its replays: planDecodeStep, then replay. The split limit is
/// the checked step's largest split count, as an engine would size it for
/// such batches. `lastPlan` receives the plan the replays ran.
llvm::Expected<HostStepTiming::GraphReplay>
timeGraphReplays(runtime::MlaLayer &layer, Runtime &runtime,
                 const runtime::CommonAttentionMetadata &m,
                 const runtime::MlaStepPlan &checked,
                 const runtime::MlaForwardArgs &args, int64_t repeats,
                 runtime::MlaStepPlan &lastPlan) {
  runtime::DecodeGraphShape shape;
  shape.maxDecodes = checked.split.numDecodes;
  shape.queryLen = checked.decodeQueryLen;
  shape.maxBlocksPerRequest = checked.decodeTableWidth;
  shape.numCacheBlocks = checked.numCacheBlocks;
  shape.maxSplitsPerRequest = checked.splitCapacity;
  auto start = Clock::now();
  auto graph = layer.captureDecodeStep(shape, args);
  if (!graph)
    return graph.takeError();
  HostStepTiming::GraphReplay g;
  g.captureMs =
      std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  auto samples = repeatTimed(
      runtime, repeats,
      [&] { return layer.planDecodeStep(m, (*graph)->shape()); },
      [&](const runtime::MlaStepPlan &plan) {
        return layer.replay(**graph, plan);
      });
  if (!samples)
    return samples.takeError();
  // Planning is deterministic: the replays all ran this plan.
  auto plan = layer.planDecodeStep(m, (*graph)->shape());
  if (!plan)
    return plan.takeError();
  lastPlan = std::move(*plan);
  g.planMedianUs = quantile(samples->plan, 0.5);
  g.replayMedianUs = quantile(samples->run, 0.5);
  g.stepMedianUs = quantile(samples->step, 0.5);
  g.stepP90Us = quantile(samples->step, 0.9);
  return g;
}

} // namespace

llvm::Expected<ServingStepReport>
runServingSteps(const ServingStepConfig &config, Runtime &runtime,
                const std::function<void(const std::string &)> &progress) {
  const MlaDims &d = config.dims;
  const int64_t n = d.numHeads, latent = d.kvLoraRank, rope = d.ropeDim,
                nope = d.qkNopeHeadDim, vDim = d.vHeadDim,
                entry = d.cacheEntry(), page = config.blockSize;
  const DType act = config.activation;
  if (config.prefillContexts.size() != config.prefillNewTokens.size())
    return makeError("prefill contexts and new-token counts differ in length");
  for (int32_t v : config.decodeContexts)
    if (v < 0)
      return makeError("negative decode context length");
  for (size_t i = 0; i < config.prefillContexts.size(); ++i)
    if (config.prefillContexts[i] < 0 ||
        config.prefillNewTokens[i] <= config.decodeQueryLen)
      return makeError("a prefill needs a context >= 0 and more new tokens "
                       "than a decode");
  if (config.steps < 1 || config.decodeQueryLen < 1)
    return makeError("at least one step of at least one token per decode");
  const int32_t perStep = config.decodeQueryLen;

  std::mt19937 rng(config.seed);
  ServingStepReport report;

  // Requests in batch order, decodes first: those decoding from the start,
  // then each mixed step's prefills. A request decodes one token a step
  // after the step it arrives at, so the order stays decodes first.
  if (config.mixedSteps < 1 || config.mixedSteps > config.steps)
    return makeError("mixed steps must be 1 to the number of steps");
  std::vector<Request> requests;
  for (int32_t c : config.decodeContexts)
    requests.push_back({0, c, perStep, {}});
  for (int64_t s = 0; s < config.mixedSteps; ++s)
    for (size_t i = 0; i < config.prefillContexts.size(); ++i)
      requests.push_back(
          {s, config.prefillContexts[i], config.prefillNewTokens[i], {}});
  auto finalLength = [&](const Request &r) {
    return r.total() + (config.steps - 1 - r.arrival) * perStep;
  };
  int64_t pagesNeeded = 0, maxBlocks = 1;
  for (const Request &r : requests) {
    int64_t pages = (finalLength(r) + page - 1) / page;
    pagesNeeded += pages;
    maxBlocks = std::max(maxBlocks, pages);
  }
  int64_t numBlocks = pagesNeeded + 4;
  std::vector<int32_t> freePages(numBlocks);
  std::iota(freePages.begin(), freePages.end(), 0);
  std::shuffle(freePages.begin(), freePages.end(), rng);
  for (Request &r : requests)
    for (int64_t j = 0; j * page < finalLength(r); ++j) {
      r.pages.push_back(freePages.back());
      freePages.pop_back();
    }

  progress("filling a " + std::to_string(numBlocks) +
           "-page latent cache and the weights on " +
           runtime.deviceDescription());
  HostTensor cacheHost(config.cache, {numBlocks, page, entry});
  cacheHost.fillRandom(rng);
  auto cache = mirror(runtime, std::move(cacheHost));
  if (!cache)
    return cache.takeError();
  // An FP8 cache holds value / kFp8CacheScale: the latent entries (about
  // [-1, 1]) then use the format's range without reaching its largest.
  auto madeScale = cacheScaleFor(runtime, config.cache);
  if (!madeScale)
    return madeScale.takeError();
  std::optional<Mirrored> kvScale = std::move(*madeScale);
  // The cache's values as the kernels read them (FP8 entries x scale).
  auto readValues = [&](const HostTensor &t) {
    return cacheEntries(t, kvScale.has_value());
  };
  auto weights = makeWeights(runtime, d, act, rng);
  if (!weights)
    return weights.takeError();

  // --- The layer: backend selection and kernels --------------------------
  progress("creating the MLA layer (selecting a backend, compiling or "
           "loading its kernels)");
  runtime::MlaLayerConfig layerConfig =
      checkedLayerConfig(d, act, config.cache, page, config.backend,
                         config.prefillBackend);
  layerConfig.workspaceTokens = config.workspaceTokens;
  layerConfig.decodeThreshold = perStep;
  size_t eventsBefore = runtime.compileEvents().size();
  auto setupStart = Clock::now();
  auto layer = runtime::MlaLayer::create(runtime, layerConfig,
                                         weights->views());
  if (!layer)
    return layer.takeError();
  report.layerSetupMs =
      std::chrono::duration<double, std::milli>(Clock::now() - setupStart)
          .count();
  // The steps below run and time the kernels' best code.
  runtime.waitForKernelUpgrades();
  report.kernelsUpgradedMs =
      std::chrono::duration<double, std::milli>(Clock::now() - setupStart)
          .count();
  report.selection = (*layer)->selection();
  report.prefillSelection = (*layer)->prefillSelection();
  std::vector<CompileEvent> events = runtime.compileEvents();
  report.compiles.assign(events.begin() + eventsBefore, events.end());
  (*layer)->setPhaseTiming(true);
  (*layer)->setHostTiming(true);
  const float scale = layerConfig.effectiveScale();
  report.tolerance = outputTolerance(act);

  for (int64_t step = 0; step < config.steps; ++step) {
    // The step's batch: every request that has arrived.
    std::vector<Request *> batch;
    for (Request &r : requests) {
      if (r.arrival > step)
        continue;
      if (r.arrival < step) {
        r.context = r.total();
        r.fresh = perStep;
      }
      batch.push_back(&r);
    }
    // --- The batch's metadata ---------------------------------------------
    std::vector<int32_t> queryLens, seqLens, table;
    for (const Request *request : batch) {
      const Request &r = *request;
      queryLens.push_back(r.fresh);
      seqLens.push_back(r.total());
      for (int64_t j = 0; j < maxBlocks; ++j)
        table.push_back(j < int64_t(r.pages.size()) ? r.pages[j] : 0);
    }
    runtime::CommonAttentionMetadata m = runtime::makeCommonAttentionMetadata(
        queryLens, seqLens, table, maxBlocks, page);
    auto planStart = Clock::now();
    auto plan = (*layer)->plan(m, numBlocks);
    if (!plan)
      return plan.takeError();
    StepReport stepReport;
    stepReport.planMicroseconds =
        std::chrono::duration<double, std::micro>(Clock::now() - planStart)
            .count();
    stepReport.plan = plan->str();
    const runtime::BatchSplit &split = plan->split;
    int64_t tokens = m.numActualTokens;

    // --- Inputs and outputs -------------------------------------------------
    HostTensor qH(act, {tokens, n, d.qkHeadDim()});
    HostTensor kvcH(act, {tokens, latent}), kpeH(act, {tokens, rope});
    qH.fillRandom(rng, -2.0, 2.0);
    kvcH.fillRandom(rng);
    kpeH.fillRandom(rng);
    HostTensor outH(act, {tokens, n, vDim});
    HostTensor lseH(DType::F32, {split.numDecodes, n, plan->decodeQueryLen});
    outH.poison();
    lseH.poison();
    auto q = mirror(runtime, std::move(qH));
    auto kvc = mirror(runtime, std::move(kvcH));
    auto kpe = mirror(runtime, std::move(kpeH));
    auto out = mirror(runtime, std::move(outH));
    auto lse = mirror(runtime, std::move(lseH));
    for (auto *t : {&q, &kvc, &kpe, &out, &lse})
      if (!*t)
        return t->takeError();

    progress("step " + std::to_string(step) + ": " + stepReport.plan);
    runtime::MlaForwardArgs args{q->deviceView(),   kvc->deviceView(),
                                 kpe->deviceView(), cache->deviceView(),
                                 out->deviceView(), lse->deviceView()};
    if (kvScale)
      args.kvScale = kvScale->deviceView();
    if (llvm::Error e = (*layer)->forward(*plan, args))
      return std::move(e);
    stepReport.phases = (*layer)->phaseTimings();
    stepReport.hostParts = (*layer)->hostTimings();
    for (auto *t : {&*out, &*lse, &*cache})
      if (llvm::Error e = download(runtime, *t))
        return std::move(e);

    // --- Checks against the float64 reference ------------------------------
    progress("step " + std::to_string(step) +
             ": checking against the float64 reference");
    std::vector<double> cacheValues = readValues(cache->host);
    std::vector<double> qv = q->host.toDouble(), kvcv = kvc->host.toDouble(),
                        kpev = kpe->host.toDouble(),
                        outv = out->host.toDouble();
    // Every new token's cache row is its [kv_c | k_pe] in the cache dtype.
    HostTensor expectRow(config.cache, {1, entry});
    for (int64_t t = 0; t < tokens; ++t) {
      int64_t slot = m.slotMapping[t];
      std::vector<double> row = rows(kvcv, t, 1, latent);
      std::vector<double> pe = rows(kpev, t, 1, rope);
      row.insert(row.end(), pe.begin(), pe.end());
      // Stored as value / scale in an FP8 cache.
      if (kvScale)
        toFp8CacheUnits(row);
      expectRow.fromDouble(row);
      std::vector<double> want = readValues(expectRow);
      for (int64_t c = 0; c < entry; ++c)
        if (cacheValues[slot * entry + c] != want[c]) {
          ++stepReport.cacheMismatches;
          break;
        }
    }

    if (split.numPrefills > 0) {
      const runtime::ChunkedPrefillMetadata &pf = plan->prefill;
      int64_t first = split.numDecodeTokens, count = split.numPrefillTokens;
      // The gather converts cache rows to the activation type.
      HostTensor cacheAsAct(act, {numBlocks, page, entry});
      cacheAsAct.fromDouble(cacheValues);
      std::vector<double> outRef(count * n * vDim), lseRef(n * count);
      ref::mlaPrefillWithContext(
          rows(qv, first, count, n * d.qkHeadDim()),
          rows(kvcv, first, count, latent), rows(kpev, first, count, rope),
          pf.cuSeqlensQ, pf.chunks.contextLens, cacheAsAct.toDouble(),
          pf.blockTable, weights->kvBProj, numBlocks, page, pf.maxBlocks, n,
          latent, nope, rope, vDim, scale, outRef, lseRef);
      stepReport.prefillError = ref::relativeL2Error(
          rows(outv, first, count, n * vDim), outRef);
    }
    std::vector<double> decodeOutRef, decodeLseRef;
    if (split.numDecodes > 0) {
      int64_t sq = plan->decodeQueryLen, td = split.numDecodeTokens;
      std::vector<double> outRef, lseRef;
      referenceDecode(qv, cacheValues, *weights, d, plan->decodeBlockTable,
                      plan->decodeSeqLens, plan->decodeTableWidth, numBlocks,
                      page, sq, scale, outRef, lseRef);
      stepReport.decodeError =
          ref::relativeL2Error(rows(outv, 0, td, n * vDim), outRef);
      stepReport.decodeLseError = maxLseError(lse->host.toDouble(), lseRef);
      decodeOutRef = std::move(outRef);
      decodeLseRef = std::move(lseRef);
    }
    if (step + 1 == config.steps && config.hostTimingRepeats > 0 &&
        split.numPrefills == 0 && runtime.deviceKind() != DeviceKind::CPU) {
      progress("step " + std::to_string(step) + ": timing its host side (" +
               std::to_string(config.hostTimingRepeats) + " repeats)");
      auto timing = timeHostSide(**layer, runtime, m, numBlocks, args,
                                 config.hostTimingRepeats);
      if (!timing)
        return timing.takeError();
      // The repeats rewrite the same cache rows and outputs: deterministic
      // kernels leave them as checked.
      std::vector<double> lsev = lse->host.toDouble();
      // The outputs now, and poisoned again, so that the next check sees
      // only new results.
      auto takeOutputs = [&]() -> llvm::Expected<std::vector<double>> {
        std::vector<double> both;
        for (auto *t : {&*out, &*lse}) {
          if (llvm::Error e = download(runtime, *t))
            return std::move(e);
          std::vector<double> values = t->host.toDouble();
          both.insert(both.end(), values.begin(), values.end());
          t->host.poison();
          if (llvm::Error e = runtime.upload(
                  t->device.data(), t->host.view().data, t->host.sizeInBytes()))
            return std::move(e);
        }
        return both;
      };
      std::vector<double> checkedOutputs = outv;
      checkedOutputs.insert(checkedOutputs.end(), lsev.begin(), lsev.end());
      auto repeated = takeOutputs();
      if (!repeated)
        return repeated.takeError();
      timing->reproduced = *repeated == checkedOutputs;
      if ((*layer)->selection().backend->cudaGraphs !=
          CudaGraphSupport::NEVER) {
        progress("step " + std::to_string(step) +
                 ": capturing it as a CUDA graph, timing its replays");
        runtime::MlaStepPlan graphPlan;
        auto graph = timeGraphReplays(**layer, runtime, m, *plan, args,
                                      config.hostTimingRepeats, graphPlan);
        if (!graph)
          return graph.takeError();
        auto replayed = takeOutputs();
        if (!replayed)
          return replayed.takeError();
        size_t outSize = outv.size();
        std::vector<double> replayedOut(replayed->begin(),
                                        replayed->begin() + outSize);
        std::vector<double> replayedLse(replayed->begin() + outSize,
                                        replayed->end());
        graph->decodeError = ref::relativeL2Error(replayedOut, decodeOutRef);
        graph->decodeLseError = maxLseError(replayedLse, decodeLseRef);
        if (llvm::Error e = (*layer)->forward(graphPlan, args))
          return std::move(e);
        auto forwarded = takeOutputs();
        if (!forwarded)
          return forwarded.takeError();
        graph->matchesForward = *forwarded == *replayed;
        timing->graph = *graph;
      }
      report.hostTiming = *timing;
    }
    stepReport.passed = stepReport.prefillError <= report.tolerance &&
                        stepReport.decodeError <= report.tolerance &&
                        stepReport.decodeLseError <= kLseTolerance &&
                        stepReport.cacheMismatches == 0;
    report.steps.push_back(std::move(stepReport));
  }
  auto graphPassed = [&](const HostStepTiming &t) {
    return !t.graph || (t.graph->matchesForward &&
                        t.graph->decodeError <= report.tolerance &&
                        t.graph->decodeLseError <= kLseTolerance);
  };
  report.passed = std::all_of(report.steps.begin(), report.steps.end(),
                              [](const StepReport &s) { return s.passed; }) &&
                  (!report.hostTiming || (report.hostTiming->reproduced &&
                                          graphPassed(*report.hostTiming)));
  return report;
}

} // namespace mla
