//===- ReferenceSelfTest.cpp - Checks of the float64 MLA reference --------===//
//
// The reference is what every optimized kernel is judged against, so it is
// itself checked here on cases small enough to verify by hand. Scores are
// mostly chosen as 0 or log(n) so that softmax weights are small integers and
// the expected outputs are exact. Two randomized tests cross-check
// independent code paths: the direct prefill-with-context against
// gather + up-projection + prefill, and absorbed latent decode against the
// MHA form it is algebraically equal to.
//
//===----------------------------------------------------------------------===//

#include "MlaReference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace mla::ref;

namespace {

const double kNegInf = -std::numeric_limits<double>::infinity();
const double kPosInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kTol = 1e-12;

void expectAllNear(const std::vector<double> &got,
                   const std::vector<double> &want, double tol = kTol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isinf(want[i]))
      EXPECT_EQ(got[i], want[i]) << "at index " << i;
    else
      EXPECT_NEAR(got[i], want[i], tol) << "at index " << i;
  }
}

std::vector<double> randomVector(std::mt19937 &rng, size_t size) {
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<double> values(size);
  for (double &value : values)
    value = dist(rng);
  return values;
}

} // namespace

//===----------------------------------------------------------------------===//
// prefillAttention
//===----------------------------------------------------------------------===//

TEST(ReferencePrefill, SingleKeyReturnsItsValue) {
  // One key: softmax weight 1, lse = scale * q.k = 0.5 * (3 - 2).
  std::vector<double> q = {1, 2}, k = {3, -1}, v = {5, 7, 9};
  std::vector<double> out(3, 0.0), lse(1, 0.0);
  prefillAttention(q, k, v, {0, 1}, {0, 1}, /*numHeads=*/1, /*qkDim=*/2,
                   /*vDim=*/3, /*scale=*/0.5, /*causal=*/false, out, lse);
  expectAllNear(out, {5, 7, 9});
  expectAllNear(lse, {0.5});
}

TEST(ReferencePrefill, EqualScoresAverageValues) {
  // Both dot products are 2, so both scores are 1.5 * 2 = 3.
  std::vector<double> q = {1, 0}, k = {2, 5, 2, -3}, v = {1, 4, 3, 8};
  std::vector<double> out(2, 0.0), lse(1, 0.0);
  prefillAttention(q, k, v, {0, 1}, {0, 2}, 1, 2, 2, 1.5, false, out, lse);
  expectAllNear(out, {2, 6});
  expectAllNear(lse, {3 + std::log(2.0)});
}

TEST(ReferencePrefill, DistinctScoresWeightBySoftmax) {
  // Scores 0 and log 3 give weights 1/4 and 3/4.
  std::vector<double> q = {1}, k = {0, std::log(3.0)}, v = {4, 8};
  std::vector<double> out(1, 0.0), lse(1, 0.0);
  prefillAttention(q, k, v, {0, 1}, {0, 2}, 1, 1, 1, 1.0, false, out, lse);
  expectAllNear(out, {0.25 * 4 + 0.75 * 8});
  expectAllNear(lse, {std::log(4.0)});
}

TEST(ReferencePrefill, LargeScoresDoNotOverflow) {
  // exp(1000) overflows; the max-subtracted form must still give the average.
  std::vector<double> q = {1}, k = {1000, 1000}, v = {2, 4};
  std::vector<double> out(1, 0.0), lse(1, 0.0);
  prefillAttention(q, k, v, {0, 1}, {0, 2}, 1, 1, 1, 1.0, false, out, lse);
  expectAllNear(out, {3});
  expectAllNear(lse, {1000 + std::log(2.0)}, 1e-9);
}

TEST(ReferencePrefill, CausalIsBottomRightAligned) {
  // Sq = 2, Skv = 3, all scores 0: query 0 sees keys 0..1, query 1 sees 0..2.
  std::vector<double> q = {0, 0}, k = {1, 2, 3}, v = {3, 6, 12};
  std::vector<double> out(2, 0.0), lse(2, 0.0);
  prefillAttention(q, k, v, {0, 2}, {0, 3}, 1, 1, 1, 1.0, /*causal=*/true, out,
                   lse);
  expectAllNear(out, {4.5, 7});
  expectAllNear(lse, {std::log(2.0), std::log(3.0)});

  prefillAttention(q, k, v, {0, 2}, {0, 3}, 1, 1, 1, 1.0, /*causal=*/false, out,
                   lse);
  expectAllNear(out, {7, 7});
  expectAllNear(lse, {std::log(3.0), std::log(3.0)});
}

