//===- CompiledModuleTest.cpp - Kernels through the kernel cache ----------===//
//
// The compile path end to end: a kernel compiled into the disk cache is
// loaded by a fresh cache (another process, in effect) without compiling and
// computes the same bytes; a corrupted artifact is reported, rebuilt and
// still correct; a GPU module's artifact (host object with the PTX inside)
// is built and linked without a GPU.
//
//===----------------------------------------------------------------------===//

#include "TestSupport.h"

#include "mla/Builders/KernelBuilders.h"
#include "mla/Runtime/CompiledModule.h"
#include "mla/Runtime/CpuKernel.h"
#include "mla/Runtime/GpuKernel.h"
#include "mla/Target/KernelLoading.h"
#include "llvm/ADT/ScopeExit.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

using namespace mla;
using namespace mla::test;

namespace {

class CompiledModuleCache : public ::testing::Test {
protected:

  runtime::KernelCache freshCache(std::vector<std::string> *log = nullptr) {
    runtime::KernelCache::Config config;
    config.directory = dir;
    runtime::KernelCache cache(config);
    cache.setLogSink([log](const std::string &line) {
      if (log)
        log->push_back(line);
    });
    return cache;
  }

  /// A merge kernel compiled through `cache`, run on fixed inputs.
  std::vector<double> compileAndRun(runtime::KernelCache &cache,
                                    runtime::CacheOutcome expected) {
    auto kernel = CpuKernel::compile(
        buildMergeAttnStates(testContext(), {4, 32, DType::F32, true}),
        kKernelEntry, {}, &cache);
    EXPECT_TRUE(bool(kernel)) << llvm::toString(kernel.takeError());
    if (!kernel)
      return {};
    const CompileEvent &event = (*kernel)->compileEvent();
    EXPECT_EQ(event.outcome, expected) << event.source();
    // The phases name what the path did, and fit in the total.
    std::vector<std::string> phases,
        want = {"lower", "host code", "cache write", "link"};
    if (expected != runtime::CacheOutcome::Compiled)
      want = {"cache read", "link"};
    double sum = 0;
    for (const auto &[phase, ms] : event.phases) {
      phases.push_back(phase);
      EXPECT_GE(ms, 0.0) << phase;
      sum += ms;
    }
    EXPECT_EQ(phases, want) << event.describePhases();
    EXPECT_LE(sum, event.milliseconds + 1e-6) << event.describePhases();
    // No driver: nothing on its timeline.
    EXPECT_TRUE(event.driverCompiles.empty());
    EXPECT_EQ(event.describeDriverCompiles(), "");
    HostTensor po(DType::F32, {3, 4, 32}), so(DType::F32, {3, 4, 32});
    HostTensor pl(DType::F32, {4, 3}), sl(DType::F32, {4, 3});
    std::mt19937 fixed(7);
    for (HostTensor *t : {&po, &so, &pl, &sl})
      t->fillRandom(fixed);
    HostTensor out(DType::F32, {3, 4, 32}), outLse(DType::F32, {4, 3});
    out.poison();
    outLse.poison();
    llvm::Error error = (*kernel)->run({po.view(), pl.view(), so.view(),
                                        sl.view(), out.view(), outLse.view()});
    EXPECT_FALSE(bool(error)) << llvm::toString(std::move(error));
    std::vector<double> result = out.toDouble();
    std::vector<double> lse = outLse.toDouble();
    result.insert(result.end(), lse.begin(), lse.end());
    return result;
  }

