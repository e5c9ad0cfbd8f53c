//===- AttentionTest.cpp - prefill_attention and decode_attention ---------===//
//
// Each case JIT-compiles the op for the host, runs it on fresh random inputs
// with NaN-poisoned outputs, and compares with the float64 reference.
//
//===----------------------------------------------------------------------===//

#include "MlaReference.h"
#include "TestSupport.h"
#include "mla/Builders/KernelBuilders.h"

#include <algorithm>
#include <cmath>
#include <numeric>

using namespace mla;
using namespace mla::test;
using mla::HostTensor;

namespace {

constexpr double kLseTolerance = 2e-3;

struct PrefillCase {
  DType dtype;
  int64_t heads;
  bool causal;
  std::vector<int32_t> queryLens, keyLens;
  int64_t qkDim = 192, vDim = 128;
};

void checkPrefill(const PrefillCase &c) {
  float scale = 1.0f / std::sqrt(static_cast<float>(c.qkDim));
  auto kernel = compileKernel(buildPrefillAttention(
      testContext(), {c.heads, c.qkDim, c.vDim, c.dtype, c.causal, scale}));
  ASSERT_TRUE(kernel);
  std::vector<int32_t> cuQ = prefixSums(c.queryLens),
                       cuK = prefixSums(c.keyLens);
  int64_t tokens = cuQ.back(), keys = cuK.back(), n = c.heads;

  HostTensor q(c.dtype, {tokens, n, c.qkDim}), k(c.dtype, {keys, n, c.qkDim}),
      v(c.dtype, {keys, n, c.vDim});
  q.fillRandom(rng(), -2.0, 2.0);
  k.fillRandom(rng(), -2.0, 2.0);
  v.fillRandom(rng());
  HostTensor cuQT = HostTensor::i32({(int64_t)cuQ.size()}, cuQ);
  HostTensor cuKT = HostTensor::i32({(int64_t)cuK.size()}, cuK);
  HostTensor out(c.dtype, {tokens, n, c.vDim}), lse(DType::F32, {n, tokens});
  out.poison();
  lse.poison();
  runKernel(*kernel, {q.view(), k.view(), v.view(), cuQT.view(), cuKT.view(),
                      out.view(), lse.view()});

  std::vector<double> outRef(tokens * n * c.vDim), lseRef(n * tokens);
  ref::prefillAttention(q.toDouble(), k.toDouble(), v.toDouble(), cuQ, cuK, n,
                        c.qkDim, c.vDim, scale, c.causal, outRef, lseRef);
  expectClose(out.toDouble(), outRef, tolerance(c.dtype), "prefill out");
  expectLseClose(lse.toDouble(), lseRef, kLseTolerance, "prefill lse");
}

class PrefillByDType : public ::testing::TestWithParam<DType> {};

TEST_P(PrefillByDType, CausalVarlenWithContext) {
  // New tokens over context + themselves: Skv >= Sq, ragged lengths.
  checkPrefill({GetParam(), 4, true, {5, 1, 17, 33}, {9, 1, 40, 33}});
}

TEST_P(PrefillByDType, NonCausal) {
  checkPrefill({GetParam(), 4, false, {3, 20, 7}, {50, 2, 7}});
}

INSTANTIATE_TEST_SUITE_P(DTypes, PrefillByDType,
                         ::testing::Values(DType::F32, DType::F16,
                                           DType::BF16),
                         [](const auto &info) {
                           return std::string(name(info.param));
                         });

TEST(Prefill, HeadCounts) {
  for (int64_t heads : {1, 16, 128})
    checkPrefill({DType::BF16, heads, true, {6, 3}, {10, 3}});
}

TEST(Prefill, EmptySequencesAndRowsWithoutKeys) {
  // A sequence with no queries, one with no keys (every row empty: out 0,
  // lse -inf), and a causal one with fewer keys than queries, whose first
  // rows see nothing.
  checkPrefill({DType::F32, 2, true, {0, 4, 6, 1}, {5, 0, 3, 1}});
  checkPrefill({DType::F32, 2, false, {3, 2}, {0, 4}});
}

TEST(Prefill, SingleToken) {
  checkPrefill({DType::BF16, 16, true, {1}, {1}});
}

TEST(Prefill, UnalignedHeadDims) {
  // Head dims that are not multiples of the vector width take the scalar
  // tail path.
  checkPrefill({DType::F16, 3, true, {7, 9}, {12, 9}, 40, 23});
}

struct DecodeCase {
  DType activation, cache;
  int64_t heads, queryLen, blockSize;
  bool causal;
  std::vector<int32_t> seqLens;
  int64_t kvLoraRank = 512, ropeDim = 64;
};

void checkDecode(const DecodeCase &c) {
  MlaDims dims;
  dims.numHeads = c.heads;
  dims.kvLoraRank = c.kvLoraRank;
  dims.ropeDim = c.ropeDim;
  int64_t entry = dims.cacheEntry();
  float scale = 1.0f / std::sqrt(192.0f);
  auto kernel = compileKernel(buildDecodeAttention(
      testContext(),
      {dims, c.activation, c.cache, c.blockSize, c.causal, scale}));
  ASSERT_TRUE(kernel);

  int64_t batch = c.seqLens.size(), n = c.heads, sq = c.queryLen;
  int64_t maxLen = *std::max_element(c.seqLens.begin(), c.seqLens.end());
  int64_t maxBlocks = std::max<int64_t>(1, (maxLen + c.blockSize - 1) / c.blockSize);
  int64_t numBlocks = batch * maxBlocks + 3;

  // Pages in shuffled order; unused pages and the rows past each sequence's
  // end stay NaN, so reading them would poison the result.
  std::vector<int32_t> pages(numBlocks);
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), rng());
  std::vector<int32_t> blockTable(batch * maxBlocks);
  for (int64_t i = 0; i < batch * maxBlocks; ++i)
    blockTable[i] = pages[i];

  HostTensor cache(c.cache, {numBlocks, c.blockSize, entry});
  std::vector<double> cacheValues(numBlocks * c.blockSize * entry,
                                  std::nan(""));
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t j = 0; j < c.seqLens[b]; ++j) {
      int64_t page = blockTable[b * maxBlocks + j / c.blockSize];
      int64_t row = page * c.blockSize + j % c.blockSize;
      for (int64_t e = 0; e < entry; ++e)
        cacheValues[row * entry + e] = dist(rng());
    }
  cache.fromDouble(cacheValues);

  HostTensor q(c.activation, {batch, sq, n, entry});
  q.fillRandom(rng(), -2.0, 2.0);
  HostTensor table = HostTensor::i32({batch, maxBlocks}, blockTable);
  HostTensor lens = HostTensor::i32({batch}, c.seqLens);
  HostTensor out(c.activation, {batch, sq, n, c.kvLoraRank});
  HostTensor lse(DType::F32, {batch, n, sq});
  out.poison();
  lse.poison();
  runKernel(*kernel, {q.view(), cache.view(), table.view(), lens.view(),
                      out.view(), lse.view()});

  std::vector<double> outRef(batch * sq * n * c.kvLoraRank),
      lseRef(batch * n * sq);
  ref::decodeAttention(q.toDouble(), cache.toDouble(), blockTable, c.seqLens,
                       numBlocks, c.blockSize, maxBlocks, batch, sq, n,
                       c.kvLoraRank, c.ropeDim, scale, c.causal, outRef,
                       lseRef);
  expectClose(out.toDouble(), outRef, tolerance(c.activation), "decode out");
  expectLseClose(lse.toDouble(), lseRef, kLseTolerance, "decode lse");
}

