//===- mla-cache.cpp - Fill, list, verify and prune a kernel cache --------===//
//
// A serving engine starts with a warm kernel cache when one was filled
// ahead of time (a container ships one): `fill` compiles every kernel a
// layer configuration needs, for a list of chips, with no GPU, into the
// cache a runtime on such a chip looks in. `list` shows the entries with
// readable names and sizes, `verify` checks each one as a lookup would
// (and reads every payload), `prune` removes stale, corrupt, old or excess
// entries.
//
//   mla-cache fill --chips sm_80,sm_90a --heads 16,128 [--cache-dir D]
//   mla-cache list | verify | prune --stale --older-than 30 --max-mb 2048
//
// The cache directory is --cache-dir, else the runtime's (MLA_CACHE_DIR,
// $XDG_CACHE_HOME/mla, ~/.cache/mla).
//
//===----------------------------------------------------------------------===//

#include "mla/Runtime/ContextPool.h"
#include "mla/Runtime/CpuKernel.h"
#include "mla/Runtime/GpuKernel.h"
#include "mla/Runtime/MlaLayer.h"
#include "mla/Runtime/MlaLayerKernels.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

using namespace llvm;
using namespace mla;
using namespace mla::runtime;

static cl::SubCommand fillCommand("fill", "compile a layer's kernels for "
                                          "chips into the cache, no GPU needed");
static cl::SubCommand listCommand("list", "list the cache's entries");
static cl::SubCommand verifyCommand(
    "verify", "check every entry as a lookup would, payloads included");
static cl::SubCommand pruneCommand("prune", "remove entries");

static cl::OptionCategory cacheOptions("mla-cache options");
static cl::opt<std::string> cacheDir(
    "cache-dir", cl::cat(cacheOptions), cl::sub(cl::SubCommand::getAll()),
    cl::desc("the cache directory (default: the runtime's)"));

// fill
static cl::list<std::string>
    chips("chips", cl::CommaSeparated, cl::cat(cacheOptions),
          cl::sub(fillCommand),
          cl::desc("chips to compile for: sm_80, sm_86, sm_89, sm_90a, and "
                   "cpu for this host's CPU (default sm_80,sm_86,sm_89,sm_90a)"));
static cl::list<int> heads("heads", cl::CommaSeparated, cl::cat(cacheOptions),
                           cl::sub(fillCommand),
                           cl::desc("heads per device (default 128)"));
static cl::opt<std::string> dtype("dtype", cl::cat(cacheOptions),
                                  cl::sub(fillCommand), cl::init("bf16"),
                                  cl::desc("activations: f32, f16 or bf16"));
static cl::opt<std::string> cacheDtype("cache-dtype", cl::cat(cacheOptions),
                                       cl::sub(fillCommand), cl::init("bf16"),
                                       cl::desc("KV cache: f32, f16, bf16, fp8_e4m3 or fp8_e5m2"));
static cl::opt<int> blockSize("block-size", cl::cat(cacheOptions),
                              cl::sub(fillCommand), cl::init(64),
                              cl::desc("tokens per cache page"));
static cl::opt<int> decodeThreshold(
    "decode-threshold", cl::cat(cacheOptions), cl::sub(fillCommand),
    cl::init(1), cl::desc("1, or 1 + speculative tokens"));
static cl::opt<int> kvLoraRank("kv-lora-rank", cl::cat(cacheOptions),
                               cl::sub(fillCommand), cl::init(512));
static cl::opt<int> qkNopeHeadDim("qk-nope-head-dim", cl::cat(cacheOptions),
                                  cl::sub(fillCommand), cl::init(128));
static cl::opt<int> qkRopeHeadDim("qk-rope-head-dim", cl::cat(cacheOptions),
                                  cl::sub(fillCommand), cl::init(64));
static cl::opt<int> vHeadDim("v-head-dim", cl::cat(cacheOptions),
                             cl::sub(fillCommand), cl::init(128));