TEST(ReferencePrefill, CausalWithMoreQueriesThanKeysLeavesEarlyRowsEmpty) {
  // Sq = 3, Skv = 1: query i sees keys 0 .. i - 2, so only query 2 sees one.
  std::vector<double> q = {1, 1, 1}, k = {2}, v = {5};
  std::vector<double> out(3, -1.0), lse(3, -1.0);
  prefillAttention(q, k, v, {0, 3}, {0, 1}, 1, 1, 1, 1.0, true, out, lse);
  expectAllNear(out, {0, 0, 5});
  expectAllNear(lse, {kNegInf, kNegInf, 2});
}

TEST(ReferencePrefill, EmptySequencesHeadsAndUntouchedRows) {
  // Two heads, four query rows. Sequence 0: row 0, no keys. Sequence 1: rows
  // 1..2 over key rows 0..1. Row 3 belongs to no sequence.
  const int64_t numHeads = 2, numRows = 4;
  // q [4, 2, 1]: head 0 has q = 0 (equal weights), head 1 has q = 1.
  std::vector<double> q = {0, 1, 0, 1, 0, 1, 0, 1};
  // k [2, 2, 1]: head 1 scores are 0 and log 3 (weights 1/4, 3/4).
  std::vector<double> k = {0, 0, 0, std::log(3.0)};
  // v [2, 2, 1]
  std::vector<double> v = {2, 10, 4, 30};
  const double sentinel = 99;
  std::vector<double> out(numRows * numHeads, sentinel);
  std::vector<double> lse(numHeads * numRows, sentinel);
  prefillAttention(q, k, v, {0, 1, 3}, {0, 0, 2}, numHeads, 1, 1, 1.0, false,
                   out, lse);
  // out [T, N]
  expectAllNear(out, {0, 0, 3, 25, 3, 25, sentinel, sentinel});
  // lse [N, T]
  expectAllNear(lse, {kNegInf, std::log(2.0), std::log(2.0), sentinel, //
                      kNegInf, std::log(4.0), std::log(4.0), sentinel});
}

TEST(ReferencePrefill, RejectsMalformedArguments) {
  std::vector<double> q = {1}, k = {1}, v = {1}, out(1), lse(1);
  // Key offsets run past the key rows.
  EXPECT_THROW(
      prefillAttention(q, k, v, {0, 1}, {0, 2}, 1, 1, 1, 1.0, false, out, lse),
      std::invalid_argument);
  // Output not pre-sized.
  std::vector<double> smallOut;
  EXPECT_THROW(prefillAttention(q, k, v, {0, 1}, {0, 1}, 1, 1, 1, 1.0, false,
                                smallOut, lse),
               std::invalid_argument);
}

//===----------------------------------------------------------------------===//
// decodeAttention
//===----------------------------------------------------------------------===//

TEST(ReferenceDecode, FollowsPageTableAndUsesRopeInKeysOnly) {
  // L = 2, R = 1, blockSize 2, pages 0..2. The request's tokens 0,1 are in
  // page 2 and token 2 is row 0 of page 0. Other rows hold junk that must not
  // be read.
  const int64_t L = 2, R = 1, blockSize = 2, numBlocks = 3, entry = L + R;
  const double junk = 1000;
  std::vector<double> cache(numBlocks * blockSize * entry, junk);
  auto setRow = [&](int64_t page, int64_t row, std::vector<double> values) {
    std::copy(values.begin(), values.end(),
              cache.begin() + (page * blockSize + row) * entry);
  };
  setRow(2, 0, {1, 2, 0});
  setRow(2, 1, {3, 4, 0});
  setRow(0, 0, {8, 12, std::log(2.0)});

  // Two heads: head 0 has q = 0 (equal weights over 3 tokens); head 1 looks
  // only at the rope entry, giving weights 1, 1, 2.
  std::vector<double> q = {0, 0, 0, /*head 1*/ 0, 0, 1};
  std::vector<double> out, lse;
  decodeAttention(q, cache, /*blockTable=*/{2, 0}, /*seqLens=*/{3}, numBlocks,
                  blockSize, /*maxBlocks=*/2, /*batch=*/1, /*queryLen=*/1,
                  /*numHeads=*/2, L, R, 1.0, false, out, lse);
  // out [B, Sq, N, L]; values are the first L entries only.
  expectAllNear(out, {4, 6, (1 + 3 + 2 * 8) / 4.0, (2 + 4 + 2 * 12) / 4.0});
  // lse [B, N, Sq]
  expectAllNear(lse, {std::log(3.0), std::log(4.0)});
}

