//===- MergeNTest.cpp - merge_attn_states_n -------------------------------===//
//
// The S-way merge against the float64 two-way reference folded over the
// states (an independent formula: S - 1 pairwise merges), on fresh random
// inputs with empty states (-inf, and +inf as some kernels write them),
// rows whose every state is empty, several query tokens a request, and
// head-range views of wider buffers (a DCP rank's share of the heads).
//
//===----------------------------------------------------------------------===//

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

struct MergeNCase {
  int64_t states, batch, queries, heads, headDim;
  DType partials, output;
  bool withLse = true;
  /// Heads of the buffers the views are taken from; the merged heads are
  /// [firstHead, firstHead + heads). 0: the views are the whole buffers.
  int64_t bufferHeads = 0, firstHead = 0;
  /// With it, the partials' view starts one element into its buffer: no
  /// 16-byte vectors (the GPU kernel's run-time check falls back).
  bool misalignedPartials = false;
};

/// State s's LSE of row (b, h, q): random, or empty in patterns that give
/// rows with one, several and all states empty.
double randomLse(int64_t s, int64_t row, std::mt19937 &gen) {
  std::uniform_real_distribution<double> dist(-6.0, 6.0);
  if (row % 9 == 4)
    return s % 2 ? kInf : -kInf; // every state empty
  if ((row + s) % 5 == 2)
    return -kInf;
  if ((row + 2 * s) % 7 == 3)
    return kInf;
  return dist(gen);
}

void checkMergeN(const MergeNCase &c) {
  const int64_t s = c.states, b = c.batch, q = c.queries, n = c.heads,
                d = c.headDim, tokens = b * q;
  const int64_t wide = c.bufferHeads ? c.bufferHeads : n;
  auto kernel = compileKernel(buildMergeAttnStatesN(
      testContext(), {s, n, d, c.partials, c.output, c.withLse}));
  ASSERT_TRUE(kernel);

  // One element more, for the misaligned view.
  HostTensor partials(c.partials, {s * b * q * wide * d + 1});
  partials.fillRandom(rng());
  const int64_t shift = c.misalignedPartials ? 1 : 0;
  HostTensor lses(DType::F32, {s, b, wide, q});
  std::vector<double> lseValues(s * b * wide * q);
  for (int64_t i = 0; i < (int64_t)lseValues.size(); ++i)
    lseValues[i] = randomLse(i / (b * wide * q), i % (b * wide * q), rng());
  lses.fromDouble(lseValues);
  HostTensor out(c.output, {b, q, wide, d}), outLse(DType::F32, {b, wide, q});
  out.poison();
  outLse.poison();
  std::vector<double> outBefore = out.toDouble(), lseBefore = outLse.toDouble();

  // Views of the merged heads.
  auto headsOf = [&](BufferView v, int64_t headDim) {
    v.shape[headDim] = n;
    v.data = static_cast<char *>(v.data) +
             c.firstHead * v.strides[headDim] * byteWidth(v.dtype);
    return v;
  };
  BufferView partialsView = BufferView::contiguous(
      static_cast<char *>(partials.view().data) +
          shift * byteWidth(c.partials),
      c.partials, {s, b, q, wide, d});
  std::vector<BufferView> args{headsOf(partialsView, 3),
                               headsOf(lses.view(), 2),
                               headsOf(out.view(), 2)};
  if (c.withLse)
    args.push_back(headsOf(outLse.view(), 1));
  runKernel(*kernel, args);

  // The reference: the states folded pairwise in float64, in the
  // reference's layouts (outputs [T, N, D], LSEs [N, T], t = b * Q + q).
  std::vector<double> pv = partials.toDouble();
  pv.erase(pv.begin(), pv.begin() + shift);
  auto stateOut = [&](int64_t st) {
    std::vector<double> o(tokens * n * d);
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t h = 0; h < n; ++h)
        for (int64_t k = 0; k < d; ++k)
          o[(t * n + h) * d + k] =
              pv[((st * tokens + t) * wide + c.firstHead + h) * d + k];
    return o;
  };
  auto stateLse = [&](int64_t st) {
    std::vector<double> l(n * tokens);
    for (int64_t bi = 0; bi < b; ++bi)
      for (int64_t h = 0; h < n; ++h)
        for (int64_t qi = 0; qi < q; ++qi)
          l[h * tokens + bi * q + qi] =
              lseValues[((st * b + bi) * wide + c.firstHead + h) * q + qi];
    return l;
  };
  std::vector<double> refOut = stateOut(0), refLse = stateLse(0);
  // Alone, an empty state (+inf read as -inf) gives 0 and -inf.
  for (int64_t h = 0; h < n; ++h)
    for (int64_t t = 0; t < tokens; ++t)
      if (std::isinf(refLse[h * tokens + t])) {
        refLse[h * tokens + t] = -kInf;
        for (int64_t k = 0; k < d; ++k)
          refOut[(t * n + h) * d + k] = 0;
      }
  for (int64_t st = 1; st < s; ++st) {
    std::vector<double> merged, mergedLse;
    ref::mergeAttnStates(refOut, refLse, stateOut(st), stateLse(st), tokens,
                         n, d, merged, mergedLse);
    refOut = std::move(merged);
    refLse = std::move(mergedLse);
  }

  std::vector<double> got = out.toDouble(), gotLse = outLse.toDouble();
  std::vector<double> gotMerged, gotMergedLse;
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < n; ++h)
      for (int64_t k = 0; k < d; ++k)
        gotMerged.push_back(got[(t * wide + c.firstHead + h) * d + k]);
  for (int64_t h = 0; h < n; ++h)
    for (int64_t t = 0; t < tokens; ++t)
      gotMergedLse.push_back(
          gotLse[((t / q) * wide + c.firstHead + h) * q + t % q]);
  double tol = std::max(tolerance(c.partials), tolerance(c.output));
  expectClose(gotMerged, refOut, tol, "merged out");
  if (c.withLse)
    expectLseClose(gotMergedLse, refLse, 1e-5, "merged lse");

  // Heads outside the view keep their poison.
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < wide; ++h) {
      if (h >= c.firstHead && h < c.firstHead + n)
        continue;
      for (int64_t k = 0; k < d; ++k) {
        int64_t i = (t * wide + h) * d + k;
        ASSERT_TRUE(std::isnan(got[i]) == std::isnan(outBefore[i]) &&
                    (std::isnan(got[i]) || got[i] == outBefore[i]))
            << "output of head " << h << " outside the merged range written";
      }
      if (!c.withLse)
        continue;
      int64_t li = ((t / q) * wide + h) * q + t % q;
      ASSERT_TRUE(std::isnan(gotLse[li]) == std::isnan(lseBefore[li]))
          << "lse of head " << h << " outside the merged range written";
    }
  if (!c.withLse) {
    for (size_t i = 0; i < gotLse.size(); ++i)
      ASSERT_TRUE(std::isnan(gotLse[i]) == std::isnan(lseBefore[i]))
          << "output_lse written without the operand";
  }
}