static cl::opt<float> softmaxScale(
    "softmax-scale", cl::cat(cacheOptions), cl::sub(fillCommand), cl::init(0),
    cl::desc("0: 1 / sqrt(qk_nope_head_dim + qk_rope_head_dim)"));
static cl::opt<bool> decodeLse("decode-lse", cl::cat(cacheOptions),
                               cl::sub(fillCommand),
                               cl::desc("the layer returns its decode LSE"));
static cl::opt<bool> cudaGraphs("cuda-graphs", cl::cat(cacheOptions),
                                cl::sub(fillCommand),
                                cl::desc("the layer's decodes are captured"));
static cl::opt<bool> forceFill(
    "force", cl::cat(cacheOptions), cl::sub(fillCommand),
    cl::desc("compile every module again and replace the entries found"));
static cl::opt<std::string> backendName(
    "backend", cl::cat(cacheOptions), cl::sub(fillCommand),
    cl::desc("a backend to use instead of selection by priority"));
static cl::opt<std::string> prefillBackendName(
    "prefill-backend", cl::cat(cacheOptions), cl::sub(fillCommand),
    cl::desc("a prefill backend to use instead of selection by priority"));

// verify and prune
static cl::opt<bool> removeCorrupt("remove", cl::cat(cacheOptions),
                                   cl::sub(verifyCommand),
                                   cl::desc("remove the corrupt and the incomplete entries"));
static cl::opt<bool> pruneStale(
    "stale", cl::cat(cacheOptions), cl::sub(pruneCommand),
    cl::desc("entries of other compiler builds (never served by this one)"));
static cl::opt<bool> pruneCorrupt("corrupt", cl::cat(cacheOptions),
                                  cl::sub(pruneCommand),
                                  cl::desc("entries a lookup would reject"));
static cl::opt<int> olderThanDays(
    "older-than", cl::cat(cacheOptions), cl::sub(pruneCommand), cl::init(-1),
    cl::desc("entries written more than this many days ago"));
static cl::opt<int64_t> maxMegabytes(
    "max-mb", cl::cat(cacheOptions), cl::sub(pruneCommand), cl::init(-1),
    cl::desc("then the oldest entries until the cache holds at most this"));
static cl::opt<bool> pruneAll("all", cl::cat(cacheOptions),
                              cl::sub(pruneCommand),
                              cl::desc("every entry"));
static cl::opt<bool> dryRun("dry-run", cl::cat(cacheOptions),
                            cl::sub(pruneCommand),
                            cl::desc("say what would go, remove nothing"));

static KernelCache openCache() {
  KernelCache::Config config = KernelCache::Config::fromEnvironment();
  if (!cacheDir.empty()) {
    config.directory = cacheDir;
    config.diskEnabled = true;
  }
  // Only `fill --force` recompiles: MLA_CACHE_FORCE_RECOMPILE is for
  // runtimes, and a listing never compiles.
  config.forceRecompile = forceFill;
  return KernelCache(config);
}

static int fail(const Twine &message) {
  errs() << "mla-cache: " << message << "\n";
  return 1;
}

static std::string megabytes(uint64_t bytes) {
  return formatv("{0:f2} MB", bytes / 1e6).str();
}

//===----------------------------------------------------------------------===//
// fill
//===----------------------------------------------------------------------===//

/// One layer configuration on one chip: its backend and modules.
struct FillItem {
  std::string chip;
  int64_t heads = 0;
  /// Empty for the host CPU.
  std::optional<GpuTarget> target;
  std::string backend, prefillBackend;
  /// Each with its kernel strategy (the prefill backend's for the chunked
  /// prefill, the backend's for the others).
  std::vector<CompileRequest> modules;
};

/// The target `module` of `item` compiles for: the item's chip, the
/// module's strategy.
static GpuTarget targetOf(const FillItem &item, const CompileRequest &module) {
  GpuTarget target = *item.target;
  target.strategy = module.strategy.value_or(KernelStrategy::Generic);
  return target;
}