TEST(ReferenceDecode, CausalMultiTokenQueriesAndEmptyRequest) {
  // L = 1, R = 1, blockSize 2, Sq = 2, two heads. Request 0 has 3 tokens in
  // pages 1, 2; request 1 has none.
  const int64_t L = 1, R = 1, blockSize = 2, numBlocks = 3, entry = L + R;
  const int64_t batch = 2, queryLen = 2, numHeads = 2;
  std::vector<double> cache(numBlocks * blockSize * entry, -500);
  auto setRow = [&](int64_t page, int64_t row, double latent, double rope) {
    cache[(page * blockSize + row) * entry] = latent;
    cache[(page * blockSize + row) * entry + 1] = rope;
  };
  setRow(1, 0, 2, 0);
  setRow(1, 1, 4, std::log(3.0));
  setRow(2, 0, 9, 0);

  // q [B, Sq, N, L + R]: head 0 q = 0, head 1 reads the rope entry.
  std::vector<double> q;
  for (int b = 0; b < batch; ++b)
    for (int s = 0; s < queryLen; ++s)
      q.insert(q.end(), {0, 0, /*head 1*/ 0, 1});

  std::vector<double> out, lse;
  decodeAttention(q, cache, {1, 2, 0, 0}, {3, 0}, numBlocks, blockSize, 2,
                  batch, queryLen, numHeads, L, R, 1.0, /*causal=*/true, out,
                  lse);
  // Query 0 sees tokens 0..1, query 1 sees 0..2. Head 1 weights: 1, 3, (1).
  expectAllNear(out, {/*b0 s0*/ 3, (2 + 3 * 4) / 4.0,
                      /*b0 s1*/ 5, (2 + 3 * 4 + 9) / 5.0,
                      /*b1*/ 0, 0, 0, 0});
  expectAllNear(lse, {/*b0 h0*/ std::log(2.0), std::log(3.0),
                      /*b0 h1*/ std::log(4.0), std::log(5.0),
                      /*b1*/ kNegInf, kNegInf, kNegInf, kNegInf});

  decodeAttention(q, cache, {1, 2, 0, 0}, {3, 0}, numBlocks, blockSize, 2,
                  batch, queryLen, numHeads, L, R, 1.0, /*causal=*/false, out,
                  lse);
  expectAllNear(out, {5, 23 / 5.0, 5, 23 / 5.0, 0, 0, 0, 0});
  expectAllNear(lse, {std::log(3.0), std::log(3.0), std::log(5.0),
                      std::log(5.0), kNegInf, kNegInf, kNegInf, kNegInf});
}

TEST(ReferenceDecode, RejectsInvalidPage) {
  std::vector<double> q = {0, 0}, cache(4, 0.0), out, lse;
  // Page 7 does not exist (numBlocks = 2, blockSize = 1, entry = 2).
  EXPECT_THROW(decodeAttention(q, cache, {7}, {1}, 2, 1, 1, 1, 1, 1, 1, 1, 1.0,
                               false, out, lse),
               std::invalid_argument);
}

//===----------------------------------------------------------------------===//
// mergeAttnStates
//===----------------------------------------------------------------------===//

TEST(ReferenceMerge, TwoEmptyStatesGiveZeroAndNegInfWithoutNaN) {
  std::vector<double> out, lse;
  mergeAttnStates({5, kNaN}, {kNegInf}, {7, 8}, {kNegInf}, 1, 1, 2, out, lse);
  expectAllNear(out, {0, 0});
  expectAllNear(lse, {kNegInf});

  // +inf marks an empty state too.
  mergeAttnStates({5, 6}, {kPosInf}, {7, 8}, {kPosInf}, 1, 1, 2, out, lse);
  expectAllNear(out, {0, 0});
  expectAllNear(lse, {kNegInf});
}

