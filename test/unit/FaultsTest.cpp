//===- FaultsTest.cpp - Bad values and failing calls in the middle of a step ===//
//
// What one bad input or one failing driver call does to a layer's step:
//  - A NaN or Inf in q, in the new tokens' kv_c / k_pe, or in the cache
//    changes exactly the output rows that read it (every head of the tokens
//    that attend to a poisoned cache position, one (token, head) row for a
//    poisoned q), and nothing else bit for bit; poison in cache slots no
//    request reads (the tail of a partly filled page, a page no block table
//    names) changes nothing. On the CPU and, with MLA_TEST_DEVICE=gpu, on
//    each GPU backend the device runs (generic, mma.sync, wgmma).
//  - GPU only: a kernel launch or a device allocation that fails, at any
//    point of a step (injected through the driver's entry-point table, which
//    every launch and allocation goes through), makes forward return an
//    error naming the call, and the same layer, runtime and kernel cache
//    then run the step again to the same result.
//  - Kernel source given as a slice of a larger buffer is parsed alone.
//
//===----------------------------------------------------------------------===//

#include "GpuTestSupport.h"
#include "HostTensor.h"
#include "RuntimeTestSupport.h"
#include "TestSupport.h"

#include "mla/Runtime/CudaDriver.h"
#include "mla/Runtime/GpuKernel.h"
#include "mla/Runtime/MlaLayer.h"
#include "mla/Runtime/Runtime.h"

#include <cmath>
#include <limits>
#include <set>

using namespace mla;
using namespace mla::runtime;
using namespace mla::test;

namespace {

constexpr int64_t kPage = 16, kCachePages = 16, kTableWidth = 5;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

/// The batch: two decodes (over 40 and 77 tokens), a prefill of 12 new
/// tokens over 30 cached ones (rows 2..13) and one of 9 over 5 (rows
/// 14..22). Request b's pages are kPages[b]; pages 12..15 are no one's.
const std::vector<int32_t> kQueryLens = {1, 1, 12, 9},
                           kSeqLens = {40, 77, 42, 14};
const std::vector<std::vector<int32_t>> kPages = {
    {0, 1, 2}, {3, 4, 5, 6, 7}, {8, 9, 10}, {11}};
constexpr int64_t kTokens = 23, kFirstPrefillToken = 2, kSecondPrefillToken = 14;

using Tensor = RuntimeTensor;

/// (token, head) output rows.
using Rows = std::set<std::pair<int64_t, int64_t>>;

class Faults : public ::testing::Test {
protected:
  void SetUp() override {
    runtime = makeTestRuntime();
    ASSERT_TRUE(runtime);
    config.blockSize = kPage;
    useBackend("");
  }

  /// The layer of `backend` (empty: the one selection picks) with fresh
  /// random weights and inputs, its plan of the batch and its clean step's
  /// output. Small dims, but DeepSeek's where the wgmma kernels need them.
  void useBackend(const std::string &backend) {
    config.backend = backend;
    config.dims = backend == "TC_SM90A" ? MlaDims{16, 512, 128, 64, 128}
                                        : MlaDims{4, 128, 64, 32, 64};
    const MlaDims &d = config.dims;
    kvBProj = random(DType::BF16,
                     {d.kvLoraRank, d.numHeads, d.qkNopeHeadDim + d.vHeadDim});
    wUkT = random(DType::BF16, {d.numHeads, d.qkNopeHeadDim, d.kvLoraRank});
    wUv = random(DType::BF16, {d.numHeads, d.kvLoraRank, d.vHeadDim});
    q = random(DType::BF16, {kTokens, d.numHeads, d.qkHeadDim()}, 2.0);
    kvC = random(DType::BF16, {kTokens, d.kvLoraRank});
    kPe = random(DType::BF16, {kTokens, d.ropeDim});
    cache = random(DType::BF16, {kCachePages, kPage, d.cacheEntry()});
    output = random(DType::BF16, {kTokens, d.numHeads, d.vHeadDim});
    clean = {q.host, kvC.host, kPe.host, cache.host};
    layer = makeLayer();
    ASSERT_TRUE(layer);
    std::vector<int32_t> table;
    for (const std::vector<int32_t> &pages : kPages)
      for (int64_t j = 0; j < kTableWidth; ++j)
        table.push_back(j < int64_t(pages.size()) ? pages[j] : 0);
    auto planned = layer->plan(makeCommonAttentionMetadata(
                                   kQueryLens, kSeqLens, table, kTableWidth, kPage),
                               kCachePages);
    ASSERT_TRUE(bool(planned)) << llvm::toString(planned.takeError());
    plan = std::move(*planned);
    baseline = step();
    ASSERT_FALSE(baseline.empty());
    for (double v : baseline)
      ASSERT_TRUE(std::isfinite(v));
  }