  TemporaryDirectory temporary{"mla-compiled"};
  const std::string &dir = temporary.path();
};

TEST_F(CompiledModuleCache, DiskHitSkipsTheCompilerAndComputesTheSame) {
  runtime::KernelCache first = freshCache();
  std::vector<double> compiled =
      compileAndRun(first, runtime::CacheOutcome::Compiled);
  EXPECT_EQ(first.stats().compiles, 1u);

  runtime::KernelCache second = freshCache();
  std::vector<double> loaded =
      compileAndRun(second, runtime::CacheOutcome::DiskHit);
  EXPECT_EQ(second.stats().compiles, 0u);
  EXPECT_EQ(second.stats().diskHits, 1u);
  EXPECT_EQ(compiled, loaded);

  // The same cache object serves it again from memory.
  compileAndRun(second, runtime::CacheOutcome::MemoryHit);
}

TEST_F(CompiledModuleCache, CorruptArtifactIsReportedRebuiltAndCorrect) {
  runtime::KernelCache first = freshCache();
  std::vector<double> good =
      compileAndRun(first, runtime::CacheOutcome::Compiled);

  // Flip one byte in the middle of every stored payload.
  int flipped = 0;
  std::error_code ec;
  for (llvm::sys::fs::recursive_directory_iterator it(dir, ec), end;
       it != end && !ec; it.increment(ec)) {
    if (llvm::sys::path::filename(it->path()) != "payload")
      continue;
    std::fstream file(it->path(),
                      std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(0, std::ios::end);
    std::streamoff size = file.tellg();
    file.seekp(size / 2);
    char c = 0;
    file.seekg(size / 2);
    file.read(&c, 1);
    c ^= 0x5a;
    file.seekp(size / 2);
    file.write(&c, 1);
    ++flipped;
  }
  ASSERT_EQ(flipped, 1);

  std::vector<std::string> log;
  runtime::KernelCache second = freshCache(&log);
  std::vector<double> rebuilt =
      compileAndRun(second, runtime::CacheOutcome::Compiled);
  EXPECT_EQ(second.stats().corruptEntries, 1u);
  EXPECT_EQ(rebuilt, good);
  bool reported = false;
  for (const std::string &line : log)
    reported = reported || line.find("corrupt") != std::string::npos;
  EXPECT_TRUE(reported) << "no log line reports the corrupt entry";

  // The rebuilt entry is served next time.
  runtime::KernelCache third = freshCache();
  compileAndRun(third, runtime::CacheOutcome::DiskHit);
}

TEST_F(CompiledModuleCache, SpecializationsAreSeparateEntries) {
  runtime::KernelCache cache = freshCache();
  CompileRecipe recipe = cpuCompileRecipe();
  auto a = kernelKeyFor(
      *buildMergeAttnStates(testContext(), {4, 32, DType::F32, true}), recipe);
  auto b = kernelKeyFor(
      *buildMergeAttnStates(testContext(), {8, 32, DType::F32, true}), recipe);
  auto c = kernelKeyFor(
      *buildMergeAttnStates(testContext(), {4, 32, DType::BF16, true}), recipe);
  EXPECT_NE(a.digest(), b.digest());
  EXPECT_NE(a.digest(), c.digest());
  EXPECT_EQ(a.op, "merge_attn_states");
  EXPECT_NE(a.specialization.find("f32"), std::string::npos) << a.specialization;
  EXPECT_NE(c.specialization.find("bf16"), std::string::npos)
      << c.specialization;
  // Another pipeline option, another key.
  CpuPipelineOptions narrow;
  narrow.vectorWidth = 8;
  auto d = kernelKeyFor(
      *buildMergeAttnStates(testContext(), {4, 32, DType::F32, true}),
      cpuCompileRecipe(narrow));
  EXPECT_NE(a.digest(), d.digest());
}

/// Stand-ins for the launch shims: a GPU artifact links against them
/// without a GPU. None is ever called.
void unusedShim() {}

llvm::orc::SymbolMap unusedShimSymbols(llvm::orc::MangleAndInterner interner) {
  llvm::orc::SymbolMap map;
  for (const char *name :
       {"mgpuModuleLoad", "mgpuModuleLoadJIT", "mgpuModuleUnload",
        "mgpuModuleGetFunction", "mgpuLaunchKernel", "mgpuStreamCreate",
        "mgpuStreamDestroy", "mgpuStreamSynchronize", "mgpuStreamWaitEvent",
        "mgpuEventCreate", "mgpuEventDestroy", "mgpuEventRecord",
        "mgpuEventSynchronize", "mgpuMemAlloc", "mgpuMemFree", "mgpuMemcpy",
        "mgpuSetDefaultDevice"})
    map[interner(name)] = {llvm::orc::ExecutorAddr::fromPtr(&unusedShim),
                           llvm::JITSymbolFlags::Exported};
  return map;
}

/// The 16-head bf16 decode compiled for `target` on this host, its host
/// code linked against the stand-in shims.
llvm::Expected<CompiledModule>
compileDecodeWithoutGpu(const GpuTarget &target,
                        SerializedKernelObserver observer = {}) {
  MlaDims dims;
  dims.numHeads = 16;
  auto module = buildDecodeAttention(
      testContext(), {dims, DType::BF16, DType::BF16, 64, true, 0.07f});
  initializeNativeTarget();
  return compileModule(std::move(module), kKernelEntry,
                       gpuCompileRecipe(target, std::move(observer)), nullptr,
                       unusedShimSymbols);
}

TEST(CompiledModule, PassTimesArePrintedOnlyWhenAskedFor) {
  auto compileMerge = [] {
    testing::internal::CaptureStderr();
    auto kernel = CpuKernel::compile(
        buildMergeAttnStates(testContext(), {4, 32, DType::F32, true}),
        kKernelEntry, {}, nullptr);
    EXPECT_TRUE(bool(kernel)) << llvm::toString(kernel.takeError());
    return testing::internal::GetCapturedStderr();
  };
  ASSERT_EQ(setenv("MLA_TIME_PASSES", "1", 1), 0);
  std::string timed = compileMerge();
  ASSERT_EQ(unsetenv("MLA_TIME_PASSES"), 0);
  EXPECT_NE(timed.find("Execution time report"), std::string::npos) << timed;
  EXPECT_NE(timed.find("ConvertMLAToLoops"), std::string::npos) << timed;
  std::string quiet = compileMerge();
  EXPECT_EQ(quiet.find("Execution time report"), std::string::npos) << quiet;
}

TEST(CompiledModuleGpu, ArtifactEmbedsPtxAndLinksWithoutAGpu) {
  auto target = GpuTarget::parse("sm_90a");
  ASSERT_TRUE(bool(target)) << llvm::toString(target.takeError());
  auto compiled = compileDecodeWithoutGpu(*target);
  ASSERT_TRUE(bool(compiled)) << llvm::toString(compiled.takeError());
  // A PTX module per kernel: the split kernel and both combines.
  ASSERT_EQ(compiled->kernelPtx.size(), 3u);
  for (const std::string &ptx : compiled->kernelPtx) {
    EXPECT_NE(ptx.find(".target sm_90a"), std::string::npos);
    EXPECT_EQ(ptx.find(".entry"), ptx.rfind(".entry")) << "one kernel each";
  }
  EXPECT_NE(compiled->kernelPtx[0].find(".entry decode_attention_split"),
            std::string::npos);
  EXPECT_NE(compiled->packed, nullptr);
  EXPECT_EQ(compiled->event.outcome, runtime::CacheOutcome::Compiled);
  EXPECT_NE(compiled->event.entryName.find("decode_attention__h16"),
            std::string::npos)
      << compiled->event.entryName;
  EXPECT_NE(compiled->event.entryName.find("sm_90a"), std::string::npos)
      << compiled->event.entryName;
}

TEST(CompiledModuleGpu, PtxIsDumpedWhereAskedFor) {
  auto target = GpuTarget::parse("sm_90a");
  ASSERT_TRUE(bool(target)) << llvm::toString(target.takeError());
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("mla-dump-ptx", dir));
  auto removeDir =
      llvm::make_scope_exit([&] { llvm::sys::fs::remove_directories(dir); });
  llvm::SmallString<128> nested(dir);
  llvm::sys::path::append(nested, "kernels");
  ASSERT_EQ(setenv("MLA_DUMP_PTX", nested.c_str(), 1), 0);
  auto compiled = compileDecodeWithoutGpu(*target);
  ASSERT_EQ(unsetenv("MLA_DUMP_PTX"), 0);
  ASSERT_TRUE(bool(compiled)) << llvm::toString(compiled.takeError());
  ASSERT_FALSE(compiled->kernelPtx.empty());
  // One file a kernel module, named by the entry, holding its PTX, and
  // nothing else: no temporary file is left behind.
  std::set<std::string> expected;
  for (size_t i = 0; i < compiled->kernelPtx.size(); ++i) {
    std::string name =
        compiled->event.entryName + "." + std::to_string(i) + ".ptx";
    expected.insert(name);
    llvm::SmallString<256> file(nested);
    llvm::sys::path::append(file, name);
    auto text = llvm::MemoryBuffer::getFile(file);
    ASSERT_TRUE(bool(text)) << file.str().str();
    EXPECT_EQ((*text)->getBuffer(), compiled->kernelPtx[i]);
  }
  std::set<std::string> found;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(nested, ec), end;
       !ec && it != end; it.increment(ec))
    found.insert(llvm::sys::path::filename(it->path()).str());
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(found, expected);
  // The dump is timed apart from the link, as the last phase.
  ASSERT_FALSE(compiled->event.phases.empty());
  EXPECT_EQ(compiled->event.phases.back().first, "ptx dump");
}