TEST(Decode, SingleQueryBf16) {
  checkDecode({DType::BF16, DType::BF16, 16, 1, 64, false, {1, 64, 65, 130}});
}

TEST(Decode, SpeculativeQueriesCausal) {
  for (int64_t sq = 1; sq <= 4; ++sq)
    checkDecode({DType::BF16, DType::BF16, 16, sq, 16, true, {4, 37, 16}});
}

TEST(Decode, HeadCounts) {
  for (int64_t heads : {1, 16, 128})
    checkDecode({DType::BF16, DType::BF16, heads, 2, 64, true, {70, 3}});
}

TEST(Decode, DTypesAndMixedCache) {
  checkDecode({DType::F32, DType::F32, 4, 1, 32, false, {33, 7}});
  checkDecode({DType::F16, DType::F16, 4, 2, 32, true, {33, 7}});
  checkDecode({DType::F32, DType::BF16, 4, 1, 16, false, {50}});
  checkDecode({DType::BF16, DType::F16, 4, 3, 16, true, {50, 9}});
}

TEST(Decode, EmptyAndShortSequences) {
  // A request with no cached tokens (lse -inf, out 0), and causal requests
  // shorter than the query length, whose first queries see nothing.
  checkDecode({DType::F32, DType::F32, 2, 1, 16, false, {0, 5}});
  checkDecode({DType::F32, DType::F32, 2, 3, 16, true, {1, 2, 0}});
}

TEST(Decode, BlockSizes) {
  for (int64_t block : {16, 32, 128})
    checkDecode({DType::BF16, DType::BF16, 8, 1, block, false,
                 {static_cast<int32_t>(block + 3), 1}});
}

} // namespace