TEST(ReferenceMerge, PositiveInfinityIsTreatedAsEmpty) {
  std::vector<double> out, lse;
  mergeAttnStates({100, kNaN}, {kPosInf}, {2, 3}, {1.5}, 1, 1, 2, out, lse);
  expectAllNear(out, {2, 3});
  expectAllNear(lse, {1.5});

  mergeAttnStates({2, 3}, {1.5}, {100, kNaN}, {kPosInf}, 1, 1, 2, out, lse);
  expectAllNear(out, {2, 3});
  expectAllNear(lse, {1.5});
}

TEST(ReferenceMerge, MergingAStateWithItselfAddsLogTwo) {
  std::vector<double> out, lse;
  mergeAttnStates({1, -2}, {0.7}, {1, -2}, {0.7}, 1, 1, 2, out, lse);
  expectAllNear(out, {1, -2});
  expectAllNear(lse, {0.7 + std::log(2.0)});
}

TEST(ReferenceMerge, WeightsFollowLseAndLayoutIsHeadsByTokens) {
  // T = 2, N = 2, D = 1; out [T, N], lse [N, T]. Entries (t, h):
  //  (0,0) lse 0 and log 3: weights 1/4, 3/4.
  //  (0,1) same state twice.
  //  (1,0) prefix empty: the suffix wins.
  //  (1,1) both empty.
  std::vector<double> prefixOut = {4, 1, 50, 60}, suffixOut = {8, 1, 6, 70};
  std::vector<double> prefixLse = {0, kNegInf, 2, kNegInf};
  std::vector<double> suffixLse = {std::log(3.0), -1, 2, kNegInf};
  std::vector<double> out, lse;
  mergeAttnStates(prefixOut, prefixLse, suffixOut, suffixLse, 2, 2, 1, out,
                  lse);
  expectAllNear(out, {7, 1, 6, 0});
  expectAllNear(lse, {std::log(4.0), -1, 2 + std::log(2.0), kNegInf});
}

//===----------------------------------------------------------------------===//
// gatherCache and concatAndCache
//===----------------------------------------------------------------------===//

TEST(ReferenceCache, GatherFollowsPageTableFromStartOffset) {
  // blockSize 2, E = 2, three pages; row (page, r) holds {10 page + r, 100 +
  // 10 page + r}.
  const int64_t blockSize = 2, E = 2, numBlocks = 3;
  std::vector<double> cache;
  for (int64_t page = 0; page < numBlocks; ++page)
    for (int64_t r = 0; r < blockSize; ++r)
      cache.insert(cache.end(), {10.0 * page + r, 100 + 10.0 * page + r});

  // Request 0 (pages 2, 1) copies tokens 1..3; request 1 (pages 0, 2) copies
  // token 2. Workspace rows 4 and 5 are not written.
  std::vector<double> workspace(6 * E, -7);
  gatherCache(cache, {2, 1, 0, 2}, {0, 3, 4}, {1, 2}, blockSize,
              /*maxBlocks=*/2, E, workspace);
  expectAllNear(workspace,
                {21, 121, 10, 110, 11, 111, 20, 120, -7, -7, -7, -7});
}

TEST(ReferenceCache, ConcatAndCacheSkipsPaddedSlots) {
  const int64_t L = 2, R = 1, blockSize = 2, numBlocks = 2;
  std::vector<double> kvC = {1, 2, 3, 4, 5, 6}, kPe = {7, 8, 9};
  std::vector<double> cache(numBlocks * blockSize * (L + R), -1);
  concatAndCache(kvC, kPe, {3, -1, 0}, L, R, blockSize, numBlocks, cache);
  // Slot 3 is page 1 row 1; slot 0 is page 0 row 0; token 1 is padding.
  expectAllNear(cache, {5, 6, 9, -1, -1, -1, -1, -1, -1, 1, 2, 7});

  EXPECT_THROW(
      concatAndCache(kvC, kPe, {4, -1, 0}, L, R, blockSize, numBlocks, cache),
      std::invalid_argument);
}

