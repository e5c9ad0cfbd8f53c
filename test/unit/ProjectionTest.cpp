//===- ProjectionTest.cpp - kv_up_proj, q_absorb, v_up_proj ---------------===//

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

/// Weights scaled so products stay O(1) whatever the depth.
void fillWeight(HostTensor &w, int64_t depth) {
  double bound = 1.0 / std::sqrt(static_cast<double>(depth));
  w.fillRandom(rng(), -bound, bound);
}

void checkKvUpProj(DType dtype, const MlaDims &d, int64_t tokens) {
  auto kernel = compileKernel(buildKvUpProj(testContext(), {d, dtype}));
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

void checkQAbsorb(DType dtype, const MlaDims &d, int64_t tokens) {
  auto kernel = compileKernel(buildQAbsorb(testContext(), {d, dtype}));
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
void checkDecodeQuery(DType dtype, const MlaDims &d, int64_t tokens) {
  auto kernel = compileKernel(buildDecodeQuery(testContext(), {d, dtype}));
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

void checkVUpProj(DType dtype, const MlaDims &d, int64_t tokens) {
  auto kernel = compileKernel(buildVUpProj(testContext(), {d, dtype}));
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
  MlaDims d;
  d.numHeads = 3;
  d.kvLoraRank = 40;
  d.qkNopeHeadDim = 24;
  d.ropeDim = 8;
  d.vHeadDim = 20;
  checkKvUpProj(DType::F32, d, 1);
  checkQAbsorb(DType::BF16, d, 1);
  checkVUpProj(DType::F16, d, 1);
}

TEST(Projection, DecodeQueryAppendsQPe) {
  checkDecodeQuery(DType::BF16, deepSeekDims(16), 5);
  checkDecodeQuery(DType::F32, deepSeekDims(2), 1);
  MlaDims odd;
  odd.numHeads = 3;
  odd.kvLoraRank = 40;
  odd.qkNopeHeadDim = 24;
  odd.ropeDim = 8;
  odd.vHeadDim = 20;
  checkDecodeQuery(DType::F16, odd, 4);
}

TEST(Projection, ManyHeads) {
  checkQAbsorb(DType::BF16, deepSeekDims(128), 2);
  checkVUpProj(DType::BF16, deepSeekDims(128), 2);
}

} // namespace
