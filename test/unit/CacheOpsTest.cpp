//===- CacheOpsTest.cpp - gather_cache and concat_and_cache ---------------===//

#include "MlaReference.h"
#include "TestSupport.h"
#include "mla/Builders/KernelBuilders.h"

#include <algorithm>
#include <numeric>

using namespace mla;
using namespace mla::test;
using mla::HostTensor;

namespace {

void checkGather(DType cacheType, DType workspaceType, int64_t blockSize,
                 std::vector<int32_t> contextLens, std::vector<int32_t> starts,
                 std::vector<int32_t> counts, int64_t entry = 576) {
  int64_t batch = contextLens.size();
  auto kernel = compileKernel(buildGatherCache(
      testContext(), {entry, blockSize, cacheType, workspaceType}));
  ASSERT_TRUE(kernel);
  int64_t maxLen = *std::max_element(contextLens.begin(), contextLens.end());
  int64_t maxBlocks = std::max<int64_t>(1, (maxLen + blockSize - 1) / blockSize);
  int64_t numBlocks = batch * maxBlocks + 2;
  std::vector<int32_t> pages(numBlocks);
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), rng());
  std::vector<int32_t> table(pages.begin(), pages.begin() + batch * maxBlocks);

  HostTensor cache(cacheType, {numBlocks, blockSize, entry});
  cache.fillRandom(rng());
  std::vector<int32_t> cu = prefixSums(counts);
  int64_t rows = cu.back() + 3; // spare rows stay poisoned
  HostTensor workspace(workspaceType, {rows, entry});
  workspace.poison();
  HostTensor tableT = HostTensor::i32({batch, maxBlocks}, table);
  HostTensor cuT = HostTensor::i32({batch + 1}, cu);
  HostTensor startsT = HostTensor::i32({batch}, starts);
  runKernel(*kernel, {cache.view(), tableT.view(), cuT.view(), startsT.view(),
                      workspace.view()});

  std::vector<double> want = workspace.toDouble(); // keeps the spare NaNs
  ref::gatherCache(cache.toDouble(), table, cu, starts, blockSize, maxBlocks,
                   entry, want);
  std::vector<double> got = workspace.toDouble();
  got.resize(cu.back() * entry);
  want.resize(cu.back() * entry);
  expectClose(got, want, tolerance(workspaceType), "gathered rows");
}

TEST(GatherCache, ChunksAcrossPages) {
  // Chunks starting mid-page, one request contributing nothing, lengths not
  // a multiple of the page size.
  checkGather(DType::BF16, DType::BF16, 16, {40, 7, 33}, {10, 7, 0},
              {30, 0, 33});
}

TEST(GatherCache, LongChunkOfOneRequest) {
  // One request's 3000 rows: the grid gives it a block per 16 workspace
  // rows (188), not a fixed 32.
  checkGather(DType::BF16, DType::BF16, 64, {3100}, {37}, {3000});
  // Among empty requests, with a workspace of the same rows.
  checkGather(DType::BF16, DType::BF16, 64, {0, 2500, 3}, {0, 100, 0},
              {0, 2400, 0});
}

TEST(GatherCache, RowsOfAnOddNumberOfVectors) {
  // 520-wide rows are 65 vectors: a warp's 8 rows (520 vectors) end 8
  // lanes into their last pass, whose other lanes load nothing past them.
  checkGather(DType::BF16, DType::BF16, 16, {70, 9}, {3, 0}, {61, 9}, 520);
  checkGather(DType::F16, DType::F32, 64, {300}, {0}, {300}, 520);
}

TEST(GatherCache, ConvertsDType) {
  checkGather(DType::BF16, DType::F32, 64, {100, 65}, {64, 0}, {36, 65});
  checkGather(DType::F32, DType::F16, 32, {5}, {0}, {5});
}

void checkConcat(DType activation, DType cacheType, int64_t blockSize) {
  int64_t latent = 512, rope = 64, numBlocks = 4, tokens = 9;
  auto kernel = compileKernel(buildConcatAndCache(
      testContext(), {latent, rope, blockSize, activation, cacheType}));
  ASSERT_TRUE(kernel);
  HostTensor kvc(activation, {tokens, latent}), kpe(activation, {tokens, rope});
  kvc.fillRandom(rng());
  kpe.fillRandom(rng());
  int64_t capacity = numBlocks * blockSize;
  // Distinct random slots, with padding (-1) mixed in.
  std::vector<int64_t> slots(capacity);
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), rng());
  slots.resize(tokens);
  slots[2] = -1;
  slots[6] = -1;
  HostTensor slotT = HostTensor::i64({tokens}, slots);
  HostTensor cache(cacheType, {numBlocks, blockSize, latent + rope});
  cache.fillRandom(rng());
  std::vector<double> want = cache.toDouble();
  runKernel(*kernel, {kvc.view(), kpe.view(), slotT.view(), cache.view()});
  ref::concatAndCache(kvc.toDouble(), kpe.toDouble(), slots, latent, rope,
                      blockSize, numBlocks, want);
  // Every entry: written rows converted, all others (padding) untouched.
  expectClose(cache.toDouble(), want, tolerance(cacheType), "cache");
}

TEST(ConcatAndCache, SkipsPaddingSlots) {
  checkConcat(DType::BF16, DType::BF16, 16);
  checkConcat(DType::F32, DType::BF16, 64);
  checkConcat(DType::F16, DType::F32, 32);
}

TEST(ConcatAndCache, SlotsPastTheCacheAreNotWritten) {
  auto kernel = compileKernel(buildConcatAndCache(
      testContext(), {512, 64, 16, DType::F32, DType::F32}));
  ASSERT_TRUE(kernel);
  HostTensor kvc(DType::F32, {2, 512}), kpe(DType::F32, {2, 64});
  kvc.fillRandom(rng());
  kpe.fillRandom(rng());
  HostTensor slots = HostTensor::i64({2}, {32, 1 << 20}); // 2 pages: 0..31
  HostTensor cache(DType::F32, {2, 16, 576});
  cache.fillRandom(rng());
  std::vector<double> before = cache.toDouble();
  runKernel(*kernel, {kvc.view(), kpe.view(), slots.view(), cache.view()});
  EXPECT_EQ(cache.toDouble(), before);
}

} // namespace