TEST(ReferenceCache, ConcatThenGatherRoundTrips) {
  const int64_t L = 2, R = 1, blockSize = 2, numBlocks = 3;
  std::vector<double> kvC = {1, 2, 3, 4, 5, 6}, kPe = {7, 8, 9};
  std::vector<double> cache(numBlocks * blockSize * (L + R), 0);
  // Context tokens 0, 1, 2 of one request whose pages are 2 then 0.
  concatAndCache(kvC, kPe, {4, 5, 0}, L, R, blockSize, numBlocks, cache);
  std::vector<double> workspace(3 * (L + R), 0);
  gatherCache(cache, {2, 0}, {0, 3}, {0}, blockSize, 2, L + R, workspace);
  expectAllNear(workspace, {1, 2, 7, 3, 4, 8, 5, 6, 9});
}

//===----------------------------------------------------------------------===//
// Projections
//===----------------------------------------------------------------------===//

TEST(ReferenceProjection, KvUpProjHandComputed) {
  // S = 2, N = 2, L = 2, P = 1, R = 1, V = 2. W [L, N, P + V].
  const int64_t S = 2, N = 2, L = 2, P = 1, R = 1, V = 2;
  std::vector<double> w = {/*l0 h0*/ 1, 0, 2, /*l0 h1*/ 3,  1, 1,
                           /*l1 h0*/ 0, 1, 0, /*l1 h1*/ -1, 0, 5};
  std::vector<double> kvC = {1, 2, 0, -1}, kPe = {7, 8};
  std::vector<double> k, v;
  kvUpProj(kvC, kPe, w, S, N, L, P, R, V, k, v);
  // k [S, N, P + R]: the rope entry is copied to every head.
  expectAllNear(k, {1, 7, 1, 7, 0, 8, 1, 8});
  // v [S, N, V]
  expectAllNear(v, {2, 2, 1, 11, -1, 0, 0, -5});
}

TEST(ReferenceProjection, KvUpProjWithIdentityWeightsCopiesLatent) {
  // L = P = V = 2, N = 1, W = [I | I]: k_nope and v both equal the latent.
  std::vector<double> w = {1, 0, 1, 0, /*l1*/ 0, 1, 0, 1};
  std::vector<double> kvC = {3, -4, 0.5, 2}, kPe = {9, 8};
  std::vector<double> k, v;
  kvUpProj(kvC, kPe, w, 2, 1, 2, 2, 1, 2, k, v);
  expectAllNear(k, {3, -4, 9, 0.5, 2, 8});
  expectAllNear(v, kvC);
}

TEST(ReferenceProjection, QAbsorbHandComputed) {
  // T = 1, N = 2, P = 2, L = 3. wUkT [N, P, L].
  std::vector<double> qNope = {1, 2, 3, -1};
  std::vector<double> wUkT = {/*h0*/ 1, 0, 2, 0, 1, 1,
                              /*h1*/ 1, 1, 1, 2, 0, -1};
  std::vector<double> ql;
  qAbsorb(qNope, wUkT, 1, 2, 2, 3, ql);
  expectAllNear(ql, {1, 2, 4, 1, 3, 4});
}

TEST(ReferenceProjection, VUpProjHandComputed) {
  // T = 1, N = 2, L = 2, V = 1. wUv [N, L, V].
  std::vector<double> oLatent = {1, 2, 3, 4}, wUv = {10, 100, 1, -1};
  std::vector<double> out;
  vUpProj(oLatent, wUv, 1, 2, 2, 1, out);
  expectAllNear(out, {210, -1});
}

//===----------------------------------------------------------------------===//
// mlaPrefillWithContext
//===----------------------------------------------------------------------===//