TEST(CompiledModuleGpu, EachKernelsPtxIsAnnouncedAsSoonAsItIsSerialized) {
  auto target = GpuTarget::parse("sm_90a");
  ASSERT_TRUE(bool(target)) << llvm::toString(target.takeError());
  // Modules serialize in parallel: the observer is called from several
  // threads.
  std::mutex mutex;
  std::vector<std::pair<std::string, std::string>> announced;
  auto observer = [&](llvm::StringRef name, llvm::StringRef ptx) {
    std::lock_guard<std::mutex> lock(mutex);
    announced.emplace_back(name.str(), ptx.str());
  };
  auto compiled = compileDecodeWithoutGpu(*target, observer);
  ASSERT_TRUE(bool(compiled)) << llvm::toString(compiled.takeError());
  // Exactly the modules the host code loads, each once, under its name.
  ASSERT_EQ(announced.size(), compiled->kernelPtx.size());
  std::vector<std::string> texts, names;
  for (auto &[name, ptx] : announced) {
    while (!ptx.empty() && ptx.back() == '\0')
      ptx.pop_back();
    EXPECT_NE(ptx.find(".entry " + name), std::string::npos) << name;
    names.push_back(name);
    texts.push_back(ptx);
  }
  std::vector<std::string> expected;
  for (std::string ptx : compiled->kernelPtx) {
    while (!ptx.empty() && ptx.back() == '\0')
      ptx.pop_back();
    expected.push_back(ptx);
  }
  llvm::sort(texts);
  llvm::sort(expected);
  EXPECT_EQ(texts, expected);
  llvm::sort(names);
  EXPECT_EQ(std::unique(names.begin(), names.end()), names.end());

  // The observer does not change the kernels or their cache key.
  EXPECT_EQ(gpuCompileRecipe(*target, observer).options,
            gpuCompileRecipe(*target).options);
}