/// The backends and kernel strategies a runtime on `chip` would pick for
/// `config`.
static Expected<FillItem> planFill(StringRef chip, const MlaLayerConfig &config) {
  FillItem item;
  item.chip = chip.str();
  item.heads = config.dims.numHeads;
  AttentionConfig key = config.selectionKey();
  if (chip == "cpu") {
    key.device = DeviceKind::CPU;
  } else {
    auto target = GpuTarget::parse(chip);
    if (!target)
      return target.takeError();
    // The chip a runtime picks for a device of this chip's capability: a
    // 9.0 device gets sm_90a, so portable sm_90 code is never looked up.
    auto picked = GpuTarget::forCapability(target->major, target->minor);
    if (!picked)
      return picked.takeError();
    if (picked->chip() != target->chip())
      return createStringError(chip + " is never chosen by a runtime (a " +
                               Twine(target->major) + "." +
                               Twine(target->minor) + " device gets " +
                               picked->chip() + ")");
    key.device = DeviceKind::CUDA;
    key.capability = {target->major, target->minor};
    item.target = *target;
  }
  auto selection = BackendRegistry::builtin().select(key, config.backend);
  if (!selection)
    return selection.takeError();
  auto prefill = BackendRegistry::builtin(BackendRole::Prefill)
                     .select(key, config.prefillBackend);
  if (!prefill)
    return prefill.takeError();
  item.backend = selection->backend->name;
  item.prefillBackend = prefill->backend->name;
  item.modules =
      layerKernelModules(config, LayerStrategies::of(*selection, *prefill));
  if (item.target)
    for (const CompileRequest &module : item.modules)
      if (Error error = targetOf(item, module).checkStrategy())
        return std::move(error);
  return item;
}

/// Compiles one module of `item` into `cache` in a leased context.
static Expected<CompileEvent> fillModule(const FillItem &item,
                                         const CompileRequest &request,
                                         ContextPool &contexts,
                                         KernelCache &cache) {
  ContextPool::Lease lease(contexts);
  auto module = request.build(lease.context());
  if (!module)
    return createStringError("the kernel module could not be built");
  if (item.target)
    return GpuKernel::compileToCache(std::move(module), request.entry,
                                     targetOf(item, request), cache);
  auto kernel = CpuKernel::compile(std::move(module), request.entry, {}, &cache);
  if (!kernel)
    return kernel.takeError();
  return (*kernel)->compileEvent();
}