TEST(ReferencePrefillWithContext, HandComputed) {
  // N = L = P = R = V = 1 and W = [1 | 1], so a token's no-rope key and its
  // value both equal its latent c. blockSize 2, pages 0..2.
  const int64_t N = 1, L = 1, P = 1, R = 1, V = 1, blockSize = 2;
  const int64_t numBlocks = 3, maxBlocks = 2, entry = L + R;
  std::vector<double> w = {1, 1};
  std::vector<double> cache(numBlocks * blockSize * entry, 0);
  auto setRow = [&](int64_t page, int64_t row, double latent, double rope) {
    cache[(page * blockSize + row) * entry] = latent;
    cache[(page * blockSize + row) * entry + 1] = rope;
  };
  // Request 0: one context token in page 2 row 0.
  setRow(2, 0, 6, 0);
  // Request 1: three context tokens, pages 0 then 1 (token 2 is page 1 row 0).
  // Page 1 row 1 is beyond its context and must not be read.
  setRow(0, 0, 1, 0);
  setRow(0, 1, 2, 0);
  setRow(1, 0, 3, std::log(2.0));
  setRow(1, 1, 500, 500);

  // Rows 0..1: request 0's new tokens; row 2: request 1's; row 3: unused.
  // q [T, N, P + R]; a q of {0, 1} scores keys by their rope entry.
  std::vector<double> q = {0, 0, 0, 1, 0, 1, 0, 0};
  std::vector<double> kvCNew = {2, 10, 6, 0};
  std::vector<double> kPeNew = {std::log(3.0), 0, 0, 0};
  const double sentinel = 42;
  std::vector<double> out(4, sentinel), lse(4, sentinel);
  mlaPrefillWithContext(q, kvCNew, kPeNew, {0, 2, 3}, {1, 3}, cache,
                        {2, 0, 0, 1}, w, numBlocks, blockSize, maxBlocks, N, L,
                        P, R, V, 1.0, out, lse);
  // Row 0 sees {ctx 6, new 2} equally. Row 1 sees {6, 2, 10} with weights
  // 1, 3, 1. Row 2 sees {1, 2, 3, 6} with weights 1, 1, 2, 1.
  expectAllNear(out, {4, 22 / 5.0, 15 / 5.0, sentinel});
  expectAllNear(lse, {std::log(2.0), std::log(5.0), std::log(5.0), sentinel});
}

TEST(ReferencePrefillWithContext, MatchesGatherUpProjectAndPrefill) {
  // Random case with a context-free request, a request without new tokens, and
  // lengths that are not multiples of the block size. The expectation is built
  // through concatAndCache + gatherCache + kvUpProj + prefillAttention, a
  // different path from the direct loop in mlaPrefillWithContext.
  std::mt19937 rng(1234);
  const int64_t N = 3, L = 5, P = 4, R = 2, V = 3, blockSize = 4;
  const int64_t maxBlocks = 4, numBlocks = 12, entry = L + R;
  const double scale = 1.0 / std::sqrt(double(P + R));
  const std::vector<int32_t> contextLens = {5, 0, 7, 3};
  const std::vector<int32_t> newLens = {3, 4, 0, 1};
  const std::vector<int32_t> blockTable = {3, 7,  0, 0, //
                                           1, 11, 0, 0, //
                                           9, 2,  5, 0, //
                                           4, 6,  0, 0};
  const int64_t batch = contextLens.size();
  std::vector<int32_t> cuQ = {0};
  for (int32_t n : newLens)
    cuQ.push_back(cuQ.back() + n);
  const int64_t T = cuQ.back();

  std::vector<double> cache = randomVector(rng, numBlocks * blockSize * entry);
  std::vector<double> w = randomVector(rng, L * N * (P + V));
  std::vector<double> q = randomVector(rng, T * N * (P + R));
  std::vector<double> kvCNew = randomVector(rng, T * L);
  std::vector<double> kPeNew = randomVector(rng, T * R);

  std::vector<double> out(T * N * V, 0), lse(N * T, 0);
  mlaPrefillWithContext(q, kvCNew, kPeNew, cuQ, contextLens, cache, blockTable,
                        w, numBlocks, blockSize, maxBlocks, N, L, P, R, V,
                        scale, out, lse);

  // Append the new tokens to the cache after each context, then gather whole
  // sequences.
  std::vector<double> fullCache = cache;
  std::vector<int64_t> slots(T);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < newLens[b]; ++i) {
      int64_t token = contextLens[b] + i;
      slots[cuQ[b] + i] =
          blockTable[b * maxBlocks + token / blockSize] * blockSize +
          token % blockSize;
    }
  concatAndCache(kvCNew, kPeNew, slots, L, R, blockSize, numBlocks, fullCache);
  std::vector<int32_t> cuK = {0};
  for (int64_t b = 0; b < batch; ++b)
    cuK.push_back(cuK.back() + contextLens[b] + newLens[b]);
  const int64_t S = cuK.back();
  std::vector<double> latent(S * entry, 0);
  gatherCache(fullCache, blockTable, cuK, std::vector<int32_t>(batch, 0),
              blockSize, maxBlocks, entry, latent);
  std::vector<double> latentC, latentPe;
  for (int64_t s = 0; s < S; ++s) {
    latentC.insert(latentC.end(), latent.begin() + s * entry,
                   latent.begin() + s * entry + L);
    latentPe.insert(latentPe.end(), latent.begin() + s * entry + L,
                    latent.begin() + (s + 1) * entry);
  }
  std::vector<double> k, v;
  kvUpProj(latentC, latentPe, w, S, N, L, P, R, V, k, v);
  std::vector<double> wantOut(T * N * V, 0), wantLse(N * T, 0);
  prefillAttention(q, k, v, cuQ, cuK, N, P + R, V, scale, true, wantOut,
                   wantLse);

  EXPECT_LT(relativeL2Error(out, wantOut), 1e-14);
  std::string why;
  EXPECT_TRUE(lseMatches(lse, wantLse, 1e-12, &why)) << why;
}

