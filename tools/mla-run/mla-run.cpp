//===- mla-run.cpp - DeepSeek-shaped MLA serving steps over the runtime ----===//
//
// The main job, a driver over the runtime's host API: creates a runtime (the
// GPU when there is one, else the CPU), an MLA attention layer (showing the
// backend and the prefill backend chosen and why the others were not, and
// every kernel compiled or found in the kernel cache), then runs serving
// steps with growing contexts, each checked against the float64
// reference, with per-phase timings. Run it twice: the second run loads
// its kernels from the disk cache. The work itself lives in tools/support
// (ServingStep.h).
//
//===----------------------------------------------------------------------===//

#include "DcpSimulation.h"
#include "ServingStep.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdio>
#include <optional>

using namespace llvm;

/// The tool's own options, the only ones --help lists (LLVM's are
/// still accepted).
static cl::OptionCategory runOptions("mla-run options");
static cl::opt<int> heads("heads", cl::cat(runOptions),
                          cl::desc("attention heads on this device"),
                          cl::init(16));
static cl::opt<std::string> dtype("dtype", cl::cat(runOptions),
                                  cl::desc("activations: f32, f16 or bf16"),
                                  cl::init("bf16"));
static cl::opt<std::string> cacheDtype("cache-dtype", cl::cat(runOptions),
                                       cl::desc("KV cache: f32, f16, bf16, fp8_e4m3 or fp8_e5m2 (stored as value / 0.03)"),
                                       cl::init("bf16"));
static cl::opt<int> blockSize("block-size", cl::cat(runOptions),
                              cl::desc("tokens per cache page"), cl::init(64));
static cl::list<int> decodeContexts(
    "decode-contexts", cl::CommaSeparated, cl::cat(runOptions),
    cl::desc(
        "cached tokens of each decode request (default 1500,700,64,2100)"));
static cl::list<int> prefillContexts(
    "prefill-contexts", cl::CommaSeparated, cl::cat(runOptions),
    cl::desc("cached tokens of each prefill request (default 900,0)"));
static cl::list<int>
    prefillNew("prefill-new-tokens", cl::CommaSeparated, cl::cat(runOptions),
               cl::desc("new tokens of each prefill (default 96,40)"));
static cl::opt<int>
    workspace("workspace", cl::cat(runOptions),
              cl::desc("context-gather workspace rows (0: vLLM's sizing)"),
              cl::init(256));
static cl::opt<int> steps("steps", cl::cat(runOptions),
                          cl::desc("steps: the mixed ones, then decode steps"),
                          cl::init(4));
static cl::opt<int> mixedSteps(
    "mixed-steps", cl::cat(runOptions),
    cl::desc("steps that admit new prefills (the first pays the kernels' "
             "first launches, the others run warm; default 3, at most "
             "--steps)"),
    cl::init(3));
static cl::opt<int> decodeQueryLen(
    "decode-query-len", cl::cat(runOptions),
    cl::desc("new tokens per decode per step: 1, or 1 + speculative tokens"),
    cl::init(1));
static cl::opt<std::string>
    backend("backend", cl::cat(runOptions),
            cl::desc("attention backend to use (default: selection by "
                     "priority, or MLA_ATTENTION_BACKEND)"),
            cl::init(""));
static cl::opt<int> hostRepeats(
    "host-repeats", cl::cat(runOptions),
    cl::desc("repeats of the last step (decodes only, on a GPU) whose host "
             "side, plan and launches, is timed (0: none)"),
    cl::init(200));
// --- Prefill backend selection -------------------------------------------
static cl::opt<std::string> prefillBackend(
    "prefill-backend", cl::cat(runOptions),
    cl::desc("prefill backend to use for the chunked prefill (default: "
             "selection by priority, or MLA_PREFILL_BACKEND)"),
    cl::init(""));
// ---------------------------------------------------------------------------
static cl::opt<unsigned> seed("seed", cl::cat(runOptions),
                              cl::desc("random seed"), cl::init(1));
static cl::opt<std::string>
    deviceChoice("device", cl::cat(runOptions),
                 cl::desc("auto (the GPU if there is one), gpu or cpu"),
                 cl::init("auto"));

static cl::opt<int> dcpWorldSize(
    "dcp-world-size", cl::cat(runOptions),
    cl::desc("simulate a step (the decodes, and the prefills given) of "
             "this many decode-context-parallel ranks in one process and "
             "check their rows against a layer without DCP and the float64 "
             "reference (1: off)"),
    cl::init(1));