TEST(MergeN, TwoToEightStatesEveryDType) {
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    for (int64_t states : {2, 3, 8})
      checkMergeN({states, 5, 1, 16, 128, t, t});
}

TEST(MergeN, OneStateIsACopyOfTheNonEmptyRows) {
  checkMergeN({1, 7, 1, 4, 64, DType::F32, DType::F32});
}

TEST(MergeN, SeveralQueryTokensARequest) {
  checkMergeN({4, 3, 3, 8, 512, DType::BF16, DType::BF16});
}

TEST(MergeN, F32PartialsIntoBf16Output) {
  checkMergeN({2, 6, 2, 16, 128, DType::F32, DType::BF16});
}

TEST(MergeN, WithoutOutputLse) {
  MergeNCase c{3, 4, 1, 8, 128, DType::BF16, DType::BF16};
  c.withLse = false;
  checkMergeN(c);
}

TEST(MergeN, UnalignedHeadDim) {
  checkMergeN({3, 4, 2, 3, 21, DType::F32, DType::F32});
}

TEST(MergeN, MisalignedPartialsTakeTheElementPath) {
  MergeNCase c{3, 4, 1, 16, 128, DType::BF16, DType::BF16};
  c.misalignedPartials = true;
  checkMergeN(c);
  c.bufferHeads = 32;
  c.firstHead = 16;
  checkMergeN(c);
}

TEST(MergeN, ARanksHeadsOfWiderBuffers) {
  // Rank 1 of 2 (16 of 32 heads) and rank 2 of 4 (8 of 32).
  MergeNCase c{2, 4, 1, 16, 128, DType::BF16, DType::BF16};
  c.bufferHeads = 32;
  c.firstHead = 16;
  checkMergeN(c);
  c = {4, 3, 2, 8, 128, DType::BF16, DType::BF16};
  c.bufferHeads = 32;
  c.firstHead = 16;
  checkMergeN(c);
}

} // namespace