//===----------------------------------------------------------------------===//
// Absorbed decode versus MHA form
//===----------------------------------------------------------------------===//

TEST(ReferenceAbsorption, LatentDecodeEqualsUpProjectedAttention) {
  // q_nope . (W_UK c) == (q_nope W_UK^T) . c and W_UV (sum w c) == sum w W_UV
  // c, so absorbed decode followed by vUpProj must equal MHA prefill over
  // up-projected keys and values with the same causal alignment.
  std::mt19937 rng(99);
  const int64_t N = 3, L = 4, P = 3, R = 2, V = 3, blockSize = 2;
  const int64_t maxBlocks = 3, numBlocks = 7, batch = 2, queryLen = 2;
  const int64_t entry = L + R;
  const double scale = 0.7;
  const std::vector<int32_t> seqLens = {5, 3};
  const std::vector<int32_t> blockTable = {6, 0, 3, //
                                           2, 5, 1};

  std::vector<double> cache = randomVector(rng, numBlocks * blockSize * entry);
  std::vector<double> w = randomVector(rng, L * N * (P + V));
  std::vector<double> qNope = randomVector(rng, batch * queryLen * N * P);
  std::vector<double> qPe = randomVector(rng, batch * queryLen * N * R);

  // Split kv_b_proj [L, N, P + V] into W_UK^T [N, P, L] and W_UV [N, L, V].
  std::vector<double> wUkT(N * P * L), wUv(N * L * V);
  for (int64_t l = 0; l < L; ++l)
    for (int64_t h = 0; h < N; ++h) {
      for (int64_t p = 0; p < P; ++p)
        wUkT[(h * P + p) * L + l] = w[(l * N + h) * (P + V) + p];
      for (int64_t d = 0; d < V; ++d)
        wUv[(h * L + l) * V + d] = w[(l * N + h) * (P + V) + P + d];
    }

  // Absorbed path.
  std::vector<double> qlNope;
  qAbsorb(qNope, wUkT, batch * queryLen, N, P, L, qlNope);
  std::vector<double> qLatent;
  for (int64_t row = 0; row < batch * queryLen * N; ++row) {
    qLatent.insert(qLatent.end(), qlNope.begin() + row * L,
                   qlNope.begin() + (row + 1) * L);
    qLatent.insert(qLatent.end(), qPe.begin() + row * R,
                   qPe.begin() + (row + 1) * R);
  }
  std::vector<double> latentOut, decodeLse, decodeOut;
  decodeAttention(qLatent, cache, blockTable, seqLens, numBlocks, blockSize,
                  maxBlocks, batch, queryLen, N, L, R, scale, true, latentOut,
                  decodeLse);
  vUpProj(latentOut, wUv, batch * queryLen, N, L, V, decodeOut);

  // MHA path: gather every request's tokens, up-project, attend.
  std::vector<int32_t> cuK = {0}, cuQ = {0};
  for (int64_t b = 0; b < batch; ++b) {
    cuK.push_back(cuK.back() + seqLens[b]);
    cuQ.push_back(cuQ.back() + queryLen);
  }
  const int64_t S = cuK.back(), T = batch * queryLen;
  std::vector<double> latent(S * entry);
  gatherCache(cache, blockTable, cuK, std::vector<int32_t>(batch, 0), blockSize,
              maxBlocks, entry, latent);
  std::vector<double> latentC, latentPe;
  for (int64_t s = 0; s < S; ++s) {
    latentC.insert(latentC.end(), latent.begin() + s * entry,
                   latent.begin() + s * entry + L);
    latentPe.insert(latentPe.end(), latent.begin() + s * entry + L,
                    latent.begin() + (s + 1) * entry);
  }
  std::vector<double> k, v;
  kvUpProj(latentC, latentPe, w, S, N, L, P, R, V, k, v);
  std::vector<double> qMha;
  for (int64_t row = 0; row < T * N; ++row) {
    qMha.insert(qMha.end(), qNope.begin() + row * P,
                qNope.begin() + (row + 1) * P);
    qMha.insert(qMha.end(), qPe.begin() + row * R, qPe.begin() + (row + 1) * R);
  }
  std::vector<double> mhaOut(T * N * V), mhaLse(N * T);
  prefillAttention(qMha, k, v, cuQ, cuK, N, P + R, V, scale, true, mhaOut,
                   mhaLse);

  EXPECT_LT(relativeL2Error(decodeOut, mhaOut), 1e-13);
  // Decode lse is [B, N, Sq]; prefill lse is [N, T] with T = B * Sq.
  std::vector<double> decodeLseAsNT(N * T);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < N; ++h)
      for (int64_t s = 0; s < queryLen; ++s)
        decodeLseAsNT[h * T + b * queryLen + s] =
            decodeLse[(b * N + h) * queryLen + s];
  std::string why;
  EXPECT_TRUE(lseMatches(decodeLseAsNT, mhaLse, 1e-12, &why)) << why;
}