static cl::opt<int> dcpInterleave(
    "dcp-interleave", cl::cat(runOptions),
    cl::desc("with --dcp-world-size: tokens a rank holds in a row (vLLM's "
             "cp_kv_cache_interleave_size)"),
    cl::init(1));

/// The DCP simulation (--dcp-world-size): one step over the group.
static int runDcpSimulation(mla::runtime::Runtime &runtime,
                            const mla::ServingStepConfig &steps) {
  mla::DcpSimulationConfig config;
  static_cast<mla::StepShape &>(config) = steps;
  config.worldSize = dcpWorldSize;
  config.interleave = dcpInterleave;
  auto report = mla::runDcpSimulation(config, runtime, [](const std::string &line) {
    outs() << "  ... " << line << "\n";
    outs().flush();
  });
  if (!report) {
    errs() << "mla-run: " << toString(report.takeError()) << "\n";
    return 1;
  }
  const mla::DcpSimulationReport &r = *report;
  outs() << "backend: " << r.selection.str() << "\n";
  outs() << format("step over %d DCP ranks (interleave %d), %zu decodes and "
                   "%zu prefills (%lld context chunks); tokens per rank:",
                   int(dcpWorldSize), int(dcpInterleave),
                   config.decodeContexts.size(), config.prefillContexts.size(),
                   (long long)r.contextChunks);
  for (int64_t t : r.rankTokens)
    outs() << " " << t;
  outs() << "\n";
  outs() << format("  without DCP: rel L2 %.2e, max |dLSE| %.2e; decode "
                   "attention %.3f ms\n",
                   r.singleError, r.singleLseError, r.singleAttentionMs);
  outs() << format("  merged:      rel L2 %.2e, max |dLSE| %.2e; vs without "
                   "DCP %.2e; merge %.3f ms\n",
                   r.mergedError, r.mergedLseError, r.mergedVsSingle,
                   r.mergeMs);
  if (r.rankHeadsError)
    outs() << format("  each rank's own heads: rel L2 %.2e\n",
                     *r.rankHeadsError);
  if (!config.prefillContexts.empty())
    outs() << format("  prefill rows: rel L2 %.2e without DCP, %.2e on the "
                     "worst rank; worst rank vs without DCP %.2e\n",
                     r.singlePrefillError, r.rankPrefillError,
                     r.rankPrefillVsSingle);
  for (size_t i = 0; i < r.rankAttentionMs.size(); ++i)
    outs() << format("  rank %zu: decode attention %.3f ms\n", i,
                     r.rankAttentionMs[i]);
  outs() << format("  cache rows written wrongly: %lld (tolerance %.1e)\n",
                   (long long)r.cacheMismatches, r.tolerance);
  outs() << (r.passed ? "PASS" : "FAIL") << "\n";
  return r.passed ? 0 : 1;
}

/// Why `chosen` of `registry`: every other backend of the registry with
/// its reasons for `attention`, or that it would do at a lower priority.
static void printOtherBackends(const mla::BackendRegistry &registry,
                               const mla::Selection &chosen,
                               const mla::AttentionConfig &attention) {
  for (const mla::Backend &other : registry.backends()) {
    if (&other == chosen.backend)
      continue;
    std::vector<std::string> reasons = other.validate(attention);
    std::string why;
    for (const std::string &r : reasons)
      why += (why.empty() ? "" : "; ") + r;
    outs() << "  not " << other.name << ": "
           << (why.empty() ? "valid, lower priority on this device" : why)
           << "\n";
  }
}