  /// Runs `poisonAndCheck` on the layer of each backend the device runs:
  /// the CPU's, or each GPU kernel strategy's.
  void forEachBackend(const std::function<void()> &poisonAndCheck) {
    std::vector<std::string> backends = {""};
    if (testingOnGpu()) {
      backends = {"GENERIC_GPU", "TC_SM80"};
      if (testGpuRunsWgmma())
        backends.push_back("TC_SM90A");
    }
    for (const std::string &backend : backends) {
      SCOPED_TRACE("backend " + (backend.empty() ? "selected" : backend));
      useBackend(backend);
      if (HasFatalFailure())
        return;
      poisonAndCheck();
    }
  }

  std::unique_ptr<MlaLayer> makeLayer() {
    auto created =
        MlaLayer::create(*runtime, config, {kvBProj.view(), wUkT.view(), wUv.view()});
    EXPECT_TRUE(bool(created)) << llvm::toString(created.takeError());
    return created ? std::move(*created) : nullptr;
  }

  Tensor random(DType t, std::vector<int64_t> shape, double range = 1.0) {
    return RuntimeTensor::random(*runtime, t, std::move(shape), range);
  }
  void upload(Tensor &x) { x.upload(*runtime); }

  /// Sets element `index` (row-major) of `x`'s host copy to `value`.
  static void set(Tensor &x, int64_t index, double value) {
    std::vector<double> values = x.host.toDouble();
    values[index] = value;
    x.host.fromDouble(values);
  }
  /// The cache element of request b's position `position`, entry column c.
  int64_t cacheIndex(int64_t b, int64_t position, int64_t c) const {
    int64_t page = kPages[b][position / kPage];
    return (page * kPage + position % kPage) * config.dims.cacheEntry() + c;
  }

  /// Runs the step on the inputs as they are now (the output poisoned
  /// first) and returns the output; the inputs are then reset to `clean`.
  /// Empty when forward failed; its error in `error`.
  std::vector<double> step(std::string *error = nullptr,
                           MlaLayer *on = nullptr) {
    for (Tensor *x : {&q, &kvC, &kPe, &cache})
      upload(*x);
    output.host.poison();
    upload(output);
    llvm::Error failed = (on ? on : layer.get())
                             ->forward(plan, {q.view(), kvC.view(), kPe.view(),
                                              cache.view(), output.view(), {}});
    if (!failed)
      failed = runtime->synchronize(nullptr);
    std::vector<double> result;
    if (failed) {
      std::string text = llvm::toString(std::move(failed));
      if (error)
        *error = text;
      else
        ADD_FAILURE() << text;
    } else {
      result = output.download(*runtime);
    }
    q.host = clean[0];
    kvC.host = clean[1];
    kPe.host = clean[2];
    cache.host = clean[3];
    return result;
  }

  /// Every head of tokens [first, last].
  Rows allHeads(int64_t first, int64_t last) const {
    Rows rows;
    for (int64_t t = first; t <= last; ++t)
      for (int64_t h = 0; h < config.dims.numHeads; ++h)
        rows.insert({t, h});
    return rows;
  }

  /// Runs the step with the poison already set and checks that exactly
  /// `changed` rows differ from the baseline (each entirely non-finite
  /// when `nonFinite`), rows in `mayChange` are the baseline's or entirely
  /// non-finite, and every other row is the baseline's, bit for bit.
  void expectOnlyRowsChange(const Rows &changed, bool nonFinite,
                            const Rows &mayChange = {}) {
    std::vector<double> got = step();
    ASSERT_EQ(got.size(), baseline.size());
    const int64_t heads = config.dims.numHeads, width = config.dims.vHeadDim;
    for (int64_t t = 0; t < kTokens; ++t)
      for (int64_t h = 0; h < heads; ++h) {
        int64_t first = (t * heads + h) * width;
        bool same = true, allNonFinite = true;
        for (int64_t i = first; i < first + width; ++i) {
          same &= got[i] == baseline[i];
          allNonFinite &= !std::isfinite(got[i]);
        }
        if (mayChange.count({t, h})) {
          EXPECT_TRUE(same || allNonFinite) << "row (" << t << ", " << h << ")";
        } else if (changed.count({t, h})) {
          EXPECT_FALSE(same) << "row (" << t << ", " << h << ") did not change";
          if (nonFinite) {
            EXPECT_TRUE(allNonFinite) << "row (" << t << ", " << h << ")";
          }
        } else {
          EXPECT_TRUE(same) << "row (" << t << ", " << h
                            << ") changed but reads nothing poisoned";
        }
      }
  }

