//===- MlaLayerTest.cpp - The MLA layer through the runtime's API ---------===//
//
// Serving steps (mixed batch, then growing decodes) through Runtime and
// MlaLayer against the float64 reference, on the CPU, or on the GPU with
// MLA_TEST_DEVICE=gpu; the layer's argument and metadata errors; the kernel
// cache seen through the runtime; the prefill backend chosen apart from the
// decode's (config, MLA_PREFILL_BACKEND, priority), and on an sm_90a GPU
// the wgmma and mma.sync backends paired both ways.
//
//===----------------------------------------------------------------------===//

#include "DcpSimulation.h"
#include "GpuTestSupport.h"
#include "ServingStep.h"
#include "TestSupport.h"

#include "mla/Builders/KernelBuilders.h"
#include "mla/Runtime/MlaLayer.h"
#include "mla/Runtime/MlaLayerKernels.h"
#include "mla/Runtime/Runtime.h"

#include "llvm/Support/FileSystem.h"

#include <optional>

using namespace mla;
using namespace mla::runtime;
using namespace mla::test;

namespace {

/// Small MLA dims (every one a multiple of 32) so steps run fast.
MlaDims smallDims(int64_t heads = 4) { return {heads, 128, 64, 32, 64}; }

class LayerTest : public ::testing::Test {
protected:

  std::unique_ptr<Runtime> makeRuntime() {
    RuntimeOptions options;
    options.device = testingOnGpu() ? DevicePreference::Gpu
                                    : DevicePreference::Cpu;
    options.cache.directory = dir;
    options.cache.diskEnabled = true;
    options.cache.forceRecompile = false;
    auto runtime = Runtime::create(options);
    EXPECT_TRUE(bool(runtime)) << llvm::toString(runtime.takeError());
    return runtime ? std::move(*runtime) : nullptr;
  }

  void expectSteps(const ServingStepConfig &config) {
    auto runtime = makeRuntime();
    ASSERT_TRUE(runtime);
    expectStepsOn(*runtime, config);
  }

  /// Runs `config`'s steps on `runtime`, expects each to pass against the
  /// float64 reference; the report, for more checks (none on failure).
  std::optional<ServingStepReport> expectStepsOn(Runtime &runtime,
                                                 const ServingStepConfig &config) {
    auto report = runServingSteps(config, runtime, [](const std::string &) {});
    if (!report) {
      ADD_FAILURE() << llvm::toString(report.takeError());
      return std::nullopt;
    }
    EXPECT_EQ(int64_t(report->steps.size()), config.steps);
    for (size_t i = 0; i < report->steps.size(); ++i) {
      const StepReport &s = report->steps[i];
      SCOPED_TRACE("step " + std::to_string(i) + ": " + s.plan);
      EXPECT_LE(s.prefillError, report->tolerance);
      EXPECT_LE(s.decodeError, report->tolerance);
      EXPECT_LE(s.decodeLseError, 5e-2);
      EXPECT_EQ(s.cacheMismatches, 0);
      EXPECT_TRUE(s.passed);
    }
    return std::move(*report);
  }

  /// Steps of a small layer with pages of 16 tokens and a fresh seed:
  /// decodes over `decodes` cached tokens, prefills of `prefillNew` new
  /// tokens over `prefillContexts`.
  ServingStepConfig smallSteps(std::vector<int32_t> decodes,
                               std::vector<int32_t> prefillContexts,
                               std::vector<int32_t> prefillNew, int64_t steps) {
    ServingStepConfig c;
    c.dims = smallDims();
    c.blockSize = 16;
    c.decodeContexts = std::move(decodes);
    c.prefillContexts = std::move(prefillContexts);
    c.prefillNewTokens = std::move(prefillNew);
    c.steps = steps;
    c.seed = rng()();
    return c;
  }

