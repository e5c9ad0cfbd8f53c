//===- MergeTest.cpp - merge_attn_states ----------------------------------===//

#include "MlaReference.h"
#include "TestSupport.h"
#include "mla/Builders/KernelBuilders.h"

#include <cmath>
#include <limits>

using namespace mla;
using namespace mla::test;
using mla::HostTensor;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// Random LSEs with some empty states (-inf, and +inf as some kernels
/// write them), including rows where both sides are empty.
std::vector<double> randomLse(int64_t count, bool prefix) {
  std::uniform_real_distribution<double> dist(-5.0, 5.0);
  std::vector<double> lse(count);
  for (int64_t i = 0; i < count; ++i) {
    lse[i] = dist(rng());
    if (i % 7 == 3)
      lse[i] = -kInf;
    if (i % 11 == 5)
      lse[i] = prefix ? kInf : -kInf;
    if (i % 13 == 0) // both empty
      lse[i] = prefix ? -kInf : kInf;
  }
  return lse;
}

void checkMerge(DType dtype, int64_t heads, int64_t headDim, int64_t tokens,
                bool withLse) {
  auto kernel = compileKernel(buildMergeAttnStates(
      testContext(), {heads, headDim, dtype, withLse}));
  ASSERT_TRUE(kernel);
  HostTensor po(dtype, {tokens, heads, headDim}),
      so(dtype, {tokens, heads, headDim});
  po.fillRandom(rng());
  so.fillRandom(rng());
  HostTensor pl(DType::F32, {heads, tokens}), sl(DType::F32, {heads, tokens});
  pl.fromDouble(randomLse(heads * tokens, true));
  sl.fromDouble(randomLse(heads * tokens, false));
  // An empty state's output is zero by convention.
  std::vector<double> pov = po.toDouble(), sov = so.toDouble();
  std::vector<double> plv = pl.toDouble(), slv = sl.toDouble();
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t d = 0; d < headDim; ++d) {
        int64_t i = (t * heads + h) * headDim + d;
        if (std::isinf(plv[h * tokens + t]))
          pov[i] = 0;
        if (std::isinf(slv[h * tokens + t]))
          sov[i] = 0;
      }
  po.fromDouble(pov);
  so.fromDouble(sov);

  HostTensor out(dtype, {tokens, heads, headDim}),
      outLse(DType::F32, {heads, tokens});
  out.poison();
  outLse.poison();
  std::vector<BufferView> args{po.view(), pl.view(), so.view(), sl.view(),
                               out.view()};
  if (withLse)
    args.push_back(outLse.view());
  runKernel(*kernel, args);

  std::vector<double> outRef(tokens * heads * headDim), lseRef(heads * tokens);
  ref::mergeAttnStates(pov, plv, sov, slv, tokens, heads, headDim, outRef,
                       lseRef);
  expectClose(out.toDouble(), outRef, tolerance(dtype), "merged out");
  if (withLse)
    expectLseClose(outLse.toDouble(), lseRef, 1e-5, "merged lse");
}

TEST(Merge, AllDTypesWithLse) {
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    checkMerge(t, 16, 128, 40, true);
}

TEST(Merge, WithoutOutputLse) { checkMerge(DType::BF16, 4, 512, 9, false); }

TEST(Merge, UnalignedHeadDim) { checkMerge(DType::F32, 3, 21, 14, true); }

TEST(Merge, TwoEmptyStatesGiveZeroNotNaN) {
  auto kernel = compileKernel(
      buildMergeAttnStates(testContext(), {1, 16, DType::F32, true}));
  ASSERT_TRUE(kernel);
  HostTensor po(DType::F32, {2, 1, 16}), so(DType::F32, {2, 1, 16});
  po.fromDouble(std::vector<double>(32, 0.0));
  so.fromDouble(std::vector<double>(32, 0.0));
  HostTensor pl(DType::F32, {1, 2}), sl(DType::F32, {1, 2});
  pl.fromDouble({-kInf, kInf});
  sl.fromDouble({-kInf, -kInf});
  HostTensor out(DType::F32, {2, 1, 16}), lse(DType::F32, {1, 2});
  out.poison();
  lse.poison();
  runKernel(*kernel, {po.view(), pl.view(), so.view(), sl.view(), out.view(),
                      lse.view()});
  for (double v : out.toDouble())
    EXPECT_EQ(v, 0.0);
  for (double v : lse.toDouble())
    EXPECT_EQ(v, -kInf);
}

} // namespace