static int runFill() {
  auto act = parseDType(dtype), cache = parseDType(cacheDtype);
  if (!act || !isFloat(*act) || !cache || !isCacheFormat(*cache))
    return fail("--dtype takes f32, f16 or bf16; --cache-dtype also "
                "fp8_e4m3 or fp8_e5m2");
  MlaLayerConfig base;
  base.dims.kvLoraRank = kvLoraRank;
  base.dims.qkNopeHeadDim = qkNopeHeadDim;
  base.dims.ropeDim = qkRopeHeadDim;
  base.dims.vHeadDim = vHeadDim;
  base.activation = *act;
  base.cacheDType = *cache;
  base.blockSize = blockSize;
  base.softmaxScale = softmaxScale;
  base.decodeThreshold = decodeThreshold;
  base.needsDecodeLse = decodeLse;
  base.wantsCudaGraphs = cudaGraphs;
  base.backend = backendName;
  base.prefillBackend = prefillBackendName;
  if (blockSize < 1 || decodeThreshold < 1 || kvLoraRank < 1 ||
      qkNopeHeadDim < 1 || qkRopeHeadDim < 1 || vHeadDim < 1 ||
      !(softmaxScale >= 0))
    return fail("dims, --block-size and --decode-threshold must be positive, "
                "--softmax-scale not negative");

  std::vector<std::string> chipList(chips.begin(), chips.end());
  if (chipList.empty())
    for (const GpuTarget &t : GpuTarget::all())
      if (auto picked = GpuTarget::forCapability(t.major, t.minor);
          picked && picked->chip() == t.chip())
        chipList.push_back(t.chip());
  std::vector<int64_t> headList(heads.begin(), heads.end());
  if (headList.empty())
    headList.push_back(base.dims.numHeads);

  std::vector<FillItem> items;
  for (const std::string &chip : chipList)
    for (int64_t h : headList) {
      if (h < 1)
        return fail("--heads must be positive");
      MlaLayerConfig config = base;
      config.dims.numHeads = h;
      auto item = planFill(chip, config);
      if (!item)
        return fail(chip + ", " + Twine(h) + " heads: " +
                    toString(item.takeError()));
      items.push_back(std::move(*item));
    }

  KernelCache kernelCache = openCache();
  if (!kernelCache.config().diskEnabled)
    return fail("no cache directory: pass --cache-dir or set MLA_CACHE_DIR");
  kernelCache.setLogSink({});
  outs() << "filling " << kernelCache.config().directory << "\n";

  // Every module of every item, compiled on one thread per hardware thread.
  struct Job {
    size_t item, module;
  };
  std::vector<Job> jobs;
  for (size_t i = 0; i < items.size(); ++i)
    for (size_t m = 0; m < items[i].modules.size(); ++m)
      jobs.push_back({i, m});
  std::vector<std::optional<Expected<CompileEvent>>> results(jobs.size());
  ContextPool contexts;
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t j; (j = next++) < jobs.size();) {
      const FillItem &item = items[jobs[j].item];
      results[j].emplace(fillModule(item, item.modules[jobs[j].module],
                                    contexts, kernelCache));
    }
  };
  auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  size_t workers = std::min<size_t>(
      jobs.size(), std::max(1u, std::thread::hardware_concurrency()));
  for (size_t w = 1; w < workers; ++w)
    threads.emplace_back(work);
  work();
  for (std::thread &thread : threads)
    thread.join();

  int failures = 0;
  for (size_t i = 0, j = 0; i < items.size(); ++i) {
    const FillItem &item = items[i];
    outs() << item.chip << ", " << item.heads << " heads: backend "
           << item.backend << ", prefill backend " << item.prefillBackend
           << "\n";
    for (size_t m = 0; m < item.modules.size(); ++m, ++j) {
      Expected<CompileEvent> &result = *results[j];
      if (!result) {
        ++failures;
        outs() << "  FAILED: " << toString(result.takeError()) << "\n";
        continue;
      }
      outs() << format("  %-12s %8.1f ms  %s\n",
                       std::string(result->source()).c_str(),
                       result->milliseconds, result->entryName.c_str());
    }
  }
  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start)
                       .count();
  KernelCacheStats stats = kernelCache.stats();
  outs() << format("%zu modules in %.1f s: %llu compiled, %llu already in the "
                   "cache, %d failed\n",
                   jobs.size(), seconds, (unsigned long long)stats.compiles,
                   (unsigned long long)(stats.diskHits + stats.memoryHits),
                   failures);
  return failures ? 1 : 0;
}

//===----------------------------------------------------------------------===//
// list, verify, prune
//===----------------------------------------------------------------------===//

static std::string age(std::chrono::system_clock::time_point written) {
  auto hours = std::chrono::duration_cast<std::chrono::hours>(
                   std::chrono::system_clock::now() - written)
                   .count();
  if (hours < 48)
    return std::to_string(std::max<int64_t>(0, hours)) + " h";
  return std::to_string(hours / 24) + " d";
}

static void printEntry(const CacheEntryInfo &e) {
  std::string state =
      e.incomplete ? "INCOMPLETE: " + e.problem +
                         " (a write that did not finish; never served, "
                         "rebuilt when next used)"
      : !e.problem.empty()     ? "CORRUPT: " + e.problem
      : e.madeByThisCompiler() ? "current"
                               : "stale (another build)";
  outs() << format("%10s %6s  %-24s %s\n", megabytes(e.bytes).c_str(),
                   age(e.written).c_str(), e.op.c_str(), e.name.c_str());
  if (state != "current")
    outs() << "                   " << state << "\n";
}

static Expected<std::vector<CacheEntryInfo>> readEntries(KernelCache &cache,
                                                         bool payloads) {
  if (!cache.config().diskEnabled)
    return createStringError("no cache directory: pass --cache-dir or set "
                             "MLA_CACHE_DIR");
  return cache.entries(payloads);
}