  std::unique_ptr<Runtime> runtime;
  MlaLayerConfig config;
  Tensor kvBProj, wUkT, wUv, q, kvC, kPe, cache, output;
  std::unique_ptr<MlaLayer> layer;
  MlaStepPlan plan;
  std::vector<HostTensor> clean;
  std::vector<double> baseline;
};

//===----------------------------------------------------------------------===//
// Non-finite inputs
//===----------------------------------------------------------------------===//

TEST_F(Faults, NaNInQChangesOnlyItsOwnRow) {
  forEachBackend([&] {
    const MlaDims &d = config.dims;
    // A decode token's q_nope, and a prefill token's q_pe.
    set(q, (0 * d.numHeads + 1) * d.qkHeadDim() + 5, kNaN);
    expectOnlyRowsChange({{0, 1}}, /*nonFinite=*/true);
    int64_t t = kFirstPrefillToken + 5;
    set(q, (t * d.numHeads + 2) * d.qkHeadDim() + d.qkNopeHeadDim + 3, kNaN);
    expectOnlyRowsChange({{t, 2}}, /*nonFinite=*/true);
  });
}

TEST_F(Faults, InfInQChangesOnlyItsOwnRow) {
  forEachBackend([&] {
    const MlaDims &d = config.dims;
    int64_t t = kFirstPrefillToken + 7;
    set(q, (t * d.numHeads + 3) * d.qkHeadDim() + 10, kInf);
    expectOnlyRowsChange({{t, 3}}, /*nonFinite=*/false);
    set(q, (1 * d.numHeads + 0) * d.qkHeadDim() + d.qkNopeHeadDim, -kInf);
    expectOnlyRowsChange({{1, 0}}, /*nonFinite=*/false);
  });
}

TEST_F(Faults, NaNInTheCacheChangesTheRowsThatAttendToIt) {
  forEachBackend([&] {
    const MlaDims &d = config.dims;
    // A cached latent value of the second decode's context.
    set(cache, cacheIndex(1, 20, 3), kNaN);
    expectOnlyRowsChange(allHeads(1, 1), /*nonFinite=*/true);
    // A cached rope key of the prefill's context: every new token sees it.
    set(cache, cacheIndex(2, 10, d.kvLoraRank + 7), kNaN);
    expectOnlyRowsChange(allHeads(kFirstPrefillToken, kSecondPrefillToken - 1),
                         true);
  });
}

TEST_F(Faults, NaNInANewTokenChangesTheRowsFromItsPositionOn) {
  forEachBackend([&] {
    // Prefill token 6 (position 36): causal attention lets tokens 6..11
    // see it. The tensor-core prefills multiply a whole key tile's values
    // by the probabilities, 0 for the keys a row must not see, and 0 x NaN
    // is NaN: there, tokens 0..5 of the same request may come out NaN too
    // (as in FlashAttention's kernels); never another request's.
    set(kvC, (kFirstPrefillToken + 6) * config.dims.kvLoraRank + 0, kNaN);
    bool tiled = config.backend == "TC_SM80" || config.backend == "TC_SM90A";
    expectOnlyRowsChange(
        allHeads(kFirstPrefillToken + 6, kSecondPrefillToken - 1), true,
        tiled ? allHeads(kFirstPrefillToken, kFirstPrefillToken + 5) : Rows{});
    // The second prefill's first new token: all of its tokens see it; the
    // first prefill's tiles, which end where its keys end, must not.
    set(kvC, kSecondPrefillToken * config.dims.kvLoraRank + 9, kNaN);
    expectOnlyRowsChange(allHeads(kSecondPrefillToken, kTokens - 1), true);
    // The first decode's new token, attended to by that decode alone.
    set(kPe, 0 * config.dims.ropeDim + 4, kNaN);
    expectOnlyRowsChange(allHeads(0, 0), true);
  });
}

TEST_F(Faults, PoisonInSlotsNoOneReadsChangesNothing) {
  forEachBackend([&] {
    const MlaDims &d = config.dims;
    auto poisonSlot = [&](int64_t page, int64_t row) {
      for (int64_t c = 0; c < d.cacheEntry(); ++c)
        set(cache, (page * kPage + row) * d.cacheEntry() + c, c % 2 ? kNaN : kInf);
    };
    // The tails of each request's last page (past seq_len) ...
    for (size_t b = 0; b < kSeqLens.size(); ++b)
      for (int64_t p = kSeqLens[b]; p % kPage; ++p)
        poisonSlot(kPages[b][p / kPage], p % kPage);
    // ... the page slots of the block table's padding columns point at
    // page 0, read only within request 0's length; and pages no one names.
    for (int64_t page = 12; page < kCachePages; ++page)
      for (int64_t row = 0; row < kPage; ++row)
        poisonSlot(page, row);
    expectOnlyRowsChange({}, /*nonFinite=*/false);
  });
}

//===----------------------------------------------------------------------===//
// Failing driver calls (GPU)
//===----------------------------------------------------------------------===//

/// Replaces driver entry points so that the `failAt`-th call of any of them
/// (counting from 1; 0 only counts) returns `status`. Restores them when
/// destroyed. The table is shared with the background module loads of
/// tiered driver compiles, so those finish first.
class FailingDriverCalls {
public:
  FailingDriverCalls(cuda::CUresult status, int64_t failAt) {
    waitForKernelUpgrades();
    auto driver = cuda::Driver::get();
    EXPECT_TRUE(bool(driver)) << llvm::toString(driver.takeError());
    self = &*driver;
    saved = self->fn;
    injected = status;
    target = failAt;
    calls = 0;
  }
  ~FailingDriverCalls() { self->fn = saved; }

