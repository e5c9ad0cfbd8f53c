//===- PrefillBackendTest.cpp - Prefill backends and their selection ------===//
//
// PrefillBackend*: the prefill backends' rejection reasons (device,
// capability range, dtype, cache dtype, heads, head dims, unavailable), their
// priorities per device, explicit choices (API and MLA_PREFILL_BACKEND),
// unknown names, independence from the decode backend (its own registry,
// override and cache; a layer's modules get each backend's strategy), and
// each tensor-core declaration against the kernels the chunked prefill is
// lowered to.
//
//===----------------------------------------------------------------------===//

#include "TestSupport.h"

#include "mla/Builders/KernelBuilders.h"
#include "mla/Runtime/BackendRegistry.h"
#include "mla/Runtime/MlaLayerKernels.h"
#include "mla/Target/GpuTarget.h"
#include "mla/Transforms/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

using namespace mla;
using mla::test::ScopedEnv;
using Reasons = std::vector<std::string>;
using Names = std::vector<std::string>;

namespace {

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

template <typename T> std::string errorText(llvm::Expected<T> &value) {
  return value ? "" : llvm::toString(value.takeError());
}

BackendRegistry &prefillRegistry() {
  return BackendRegistry::builtin(BackendRole::Prefill);
}

const Backend &prefillBackend(const char *name) {
  const Backend *backend = prefillRegistry().find(name);
  EXPECT_NE(backend, nullptr) << name;
  return *backend;
}

/// Each test starts with neither variable set and empty caches.
class PrefillBackendSelection : public ::testing::Test {
protected:
  void SetUp() override {
    prefillRegistry().clearCache();
    BackendRegistry::builtin().clearCache();
  }
  void TearDown() override { SetUp(); }
  ScopedEnv noPrefillEnv{kPrefillBackendEnvVar, nullptr};
  ScopedEnv noDecodeEnv{kAttentionBackendEnvVar, nullptr};
};

/// The reasons `backend` gives for the 9.0 defaults changed by `change`.
Reasons reasonsFor(const char *backend,
                   const std::function<void(AttentionConfig &)> &change) {
  AttentionConfig c = AttentionConfig::cuda(9, 0);
  change(c);
  return prefillBackend(backend).validate(c);
}

//===----------------------------------------------------------------------===//
// Declarations and rejection reasons
//===----------------------------------------------------------------------===//

TEST(PrefillBackendValidate, BuiltinsArePrefillBackendsWithTheirStrategies) {
  for (const Backend &b : prefillRegistry().backends()) {
    EXPECT_EQ(b.role, BackendRole::Prefill) << b.name;
    EXPECT_TRUE(b.available) << b.name;
    // Prefills are never captured: the decode backend answers for graphs.
    EXPECT_EQ(b.cudaGraphs, CudaGraphSupport::NEVER) << b.name;
  }
  EXPECT_EQ(prefillBackend(kPrefillTcSm90aBackend).kernelStrategy,
            KernelStrategy::Warpgroup);
  EXPECT_EQ(prefillBackend(kPrefillTcSm80Backend).kernelStrategy,
            KernelStrategy::TensorCore);
  EXPECT_EQ(prefillBackend(kPrefillGenericGpuBackend).kernelStrategy,
            KernelStrategy::Generic);
  EXPECT_EQ(prefillBackend(kPrefillCpuJitBackend).kernelStrategy,
            std::nullopt);
  for (const Backend &b : BackendRegistry::builtin().backends())
    EXPECT_EQ(b.role, BackendRole::Decode) << b.name;
}

TEST(PrefillBackendValidate, DeviceAndCapabilityRange) {
  EXPECT_EQ(reasonsFor(kPrefillTcSm80Backend,
                       [](auto &c) { c.device = DeviceKind::CPU; }),
            Reasons{"device CPU not supported (requires CUDA)"});
  EXPECT_EQ(reasonsFor(kPrefillCpuJitBackend, [](auto &) {}),
            Reasons{"device CUDA not supported (requires CPU)"});
  EXPECT_EQ(reasonsFor(kPrefillTcSm80Backend,
                       [](auto &c) { c.capability = {7, 5}; }),
            Reasons{"compute capability 7.5 below minimum 8.0"});
  EXPECT_EQ(reasonsFor(kPrefillGenericGpuBackend,
                       [](auto &c) { c.capability = {7, 0}; }),
            Reasons{"compute capability 7.0 below minimum 8.0"});
  EXPECT_EQ(reasonsFor(kPrefillTcSm90aBackend,
                       [](auto &c) { c.capability = {8, 9}; }),
            Reasons{"compute capability 8.9 below minimum 9.0"});
  // wgmma code runs on sm_90a only.
  EXPECT_EQ(reasonsFor(kPrefillTcSm90aBackend,
                       [](auto &c) { c.capability = {10, 0}; }),
            Reasons{"compute capability 10.0 above maximum 9.0"});
  for (DeviceCapability chip : {DeviceCapability{8, 0}, DeviceCapability{8, 6},
                                DeviceCapability{9, 0},
                                DeviceCapability{12, 0}})
    EXPECT_EQ(reasonsFor(kPrefillTcSm80Backend,
                         [&](auto &c) { c.capability = chip; }),
              Reasons{})
        << chip.str();
}

TEST(PrefillBackendValidate, DtypesAndCacheDtypes) {
  for (const char *tc : {kPrefillTcSm80Backend, kPrefillTcSm90aBackend}) {
    SCOPED_TRACE(tc);
    EXPECT_EQ(reasonsFor(tc, [](auto &c) { c.dtype = DType::F32; }),
              Reasons{"activation dtype f32 not supported (supports bf16, "
                      "f16)"});
    // The attention reads K and V made in the activation dtype (the
    // gather converts or dequantizes the cache's entries): any float or
    // FP8 cache will do.
    for (DType cache : {DType::F32, DType::F16, DType::BF16, DType::FP8E4M3,
                        DType::FP8E5M2})
      EXPECT_EQ(reasonsFor(tc, [&](auto &c) { c.kvCacheDType = cache; }),
                Reasons{});
    EXPECT_EQ(reasonsFor(tc, [](auto &c) { c.kvCacheDType = DType::I32; }),
              Reasons{"kv-cache dtype i32 not supported (supports f32, f16, "
                      "bf16, fp8_e4m3, fp8_e5m2)"});
  }
  EXPECT_EQ(reasonsFor(kPrefillGenericGpuBackend,
                       [](auto &c) { c.dtype = c.kvCacheDType = DType::F32; }),
            Reasons{});
  EXPECT_EQ(reasonsFor(kPrefillGenericGpuBackend,
                       [](auto &c) { c.dtype = DType::I64; }),
            Reasons{"activation dtype i64 not supported (supports f32, f16, "
                    "bf16)"});
}

TEST(PrefillBackendValidate, Heads) {
  for (const Backend &b : prefillRegistry().backends()) {
    AttentionConfig c = b.device == DeviceKind::CPU
                            ? AttentionConfig::cpu()
                            : AttentionConfig::cuda(9, 0);
    c.dims.numHeads = 256;
    EXPECT_EQ(b.validate(c),
              Reasons{"num heads 256 not supported (supports 1..128)"})
        << b.name;
  }
  // The wgmma prefill has no head minimum, unlike the wgmma decode: an
  // 8-head shard keeps it.
  EXPECT_EQ(reasonsFor(kPrefillTcSm90aBackend,
                       [](auto &c) { c.dims.numHeads = 8; }),
            Reasons{});
}

TEST(PrefillBackendValidate, HeadDims) {
  // qk 96 + 64 = 160: not whole 64-column blocks for wgmma, fine for
  // mma.sync's 16.
  auto qk160 = [](AttentionConfig &c) { c.dims.qkNopeHeadDim = 96; };
  EXPECT_EQ(reasonsFor(kPrefillTcSm90aBackend, qk160),
            Reasons{"qk head dim (qk_nope_head_dim + rope dim) 160 not "
                    "supported (requires a multiple of 64 up to 256)"});
  EXPECT_EQ(reasonsFor(kPrefillTcSm80Backend, qk160), Reasons{});
  // qk 200 + 64: above both kernels' maximum; 100 + 64: not a multiple of
  // 16.
  EXPECT_EQ(reasonsFor(kPrefillTcSm80Backend,
                       [](auto &c) { c.dims.qkNopeHeadDim = 200; }),
            Reasons{"qk head dim (qk_nope_head_dim + rope dim) 264 not "
                    "supported (requires a multiple of 16 up to 256)"});
  EXPECT_EQ(reasonsFor(kPrefillTcSm80Backend,
                       [](auto &c) { c.dims.qkNopeHeadDim = 100; }),
            Reasons{"qk head dim (qk_nope_head_dim + rope dim) 164 not "
                    "supported (requires a multiple of 16 up to 256)"});
  // Only the sum counts: 100 + 28 = 128.
  EXPECT_EQ(reasonsFor(kPrefillTcSm90aBackend,
                       [](auto &c) {
                         c.dims.qkNopeHeadDim = 100;
                         c.dims.ropeDim = 28;
                       }),
            Reasons{});
  EXPECT_EQ(reasonsFor(kPrefillTcSm90aBackend,
                       [](auto &c) { c.dims.vHeadDim = 192; }),
            Reasons{"v_head_dim 192 not supported (requires a multiple of "
                    "64 up to 128)"});
  EXPECT_EQ(reasonsFor(kPrefillTcSm80Backend,
                       [](auto &c) { c.dims.vHeadDim = 40; }),
            Reasons{"v_head_dim 40 not supported (requires a multiple of 16 "
                    "up to 128)"});
  // The generic kernel takes any head dims; a non-positive one is named
  // once, as the part it is.
  EXPECT_EQ(reasonsFor(kPrefillGenericGpuBackend,
                       [](auto &c) {
                         c.dims.qkNopeHeadDim = 100;
                         c.dims.vHeadDim = 200;
                       }),
            Reasons{});
  EXPECT_EQ(reasonsFor(kPrefillTcSm90aBackend,
                       [](auto &c) { c.dims.ropeDim = 0; }),
            Reasons{"rope dim 0 invalid (must be positive)"});
}

TEST(PrefillBackendValidate, DecodeOnlyFieldsDoNotCount) {
  // Speculative decodes, the decode LSE, CUDA graphs and even an invalid
  // decode query length are the decode backend's to answer.
  for (const Backend &b : prefillRegistry().backends()) {
    AttentionConfig c = b.device == DeviceKind::CPU
                            ? AttentionConfig::cpu()
                            : AttentionConfig::cuda(9, 0);
    c.maxQueryLen = 0;
    c.needsDecodeLse = true;
    c.wantsCudaGraphs = true;
    EXPECT_EQ(b.validate(c), Reasons{}) << b.name;
  }
}

TEST(PrefillBackendValidate, EveryMismatchInOrder) {
  AttentionConfig c = AttentionConfig::cuda(8, 0);
  c.dtype = DType::F32;
  c.kvCacheDType = DType::I64;
  c.dims.numHeads = 129;
  c.dims.vHeadDim = 96;
  EXPECT_EQ(prefillBackend(kPrefillTcSm90aBackend).validate(c),
            (Reasons{"compute capability 8.0 below minimum 9.0",
                     "activation dtype f32 not supported (supports bf16, f16)",
                     "kv-cache dtype i64 not supported (supports f32, f16, "
                     "bf16, fp8_e4m3, fp8_e5m2)",
                     "num heads 129 not supported (supports 1..128)",
                     "v_head_dim 96 not supported (requires a multiple of 64 "
                     "up to 128)"}));
}

//===----------------------------------------------------------------------===//
// An unavailable backend, in a registry of the prefill role
//===----------------------------------------------------------------------===//

TEST(PrefillBackendUnavailable, NamedFirstAndSkipped) {
  Backend planned;
  planned.name = "PREFILL_PLANNED";
  planned.role = BackendRole::Prefill;
  planned.available = false;
  planned.unavailableReason = "not built into this library";
  planned.dtypes = planned.kvCacheDTypes = {DType::BF16};
  planned.minCapability = {10, 0};
  Backend fallback = planned;
  fallback.name = "PREFILL_FALLBACK";
  fallback.available = true;
  fallback.unavailableReason.clear();
  fallback.minCapability = {8, 0};
  BackendRegistry registry(
      {planned, fallback},
      {PriorityRule{DeviceKind::CUDA, {}, std::nullopt,
                    {"PREFILL_PLANNED", "PREFILL_FALLBACK"}}},
      BackendRole::Prefill);

  ScopedEnv noEnv(kPrefillBackendEnvVar, nullptr);
  AttentionConfig c = AttentionConfig::cuda(9, 0);
  EXPECT_EQ(planned.validate(c),
            (Reasons{"not built into this library",
                     "compute capability 9.0 below minimum 10.0"}));
  auto s = registry.select(c);
  ASSERT_TRUE(static_cast<bool>(s)) << errorText(s);
  EXPECT_EQ(s->backend->name, "PREFILL_FALLBACK");
  ASSERT_EQ(s->skipped.size(), 1u);
  EXPECT_EQ(s->str(), "PREFILL_FALLBACK (skipped PREFILL_PLANNED: [not built "
                      "into this library, compute capability 9.0 below "
                      "minimum 10.0])");
  auto named = registry.select(c, "PREFILL_PLANNED");
  EXPECT_TRUE(contains(errorText(named),
                       "prefill backend PREFILL_PLANNED (requested) cannot "
                       "run {device=CUDA 9.0,"))
      << errorText(named);
  // Unavailable is reason enough, even where all else fits.
  EXPECT_EQ(planned.validate(AttentionConfig::cuda(10, 0)),
            Reasons{"not built into this library"});
}

//===----------------------------------------------------------------------===//
// Priorities and selection
//===----------------------------------------------------------------------===//

Names priorityNames(const AttentionConfig &config) {
  Names names;
  for (const Backend *b : prefillRegistry().priorities(config))
    names.push_back(b->name);
  return names;
}

TEST(PrefillBackendPriorities, PerDevice) {
  EXPECT_EQ(priorityNames(AttentionConfig::cuda(9, 0)),
            (Names{"PREFILL_TC_SM90A", "PREFILL_TC_SM80",
                   "PREFILL_GENERIC_GPU"}));
  for (auto [major, minor] :
       {std::pair{8, 0}, {8, 6}, {8, 9}, {10, 0}, {12, 0}})
    EXPECT_EQ(priorityNames(AttentionConfig::cuda(major, minor)),
              (Names{"PREFILL_TC_SM80", "PREFILL_GENERIC_GPU"}));
  EXPECT_EQ(priorityNames(AttentionConfig::cuda(7, 5)),
            Names{"PREFILL_GENERIC_GPU"});
  EXPECT_EQ(priorityNames(AttentionConfig::cpu()), Names{"PREFILL_CPU_JIT"});
  for (const PriorityRule &rule : builtinPrefillPriorities())
    for (const std::string &name : rule.order)
      EXPECT_NE(prefillRegistry().find(name), nullptr) << name;
}

TEST_F(PrefillBackendSelection, ByPriorityWithReasons) {
  auto s = prefillRegistry().select(AttentionConfig::cuda(9, 0));
  ASSERT_TRUE(static_cast<bool>(s)) << errorText(s);
  EXPECT_EQ(s->str(), "PREFILL_TC_SM90A");
  EXPECT_EQ(s->source, ChoiceSource::Priority);

  // Head dims the wgmma prefill does not take: the mma.sync one, and why.
  AttentionConfig qk160 = AttentionConfig::cuda(9, 0);
  qk160.dims.qkNopeHeadDim = 96;
  auto sm80 = prefillRegistry().select(qk160);
  ASSERT_TRUE(static_cast<bool>(sm80)) << errorText(sm80);
  EXPECT_EQ(sm80->str(), "PREFILL_TC_SM80 (skipped PREFILL_TC_SM90A: [qk "
                         "head dim (qk_nope_head_dim + rope dim) 160 not "
                         "supported (requires a multiple of 64 up to 256)])");

  AttentionConfig f32 = AttentionConfig::cuda(8, 6);
  f32.dtype = f32.kvCacheDType = DType::F32;
  auto generic = prefillRegistry().select(f32);
  ASSERT_TRUE(static_cast<bool>(generic)) << errorText(generic);
  EXPECT_EQ(generic->backend->name, "PREFILL_GENERIC_GPU");
  ASSERT_EQ(generic->skipped.size(), 1u);
  EXPECT_EQ(generic->skipped[0].reasons,
            Reasons{"activation dtype f32 not supported (supports bf16, "
                    "f16)"});

  auto cpu = prefillRegistry().select(AttentionConfig::cpu());
  ASSERT_TRUE(static_cast<bool>(cpu)) << errorText(cpu);
  EXPECT_EQ(cpu->str(), "PREFILL_CPU_JIT");

  for (auto [major, minor] : {std::pair{10, 0}, {12, 0}}) {
    auto blackwell = prefillRegistry().select(AttentionConfig::cuda(major, minor));
    ASSERT_TRUE(static_cast<bool>(blackwell)) << errorText(blackwell);
    EXPECT_EQ(blackwell->str(), "PREFILL_TC_SM80");
  }
}

TEST_F(PrefillBackendSelection, NothingFitsListsEveryBackend) {
  AttentionConfig c = AttentionConfig::cuda(9, 0);
  c.dims.numHeads = 200;
  auto s = prefillRegistry().select(c);
  EXPECT_EQ(errorText(s),
            "no prefill backend fits " + c.str() +
                "; reasons: PREFILL_TC_SM90A: [num heads 200 not supported "
                "(supports 1..128)]; PREFILL_TC_SM80: [num heads 200 not "
                "supported (supports 1..128)]; PREFILL_GENERIC_GPU: [num "
                "heads 200 not supported (supports 1..128)]");
  EXPECT_EQ(prefillRegistry().cacheSize(), 0u);
}

//===----------------------------------------------------------------------===//
// Explicit choices
//===----------------------------------------------------------------------===//

TEST_F(PrefillBackendSelection, ApiChoiceHonouredOrRefused) {
  AttentionConfig c = AttentionConfig::cuda(9, 0);
  auto s = prefillRegistry().select(c, "PREFILL_GENERIC_GPU");
  ASSERT_TRUE(static_cast<bool>(s)) << errorText(s);
  EXPECT_EQ(s->str(), "PREFILL_GENERIC_GPU (requested)");
  EXPECT_EQ(s->source, ChoiceSource::Api);
  EXPECT_TRUE(s->skipped.empty());

  c.dims.vHeadDim = 192;
  auto refused = prefillRegistry().select(c, "PREFILL_TC_SM90A");
  std::string text = errorText(refused);
  EXPECT_TRUE(contains(text, "prefill backend PREFILL_TC_SM90A (requested) "
                             "cannot run {device=CUDA 9.0,"))
      << text;
  EXPECT_TRUE(contains(text, "[v_head_dim 192 not supported (requires a "
                             "multiple of 64 up to 128)]"))
      << text;
}

TEST_F(PrefillBackendSelection, UnknownNameListsValidNames) {
  const std::string valid = "valid names: PREFILL_GENERIC_GPU, "
                            "PREFILL_CPU_JIT, PREFILL_TC_SM80, "
                            "PREFILL_TC_SM90A";
  auto s = prefillRegistry().select(AttentionConfig::cuda(9, 0), "FLASH_ATTN");
  EXPECT_EQ(errorText(s),
            "unknown prefill backend 'FLASH_ATTN' (requested); " + valid);
  // A decode backend's name is no prefill backend's.
  auto decodeName = prefillRegistry().select(AttentionConfig::cuda(9, 0),
                                             "TC_SM80");
  EXPECT_EQ(errorText(decodeName),
            "unknown prefill backend 'TC_SM80' (requested); " + valid);
  ScopedEnv env(kPrefillBackendEnvVar, "prefill_tc_sm80");
  auto fromEnv = prefillRegistry().select(AttentionConfig::cpu());
  EXPECT_EQ(errorText(fromEnv), "unknown prefill backend 'prefill_tc_sm80' "
                                "(named by MLA_PREFILL_BACKEND); " +
                                    valid);
}

TEST_F(PrefillBackendSelection, EnvironmentChoice) {
  AttentionConfig c = AttentionConfig::cuda(9, 0);
  {
    ScopedEnv env(kPrefillBackendEnvVar, "PREFILL_TC_SM80");
    auto s = prefillRegistry().select(c);
    ASSERT_TRUE(static_cast<bool>(s)) << errorText(s);
    EXPECT_EQ(s->backend->name, "PREFILL_TC_SM80");
    EXPECT_EQ(s->source, ChoiceSource::Environment);
    EXPECT_EQ(s->str(), "PREFILL_TC_SM80 (from MLA_PREFILL_BACKEND)");
    // The API's choice (a layer config's prefillBackend) beats it.
    auto api = prefillRegistry().select(c, "PREFILL_GENERIC_GPU");
    ASSERT_TRUE(static_cast<bool>(api)) << errorText(api);
    EXPECT_EQ(api->str(), "PREFILL_GENERIC_GPU (requested)");
    // The decode's selection does not read it.
    auto decode = BackendRegistry::builtin().select(c);
    ASSERT_TRUE(static_cast<bool>(decode)) << errorText(decode);
    EXPECT_EQ(decode->str(), "TC_SM90A");
  }
  {
    ScopedEnv env(kPrefillBackendEnvVar, "PREFILL_TC_SM90A");
    AttentionConfig sm86 = AttentionConfig::cuda(8, 6);
    auto s = prefillRegistry().select(sm86);
    std::string text = errorText(s);
    EXPECT_TRUE(contains(text, "prefill backend PREFILL_TC_SM90A (named by "
                               "MLA_PREFILL_BACKEND) cannot run"))
        << text;
    EXPECT_TRUE(contains(text, "[compute capability 8.6 below minimum 9.0]"))
        << text;
  }
  {
    // The decode's variable does not reach the prefill's selection.
    ScopedEnv env(kAttentionBackendEnvVar, "GENERIC_GPU");
    auto s = prefillRegistry().select(c);
    ASSERT_TRUE(static_cast<bool>(s)) << errorText(s);
    EXPECT_EQ(s->str(), "PREFILL_TC_SM90A");
  }
  // Unset: priority again, although a selection was cached while set.
  auto s = prefillRegistry().select(c);
  ASSERT_TRUE(static_cast<bool>(s)) << errorText(s);
  EXPECT_EQ(s->source, ChoiceSource::Priority);
}

//===----------------------------------------------------------------------===//
// Independence from the decode backend
//===----------------------------------------------------------------------===//

TEST_F(PrefillBackendSelection, IndependentOfTheDecodeChoice) {
  // On a 9.0 device: the wgmma decode with the mma.sync prefill.
  AttentionConfig c = AttentionConfig::cuda(9, 0);
  auto decode = BackendRegistry::builtin().select(c, "TC_SM90A");
  auto prefill = prefillRegistry().select(c, "PREFILL_TC_SM80");
  ASSERT_TRUE(static_cast<bool>(decode)) << errorText(decode);
  ASSERT_TRUE(static_cast<bool>(prefill)) << errorText(prefill);
  EXPECT_EQ(decode->backend->kernelStrategy, KernelStrategy::Warpgroup);
  EXPECT_EQ(prefill->backend->kernelStrategy, KernelStrategy::TensorCore);

  // By priority, an 8-head shard: the decode falls to TC_SM80 (the wgmma
  // decode needs 16 heads), the prefill keeps wgmma.
  AttentionConfig shard = c;
  shard.dims.numHeads = 8;
  auto shardDecode = BackendRegistry::builtin().select(shard);
  auto shardPrefill = prefillRegistry().select(shard);
  ASSERT_TRUE(static_cast<bool>(shardDecode)) << errorText(shardDecode);
  ASSERT_TRUE(static_cast<bool>(shardPrefill)) << errorText(shardPrefill);
  EXPECT_EQ(shardDecode->backend->name, "TC_SM80");
  EXPECT_EQ(shardPrefill->backend->name, "PREFILL_TC_SM90A");

  // f32 cache under bf16 activations: the decode on CUDA cores, the
  // prefill still on tensor cores.
  AttentionConfig f32Cache = c;
  f32Cache.kvCacheDType = DType::F32;
  auto cacheDecode = BackendRegistry::builtin().select(f32Cache);
  auto cachePrefill = prefillRegistry().select(f32Cache);
  ASSERT_TRUE(static_cast<bool>(cacheDecode)) << errorText(cacheDecode);
  ASSERT_TRUE(static_cast<bool>(cachePrefill)) << errorText(cachePrefill);
  EXPECT_EQ(cacheDecode->backend->name, "GENERIC_GPU");
  EXPECT_EQ(cachePrefill->backend->name, "PREFILL_TC_SM90A");

  // Each registry caches its own selections.
  EXPECT_EQ(prefillRegistry().cacheSize(), 3u);
  EXPECT_EQ(BackendRegistry::builtin().cacheSize(), 3u);
}

TEST_F(PrefillBackendSelection, LayerModulesTakeEachBackendsStrategy) {
  AttentionConfig c = AttentionConfig::cuda(9, 0);
  auto decode = BackendRegistry::builtin().select(c, "TC_SM90A");
  auto prefill = prefillRegistry().select(c, "PREFILL_TC_SM80");
  ASSERT_TRUE(decode && prefill);
  std::vector<runtime::CompileRequest> modules = runtime::layerKernelModules(
      runtime::MlaLayerConfig(),
      runtime::LayerStrategies::of(*decode, *prefill));
  ASSERT_EQ(modules.size(), size_t(runtime::NumLayerModules));
  for (size_t m = 0; m < modules.size(); ++m)
    EXPECT_EQ(modules[m].strategy, m == runtime::ChunkedPrefillModule
                                       ? KernelStrategy::TensorCore
                                       : KernelStrategy::Warpgroup)
        << "module " << m;

  // And the other way round, with the generic prefill.
  auto generic = prefillRegistry().select(c, "PREFILL_GENERIC_GPU");
  auto sm80 = BackendRegistry::builtin().select(c, "TC_SM80");
  ASSERT_TRUE(generic && sm80);
  modules = runtime::layerKernelModules(
      runtime::MlaLayerConfig(), runtime::LayerStrategies::of(*sm80, *generic));
  for (size_t m = 0; m < modules.size(); ++m)
    EXPECT_EQ(modules[m].strategy, m == runtime::ChunkedPrefillModule
                                       ? KernelStrategy::Generic
                                       : KernelStrategy::TensorCore)
        << "module " << m;
}

//===----------------------------------------------------------------------===//
// The declarations against the lowering
//===----------------------------------------------------------------------===//

/// The gpu.func names of the layer's chunked-prefill module for `config`,
/// lowered for `chip` with `strategy` as a layer's compile lowers it (up to
/// the kernels, before PTX).
std::set<std::string> prefillKernels(const runtime::MlaLayerConfig &config,
                                     const std::string &chip,
                                     KernelStrategy strategy) {
  mlir::MLIRContext ctx;
  loadKernelDialects(ctx);
  runtime::CompileRequest request = runtime::layerKernelModules(
      config, {strategy, strategy})[runtime::ChunkedPrefillModule];
  mlir::OwningOpRef<mlir::ModuleOp> module = request.build(ctx);
  EXPECT_TRUE(module);
  if (!module)
    return {};
  mlir::PassManager pm(&ctx);
  pm.addPass(createExpandChunkedPrefill());
  pm.addPass(createSelectGpuTarget(
      SelectGpuTargetOptions{chip, name(strategy)}));
  pm.addPass(createConvertMLAToGPU());
  EXPECT_TRUE(mlir::succeeded(pm.run(*module))) << chip;
  std::set<std::string> kernels;
  module->walk([&](mlir::gpu::GPUFuncOp f) {
    kernels.insert(f.getName().str());
  });
  return kernels;
}

bool hasKernel(const std::set<std::string> &kernels, const std::string &part) {
  for (const std::string &k : kernels)
    if (contains(k, part))
      return true;
  return false;
}

/// A tensor-core prefill backend is accepted exactly where the lowering
/// gives the prefill attention its strategy's kernel: a declaration that
/// accepted more would name a backend whose kernel does not run, one that
/// accepted less would pass over one that does.
TEST(PrefillBackendTruth, DeclarationsMatchTheLowering) {
  struct Case {
    int64_t nope, rope, v;
    DType act, cache;
  };
  const DType bf16 = DType::BF16, f16 = DType::F16, f32 = DType::F32;
  const std::vector<Case> cases = {
      {128, 64, 128, bf16, bf16}, // DeepSeek's
      {32, 32, 64, bf16, bf16},   {96, 64, 128, bf16, bf16},
      {100, 28, 64, bf16, bf16},  {128, 128, 128, bf16, bf16},
      {192, 128, 128, bf16, bf16}, {128, 64, 192, bf16, bf16},
      {40, 24, 32, bf16, bf16},   {8, 8, 8, bf16, bf16},
      {128, 64, 128, f16, f32},   {128, 64, 128, bf16, f32},
      {128, 64, 128, f32, f32},
  };
  struct Target {
    const char *backend, *chip, *kernel;
    DeviceCapability capability;
  };
  const std::vector<Target> targets = {
      {kPrefillTcSm80Backend, "sm_80", "prefill_attention_mma", {8, 0}},
      {kPrefillTcSm80Backend, "sm_86", "prefill_attention_mma", {8, 6}},
      {kPrefillTcSm80Backend, "sm_90a", "prefill_attention_mma", {9, 0}},
      {kPrefillTcSm90aBackend, "sm_90a", "prefill_attention_wgmma", {9, 0}},
  };
  int accepted = 0, refused = 0;
  for (const Target &t : targets) {
    const Backend &backend = prefillBackend(t.backend);
    for (const Case &k : cases) {
      runtime::MlaLayerConfig config;
      config.dims = {4, 64, k.nope, k.rope, k.v};
      config.activation = k.act;
      config.cacheDType = k.cache;
      config.blockSize = 16;
      AttentionConfig key = config.selectionKey();
      key.device = DeviceKind::CUDA;
      key.capability = t.capability;
      Reasons reasons = backend.validate(key);
      std::set<std::string> kernels =
          prefillKernels(config, t.chip, *backend.kernelStrategy);
      SCOPED_TRACE(std::string(t.backend) + " on " + t.chip + ", " +
                   key.str());
      EXPECT_EQ(reasons.empty(), hasKernel(kernels, t.kernel))
          << (reasons.empty() ? "accepted" : reasons[0]);
      ++(reasons.empty() ? accepted : refused);
    }
  }
  // Both sides of the rule were exercised.
  EXPECT_GT(accepted, 8);
  EXPECT_GT(refused, 8);
}

} // namespace
