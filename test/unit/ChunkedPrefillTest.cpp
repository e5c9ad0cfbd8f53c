//===- ChunkedPrefillTest.cpp - the composite prefill ---------------------===//
//
// The chunked loop (gather, up-project, attend, merge per chunk) must equal
// one causal attention over context + new tokens, computed by the reference
// without any chunking.
//
//===----------------------------------------------------------------------===//

#include "GpuTestSupport.h"
#include "MlaReference.h"
#include "TestSupport.h"
#include "mla/Builders/KernelBuilders.h"

#include <algorithm>
#include <numeric>

using namespace mla;
using namespace mla::test;
using mla::HostTensor;

namespace {

struct ChunkedCase {
  DType activation, cache;
  int64_t heads, blockSize;
  std::vector<int32_t> contextLens, newLens;
  /// Context tokens one request may gather per chunk.
  int32_t chunkLen;
};

void checkChunkedPrefillWith(const ChunkedCase &c,
                             std::optional<KernelStrategy> strategy) {
  MlaDims d;
  d.numHeads = c.heads;
  float scale = 1.0f / std::sqrt(static_cast<float>(d.qkHeadDim()));
  auto kernel = compileKernel(
      buildChunkedPrefill(testContext(),
                          {d, c.activation, c.cache, c.blockSize, scale}),
      strategy);
  ASSERT_TRUE(kernel);

  int64_t batch = c.contextLens.size(), n = c.heads;
  std::vector<int32_t> cuQ = prefixSums(c.newLens);
  int64_t tokens = cuQ.back();

  // Paged cache holding each request's context.
  int32_t maxCtx = *std::max_element(c.contextLens.begin(), c.contextLens.end());
  int64_t maxBlocks = std::max<int64_t>(1, (maxCtx + c.blockSize - 1) / c.blockSize);
  int64_t numBlocks = batch * maxBlocks + 1;
  std::vector<int32_t> pages(numBlocks);
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), rng());
  std::vector<int32_t> table(pages.begin(), pages.begin() + batch * maxBlocks);
  HostTensor cache(c.cache, {numBlocks, c.blockSize, d.cacheEntry()});
  cache.fillRandom(rng());

  // The chunk plan: chunk k covers context tokens [k*len, (k+1)*len).
  int64_t chunks = (maxCtx + c.chunkLen - 1) / c.chunkLen;
  std::vector<int32_t> chunkCu, chunkStarts;
  int32_t maxTotal = 0;
  for (int64_t k = 0; k < chunks; ++k) {
    std::vector<int32_t> lens;
    for (int64_t b = 0; b < batch; ++b) {
      int32_t start = std::min<int32_t>(k * c.chunkLen, c.contextLens[b]);
      chunkStarts.push_back(start);
      lens.push_back(std::min<int32_t>(c.chunkLen, c.contextLens[b] - start));
    }
    std::vector<int32_t> cu = prefixSums(lens);
    maxTotal = std::max(maxTotal, cu.back());
    chunkCu.insert(chunkCu.end(), cu.begin(), cu.end());
  }
  int64_t rows = std::max<int32_t>(maxTotal, 1);

  HostTensor q(c.activation, {tokens, n, d.qkHeadDim()}),
      kvc(c.activation, {tokens, d.kvLoraRank}),
      kpe(c.activation, {tokens, d.ropeDim}),
      w(c.activation, {d.kvLoraRank, n, d.qkNopeHeadDim + d.vHeadDim});
  q.fillRandom(rng(), -2.0, 2.0);
  kvc.fillRandom(rng());
  kpe.fillRandom(rng());
  w.fillRandom(rng(), -0.1, 0.1);
  HostTensor cuQT = HostTensor::i32({batch + 1}, cuQ);
  HostTensor tableT = HostTensor::i32({batch, maxBlocks}, table);
  HostTensor chunkCuT = HostTensor::i32({chunks, batch + 1}, chunkCu);
  HostTensor chunkStartsT = HostTensor::i32({chunks, batch}, chunkStarts);
  HostTensor workspace(c.activation, {rows, d.cacheEntry()});
  workspace.poison();
  HostTensor out(c.activation, {tokens, n, d.vHeadDim}),
      lse(DType::F32, {n, tokens});
  out.poison();
  lse.poison();
  runKernel(*kernel,
            {q.view(), kvc.view(), kpe.view(), cuQT.view(), cache.view(),
             tableT.view(), chunkCuT.view(), chunkStartsT.view(), w.view(),
             workspace.view(), out.view(), lse.view()});

  // The reference sees the context at the precision the kernel gathers it
  // (the workspace holds activations).
  HostTensor cacheAsActivation(c.activation, {numBlocks, c.blockSize, d.cacheEntry()});
  cacheAsActivation.fromDouble(cache.toDouble());
  std::vector<double> outRef(tokens * n * d.vHeadDim), lseRef(n * tokens);
  ref::mlaPrefillWithContext(q.toDouble(), kvc.toDouble(), kpe.toDouble(), cuQ,
                             c.contextLens, cacheAsActivation.toDouble(), table, w.toDouble(),
                             numBlocks, c.blockSize, maxBlocks, n, d.kvLoraRank,
                             d.qkNopeHeadDim, d.ropeDim, d.vHeadDim, scale,
                             outRef, lseRef);
  // Keys and values are up-projected and rounded to the activation type
  // before attention, on both sides of the merge.
  expectClose(out.toDouble(), outRef, 2 * tolerance(c.activation), "prefill out");
  expectLseClose(lse.toDouble(), lseRef, 2e-2, "prefill lse");
}

/// With every strategy: the tensor-core ones take the chunks' attention
/// and up-projections on views of the workspace and scratch buffers.
void checkChunkedPrefill(const ChunkedCase &c) {
  forEachStrategy([&](auto strategy) { checkChunkedPrefillWith(c, strategy); });
}

TEST(ChunkedPrefill, SeveralChunksMixedContexts) {
  // One request without context, one whose context ends mid-chunk, chunk
  // length not a multiple of the page size: some chunks are empty for some
  // requests.
  checkChunkedPrefill({DType::F32, DType::F32, 4, 16, {0, 37, 80}, {5, 3, 9}, 24});
}

TEST(ChunkedPrefill, Bf16CacheAndActivations) {
  checkChunkedPrefill({DType::BF16, DType::BF16, 16, 64, {130, 1}, {4, 1}, 64});
}

TEST(ChunkedPrefill, Bf16ChunksOfSeveralTiles) {
  // Chunks of up to 260 gathered rows (five 64-token product tiles, three
  // 128-query attention tiles a chunk's keys are read by), new tokens in
  // more than one attention tile.
  checkChunkedPrefill(
      {DType::BF16, DType::BF16, 2, 64, {300, 77, 0}, {70, 5, 140}, 200});
}

TEST(ChunkedPrefill, F16ActivationsOverBf16Cache) {
  checkChunkedPrefill({DType::F16, DType::BF16, 2, 32, {50}, {7}, 20});
}

TEST(ChunkedPrefill, NoContextAtAll) {
  // Zero chunks: the result is the causal attention of the new tokens.
  checkChunkedPrefill({DType::F32, DType::F32, 2, 16, {0, 0}, {3, 6}, 16});
}

TEST(ChunkedPrefill, SingleTokenWithContext) {
  checkChunkedPrefill({DType::BF16, DType::BF16, 128, 16, {20}, {1}, 8});
}

} // namespace