//===----------------------------------------------------------------------===//
// Error metrics
//===----------------------------------------------------------------------===//

TEST(ReferenceMetrics, RelativeL2Error) {
  EXPECT_EQ(relativeL2Error({1, 2}, {1, 2}), 0.0);
  EXPECT_NEAR(relativeL2Error({1, 2}, {1, 1}), 1 / std::sqrt(2.0), kTol);
  EXPECT_EQ(relativeL2Error({0, 0}, {0, 0}), 0.0);
  EXPECT_GT(relativeL2Error({1e-3}, {0}), 1e100);
  EXPECT_EQ(relativeL2Error({kNaN, 1}, {1, 1}), kPosInf);
  EXPECT_EQ(relativeL2Error({kPosInf, 1}, {1, 1}), kPosInf);
  EXPECT_EQ(relativeL2Error({kNegInf, 1}, {kPosInf, 1}), kPosInf);
  EXPECT_EQ(relativeL2Error({kNegInf, 1}, {kNegInf, 1}), 0.0);
  EXPECT_EQ(relativeL2Error({1}, {1, 2}), kPosInf);
}

TEST(ReferenceMetrics, LseMatches) {
  std::string why;
  EXPECT_TRUE(lseMatches({kNegInf, 1.0}, {kNegInf, 1.0 + 1e-7}, 1e-6, &why))
      << why;
  EXPECT_TRUE(why.empty());

  EXPECT_FALSE(lseMatches({kPosInf}, {kNegInf}, 1e-6, &why));
  EXPECT_NE(why.find("index 0"), std::string::npos) << why;

  EXPECT_FALSE(lseMatches({0.0, 2.0}, {0.0, 2.1}, 1e-3, &why));
  EXPECT_NE(why.find("index 1"), std::string::npos) << why;

  EXPECT_FALSE(lseMatches({kNaN}, {kNaN}, 1e-3, &why));
  EXPECT_FALSE(lseMatches({kNegInf}, {0.0}, 1e-3, &why));
  EXPECT_FALSE(lseMatches({0.0}, {kNegInf}, 1e-3, nullptr));
  EXPECT_FALSE(lseMatches({0.0}, {0.0, 1.0}, 1e-3, &why));
}