/// Each phase of the first mixed step beside the same phase of the later
/// mixed steps: what a serving loop's first step pays once (the kernels'
/// first launches) and what its steps cost after.
static void printFirstAndWarmSteps(const mla::ServingStepReport &report) {
  if (mixedSteps < 2)
    return;
  // A phase's time in a list of timings.
  auto timeOf = [](const std::vector<mla::runtime::PhaseTiming> &of,
                   const std::string &phase) -> std::optional<double> {
    for (const auto &p : of)
      if (p.phase == phase)
        return p.milliseconds;
    return std::nullopt;
  };
  auto warmMedian = [&](const std::string &phase, bool host) {
    std::vector<double> warm;
    for (int s = 1; s < mixedSteps; ++s) {
      const mla::StepReport &step = report.steps[s];
      if (auto t = timeOf(host ? step.hostParts : step.phases, phase))
        warm.push_back(*t);
    }
    std::sort(warm.begin(), warm.end());
    return warm.empty() ? 0.0
                        : (warm[(warm.size() - 1) / 2] + warm[warm.size() / 2]) /
                              2;
  };
  const mla::StepReport &first = report.steps[0];
  outs() << format("\nfirst mixed step vs the %d warm ones (median; the "
                   "same prefills, more decodes as earlier prefills decode "
                   "on), each phase's time and the host's part of it:\n",
                   int(mixedSteps) - 1);
  for (const auto &phase : first.phases) {
    double inLaunches = 0;
    for (const auto &p : first.hostParts)
      if (p.phase == phase.phase)
        inLaunches = p.driverLaunchMilliseconds;
    outs() << format("  %-18s first %9.3f ms (host %8.3f ms, in the driver's "
                     "launches %8.3f ms)  warm %9.3f ms (host %8.3f ms)\n",
                     phase.phase.c_str(), phase.milliseconds,
                     timeOf(first.hostParts, phase.phase).value_or(0),
                     inLaunches, warmMedian(phase.phase, false),
                     warmMedian(phase.phase, true));
  }
}

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(runOptions);
  cl::ParseCommandLineOptions(argc, argv, "run MLA serving steps\n");
  if (!mixedSteps.getNumOccurrences())
    mixedSteps = std::min<int>(mixedSteps, steps);

  mla::ServingStepConfig config;
  auto act = mla::parseDType(dtype), cache = mla::parseDType(cacheDtype);
  if (!act || !mla::isFloat(*act) || !cache || !mla::isCacheFormat(*cache)) {
    errs() << "mla-run: --dtype takes f32, f16 or bf16; --cache-dtype also "
              "fp8_e4m3 or fp8_e5m2\n";
    return 2;
  }
  if (heads < 1 || heads > 128 || blockSize < 1 || steps < 1 ||
      decodeQueryLen < 1 || hostRepeats < 0 || mixedSteps < 1 ||
      mixedSteps > steps || dcpWorldSize < 1 || dcpInterleave < 1) {
    errs() << "mla-run: --heads must be 1..128, --block-size, --steps, "
              "--decode-query-len, --dcp-world-size and --dcp-interleave "
              "positive, --mixed-steps 1 to --steps, --host-repeats not "
              "negative\n";
    return 2;
  }
  mla::runtime::RuntimeOptions options;
  if (deviceChoice == "cpu")
    options.device = mla::runtime::DevicePreference::Cpu;
  else if (deviceChoice == "gpu")
    options.device = mla::runtime::DevicePreference::Gpu;
  else if (deviceChoice != "auto") {
    errs() << "mla-run: --device takes auto, gpu or cpu\n";
    return 2;
  }
  config.dims.numHeads = heads;
  config.activation = *act;
  config.cache = *cache;
  config.blockSize = blockSize;
  config.workspaceTokens = workspace;
  config.steps = steps;
  config.mixedSteps = mixedSteps;
  config.decodeQueryLen = decodeQueryLen;
  config.backend = backend;
  config.prefillBackend = prefillBackend;
  config.seed = seed;
  config.hostTimingRepeats = hostRepeats;
  if (!decodeContexts.empty())
    config.decodeContexts.assign(decodeContexts.begin(), decodeContexts.end());
  if (!prefillContexts.empty() || !prefillNew.empty()) {
    config.prefillContexts.assign(prefillContexts.begin(), prefillContexts.end());
    config.prefillNewTokens.assign(prefillNew.begin(), prefillNew.end());
  }

  const mla::MlaDims &d = config.dims;
  outs() << "MLA serving steps (DeepSeek-V3 dims: kv_lora_rank " << d.kvLoraRank
         << ", rope " << d.ropeDim << ", qk_nope " << d.qkNopeHeadDim << ", v "
         << d.vHeadDim << "; " << d.numHeads << " heads), activations "
         << mla::name(config.activation) << ", cache " << mla::name(config.cache)
         << ", page " << config.blockSize << " tokens\n";
  options.log = [](const std::string &line) {
    outs() << "  [runtime] " << line << "\n";
    outs().flush();
  };
  auto runtime = mla::runtime::Runtime::create(options);
  if (!runtime) {
    errs() << "mla-run: " << toString(runtime.takeError()) << "\n";
    return 1;
  }

  if (dcpWorldSize != 1) {
    return runDcpSimulation(**runtime, config);
  }
  auto report = mla::runServingSteps(config, **runtime, [](const std::string &line) {
    outs() << "  ... " << line << "\n";
    outs().flush();
  });
  if (!report) {
    errs() << "mla-run: " << toString(report.takeError()) << "\n";
    return 1;
  }

  // Why these backends: the ones above them in priority, then every other
  // one, the decode's and the prefill's.
  outs() << "\nbackend: " << report->selection.backend->name << " ("
         << report->selection.backend->description << ")\n";
  mla::AttentionConfig attention = (*runtime)->onThisDevice([&] {
    mla::runtime::MlaLayerConfig c;
    c.dims = d;
    c.activation = config.activation;
    c.cacheDType = config.cache;
    c.blockSize = config.blockSize;
    c.needsDecodeLse = true;
    return c.attentionConfig(**runtime);
  }());
  printOtherBackends((*runtime)->backends(), report->selection, attention);
  const mla::Backend &prefillChosen = *report->prefillSelection.backend;
  outs() << "prefill backend: " << prefillChosen.name << " ("
         << prefillChosen.description << ")\n";
  printOtherBackends((*runtime)->backends(mla::BackendRole::Prefill),
                     report->prefillSelection, attention);

  outs() << format("\nlayer setup %.1f ms (best code of every kernel after "
                   "%.1f ms); kernels:\n",
                   report->layerSetupMs, report->kernelsUpgradedMs);
  for (const mla::CompileEvent &e : report->compiles) {
    outs() << format("  %-13s %8.1f ms  %s\n", std::string(e.source()).c_str(),
                     e.milliseconds, e.entryName.c_str());
    // Where a compile's time went, and when the driver compiled each of its
    // GPU kernel modules: the driver takes them one at a time.
    outs() << "                           " << e.describePhases() << "\n";
    if (std::string driver = e.describeDriverCompiles(); !driver.empty())
      outs() << "                           driver: " << driver << "\n";
  }

  for (size_t i = 0; i < report->steps.size(); ++i) {
    const mla::StepReport &s = report->steps[i];
    outs() << format("\nstep %zu: %s\n  plan (validate + schedule) %.1f us\n",
                     i, s.plan.c_str(), s.planMicroseconds);
    double total = 0;
    for (const auto &p : s.phases) {
      outs() << format("  %-18s %9.3f ms\n", p.phase.c_str(), p.milliseconds);
      total += p.milliseconds;
    }
    outs() << format("  %-18s %9.3f ms\n", "total", total);
    outs() << format("  check vs float64 reference: prefill rel. L2 %.2e, "
                     "decode rel. L2 %.2e, decode max |dLSE| %.2e, cache "
                     "rows wrong %lld (tolerance %.1e): %s\n",
                     s.prefillError, s.decodeError, s.decodeLseError,
                     (long long)s.cacheMismatches, report->tolerance,
                     s.passed ? "PASS" : "FAIL");
  }
  printFirstAndWarmSteps(*report);
  if (const auto &t = report->hostTiming) {
    outs() << format("\nhost side of step %zu, %lld repeats (plan, then "
                     "forward's checks, copies and launches; no waits): "
                     "plan %.1f us, forward %.1f us, step %.1f us (median), "
                     "%.1f us (p90); outputs as checked: %s\n",
                     report->steps.size() - 1, (long long)t->repeats,
                     t->planMedianUs, t->forwardMedianUs, t->stepMedianUs,
                     t->stepP90Us, t->reproduced ? "yes" : "NO");
    for (const auto &part : t->forwardParts)
      outs() << format("  %-28s %6.1f us (in the driver's launches %.1f us)\n",
                       part.name.c_str(), part.medianUs,
                       part.driverLaunchMedianUs);
    if (const auto &g = t->graph)
      outs() << format("the same step as a CUDA graph (captured in %.1f ms), "
                       "%lld replays: planDecodeStep %.1f us, replay %.1f us, "
                       "step %.1f us (median), %.1f us (p90); replays vs "
                       "float64: decode rel. L2 %.2e, max |dLSE| %.2e; as "
                       "forward of the same plan: %s\n",
                       g->captureMs, (long long)t->repeats, g->planMedianUs,
                       g->replayMedianUs, g->stepMedianUs, g->stepP90Us,
                       g->decodeError, g->decodeLseError,
                       g->matchesForward ? "yes" : "NO");
  }
  mla::runtime::KernelCacheStats stats = (*runtime)->cacheStats();
  outs() << format("\nkernel cache: %llu compiled, %llu from disk, %llu from "
                   "memory, %llu corrupt entries rebuilt\n",
                   (unsigned long long)stats.compiles,
                   (unsigned long long)stats.diskHits,
                   (unsigned long long)stats.memoryHits,
                   (unsigned long long)stats.corruptEntries);
  outs() << (report->passed ? "PASS" : "FAIL") << "\n";
  return report->passed ? 0 : 1;
}