TEST(CompiledModuleGpu, OnlyTheRareFallbackKernelIsLoadedAtItsFirstLaunch) {
  // The wgmma decode: its split kernel, the generic split kernel the host
  // code launches only where q or the cache is misaligned, both combines.
  auto target = GpuTarget::parse("sm_90a");
  ASSERT_TRUE(bool(target)) << llvm::toString(target.takeError());
  target->strategy = KernelStrategy::Warpgroup;
  auto compiled = compileDecodeWithoutGpu(*target);
  ASSERT_TRUE(bool(compiled)) << llvm::toString(compiled.takeError());
  ASSERT_EQ(compiled->kernelPtx.size(), 4u);
  std::vector<std::string> marked, loadedWithTheOthers;
  for (const std::string &ptx : compiled->kernelPtx) {
    size_t entry = ptx.find(".entry ");
    ASSERT_NE(entry, std::string::npos);
    std::string name = ptx.substr(entry + 7, ptx.find('(', entry) - entry - 7);
    (loadsAtFirstLaunch(ptx) ? marked : loadedWithTheOthers).push_back(name);
  }
  ASSERT_EQ(marked.size(), 1u);
  EXPECT_EQ(marked[0].rfind("decode_attention_split_", 0), 0u) << marked[0];
  EXPECT_EQ(marked[0].find("wgmma"), std::string::npos) << marked[0];
  for (const std::string &name : loadedWithTheOthers)
    EXPECT_FALSE(name.rfind("decode_attention_split_", 0) == 0 &&
                 name.find("wgmma") == std::string::npos)
        << name;
}

} // namespace
