//===- ProjectionTest.cpp - kv_up_proj, q_absorb, v_up_proj ---------------===//

#include "GpuTestSupport.h"
#include "MlaReference.h"
#include "TestSupport.h"
#include "mla/Builders/KernelBuilders.h"

using namespace mla;
using namespace mla::test;
using mla::HostTensor;

namespace {

MlaDims deepSeekDims(int64_t heads) {
  MlaDims d;
  d.numHeads = heads;
  return d;
}

MlaDims customDims(int64_t heads, int64_t latent, int64_t nope, int64_t rope,
                   int64_t vDim) {
  MlaDims d;
  d.numHeads = heads;
  d.kvLoraRank = latent;
  d.qkNopeHeadDim = nope;
  d.ropeDim = rope;
  d.vHeadDim = vDim;
  return d;
}

/// Weights scaled so products stay O(1) whatever the depth.
void fillWeight(HostTensor &w, int64_t depth) {
  double bound = 1.0 / std::sqrt(static_cast<double>(depth));
  w.fillRandom(rng(), -bound, bound);
}

void checkKvUpProjWith(DType dtype, const MlaDims &d, int64_t tokens,
                       std::optional<KernelStrategy> strategy) {
  auto kernel =
      compileKernel(buildKvUpProj(testContext(), {d, dtype}), strategy);
  ASSERT_TRUE(kernel);
  int64_t n = d.numHeads, nopeV = d.qkNopeHeadDim + d.vHeadDim;
  HostTensor kvc(dtype, {tokens, d.kvLoraRank}), kpe(dtype, {tokens, d.ropeDim}),
      w(dtype, {d.kvLoraRank, n, nopeV});
  kvc.fillRandom(rng());
  kpe.fillRandom(rng());
  fillWeight(w, d.kvLoraRank);
  HostTensor k(dtype, {tokens, n, d.qkHeadDim()}), v(dtype, {tokens, n, d.vHeadDim});
  k.poison();
  v.poison();
  runKernel(*kernel, {kvc.view(), kpe.view(), w.view(), k.view(), v.view()});
  std::vector<double> kRef(tokens * n * d.qkHeadDim()),
      vRef(tokens * n * d.vHeadDim);
  ref::kvUpProj(kvc.toDouble(), kpe.toDouble(), w.toDouble(), tokens, n,
                d.kvLoraRank, d.qkNopeHeadDim, d.ropeDim, d.vHeadDim, kRef,
                vRef);
  expectClose(k.toDouble(), kRef, tolerance(dtype), "k");
  expectClose(v.toDouble(), vRef, tolerance(dtype), "v");
}

void checkQAbsorbWith(DType dtype, const MlaDims &d, int64_t tokens,
                      std::optional<KernelStrategy> strategy) {
  auto kernel =
      compileKernel(buildQAbsorb(testContext(), {d, dtype}), strategy);
  ASSERT_TRUE(kernel);
  int64_t n = d.numHeads;
  HostTensor q(dtype, {tokens, n, d.qkNopeHeadDim}),
      w(dtype, {n, d.qkNopeHeadDim, d.kvLoraRank}),
      ql(dtype, {tokens, n, d.kvLoraRank});
  q.fillRandom(rng());
  fillWeight(w, d.qkNopeHeadDim);
  ql.poison();
  runKernel(*kernel, {q.view(), w.view(), ql.view()});
  std::vector<double> want(tokens * n * d.kvLoraRank);
  ref::qAbsorb(q.toDouble(), w.toDouble(), tokens, n, d.qkNopeHeadDim,
               d.kvLoraRank, want);
  expectClose(ql.toDouble(), want, tolerance(dtype), "ql_nope");
}

/// q_absorb with rope_dim: the decode query [q_nope x W_UK_T | q_pe] from
/// the whole query.
void checkDecodeQueryWith(DType dtype, const MlaDims &d, int64_t tokens,
                          std::optional<KernelStrategy> strategy) {
  auto kernel =
      compileKernel(buildDecodeQuery(testContext(), {d, dtype}), strategy);
  ASSERT_TRUE(kernel);
  int64_t n = d.numHeads, qk = d.qkHeadDim(), entry = d.cacheEntry();
  HostTensor q(dtype, {tokens, n, qk}),
      w(dtype, {n, d.qkNopeHeadDim, d.kvLoraRank}), dq(dtype, {tokens, n, entry});
  q.fillRandom(rng());
  fillWeight(w, d.qkNopeHeadDim);
  dq.poison();
  runKernel(*kernel, {q.view(), w.view(), dq.view()});
  std::vector<double> qv = q.toDouble(), qNope, qPe, ql;
  for (int64_t r = 0; r < tokens * n; ++r) {
    qNope.insert(qNope.end(), qv.begin() + r * qk,
                 qv.begin() + r * qk + d.qkNopeHeadDim);
    qPe.insert(qPe.end(), qv.begin() + r * qk + d.qkNopeHeadDim,
               qv.begin() + (r + 1) * qk);
  }
  ref::qAbsorb(qNope, w.toDouble(), tokens, n, d.qkNopeHeadDim, d.kvLoraRank,
               ql);
  std::vector<double> got = dq.toDouble(), gotLatent, gotPe;
  for (int64_t r = 0; r < tokens * n; ++r) {
    gotLatent.insert(gotLatent.end(), got.begin() + r * entry,
                     got.begin() + r * entry + d.kvLoraRank);
    gotPe.insert(gotPe.end(), got.begin() + r * entry + d.kvLoraRank,
                 got.begin() + (r + 1) * entry);
  }
  expectClose(gotLatent, ql, tolerance(dtype), "decode query, latent part");
  // q_pe is copied: exactly the input's values.
  EXPECT_EQ(gotPe, qPe) << "decode query, rope part";
}

void checkVUpProjWith(DType dtype, const MlaDims &d, int64_t tokens,
                      std::optional<KernelStrategy> strategy) {
  auto kernel =
      compileKernel(buildVUpProj(testContext(), {d, dtype}), strategy);
  ASSERT_TRUE(kernel);
  int64_t n = d.numHeads;
  HostTensor o(dtype, {tokens, n, d.kvLoraRank}),
      w(dtype, {n, d.kvLoraRank, d.vHeadDim}), out(dtype, {tokens, n, d.vHeadDim});
  o.fillRandom(rng());
  fillWeight(w, d.kvLoraRank);
  out.poison();
  runKernel(*kernel, {o.view(), w.view(), out.view()});
  std::vector<double> want(tokens * n * d.vHeadDim);
  ref::vUpProj(o.toDouble(), w.toDouble(), tokens, n, d.kvLoraRank, d.vHeadDim,
               want);
  expectClose(out.toDouble(), want, tolerance(dtype), "v_up_proj out");
}

void checkKvUpProj(DType dtype, const MlaDims &d, int64_t tokens) {
  forEachStrategy([&](auto s) { checkKvUpProjWith(dtype, d, tokens, s); });
}
void checkQAbsorb(DType dtype, const MlaDims &d, int64_t tokens) {
  forEachStrategy([&](auto s) { checkQAbsorbWith(dtype, d, tokens, s); });
}
void checkDecodeQuery(DType dtype, const MlaDims &d, int64_t tokens) {
  forEachStrategy([&](auto s) { checkDecodeQueryWith(dtype, d, tokens, s); });
}
void checkVUpProj(DType dtype, const MlaDims &d, int64_t tokens) {
  forEachStrategy([&](auto s) { checkVUpProjWith(dtype, d, tokens, s); });
}

class ProjectionByDType : public ::testing::TestWithParam<DType> {};

TEST_P(ProjectionByDType, KvUpProj) { checkKvUpProj(GetParam(), deepSeekDims(4), 11); }
TEST_P(ProjectionByDType, QAbsorb) { checkQAbsorb(GetParam(), deepSeekDims(4), 7); }
TEST_P(ProjectionByDType, VUpProj) { checkVUpProj(GetParam(), deepSeekDims(4), 7); }

INSTANTIATE_TEST_SUITE_P(DTypes, ProjectionByDType,
                         ::testing::Values(DType::F32, DType::F16,
                                           DType::BF16),
                         [](const auto &info) {
                           return std::string(name(info.param));
                         });

TEST(Projection, OddDimsAndSingleToken) {
  MlaDims d = customDims(3, 40, 24, 8, 20);
  checkKvUpProj(DType::F32, d, 1);
  checkQAbsorb(DType::BF16, d, 1);
  checkVUpProj(DType::F16, d, 1);
}

TEST(Projection, DecodeQueryAppendsQPe) {
  checkDecodeQuery(DType::BF16, deepSeekDims(16), 5);
  checkDecodeQuery(DType::F32, deepSeekDims(2), 1);
  checkDecodeQuery(DType::F16, customDims(3, 40, 24, 8, 20), 4);
}

TEST(Projection, ManyHeads) {
  checkQAbsorb(DType::BF16, deepSeekDims(128), 2);
  checkVUpProj(DType::BF16, deepSeekDims(128), 2);
}

TEST(Projection, SeveralTokenTiles) {
  // 64-token tiles (128 for wgmma's kv_up_proj): a full one and a partial
  // one (70), three with a single-token tail (129), 300 tokens (three
  // wgmma tiles, the last partial); rows past the tokens are never
  // written.
  checkKvUpProj(DType::BF16, deepSeekDims(2), 70);
  checkKvUpProj(DType::F16, deepSeekDims(3), 300);
  checkQAbsorb(DType::F16, deepSeekDims(3), 129);
  checkVUpProj(DType::BF16, deepSeekDims(2), 129);
  checkDecodeQuery(DType::BF16, deepSeekDims(4), 70);
}

TEST(Projection, SixtyFourColumnTiles) {
  // The key's 64 columns and the value's 64 are not whole 128-column
  // tiles: the tensor-core kernel takes 64-column tiles, each output's
  // own; a depth of 96 is three 32-deep slices, fewer than the ring's
  // stages.
  MlaDims d = customDims(3, 96, 64, 32, 64);
  checkKvUpProj(DType::BF16, d, 67);
  checkQAbsorb(DType::BF16, d, 5);
  checkVUpProj(DType::F16, d, 65);
}

/// kv_up_proj on device buffers (GPU only) whose inputs start
/// `inputOffset` bytes and outputs `outputOffset` bytes past aligned
/// allocations, by `strategy`, against the reference.
void checkKvUpProjOnGpu(KernelStrategy strategy, size_t inputOffset,
                        size_t outputOffset) {
  const MlaDims d = deepSeekDims(2);
  const int64_t tokens = 75, n = d.numHeads,
                nopeV = d.qkNopeHeadDim + d.vHeadDim;
  HostTensor kvc(DType::BF16, {tokens, d.kvLoraRank}),
      kpe(DType::BF16, {tokens, d.ropeDim}),
      w(DType::BF16, {d.kvLoraRank, n, nopeV});
  kvc.fillRandom(rng());
  kpe.fillRandom(rng());
  fillWeight(w, d.kvLoraRank);
  HostTensor k(DType::BF16, {tokens, n, d.qkHeadDim()}),
      v(DType::BF16, {tokens, n, d.vHeadDim});
  k.poison();
  v.poison();
  auto kernel =
      compileOnGpu(buildKvUpProj(testContext(), {d, DType::BF16}), strategy);
  ASSERT_TRUE(kernel);
  DeviceTensor dkvc = DeviceTensor::of(kvc, inputOffset),
               dkpe = DeviceTensor::of(kpe, inputOffset),
               dw = DeviceTensor::of(w, inputOffset),
               dk = DeviceTensor::of(k, outputOffset),
               dv = DeviceTensor::of(v, outputOffset);
  llvm::Error error =
      kernel->run({dkvc.view, dkpe.view, dw.view, dk.view, dv.view});
  ASSERT_FALSE(bool(error)) << llvm::toString(std::move(error));
  dk.copyTo(k);
  dv.copyTo(v);
  std::vector<double> kRef(tokens * n * d.qkHeadDim()),
      vRef(tokens * n * d.vHeadDim);
  ref::kvUpProj(kvc.toDouble(), kpe.toDouble(), w.toDouble(), tokens, n,
                d.kvLoraRank, d.qkNopeHeadDim, d.ropeDim, d.vHeadDim, kRef,
                vRef);
  expectClose(k.toDouble(), kRef, tolerance(DType::BF16), "k");
  expectClose(v.toDouble(), vRef, tolerance(DType::BF16), "v");
}

TEST(ProjectionMma, MisalignedBuffers) {
  // Inputs 2 bytes off: the slices are copied element by element; outputs
  // 2 bytes off: the staged rows are stored element by element.
  if (!testingOnGpu() || !testGpu())
    GTEST_SKIP() << "device buffers: GPU only";
  // Both tensor-core kernels: mma.sync, and on sm_90a the wgmma one
  // (kv_up_proj is a product of prefill size).
  for (KernelStrategy strategy : gpuStrategies(/*withGeneric=*/false))
    for (auto [in, out] : {std::pair<size_t, size_t>{2, 0}, {0, 2}, {2, 2}}) {
      SCOPED_TRACE("strategy " + name(strategy) + ", input offset " +
                   std::to_string(in) + ", output offset " +
                   std::to_string(out));
      checkKvUpProjOnGpu(strategy, in, out);
    }
}

} // namespace