  /// Kernel launches fail.
  void launches() {
    real.cuLaunchKernel = saved.cuLaunchKernel;
    self->fn.cuLaunchKernel = [](cuda::CUfunction f, unsigned gx, unsigned gy,
                                 unsigned gz, unsigned bx, unsigned by,
                                 unsigned bz, unsigned shared,
                                 cuda::CUstream stream, void **params,
                                 void **extra) {
      if (++calls == target)
        return injected;
      return real.cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, stream,
                                 params, extra);
    };
  }
  /// Device allocations fail, synchronous, asynchronous and from pools.
  void allocations() {
    real.cuMemAlloc = saved.cuMemAlloc;
    real.cuMemAllocAsync = saved.cuMemAllocAsync;
    real.cuMemAllocFromPoolAsync = saved.cuMemAllocFromPoolAsync;
    self->fn.cuMemAlloc = [](cuda::CUdeviceptr *p, size_t bytes) {
      return ++calls == target ? injected : real.cuMemAlloc(p, bytes);
    };
    self->fn.cuMemAllocAsync = [](cuda::CUdeviceptr *p, size_t bytes,
                                  cuda::CUstream s) {
      return ++calls == target ? injected : real.cuMemAllocAsync(p, bytes, s);
    };
    self->fn.cuMemAllocFromPoolAsync = [](cuda::CUdeviceptr *p, size_t bytes,
                                          cuda::CUmemoryPool pool,
                                          cuda::CUstream s) {
      return ++calls == target ? injected
                               : real.cuMemAllocFromPoolAsync(p, bytes, pool, s);
    };
  }
  static int64_t count() { return calls; }

private:
  cuda::Driver *self = nullptr;
  cuda::Driver::Symbols saved;
  // Plain function pointers cannot capture: the wrappers read these.
  static inline cuda::Driver::Symbols real;
  static inline cuda::CUresult injected = 0;
  static inline int64_t target = 0, calls = 0;
};

constexpr cuda::CUresult kLaunchOutOfResources = 701;

TEST_F(Faults, AFailedLaunchAnywhereInAStepIsReportedAndTheLayerRunsAgain) {
  if (!testingOnGpu())
    GTEST_SKIP() << "kernel launches need a GPU";
  int64_t launches;
  {
    FailingDriverCalls counting(kLaunchOutOfResources, 0);
    counting.launches();
    EXPECT_EQ(step(), baseline);
    launches = FailingDriverCalls::count();
  }
  ASSERT_GE(launches, 4) << "the step launched too few kernels";
  for (int64_t k = 1; k <= launches; ++k) {
    SCOPED_TRACE("launch " + std::to_string(k) + " of " + std::to_string(launches));
    std::string error;
    {
      FailingDriverCalls failing(kLaunchOutOfResources, k);
      failing.launches();
      EXPECT_TRUE(step(&error).empty());
    }
    EXPECT_NE(error.find("cuLaunchKernel"), std::string::npos) << error;
    EXPECT_NE(error.find("CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"), std::string::npos)
        << error;
    EXPECT_EQ(step(), baseline);
  }
  // The kernel cache serves a new layer the same kernels.
  std::unique_ptr<MlaLayer> another = makeLayer();
  ASSERT_TRUE(another);
  EXPECT_EQ(step(nullptr, another.get()), baseline);
}