  TemporaryDirectory temporary{"mla-layer"};
  const std::string &dir = temporary.path();
};

TEST_F(LayerTest, MixedBatchThenGrowingDecodes) {
  ServingStepConfig c = smallSteps({300, 1, 45, 0}, {70, 0, 33}, {20, 9, 2}, 3);
  // A workspace of 64 rows: several context chunks.
  c.workspaceTokens = 64;
  expectSteps(c);
}

TEST_F(LayerTest, SpeculativeDecodesWithThreeTokens) {
  ServingStepConfig c = smallSteps({40, 0, 100}, {20}, {7}, 2);
  c.decodeQueryLen = 3;
  expectSteps(c);
}

TEST_F(LayerTest, DTypesAndCacheDTypes) {
  for (auto [act, cache] : {std::pair{DType::F32, DType::F32},
                            std::pair{DType::F16, DType::F16},
                            std::pair{DType::BF16, DType::F32}}) {
    SCOPED_TRACE(std::string(name(act)) + " activations, " +
                 std::string(name(cache)) + " cache");
    ServingStepConfig c;
    c.dims = smallDims(2);
    c.activation = act;
    c.cache = cache;
    c.blockSize = 32;
    c.decodeContexts = {50, 7};
    c.prefillContexts = {40};
    c.prefillNewTokens = {12};
    c.steps = 1;
    c.seed = rng()();
    expectSteps(c);
  }
}

TEST_F(LayerTest, OnlyDecodesAndOnlyPrefills) {
  ServingStepConfig decodes = smallSteps({10, 200}, {}, {}, 1);
  expectSteps(decodes);
  ServingStepConfig prefills = decodes;
  prefills.decodeContexts = {};
  prefills.prefillContexts = {0, 50};
  prefills.prefillNewTokens = {5, 30};
  expectSteps(prefills);
}

TEST_F(LayerTest, HostSideOfARepeatedDecodeStep) {
  // On a GPU the last step, decodes only, is repeated with its host side
  // timed, then captured as a CUDA graph and replayed as often; the repeats
  // and the replays must leave out and lse bit for bit as checked.
  // A step with prefills is not timed, nor is any step on the CPU, whose
  // kernels run inside forward.
  ServingStepConfig c = smallSteps({60, 3, 130}, {20}, {5}, 2);
  c.hostTimingRepeats = 12;
  auto runtime = makeRuntime();
  ASSERT_TRUE(runtime);
  auto report = runServingSteps(c, *runtime, [](const std::string &) {});
  ASSERT_TRUE(bool(report)) << llvm::toString(report.takeError());
  EXPECT_TRUE(report->passed);
  if (!testingOnGpu()) {
    EXPECT_FALSE(report->hostTiming);
  } else {
    ASSERT_TRUE(report->hostTiming);
    const HostStepTiming &t = *report->hostTiming;
    EXPECT_EQ(t.repeats, 12);
    EXPECT_TRUE(t.reproduced);
    EXPECT_GT(t.planMedianUs, 0);
    EXPECT_GT(t.forwardMedianUs, 0);
    EXPECT_LE(t.stepMedianUs, t.stepP90Us);
    // The upload, then a launch part for each decode phase.
    ASSERT_EQ(t.forwardParts.size(), 5u);
    EXPECT_EQ(t.forwardParts[0].name, "checks and metadata upload");
    EXPECT_EQ(t.forwardParts[3].name, "decode attention");
    // The step captured as a CUDA graph and replayed as often.
    ASSERT_TRUE(t.graph);
    EXPECT_GT(t.graph->captureMs, 0);
    EXPECT_GT(t.graph->replayMedianUs, 0);
    EXPECT_LE(t.graph->stepMedianUs, t.graph->stepP90Us);
    EXPECT_TRUE(t.graph->matchesForward);
    EXPECT_LE(t.graph->decodeError, report->tolerance);
    EXPECT_LE(t.graph->decodeLseError, 5e-2);
  }

  c.steps = 1;
  auto mixed = runServingSteps(c, *runtime, [](const std::string &) {});
  ASSERT_TRUE(bool(mixed)) << llvm::toString(mixed.takeError());
  EXPECT_TRUE(mixed->passed);
  EXPECT_FALSE(mixed->hostTiming);
}

TEST_F(LayerTest, SecondRuntimeLoadsEveryKernelFromDisk) {
  ServingStepConfig c;
  c.dims = smallDims();
  c.blockSize = 16;
  c.decodeContexts = {20};
  c.prefillContexts = {16};
  c.prefillNewTokens = {4};
  c.steps = 1;
  auto first = makeRuntime();
  ASSERT_TRUE(first);
  auto firstReport = runServingSteps(c, *first, [](const std::string &) {});
  ASSERT_TRUE(bool(firstReport)) << llvm::toString(firstReport.takeError());
  EXPECT_GT(first->cacheStats().compiles, 0u);

  auto second = makeRuntime();
  ASSERT_TRUE(second);
  auto report = runServingSteps(c, *second, [](const std::string &) {});
  ASSERT_TRUE(bool(report)) << llvm::toString(report.takeError());
  EXPECT_EQ(second->cacheStats().compiles, 0u);
  EXPECT_EQ(second->cacheStats().diskHits, report->compiles.size());
  for (const CompileEvent &e : report->compiles)
    EXPECT_EQ(e.outcome, CacheOutcome::DiskHit) << e.entryName;
  EXPECT_TRUE(report->passed);
}

TEST_F(LayerTest, ModulesCompileAtOnceAndEqualOnesOnce) {
  auto runtime = makeRuntime();
  ASSERT_TRUE(runtime);
  MlaLayerConfig config;
  config.dims = smallDims();
  config.blockSize = 16;
  std::vector<CompileRequest> requests =
      layerKernelModules(config, LayerStrategies());
  ASSERT_EQ(requests.size(), 5u);
  // The decode module asked for twice, and one module that cannot build.
  requests.push_back(requests[3]);
  requests.push_back({[](mlir::MLIRContext &) {
                        return mlir::OwningOpRef<mlir::ModuleOp>();
                      },
                      kKernelEntry, std::nullopt});
  auto failed = compileAll(*runtime, requests);
  ASSERT_FALSE(bool(failed));
  EXPECT_NE(llvm::toString(failed.takeError()).find("could not be built"),
            std::string::npos);
  // Every other module was compiled (once) and is held: asked again, they
  // come from memory.
  EXPECT_EQ(runtime->cacheStats().compiles, 5u);
  requests.pop_back();
  auto kernels = compileAll(*runtime, requests);
  ASSERT_TRUE(bool(kernels)) << llvm::toString(kernels.takeError());
  ASSERT_EQ(kernels->size(), 6u);
  EXPECT_EQ((*kernels)[3], (*kernels)[5]);
  for (size_t i = 0; i < 5; ++i)
    for (size_t j = i + 1; j < 5; ++j)
      EXPECT_NE((*kernels)[i], (*kernels)[j]);
  EXPECT_EQ(runtime->cacheStats().compiles, 5u);
  EXPECT_EQ(runtime->compileEvents().size(), 5u);
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

/// A layer with tiny weights (values irrelevant: these tests fail before
/// any kernel reads them).
class LayerErrors : public LayerTest {
protected:
  void SetUp() override {
    LayerTest::SetUp();
    runtime = makeRuntime();
    ASSERT_TRUE(runtime);
    const MlaDims d = smallDims();
    weights = {
        bf16Buffer({d.kvLoraRank, d.numHeads, d.qkNopeHeadDim + d.vHeadDim}),
        bf16Buffer({d.numHeads, d.qkNopeHeadDim, d.kvLoraRank}),
        bf16Buffer({d.numHeads, d.kvLoraRank, d.vHeadDim})};
    config.dims = d;
    config.blockSize = 16;
  }

  /// An uninitialized bf16 buffer on the runtime's device, kept by the test.
  BufferView bf16Buffer(std::vector<int64_t> shape) {
    int64_t elements = 1;
    for (int64_t s : shape)
      elements *= s;
    auto a = runtime->allocate(size_t(elements) * 2);
    EXPECT_TRUE(bool(a));
    BufferView v = BufferView::contiguous(a->data(), DType::BF16, shape);
    storage.push_back(std::move(*a));
    return v;
  }

  std::string createError(MlaLayerConfig c, MlaLayerWeights w) {
    auto layer = MlaLayer::create(*runtime, c, w);
    if (layer)
      return "";
    return llvm::toString(layer.takeError());
  }

  /// A view of `shape` over `hostBytes`: enough for the tests whose calls
  /// fail before any kernel reads their buffers.
  BufferView hostView(DType t, std::vector<int64_t> shape) {
    return BufferView::contiguous(hostBytes.data(), t, shape);
  }
  /// One token's forward buffers over a 4-page cache of 16-token pages,
  /// output `outputExtra` columns too wide, no decode LSE.
  MlaForwardArgs oneTokenArgs(int64_t outputExtra = 0) {
    const MlaDims d = config.dims;
    return {hostView(DType::BF16, {1, d.numHeads, d.qkHeadDim()}),
            hostView(DType::BF16, {1, d.kvLoraRank}),
            hostView(DType::BF16, {1, d.ropeDim}),
            hostView(DType::BF16, {4, 16, d.cacheEntry()}),
            hostView(DType::BF16, {1, d.numHeads, d.vHeadDim + outputExtra}),
            {}};
  }

  std::unique_ptr<Runtime> runtime;
  std::vector<DeviceAllocation> storage;
  std::vector<char> hostBytes = std::vector<char>(1 << 20);
  MlaLayerWeights weights;
  MlaLayerConfig config;
};

TEST_F(LayerErrors, WeightsOfTheWrongShapeAreNamed) {
  MlaLayerWeights w = weights;
  w.wUv.shape[2] = 65;
  std::string error = createError(config, w);
  EXPECT_NE(error.find("'w_uv'"), std::string::npos) << error;
  w = weights;
  w.kvBProj.dtype = DType::F16;
  error = createError(config, w);
  EXPECT_NE(error.find("kv_b_proj"), std::string::npos) << error;
  EXPECT_NE(error.find("element type"), std::string::npos) << error;
}

TEST_F(LayerErrors, ARejectedBackendListsItsReasons) {
  MlaLayerConfig c = config;
  c.backend = testingOnGpu() ? "CPU_JIT" : "GENERIC_GPU";
  std::string error = createError(c, weights);
  EXPECT_NE(error.find(c.backend), std::string::npos) << error;
  EXPECT_NE(error.find("not supported"), std::string::npos) << error;
  c.backend = "NO_SUCH_BACKEND";
  error = createError(c, weights);
  EXPECT_NE(error.find("CPU_JIT"), std::string::npos) << error;
}

TEST_F(LayerErrors, PlanRefusesBadBatches) {
  auto layer = MlaLayer::create(*runtime, config, weights);
  ASSERT_TRUE(bool(layer)) << llvm::toString(layer.takeError());
  // A prefill before a decode: the batch is not ordered decodes-first.
  std::vector<int32_t> table = {0, 1, 2, 3};
  auto m = makeCommonAttentionMetadata({5, 1}, {5, 9}, table, 2, 16);
  auto plan = (*layer)->plan(m, 8);
  ASSERT_FALSE(bool(plan));
  std::string error = llvm::toString(plan.takeError());
  EXPECT_NE(error.find("decode"), std::string::npos) << error;

  // seq_len < query_len.
  m = makeCommonAttentionMetadata({1, 5}, {9, 5}, table, 2, 16);
  m.seqLens[1] = 3;
  plan = (*layer)->plan(m, 8);
  ASSERT_FALSE(bool(plan));
  error = llvm::toString(plan.takeError());
  EXPECT_NE(error.find("less than its query length"), std::string::npos)
      << error;

  // Decodes of different lengths under a threshold of 2.
  MlaLayerConfig spec = config;
  spec.decodeThreshold = 2;
  auto specLayer = MlaLayer::create(*runtime, spec, weights);
  ASSERT_TRUE(bool(specLayer)) << llvm::toString(specLayer.takeError());
  m = makeCommonAttentionMetadata({1, 2}, {9, 5}, table, 2, 16);
  plan = (*specLayer)->plan(m, 8);
  ASSERT_FALSE(bool(plan));
  error = llvm::toString(plan.takeError());
  EXPECT_NE(error.find("same number of new tokens"), std::string::npos)
      << error;
}

TEST_F(LayerErrors, ForwardNamesTheWrongBuffer) {
  auto layer = MlaLayer::create(*runtime, config, weights);
  ASSERT_TRUE(bool(layer)) << llvm::toString(layer.takeError());
  std::vector<int32_t> table = {0, 1};
  auto m = makeCommonAttentionMetadata({1}, {9}, table, 2, 16);
  auto plan = (*layer)->plan(m, 4);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  const MlaDims d = config.dims;
  auto view = [&](DType t, std::vector<int64_t> shape) {
    return hostView(t, std::move(shape));
  };
  MlaForwardArgs args = oneTokenArgs(/*outputExtra=*/1);
  llvm::Error error = (*layer)->forward(*plan, args);
  ASSERT_TRUE(bool(error));
  std::string text = llvm::toString(std::move(error));
  EXPECT_NE(text.find("output"), std::string::npos) << text;
  args.output = view(DType::BF16, {1, d.numHeads, d.vHeadDim});
  args.kvCache = view(DType::BF16, {3, 16, d.cacheEntry()});
  error = (*layer)->forward(*plan, args);
  ASSERT_TRUE(bool(error));
  text = llvm::toString(std::move(error));
  EXPECT_NE(text.find("kv_cache"), std::string::npos) << text;
}

/// A layer built as for the error tests, run on real buffers.
using LayerHostTimings = LayerErrors;

TEST_F(LayerHostTimings, RecordedOnlyWhenAsked) {
  auto layer = MlaLayer::create(*runtime, config, weights);
  ASSERT_TRUE(bool(layer)) << llvm::toString(layer.takeError());
  std::vector<int32_t> table = {0, 1, 2, 3};
  auto m = makeCommonAttentionMetadata({1, 1}, {9, 20}, table, 2, 16);
  auto plan = (*layer)->plan(m, 4);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  const MlaDims d = config.dims;
  MlaForwardArgs args{bf16Buffer({2, d.numHeads, d.qkHeadDim()}),
                      bf16Buffer({2, d.kvLoraRank}),
                      bf16Buffer({2, d.ropeDim}),
                      bf16Buffer({4, 16, d.cacheEntry()}),
                      bf16Buffer({2, d.numHeads, d.vHeadDim}),
                      {}};
  auto forwardParts = [&]() -> std::vector<std::string> {
    llvm::Error error = (*layer)->forward(*plan, args);
    EXPECT_FALSE(bool(error)) << llvm::toString(std::move(error));
    EXPECT_FALSE(bool(runtime->synchronize()));
    std::vector<std::string> names;
    for (const PhaseTiming &p : (*layer)->hostTimings()) {
      EXPECT_GE(p.milliseconds, 0);
      // The driver's launches are part of the phase; on the GPU every
      // phase but the first launches kernels, on the CPU none does.
      EXPECT_LE(p.driverLaunchMilliseconds, p.milliseconds) << p.phase;
      if (runtime->deviceKind() == DeviceKind::CUDA && !names.empty())
        EXPECT_GT(p.driverLaunchMilliseconds, 0) << p.phase;
      else
        EXPECT_EQ(p.driverLaunchMilliseconds, 0) << p.phase;
      names.push_back(p.phase);
    }
    return names;
  };
  EXPECT_TRUE(forwardParts().empty());
  (*layer)->setHostTiming(true);
  EXPECT_EQ(forwardParts(),
            (std::vector<std::string>{"checks and metadata upload",
                                      "concat_and_cache", "decode query",
                                      "decode attention", "decode v_up_proj"}));
  (*layer)->setHostTiming(false);
  EXPECT_TRUE(forwardParts().empty());
}

//===----------------------------------------------------------------------===//
// The prefill backend
//===----------------------------------------------------------------------===//

TEST_F(LayerErrors, ThePrefillBackendIsChosenApart) {
  ScopedEnv noEnv(kPrefillBackendEnvVar, nullptr);
  const bool gpu = testingOnGpu();
  const std::string other = gpu ? "PREFILL_CPU_JIT" : "PREFILL_GENERIC_GPU";
  const std::string own = gpu ? "PREFILL_GENERIC_GPU" : "PREFILL_CPU_JIT";
  MlaLayerConfig c = config;
  c.prefillBackend = other;
  std::string error = createError(c, weights);
  EXPECT_NE(error.find("prefill backend " + other + " (requested) cannot run"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("not supported (requires "), std::string::npos)
      << error;
  c.prefillBackend = "NO_SUCH_PREFILL";
  error = createError(c, weights);
  EXPECT_NE(error.find("unknown prefill backend 'NO_SUCH_PREFILL'"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("valid names: PREFILL_GENERIC_GPU, PREFILL_CPU_JIT"),
            std::string::npos)
      << error;
  {
    ScopedEnv env(kPrefillBackendEnvVar, other.c_str());
    c.prefillBackend = "";
    error = createError(c, weights);
    EXPECT_NE(error.find("(named by MLA_PREFILL_BACKEND) cannot run"),
              std::string::npos)
        << error;
    // The config's choice beats the environment's; the decode backend is
    // chosen by its own priorities all along.
    c.prefillBackend = own;
    auto layer = MlaLayer::create(*runtime, c, weights);
    ASSERT_TRUE(bool(layer)) << llvm::toString(layer.takeError());
    EXPECT_EQ((*layer)->prefillSelection().backend->name, own);
    EXPECT_EQ((*layer)->prefillSelection().source, ChoiceSource::Api);
    EXPECT_EQ((*layer)->selection().source, ChoiceSource::Priority);
    EXPECT_EQ((*layer)->selection().backend->role, BackendRole::Decode);
  }
  c.prefillBackend = "";
  auto byPriority = MlaLayer::create(*runtime, c, weights);
  ASSERT_TRUE(bool(byPriority)) << llvm::toString(byPriority.takeError());
  EXPECT_EQ((*byPriority)->prefillSelection().source, ChoiceSource::Priority);
  EXPECT_EQ((*byPriority)->prefillSelection().backend->role,
            BackendRole::Prefill);
  if (!gpu) {
    EXPECT_EQ((*byPriority)->prefillSelection().str(), "PREFILL_CPU_JIT");
  }
}

/// On an sm_90a GPU, the wgmma decode with the mma.sync prefill and the
/// mma.sync decode with the wgmma prefill, each layer's steps against the
/// float64 reference (DeepSeek's dims at 16 heads, which the wgmma decode
/// takes, over 16-token pages; a prefill of 130 new tokens spans two of a
/// kernel's 128-row tiles; a 64-row workspace makes several context
/// chunks).
TEST_F(LayerTest, DecodeAndPrefillBackendsPairedOnSm90a) {
  if (!testingOnGpu() || !testGpu() || !testGpuRunsWgmma())
    GTEST_SKIP() << "the wgmma backends: an sm_90a GPU only";
  ScopedEnv noPrefillEnv(kPrefillBackendEnvVar, nullptr);
  ScopedEnv noDecodeEnv(kAttentionBackendEnvVar, nullptr);
  auto runtime = makeRuntime();
  ASSERT_TRUE(runtime);
  for (auto [decode, prefill] : {std::pair{"TC_SM90A", "PREFILL_TC_SM80"},
                                 std::pair{"TC_SM80", "PREFILL_TC_SM90A"}}) {
    SCOPED_TRACE(std::string(decode) + " with " + prefill);
    ServingStepConfig c =
        smallSteps({300, 1, 45, 0}, {70, 0, 200}, {20, 9, 130}, 2);
    c.dims = {16, 512, 128, 64, 128};
    c.workspaceTokens = 64;
    c.backend = decode;
    c.prefillBackend = prefill;
    auto report = expectStepsOn(*runtime, c);
    ASSERT_TRUE(report);
    EXPECT_EQ(report->selection.backend->name, decode);
    EXPECT_EQ(report->prefillSelection.backend->name, prefill);
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// Decode context parallelism
//===----------------------------------------------------------------------===//

/// Ranks simulated in one process (runDcpSimulation): each rank's layer
/// over its share of the tokens, the decode partials gathered and merged,
/// equal to the layer without DCP and to the float64 reference, for every
/// head and for each rank's own heads; the prefills' rows, which read
/// their context chunks through the group's all-gather, equal to the
/// layer without DCP on every rank.
TEST_F(LayerTest, DcpRanksMergeToTheLayerWithoutDcp) {
  auto runtime = makeRuntime();
  ASSERT_TRUE(runtime);
  std::uniform_int_distribution<int32_t> context(0, 300);
  struct Group {
    int64_t worldSize, interleave, heads, decodeQueryLen;
  };
  // Decodes of several new tokens too: each query's causal prefix, held in
  // part by every rank.
  for (Group g : {Group{2, 1, 4, 1}, Group{3, 1, 4, 2}, Group{4, 16, 8, 3},
                  Group{2, 16, 4, 1}, Group{2, 4, 4, 4}}) {
    DcpSimulationConfig c;
    c.dims = smallDims(g.heads);
    c.blockSize = 16;
    c.worldSize = g.worldSize;
    c.interleave = g.interleave;
    c.decodeQueryLen = g.decodeQueryLen;
    c.seed = rng()();
    // Fresh lengths, and the edges: no context, fewer tokens than ranks,
    // a run that ends where a rank's next begins.
    c.decodeContexts = {0, 1, int32_t(g.worldSize * g.interleave - 1)};
    for (int i = 0; i < 5; ++i)
      c.decodeContexts.push_back(context(rng()));
    // Prefills with context in several chunks, one without context, one
    // whose context is shorter than the group's first run.
    c.prefillContexts = {context(rng()), 0, int32_t(g.interleave - 1) + 1,
                         context(rng())};
    c.prefillNewTokens = {13, 5, 6, 30};
    c.workspaceTokens = 48;
    SCOPED_TRACE("world " + std::to_string(g.worldSize) + ", interleave " +
                 std::to_string(g.interleave) + ", decode query len " +
                 std::to_string(g.decodeQueryLen));
    auto report = runDcpSimulation(c, *runtime, [](const std::string &) {});
    ASSERT_TRUE(bool(report)) << llvm::toString(report.takeError());
    EXPECT_LE(report->singleError, report->tolerance);
    EXPECT_LE(report->mergedError, report->tolerance);
    EXPECT_LE(report->mergedLseError, 5e-2);
    EXPECT_LE(report->mergedVsSingle, report->tolerance);
    EXPECT_EQ(report->cacheMismatches, 0);
    EXPECT_EQ(report->rankHeadsError.has_value(),
              g.heads % g.worldSize == 0);
    if (report->rankHeadsError) {
      EXPECT_LE(*report->rankHeadsError, report->tolerance);
    }
    EXPECT_LE(report->singlePrefillError, report->tolerance);
    EXPECT_LE(report->rankPrefillError, report->tolerance);
    // The same chunks in the same order through the same kernels.
    EXPECT_EQ(report->rankPrefillVsSingle, 0.0);
    EXPECT_GE(report->contextChunks, 2);
    EXPECT_TRUE(report->passed);
    // Every token is held by exactly one rank.
    int64_t held = 0, total = 0;
    for (int64_t t : report->rankTokens)
      held += t;
    for (int32_t ctx : c.decodeContexts)
      total += ctx + g.decodeQueryLen;
    for (size_t p = 0; p < c.prefillContexts.size(); ++p)
      total += c.prefillContexts[p] + c.prefillNewTokens[p];
    EXPECT_EQ(held, total);
  }
}

/// A step of prefills only: nothing to merge, every rank's rows exact.
TEST_F(LayerTest, DcpPrefillOnlyStep) {
  auto runtime = makeRuntime();
  ASSERT_TRUE(runtime);
  DcpSimulationConfig c;
  c.dims = smallDims(4);
  c.blockSize = 16;
  c.worldSize = 3;
  c.interleave = 4;
  c.seed = rng()();
  c.decodeContexts = {};
  c.prefillContexts = {100, 37};
  c.prefillNewTokens = {6, 17};
  c.workspaceTokens = 32;
  auto report = runDcpSimulation(c, *runtime, [](const std::string &) {});
  ASSERT_TRUE(bool(report)) << llvm::toString(report.takeError());
  EXPECT_EQ(report->contextChunks, 7);
  EXPECT_LE(report->rankPrefillError, report->tolerance);
  EXPECT_EQ(report->rankPrefillVsSingle, 0.0);
  EXPECT_TRUE(report->passed);
}

TEST_F(LayerErrors, DcpConfigsAndBatchesAreChecked) {
  MlaLayerConfig c = config;
  c.dcp = {2, 2, 1};
  std::string error = createError(c, weights);
  EXPECT_NE(error.find("dcp_rank"), std::string::npos) << error;
  c.dcp = {2, 0, 3};
  error = createError(c, weights);
  EXPECT_NE(error.find("cp_kv_cache_interleave_size"), std::string::npos)
      << error;
  c.dcp = {2, 0, 1};
  auto layer = MlaLayer::create(*runtime, c, weights);
  ASSERT_TRUE(bool(layer)) << llvm::toString(layer.takeError());
  // Rank 0 of 2 holds 5 of a 9-token sequence: one page of 16.
  std::vector<int32_t> table = {3, 0};
  auto m = makeCommonAttentionMetadata({1}, {9}, table, 2, 16);
  // The slot of the whole sequence's position 8, not rank 0's local 4.
  ASSERT_EQ(m.slotMapping[0], 3 * 16 + 8);
  auto plan = (*layer)->plan(m, 4);
  ASSERT_FALSE(bool(plan));
  error = llvm::toString(plan.takeError());
  EXPECT_NE(error.find("DCP rank 0 stores the token in slot 52"),
            std::string::npos)
      << error;
  m.slotMapping[0] = 3 * 16 + 4;
  plan = (*layer)->plan(m, 4);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  // The decode kernel counts from rank 0's first token: all 9; its splits
  // divide the 5 tokens rank 0 holds.
  EXPECT_EQ(plan->decodeSeqLens[0], 9);
  EXPECT_EQ(plan->decodeSplits.numSplits[0], 1);
  // Position 9 of a 10-token sequence lives on rank 1: rank 0 writes none.
  auto other = makeCommonAttentionMetadata({1}, {10}, table, 2, 16);
  auto otherPlan = (*layer)->plan(other, 4);
  ASSERT_FALSE(bool(otherPlan));
  error = llvm::toString(otherPlan.takeError());
  EXPECT_NE(error.find("belongs to another DCP rank"), std::string::npos)
      << error;

  // A rank's forward needs decode_lse; the merge needs a DCP layer and an
  // output of every head or the rank's share.
  plan = (*layer)->plan(m, 4);
  ASSERT_TRUE(bool(plan));
  const MlaDims d = config.dims;
  auto view = [&](DType t, std::vector<int64_t> shape) {
    return hostView(t, std::move(shape));
  };
  llvm::Error fwd = (*layer)->forward(*plan, oneTokenArgs());
  ASSERT_TRUE(bool(fwd));
  error = llvm::toString(std::move(fwd));
  EXPECT_NE(error.find("decode_lse is required"), std::string::npos) << error;

  DcpMergeArgs merge{view(DType::BF16, {2, 1, d.numHeads, d.vHeadDim}),
                     view(DType::F32, {2, 1, d.numHeads, 1}),
                     view(DType::BF16, {1, 3, d.vHeadDim}),
                     {}};
  llvm::Error merged = (*layer)->mergeDcpPartials(*plan, merge);
  ASSERT_TRUE(bool(merged));
  error = llvm::toString(std::move(merged));
  EXPECT_NE(error.find("every head (4) or this rank's share (2)"),
            std::string::npos)
      << error;
  merge.gatheredLse = view(DType::F32, {1, 1, d.numHeads, 1});
  merge.output = view(DType::BF16, {1, 2, d.vHeadDim});
  merged = (*layer)->mergeDcpPartials(*plan, merge);
  ASSERT_TRUE(bool(merged));
  error = llvm::toString(std::move(merged));
  EXPECT_NE(error.find("gathered_lse"), std::string::npos) << error;

  auto plain = MlaLayer::create(*runtime, config, weights);
  ASSERT_TRUE(bool(plain)) << llvm::toString(plain.takeError());
  merged = (*plain)->mergeDcpPartials(*plan, merge);
  ASSERT_TRUE(bool(merged));
  error = llvm::toString(std::move(merged));
  EXPECT_NE(error.find("without decode context parallelism"),
            std::string::npos)
      << error;
}

/// A prefill with context reads it through the group's all-gather: the
/// forward needs one, and an error it returns ends the forward; a chunk
/// gathered by hand must be one of the plan's, into rows of its size.
TEST_F(LayerErrors, DcpPrefillContextNeedsTheGroupsAllGather) {
  MlaLayerConfig c = config;
  c.dcp = {2, 0, 1};
  auto layer = MlaLayer::create(*runtime, c, weights);
  ASSERT_TRUE(bool(layer)) << llvm::toString(layer.takeError());
  // A decode (8 cached tokens) and a prefill of 6 new tokens over 20.
  std::vector<int32_t> wide = {3, 0, 1, 2};
  auto mixed = makeCommonAttentionMetadata({1, 6}, {9, 26}, wide, 2, 16);
  auto slots = dcpLocalSlotMapping(mixed, 16, c.dcp);
  ASSERT_TRUE(bool(slots)) << llvm::toString(slots.takeError());
  mixed.slotMapping = *slots;
  auto plan = (*layer)->plan(mixed, 4);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  EXPECT_EQ(plan->dcpContext.rowsPerRank, 10);
  const MlaDims d = config.dims;
  // Device buffers: the last forward runs kernels before the all-gather.
  auto onDevice = [&](DType t, std::vector<int64_t> shape) {
    BufferView v = BufferView::contiguous(nullptr, t, shape);
    v.data = bf16Buffer({int64_t(v.numElements() * byteWidth(t) / 2)}).data;
    return v;
  };
  MlaForwardArgs args{onDevice(DType::BF16, {7, d.numHeads, d.qkHeadDim()}),
                      onDevice(DType::BF16, {7, d.kvLoraRank}),
                      onDevice(DType::BF16, {7, d.ropeDim}),
                      onDevice(DType::BF16, {4, 16, d.cacheEntry()}),
                      onDevice(DType::BF16, {7, d.numHeads, d.vHeadDim}),
                      onDevice(DType::F32, {1, d.numHeads, 1})};
  auto failure = [](llvm::Error error) {
    return error ? llvm::toString(std::move(error)) : "success";
  };
  std::string error = failure((*layer)->forward(*plan, args));
  EXPECT_NE(error.find("setDcpAllGather"), std::string::npos) << error;
  BufferView rows = onDevice(DType::BF16, {10, d.cacheEntry()});
  error = failure((*layer)->gatherDcpContextChunk(*plan, 1, args.kvCache, rows));
  EXPECT_NE(error.find("chunk 1 of a plan with 1 context chunks"),
            std::string::npos)
      << error;
  error = failure((*layer)->gatherDcpContextChunk(
      *plan, 0, args.kvCache, onDevice(DType::BF16, {9, d.cacheEntry()})));
  EXPECT_NE(error.find("'rows'"), std::string::npos) << error;
  (*layer)->setDcpAllGather([](const void *, void *, size_t, Stream) {
    return llvm::createStringError("the group is gone");
  });
  error = failure((*layer)->forward(*plan, args));
  EXPECT_NE(error.find("all-gather of context chunk 0: the group is gone"),
            std::string::npos)
      << error;
}

TEST_F(LayerErrors, DcpMergesNotInPlaceAndAtMost64Ranks) {
  MlaLayerConfig c = config;
  c.dcp = {kMaxMergedStates + 1, 0, 1};
  std::string error = createError(c, weights);
  EXPECT_NE(error.find("at most 64 ranks"), std::string::npos) << error;
  c.dcp = {2, 0, 1};
  auto layer = MlaLayer::create(*runtime, c, weights);
  ASSERT_TRUE(bool(layer)) << llvm::toString(layer.takeError());
  std::vector<int32_t> table = {3, 0};
  auto m = makeCommonAttentionMetadata({1}, {9}, table, 2, 16);
  m.slotMapping[0] = 3 * 16 + 4;
  auto plan = (*layer)->plan(m, 4);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  const MlaDims d = config.dims;
  // The output over rank 0's own partial in the gathered buffer.
  DcpMergeArgs merge{hostView(DType::BF16, {2, 1, d.numHeads, d.vHeadDim}),
                     BufferView::contiguous(hostBytes.data() + 4096,
                                            DType::F32, {2, 1, d.numHeads, 1}),
                     hostView(DType::BF16, {1, d.numHeads, d.vHeadDim}),
                     {}};
  llvm::Error merged = (*layer)->mergeDcpPartials(*plan, merge);
  ASSERT_TRUE(bool(merged));
  error = llvm::toString(std::move(merged));
  EXPECT_NE(error.find("'output' overlaps 'gathered_output'"),
            std::string::npos)
      << error;
}