static int runList(bool verify) {
  KernelCache cache = openCache();
  auto entries = readEntries(cache, verify);
  if (!entries)
    return fail(toString(entries.takeError()));
  outs() << cache.config().directory << "\n";
  uint64_t bytes = 0;
  int corrupt = 0, incomplete = 0, stale = 0, removed = 0;
  for (const CacheEntryInfo &e : *entries) {
    printEntry(e);
    bytes += e.bytes;
    stale += e.problem.empty() && !e.madeByThisCompiler();
    if (e.problem.empty())
      continue;
    // An interrupted write is reported, and removed with --remove, but
    // does not fail verify: no lookup serves it.
    (e.incomplete ? incomplete : corrupt) += 1;
    if (verify && removeCorrupt) {
      if (Error error = cache.removeEntry(e.name))
        return fail(toString(std::move(error)));
      ++removed;
    }
  }
  outs() << entries->size() << " entries, " << megabytes(bytes) << "; "
         << stale << " stale, " << corrupt << " corrupt, " << incomplete
         << " incomplete";
  if (removed)
    outs() << " (removed)";
  outs() << "\n";
  return verify && corrupt && !removeCorrupt ? 1 : 0;
}

static int runPrune() {
  if (!pruneStale && !pruneCorrupt && olderThanDays < 0 && maxMegabytes < 0 &&
      !pruneAll)
    return fail("prune: say what to remove: --stale, --corrupt, --older-than "
                "DAYS, --max-mb MB or --all");
  KernelCache cache = openCache();
  auto entries = readEntries(cache, /*payloads=*/false);
  if (!entries)
    return fail(toString(entries.takeError()));
  auto now = std::chrono::system_clock::now();
  std::vector<const CacheEntryInfo *> kept, gone;
  for (const CacheEntryInfo &e : *entries) {
    bool old = olderThanDays >= 0 &&
               now - e.written > std::chrono::hours(24) * olderThanDays;
    bool remove = pruneAll || old || (pruneCorrupt && !e.problem.empty()) ||
                  (pruneStale && e.problem.empty() && !e.madeByThisCompiler());
    (remove ? gone : kept).push_back(&e);
  }
  if (maxMegabytes >= 0) {
    // The oldest go first until the rest fits.
    std::sort(kept.begin(), kept.end(), [](auto *a, auto *b) {
      return a->written > b->written;
    });
    uint64_t limit = uint64_t(maxMegabytes) * 1000 * 1000, total = 0;
    std::vector<const CacheEntryInfo *> fit;
    for (const CacheEntryInfo *e : kept) {
      if (total + e->bytes <= limit) {
        total += e->bytes;
        fit.push_back(e);
      } else {
        gone.push_back(e);
      }
    }
    kept = std::move(fit);
  }
  uint64_t freed = 0;
  for (const CacheEntryInfo *e : gone) {
    outs() << (dryRun ? "would remove " : "removing ") << e->name << " ("
           << megabytes(e->bytes) << ")\n";
    freed += e->bytes;
    if (!dryRun)
      if (Error error = cache.removeEntry(e->name))
        return fail(toString(std::move(error)));
  }
  outs() << (dryRun ? "would remove " : "removed ") << gone.size()
         << " entries (" << megabytes(freed) << "), kept " << kept.size()
         << "\n";
  return 0;
}

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(cacheOptions);
  cl::ParseCommandLineOptions(
      argc, argv,
      "fill, list, verify and prune the mla kernel cache\n\n"
      "  mla-cache fill --chips sm_80,sm_90a --heads 16,128\n"
      "  mla-cache list | verify [--remove] | prune --stale ...\n");
  if (fillCommand)
    return runFill();
  if (listCommand)
    return runList(/*verify=*/false);
  if (verifyCommand)
    return runList(/*verify=*/true);
  if (pruneCommand)
    return runPrune();
  return fail("say fill, list, verify or prune (--help lists them)");
}