TEST_F(Faults, OutOfMemoryAnywhereInAStepIsReportedAndTheLayerRunsAgain) {
  if (!testingOnGpu())
    GTEST_SKIP() << "device allocations need a GPU";
  // A fresh layer allocates its metadata and scratch in its first step.
  int64_t allocations;
  {
    std::unique_ptr<MlaLayer> fresh = makeLayer();
    ASSERT_TRUE(fresh);
    FailingDriverCalls counting(cuda::CUDA_ERROR_OUT_OF_MEMORY, 0);
    counting.allocations();
    EXPECT_EQ(step(nullptr, fresh.get()), baseline);
    allocations = FailingDriverCalls::count();
  }
  ASSERT_GE(allocations, 1) << "the first step allocated nothing";
  for (int64_t k = 1; k <= allocations; ++k) {
    SCOPED_TRACE("allocation " + std::to_string(k) + " of " +
                 std::to_string(allocations));
    std::unique_ptr<MlaLayer> fresh = makeLayer();
    ASSERT_TRUE(fresh);
    std::string error;
    {
      FailingDriverCalls failing(cuda::CUDA_ERROR_OUT_OF_MEMORY, k);
      failing.allocations();
      EXPECT_TRUE(step(&error, fresh.get()).empty());
    }
    EXPECT_NE(error.find("CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos) << error;
    EXPECT_EQ(step(nullptr, fresh.get()), baseline);
  }
}

TEST_F(Faults, ADeviceFullOfOtherDataRefusesTheStepUntilMemoryIsFreed) {
  if (!testingOnGpu())
    GTEST_SKIP() << "device memory needs a GPU";
  // Everything the device will give, in ever smaller pieces.
  std::vector<DeviceAllocation> hog;
  for (size_t piece = size_t(1) << 30; piece >= (size_t(1) << 16); piece /= 4)
    for (;;) {
      auto a = runtime->allocate(piece);
      if (!a) {
        llvm::consumeError(a.takeError());
        break;
      }
      hog.push_back(std::move(*a));
    }
  ASSERT_FALSE(hog.empty());
  std::unique_ptr<MlaLayer> fresh = makeLayer();
  std::string error;
  if (fresh) {
    EXPECT_TRUE(step(&error, fresh.get()).empty());
    EXPECT_NE(error.find("CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos) << error;
  }
  hog.clear();
  if (!fresh)
    fresh = makeLayer();
  ASSERT_TRUE(fresh);
  EXPECT_EQ(step(nullptr, fresh.get()), baseline);
}

//===----------------------------------------------------------------------===//
// Kernel source
//===----------------------------------------------------------------------===//

// MLIR's lexer ends at a NUL after the text; a StringRef into a larger
// buffer has none there, and the text after it must not be read (found by
// the IR fuzzer as a heap over-read).
TEST(KernelSource, ASliceOfALargerBufferIsParsedAlone) {
  RuntimeOptions options;
  options.device = DevicePreference::Cpu;
  options.cache.diskEnabled = false;
  auto runtime = Runtime::create(options);
  ASSERT_TRUE(bool(runtime)) << llvm::toString(runtime.takeError());
  std::string source =
      "func.func @kernel(%po: memref<?x4x32xf32>, %pl: memref<4x?xf32>,\n"
      "    %so: memref<?x4x32xf32>, %sl: memref<4x?xf32>,\n"
      "    %o: memref<?x4x32xf32>, %ol: memref<4x?xf32>) {\n"
      "  mla.merge_attn_states ins(%po, %pl, %so, %sl : memref<?x4x32xf32>,\n"
      "      memref<4x?xf32>, memref<?x4x32xf32>, memref<4x?xf32>)\n"
      "      outs(%o, %ol : memref<?x4x32xf32>, memref<4x?xf32>)\n"
      "  return\n"
      "}\n"
      "func.func private @declared(i32) -> i32";
  // Read past the slice's end, the last type would be "i32x".
  std::string buffer = source + "x";
  auto kernel = (*runtime)->compileSource(
      llvm::StringRef(buffer.data(), source.size()), "kernel");
  EXPECT_TRUE(bool(kernel)) << llvm::toString(kernel.takeError());
}

} // namespace
