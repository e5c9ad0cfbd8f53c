//===- MetadataTest.cpp - Batch metadata, chunk and split plans -----------===//
//
// Metadata*: the host-side metadata builders of runtime/metadata.
//  - MetadataValidate: a consistent batch passes, each inconsistency gives
//    its own message.
//  - MetadataReorder: decodes first (stable), the permutation applied to
//    every field, the decode/prefill split.
//  - MetadataChunkedContext: hand-computed plans and random batches checked
//    for the plan's invariants.
//  - MetadataDecodeSplits: hand-computed plans, proportional and balanced
//    splits on random batches.
//  - MetadataBuffers: fixed-capacity buffers for CUDA-graph capture.
//
//===----------------------------------------------------------------------===//

#include "mla/Runtime/Metadata.h"
#include "mla/Runtime/MetadataBuffers.h"
#include "mla/Runtime/MetadataChunkedContext.h"
#include "mla/Runtime/MetadataDecodeSplits.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

using namespace mla::runtime;

namespace {

std::string errorText(llvm::Error err) {
  return err ? llvm::toString(std::move(err)) : "success";
}

template <typename T> std::string errorText(llvm::Expected<T> &value) {
  return value ? "success" : llvm::toString(value.takeError());
}

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

using I32 = std::vector<int32_t>;
using I64 = std::vector<int64_t>;

//===----------------------------------------------------------------------===//
// A batch to validate and reorder
//===----------------------------------------------------------------------===//

constexpr int64_t kBlockSize = 4;
constexpr int64_t kCacheBlocks = 16;

/// Three requests over a cache of 16 pages of 4 tokens:
///   request 0: 1 new token, seq 5 (pages 2, 7), new token at position 4
///   request 1: 3 new tokens, seq 3 (page 5), positions 0..2
///   request 2: 2 new tokens, seq 9 (pages 1, 3, 9), positions 7 and 8
CommonAttentionMetadata sampleBatch() {
  return makeCommonAttentionMetadata({1, 3, 2}, {5, 3, 9},
                                     {2, 7, 0, 5, 0, 0, 1, 3, 9},
                                     /*maxBlocks=*/3, kBlockSize);
}

std::string validateError(const CommonAttentionMetadata &m) {
  return errorText(validate(m, kCacheBlocks, kBlockSize));
}

TEST(MetadataValidate, MakeDerivesSlotsAndCounts) {
  CommonAttentionMetadata m = sampleBatch();
  EXPECT_EQ(m.queryStartLoc, (I32{0, 1, 4, 6}));
  // Position p of a request: page table[p / 4], row p % 4.
  //   request 0, position 4: page 7 -> 28
  //   request 1, positions 0..2: page 5 -> 20, 21, 22
  //   request 2, position 7: page 3 -> 15; position 8: page 9 -> 36
  EXPECT_EQ(m.slotMapping, (I64{28, 20, 21, 22, 15, 36}));
  EXPECT_EQ(m.numReqs, 3);
  EXPECT_EQ(m.numActualTokens, 6);
  EXPECT_EQ(m.maxQueryLen, 3);
  EXPECT_EQ(m.maxSeqLen, 9);
  EXPECT_EQ(m.contextLen(2), 7);
  EXPECT_EQ(m.blockTableRow(2).vec(), (I32{1, 3, 9}));
  EXPECT_EQ(validateError(m), "success");
}

TEST(MetadataValidate, AcceptsPaddingAndUpperBounds) {
  CommonAttentionMetadata m = sampleBatch();
  m.slotMapping[2] = kPaddingSlot;       // a token whose KV is not stored
  m.slotMapping.push_back(kPaddingSlot); // CUDA-graph padding tokens
  m.slotMapping.push_back(kPaddingSlot);
  m.blockTable[1 * 3 + 2] = 999; // past request 1's one page: unread
  m.maxSeqLen = 64;              // vLLM allows an upper bound
  EXPECT_EQ(validateError(m), "success");

  CommonAttentionMetadata empty =
      makeCommonAttentionMetadata({}, {}, {}, /*maxBlocks=*/4, kBlockSize);
  EXPECT_EQ(empty.queryStartLoc, (I32{0}));
  EXPECT_EQ(validateError(empty), "success");

  // Zero-length requests and sequences (padded batches) are consistent.
  CommonAttentionMetadata zeros =
      makeCommonAttentionMetadata({0, 1}, {0, 1}, {0, 4}, 1, kBlockSize);
  EXPECT_EQ(validateError(zeros), "success");
}

TEST(MetadataValidate, CacheGeometry) {
  CommonAttentionMetadata m = sampleBatch();
  EXPECT_EQ(errorText(validate(m, 0, kBlockSize)),
            "numCacheBlocks is 0, must be positive");
  EXPECT_EQ(errorText(validate(m, kCacheBlocks, -4)),
            "blockSize is -4, must be positive");
  // Found by the plan fuzzer: pages x block size overflowed int64.
  int64_t huge = std::numeric_limits<int64_t>::max() / 8;
  EXPECT_EQ(errorText(validate(m, huge, 16)),
            "a cache of " + std::to_string(huge) +
                " pages of 16 tokens has more slots than int64 indexes");
}

TEST(MetadataValidate, SizeErrors) {
  struct Case {
    const char *what;
    void (*mutate)(CommonAttentionMetadata &);
    const char *message;
  };
  const Case cases[] = {
      {"negative num_reqs", [](CommonAttentionMetadata &m) { m.numReqs = -1; },
       "num_reqs is -1, must be non-negative"},
      // Found by the plan fuzzer: num_reqs + 1 overflowed int64.
      {"largest num_reqs",
       [](CommonAttentionMetadata &m) {
         m.numReqs = std::numeric_limits<int64_t>::max();
       },
       "query_start_loc has 4 entries, expected num_reqs + 1 = "
       "9223372036854775808"},
      {"num_reqs x max_blocks beyond int64",
       [](CommonAttentionMetadata &m) {
         m.maxBlocks = std::numeric_limits<int64_t>::max() / 2;
       },
       "num_reqs * max_blocks = 3 * 4611686018427387903 overflows int64"},
      {"negative num_actual_tokens",
       [](CommonAttentionMetadata &m) { m.numActualTokens = -6; },
       "num_actual_tokens is -6, must be non-negative"},
      {"negative max_blocks",
       [](CommonAttentionMetadata &m) { m.maxBlocks = -3; },
       "max_blocks is -3, must be non-negative"},
      {"query_start_loc size",
       [](CommonAttentionMetadata &m) { m.queryStartLoc.pop_back(); },
       "query_start_loc has 3 entries, expected num_reqs + 1 = 4"},
      {"query_start_loc start",
       [](CommonAttentionMetadata &m) { m.queryStartLoc[0] = 1; },
       "query_start_loc[0] is 1, must be 0"},
      {"query_start_loc decreasing",
       [](CommonAttentionMetadata &m) {
         m.queryStartLoc = {0, 4, 3, 6};
       },
       "query_start_loc decreases at request 1: query_start_loc[2] = 3 < "
       "query_start_loc[1] = 4 (a negative query length)"},
      {"query_start_loc end",
       [](CommonAttentionMetadata &m) { m.numActualTokens = 7; },
       "query_start_loc[3] is 6, but num_actual_tokens is 7"},
      {"seq_lens size", [](CommonAttentionMetadata &m) { m.seqLens.pop_back(); },
       "seq_lens has 2 entries, expected num_reqs = 3"},
      {"block_table size",
       [](CommonAttentionMetadata &m) { m.blockTable.pop_back(); },
       "block_table has 8 entries, expected num_reqs * max_blocks = 3 * 3 = 9"},
      {"slot_mapping size",
       [](CommonAttentionMetadata &m) { m.slotMapping.pop_back(); },
       "slot_mapping has 5 entries, fewer than num_actual_tokens = 6"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.what);
    CommonAttentionMetadata m = sampleBatch();
    c.mutate(m);
    EXPECT_EQ(validateError(m), c.message);
  }
}

TEST(MetadataValidate, RequestErrors) {
  struct Case {
    const char *what;
    void (*mutate)(CommonAttentionMetadata &);
    const char *message;
  };
  const Case cases[] = {
      {"negative seq_len",
       [](CommonAttentionMetadata &m) { m.seqLens[1] = -1; },
       "seq_lens[1] is -1, must be non-negative"},
      {"seq_len < query_len",
       [](CommonAttentionMetadata &m) { m.seqLens[1] = 2; },
       "request 1: seq_lens[1] = 2 is less than its query length 3 (the new "
       "tokens are part of the sequence)"},
      {"block table too short",
       [](CommonAttentionMetadata &m) { m.seqLens[2] = 13; },
       "request 2 needs 4 pages for 13 tokens of block size 4, but the block "
       "table has max_blocks = 3 columns"},
      {"block id past the cache",
       [](CommonAttentionMetadata &m) { m.blockTable[2 * 3 + 2] = 16; },
       "block_table[2][2] = 16 is not a page of the cache [0, 16)"},
      {"negative block id",
       [](CommonAttentionMetadata &m) { m.blockTable[0] = -1; },
       "block_table[0][0] = -1 is not a page of the cache [0, 16)"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.what);
    CommonAttentionMetadata m = sampleBatch();
    c.mutate(m);
    EXPECT_EQ(validateError(m), c.message);
  }
}

TEST(MetadataValidate, SlotErrors) {
  struct Case {
    const char *what;
    void (*mutate)(CommonAttentionMetadata &);
    const char *message;
  };
  const Case cases[] = {
      {"slot past the cache",
       [](CommonAttentionMetadata &m) { m.slotMapping[5] = 64; },
       "slot_mapping[5] = 64 is neither -1 (padding) nor a slot of the cache "
       "[0, 64)"},
      {"negative slot other than -1",
       [](CommonAttentionMetadata &m) { m.slotMapping[1] = -2; },
       "slot_mapping[1] = -2 is neither -1 (padding) nor a slot of the cache "
       "[0, 64)"},
      {"slot not where the block table puts the token",
       [](CommonAttentionMetadata &m) { m.slotMapping[0] = 29; },
       "slot_mapping[0] = 29, but token 0 is position 4 of request 0, which "
       "the block table puts in slot 28 (page 7, row 0)"},
      {"padding tail holding a slot",
       [](CommonAttentionMetadata &m) { m.slotMapping.push_back(5); },
       "slot_mapping[6] = 5 is past num_actual_tokens = 6 and must be -1 "
       "(padding)"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.what);
    CommonAttentionMetadata m = sampleBatch();
    c.mutate(m);
    EXPECT_EQ(validateError(m), c.message);
  }
}

TEST(MetadataValidate, MaximaErrors) {
  CommonAttentionMetadata m = sampleBatch();
  m.maxQueryLen = 2;
  EXPECT_EQ(validateError(m), "max_query_len is 2, but the longest query is 3");
  m.maxQueryLen = 4;
  EXPECT_EQ(validateError(m), "max_query_len is 4, but the longest query is 3");
  m = sampleBatch();
  m.maxSeqLen = 8;
  EXPECT_EQ(validateError(m),
            "max_seq_len is 8, less than the longest sequence 9");
}

//===----------------------------------------------------------------------===//
// Reorder
//===----------------------------------------------------------------------===//

/// Six requests, query lengths 5, 1, 1, 7, 1, 3; each owns one page per 4
/// tokens, pages numbered in order.
CommonAttentionMetadata mixedBatch() {
  I32 queryLens = {5, 1, 1, 7, 1, 3}, seqLens = {9, 4, 12, 7, 1, 3};
  int64_t maxBlocks = 3;
  I32 table;
  int32_t page = 0;
  for (int32_t len : seqLens)
    for (int64_t j = 0; j < maxBlocks; ++j)
      table.push_back(j < cdiv(len, kBlockSize) ? page++ : 0);
  return makeCommonAttentionMetadata(queryLens, seqLens, table, maxBlocks,
                                     kBlockSize);
}

TEST(MetadataReorder, DecodesFirstStable) {
  CommonAttentionMetadata m = mixedBatch();
  auto order = decodesFirstOrder(m);
  ASSERT_EQ(errorText(order), "success");
  EXPECT_EQ(*order, (I64{1, 2, 4, 0, 3, 5}));

  // Speculative decoding: up to 3 new tokens still count as a decode.
  auto spec = decodesFirstOrder(m, /*decodeThreshold=*/3);
  ASSERT_EQ(errorText(spec), "success");
  EXPECT_EQ(*spec, (I64{1, 2, 4, 5, 0, 3}));
}

TEST(MetadataReorder, RefusesAQueryStartLocOfTheWrongSize) {
  CommonAttentionMetadata m = sampleBatch();
  m.numReqs = std::numeric_limits<int64_t>::max();
  auto order = decodesFirstOrder(m);
  EXPECT_EQ(errorText(order), "query_start_loc has 4 entries, expected "
                              "num_reqs + 1 = 9223372036854775808");
}

TEST(MetadataReorder, ApplyMovesEveryField) {
  CommonAttentionMetadata m = mixedBatch();
  m.slotMapping.push_back(kPaddingSlot);
  auto order = decodesFirstOrder(m);
  ASSERT_EQ(errorText(order), "success");
  auto reordered = applyOrder(m, *order);
  ASSERT_EQ(errorText(reordered), "success");

  EXPECT_EQ(reordered->queryStartLoc, (I32{0, 1, 2, 3, 8, 15, 18}));
  EXPECT_EQ(reordered->seqLens, (I32{4, 12, 1, 9, 7, 3}));
  for (int64_t i = 0; i < m.numReqs; ++i) {
    EXPECT_EQ(reordered->blockTableRow(i).vec(),
              m.blockTableRow((*order)[i]).vec());
    for (int32_t k = 0; k < m.queryLen((*order)[i]); ++k)
      EXPECT_EQ(reordered->slotMapping[reordered->queryStartLoc[i] + k],
                m.slotMapping[m.queryStartLoc[(*order)[i]] + k]);
  }
  EXPECT_EQ(reordered->slotMapping.size(), m.slotMapping.size());
  EXPECT_EQ(reordered->slotMapping.back(), kPaddingSlot);
  EXPECT_EQ(reordered->numActualTokens, 18);
  EXPECT_EQ(reordered->maxQueryLen, 7);
  EXPECT_EQ(reordered->maxSeqLen, 12);
  EXPECT_EQ(errorText(validate(*reordered, 64, kBlockSize)), "success");

  auto split = splitDecodesAndPrefills(*reordered);
  ASSERT_EQ(errorText(split), "success");
  EXPECT_EQ(split->numDecodes, 3);
  EXPECT_EQ(split->numPrefills, 3);
  EXPECT_EQ(split->numDecodeTokens, 3);
  EXPECT_EQ(split->numPrefillTokens, 15);
}

TEST(MetadataReorder, SplitEdgeCases) {
  auto splitOf = [](I32 queryLens) {
    I32 seqLens = queryLens;
    CommonAttentionMetadata m = makeCommonAttentionMetadata(
        queryLens, seqLens, I32(queryLens.size() * 2, 0), 2, kBlockSize);
    auto split = splitDecodesAndPrefills(m);
    EXPECT_EQ(errorText(split), "success");
    return split ? I64{split->numDecodes, split->numPrefills,
                       split->numDecodeTokens, split->numPrefillTokens}
                 : I64{};
  };
  EXPECT_EQ(splitOf({}), (I64{0, 0, 0, 0}));
  EXPECT_EQ(splitOf({1, 1, 1}), (I64{3, 0, 3, 0}));
  EXPECT_EQ(splitOf({4, 2}), (I64{0, 2, 0, 6}));
  EXPECT_EQ(splitOf({0, 1, 3}), (I64{2, 1, 1, 3}));
}

TEST(MetadataReorder, Errors) {
  CommonAttentionMetadata m = mixedBatch();
  auto split = splitDecodesAndPrefills(m);
  EXPECT_EQ(errorText(split),
            "request 1 (query length 1) is a decode after prefill request 0 "
            "(query length 5): order the batch decodes-first "
            "(decodesFirstOrder, applyOrder)");

  auto zero = decodesFirstOrder(m, 0);
  EXPECT_EQ(errorText(zero), "decodeThreshold is 0, must be at least 1");
  auto zeroSplit = splitDecodesAndPrefills(m, 0);
  EXPECT_EQ(errorText(zeroSplit), "decodeThreshold is 0, must be at least 1");

  CommonAttentionMetadata broken = m;
  broken.queryStartLoc.pop_back();
  auto brokenOrder = decodesFirstOrder(broken);
  EXPECT_EQ(errorText(brokenOrder),
            "query_start_loc has 6 entries, expected num_reqs + 1 = 7");

  auto shortOrder = applyOrder(m, {0, 1, 2});
  EXPECT_EQ(errorText(shortOrder),
            "order has 3 entries, but the batch has 6 requests");
  auto outside = applyOrder(m, {0, 1, 2, 3, 4, 6});
  EXPECT_EQ(errorText(outside),
            "order[5] = 6 is not a request of the batch [0, 6)");
  auto twice = applyOrder(m, {0, 1, 2, 3, 4, 1});
  EXPECT_EQ(errorText(twice),
            "order[5] = 1 names a request twice: not a permutation");
  auto malformed = applyOrder(broken, {0, 1, 2, 3, 4, 5});
  EXPECT_EQ(errorText(malformed),
            "query_start_loc has 6 entries, expected num_reqs + 1 = 7");
}

TEST(MetadataReorder, RandomBatches) {
  std::mt19937 gen(1234);
  for (int iter = 0; iter < 500; ++iter) {
    SCOPED_TRACE("iteration " + std::to_string(iter));
    int64_t batch = std::uniform_int_distribution<int64_t>(0, 20)(gen);
    int64_t threshold = std::uniform_int_distribution<int64_t>(1, 4)(gen);
    I32 queryLens, seqLens, table;
    int64_t maxBlocks = 8;
    int32_t page = 0;
    for (int64_t b = 0; b < batch; ++b) {
      bool decode = gen() % 2;
      int32_t q = decode ? std::uniform_int_distribution<int32_t>(0, 4)(gen)
                         : std::uniform_int_distribution<int32_t>(1, 12)(gen);
      int32_t s = std::uniform_int_distribution<int32_t>(
          q, static_cast<int32_t>(maxBlocks * kBlockSize))(gen);
      queryLens.push_back(q);
      seqLens.push_back(s);
      for (int64_t j = 0; j < maxBlocks; ++j)
        table.push_back(j < cdiv(s, kBlockSize) ? page++ : 0);
    }
    CommonAttentionMetadata m = makeCommonAttentionMetadata(
        queryLens, seqLens, table, maxBlocks, kBlockSize);
    int64_t numPages = std::max<int32_t>(page, 1);
    ASSERT_EQ(errorText(validate(m, numPages, kBlockSize)), "success");

    auto order = decodesFirstOrder(m, threshold);
    ASSERT_EQ(errorText(order), "success");
    // A permutation...
    I64 sorted = *order;
    std::sort(sorted.begin(), sorted.end());
    I64 identity(batch);
    std::iota(identity.begin(), identity.end(), 0);
    ASSERT_EQ(sorted, identity);
    // ...with decodes first, each class in its original order.
    int64_t decodes = 0;
    for (int64_t b = 0; b < batch; ++b)
      decodes += queryLens[b] <= threshold;
    for (int64_t i = 0; i < batch; ++i)
      EXPECT_EQ(queryLens[(*order)[i]] <= threshold, i < decodes);
    for (int64_t i = 1; i < batch; ++i)
      if (i != decodes) {
        EXPECT_LT((*order)[i - 1], (*order)[i]);
      }

    auto reordered = applyOrder(m, *order);
    ASSERT_EQ(errorText(reordered), "success");
    EXPECT_EQ(errorText(validate(*reordered, numPages, kBlockSize)), "success");
    auto split = splitDecodesAndPrefills(*reordered, threshold);
    ASSERT_EQ(errorText(split), "success");
    EXPECT_EQ(split->numDecodes, decodes);
    EXPECT_EQ(split->numPrefills, batch - decodes);
    EXPECT_EQ(split->numDecodeTokens + split->numPrefillTokens,
              m.numActualTokens);
    EXPECT_EQ(split->numDecodeTokens, reordered->queryStartLoc[decodes]);
  }
}

//===----------------------------------------------------------------------===//
// Chunked context
//===----------------------------------------------------------------------===//

TEST(MetadataChunkedContext, DefaultWorkspace) {
  // DeepSeek-V3 (163840 tokens): capped at 128K.
  EXPECT_EQ(defaultContextWorkspaceTokens(163840, 256, 64), 128 * 1024);
  // 8 full-length requests.
  EXPECT_EQ(defaultContextWorkspaceTokens(4096, 256, 16), 32768);
  EXPECT_EQ(defaultContextWorkspaceTokens(2048, 8, 16), 16384);
  // 4 pages per request, capped.
  EXPECT_EQ(defaultContextWorkspaceTokens(1024, 64, 64), 16384);
  EXPECT_EQ(defaultContextWorkspaceTokens(1024, 1024, 64), 128 * 1024);
}

TEST(MetadataChunkedContext, OnePrefillWithContext) {
  // Contexts 100 and 0, page 16, workspace 64: one prefill with context
  // gets all 64 rows (a multiple of 16), so cdiv(100, 64) = 2 chunks.
  auto plan = planChunkedContext({100, 0}, 64, 16);
  ASSERT_EQ(errorText(plan), "success");
  EXPECT_EQ(plan->numPrefills, 2);
  EXPECT_EQ(plan->maxContextChunk, 64);
  EXPECT_EQ(plan->numChunks, 2);
  EXPECT_EQ(plan->chunkStarts, (I32{0, 0, 64, 0}));
  EXPECT_EQ(plan->chunkEnds, (I32{64, 0, 100, 0}));
  EXPECT_EQ(plan->chunkSeqLens, (I32{64, 0, 36, 0}));
  EXPECT_EQ(plan->chunkCuSeqLens, (I32{0, 64, 64, 0, 36, 36}));
  EXPECT_EQ(plan->chunkSeqTot, (I64{64, 36}));
  EXPECT_EQ(plan->chunkMaxSeqLens, (I32{64, 36}));
  EXPECT_EQ(plan->cuSeqLens(1).vec(), (I32{0, 36, 36}));
}

TEST(MetadataChunkedContext, SharedWorkspace) {
  // Three prefills with context share 100 rows: 100 / 3 = 33, rounded down
  // to 32 (page 16); the longest context, 100, takes cdiv(100, 32) = 4.
  auto plan = planChunkedContext({100, 40, 0, 17}, 100, 16);
  ASSERT_EQ(errorText(plan), "success");
  EXPECT_EQ(plan->maxContextChunk, 32);
  EXPECT_EQ(plan->numChunks, 4);
  EXPECT_EQ(plan->chunkStarts, (I32{0, 0, 0, 0,    //
                                    32, 32, 0, 17, //
                                    64, 40, 0, 17, //
                                    96, 40, 0, 17}));
  EXPECT_EQ(plan->chunkSeqLens, (I32{32, 32, 0, 17, //
                                     32, 8, 0, 0,   //
                                     32, 0, 0, 0,   //
                                     4, 0, 0, 0}));
  EXPECT_EQ(plan->chunkCuSeqLens, (I32{0, 32, 64, 64, 81, //
                                       0, 32, 40, 40, 40, //
                                       0, 32, 32, 32, 32, //
                                       0, 4,  4,  4,  4}));
  EXPECT_EQ(plan->chunkSeqTot, (I64{81, 40, 32, 4}));
  EXPECT_EQ(plan->chunkMaxSeqLens, (I32{32, 32, 32, 4}));
}

TEST(MetadataChunkedContext, NoContextNoChunks) {
  for (I32 contexts : {I32{}, I32{0}, I32{0, 0, 0}}) {
    auto plan = planChunkedContext(contexts, 64, 16);
    ASSERT_EQ(errorText(plan), "success");
    EXPECT_EQ(plan->numChunks, 0);
    EXPECT_EQ(plan->maxContextChunk, 0);
    EXPECT_TRUE(plan->chunkStarts.empty());
    EXPECT_TRUE(plan->chunkCuSeqLens.empty());
    EXPECT_TRUE(plan->chunkSeqTot.empty());
  }
}

TEST(MetadataChunkedContext, ExactlyOnePagePerPrefill) {
  auto plan = planChunkedContext({10, 20, 30}, 48, 16);
  ASSERT_EQ(errorText(plan), "success");
  EXPECT_EQ(plan->maxContextChunk, 16);
  EXPECT_EQ(plan->numChunks, 2);
  EXPECT_EQ(plan->chunkSeqTot, (I64{42, 18}));
}

TEST(MetadataChunkedContext, Errors) {
  auto tooSmall = planChunkedContext({10, 20, 30, 0}, 40, 16);
  EXPECT_EQ(errorText(tooSmall),
            "a workspace of 40 tokens cannot hold one page (16 tokens) for "
            "each of the 3 prefills with context: it needs at least 48 "
            "tokens");
  auto negative = planChunkedContext({10, -1}, 64, 16);
  EXPECT_EQ(errorText(negative),
            "context length of prefill 1 is -1, must be non-negative");
  auto noPage = planChunkedContext({10}, 64, 0);
  EXPECT_EQ(errorText(noPage), "page size is 0, must be positive");
  auto noWorkspace = planChunkedContext({10}, 0, 16);
  EXPECT_EQ(errorText(noWorkspace), "workspace of 0 tokens: must be positive");
  auto huge = planChunkedContext({10}, int64_t(1) << 31, 16);
  EXPECT_EQ(errorText(huge),
            "workspace of 2147483648 tokens does not fit the int32 offsets of "
            "chunk_cu_seq_lens");
}

TEST(MetadataChunkedContext, FromBatchMetadata) {
  // Two decodes, then prefills with contexts 100 and 0 (5 and 7 new tokens).
  I32 queryLens = {1, 1, 5, 7}, seqLens = {10, 33, 105, 7};
  int64_t blockSize = 16, maxBlocks = 7;
  I32 table(4 * maxBlocks, 0);
  std::iota(table.begin(), table.end(), 0);
  CommonAttentionMetadata m = makeCommonAttentionMetadata(
      queryLens, seqLens, table, maxBlocks, blockSize);
  ASSERT_EQ(errorText(validate(m, 28, blockSize)), "success");

  auto prefill = buildChunkedPrefillMetadata(m, 64, blockSize);
  ASSERT_EQ(errorText(prefill), "success");
  EXPECT_EQ(prefill->firstPrefill, 2);
  EXPECT_EQ(prefill->firstPrefillToken, 2);
  EXPECT_EQ(prefill->cuSeqlensQ, (I32{0, 5, 12}));
  EXPECT_EQ(prefill->maxBlocks, 7);
  EXPECT_EQ(prefill->blockTable, I32(table.begin() + 14, table.end()));
  EXPECT_EQ(prefill->chunks.contextLens, (I32{100, 0}));
  EXPECT_EQ(prefill->chunks.chunkCuSeqLens, (I32{0, 64, 64, 0, 36, 36}));
  EXPECT_EQ(prefill->chunks.chunkStarts, (I32{0, 0, 64, 0}));

  // Decodes only: no prefill rows, no chunks.
  auto decodes = makeCommonAttentionMetadata(
      {1, 1}, {10, 33}, I32(table.begin(), table.begin() + 14), maxBlocks,
      blockSize);
  auto none = buildChunkedPrefillMetadata(decodes, 64, blockSize);
  ASSERT_EQ(errorText(none), "success");
  EXPECT_EQ(none->cuSeqlensQ, (I32{0}));
  EXPECT_EQ(none->chunks.numPrefills, 0);
  EXPECT_EQ(none->chunks.numChunks, 0);

  // Not reordered: the split refuses it.
  auto unordered = makeCommonAttentionMetadata(
      {5, 1}, {105, 10}, I32(table.begin(), table.begin() + 14), maxBlocks,
      blockSize);
  auto refused = buildChunkedPrefillMetadata(unordered, 64, blockSize);
  EXPECT_EQ(errorText(refused),
            "request 1 (query length 1) is a decode after prefill request 0 "
            "(query length 5): order the batch decodes-first "
            "(decodesFirstOrder, applyOrder)");
}

/// Every invariant of a chunk plan for `contexts`.
void checkPlanInvariants(const ChunkedContextPlan &plan, const I32 &contexts,
                         int64_t workspace, int64_t page) {
  int64_t batch = contexts.size(), chunks = plan.numChunks;
  int64_t withContext = 0, longest = 0;
  for (int32_t c : contexts) {
    withContext += c > 0;
    longest = std::max<int64_t>(longest, c);
  }
  ASSERT_EQ(plan.numPrefills, batch);
  if (withContext == 0) {
    EXPECT_EQ(chunks, 0);
    return;
  }
  int64_t chunk = plan.maxContextChunk;
  EXPECT_EQ(chunk, workspace / withContext / page * page);
  EXPECT_GT(chunk, 0);
  EXPECT_EQ(chunks, cdiv(longest, chunk));
  ASSERT_EQ(static_cast<int64_t>(plan.chunkStarts.size()), chunks * batch);
  ASSERT_EQ(static_cast<int64_t>(plan.chunkSeqLens.size()), chunks * batch);
  ASSERT_EQ(static_cast<int64_t>(plan.chunkCuSeqLens.size()),
            chunks * (batch + 1));
  ASSERT_EQ(static_cast<int64_t>(plan.chunkSeqTot.size()), chunks);

  for (int64_t c = 0; c < chunks; ++c) {
    llvm::ArrayRef<int32_t> cu = plan.cuSeqLens(c);
    EXPECT_EQ(cu[0], 0);
    int32_t longestRun = 0;
    for (int64_t b = 0; b < batch; ++b) {
      EXPECT_EQ(cu[b + 1] - cu[b], plan.length(c, b));
      EXPECT_GE(plan.length(c, b), 0);
      EXPECT_LE(plan.length(c, b), chunk);
      EXPECT_EQ(plan.start(c, b), std::min<int64_t>(c * chunk, contexts[b]));
      // Runs start on a page, unless clamped to the end of the context.
      EXPECT_TRUE(plan.start(c, b) % page == 0 ||
                  plan.start(c, b) == contexts[b]);
      longestRun = std::max(longestRun, plan.length(c, b));
    }
    EXPECT_EQ(cu[batch], plan.chunkSeqTot[c]);
    EXPECT_LE(plan.chunkSeqTot[c], workspace);
    EXPECT_EQ(plan.chunkMaxSeqLens[c], longestRun);
  }

  for (int64_t b = 0; b < batch; ++b) {
    // Consecutive runs starting at 0 and ending at the context length cover
    // every context token exactly once; count them to be sure.
    std::vector<int> seen(contexts[b], 0);
    int64_t next = 0;
    for (int64_t c = 0; c < chunks; ++c) {
      EXPECT_EQ(plan.start(c, b), next);
      if (c > 0) {
        EXPECT_GE(plan.start(c, b), plan.start(c - 1, b));
      }
      for (int32_t t = 0; t < plan.length(c, b); ++t)
        ++seen[plan.start(c, b) + t];
      next = plan.start(c, b) + plan.length(c, b);
    }
    EXPECT_EQ(next, contexts[b]);
    EXPECT_TRUE(
        std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
  }
}

TEST(MetadataChunkedContext, RandomPlans) {
  std::mt19937 gen(20240611);
  const int64_t pages[] = {1, 16, 64, 128};
  int planned = 0, refused = 0;
  for (int iter = 0; iter < 2000; ++iter) {
    SCOPED_TRACE("iteration " + std::to_string(iter));
    int64_t batch = std::uniform_int_distribution<int64_t>(0, 12)(gen);
    int64_t page = pages[gen() % 4];
    I32 contexts;
    int64_t withContext = 0;
    for (int64_t b = 0; b < batch; ++b) {
      int32_t len = gen() % 3 == 0
                        ? 0
                        : std::uniform_int_distribution<int32_t>(1, 5000)(gen);
      contexts.push_back(len);
      withContext += len > 0;
    }
    // Mostly workspaces that fit, sometimes ones just too small.
    int64_t least = std::max<int64_t>(withContext * page, 1);
    int64_t workspace =
        gen() % 8 == 0
            ? std::max<int64_t>(least - 1, 1)
            : std::uniform_int_distribution<int64_t>(least, 20000)(gen);
    auto plan = planChunkedContext(contexts, workspace, page);
    if (withContext > 0 && workspace / withContext < page) {
      EXPECT_NE(errorText(plan).find("cannot hold one page"),
                std::string::npos);
      ++refused;
      continue;
    }
    ASSERT_EQ(errorText(plan), "success");
    checkPlanInvariants(*plan, contexts, workspace, page);
    ++planned;
  }
  EXPECT_GT(planned, 1000);
  EXPECT_GT(refused, 10);
}

//===----------------------------------------------------------------------===//
// Decode splits
//===----------------------------------------------------------------------===//

DecodeSplitConfig h100(int64_t heads) {
  DecodeSplitConfig c;
  c.numSms = 132;
  c.numHeads = heads;
  return c;
}

TEST(MetadataDecodeSplits, LongContextAtBatchOne) {
  // 32768 tokens = 512 blocks, cost 517. 16 heads fit one CTA: 132 parts,
  // cdiv(517, 132) = 4 blocks per split (also the 256-token floor): 128
  // splits of 256 tokens.
  auto plan = planDecodeSplits({32768}, h100(16));
  ASSERT_EQ(errorText(plan), "success");
  EXPECT_EQ(plan->numSmParts, 132);
  EXPECT_EQ(plan->blocksPerSplit, 4);
  EXPECT_EQ(plan->numSplits, (I32{128}));
  EXPECT_EQ(plan->cuNumSplits, (I32{0, 128}));
  EXPECT_EQ(plan->splitBegin(0, 5), 5 * 256);
  EXPECT_EQ(plan->splitEnd(0, 127), 32768);

  // 128 heads take 2 CTAs per split: 66 parts, cdiv(517, 66) = 8 blocks.
  auto wide = planDecodeSplits({32768}, h100(128));
  ASSERT_EQ(errorText(wide), "success");
  EXPECT_EQ(wide->numSmParts, 66);
  EXPECT_EQ(wide->blocksPerSplit, 8);
  EXPECT_EQ(wide->numSplits, (I32{64}));

  // Two new tokens per request double the rows: 16 heads x 2 -> 32 rows,
  // still one CTA; 64 heads x 2 -> 128 rows, two.
  DecodeSplitConfig spec = h100(64);
  spec.queryLen = 2;
  auto specPlan = planDecodeSplits({32768}, spec);
  ASSERT_EQ(errorText(specPlan), "success");
  EXPECT_EQ(specPlan->numSmParts, 66);
}

TEST(MetadataDecodeSplits, ResidentCtasMultiplyTheParts) {
  // The generic kernels: 4 rows per CTA, 8 CTAs per SM. 16 heads take 4
  // CTAs per split: 132 * 8 / 4 = 264 parts. At batch 64 x 32768 tokens the
  // cost is 64 * 517 = 33088, cdiv(33088, 264) = 126 blocks per split: 5
  // splits per request (512 blocks), where one CTA per SM would give 1;
  // but 320 splits are two waves of 264, so 128 blocks a split, 4 splits a
  // request, 256 splits in one wave.
  DecodeSplitConfig generic = genericDecodeSchedule(132, 16, 1, 64);
  EXPECT_EQ(generic.ctasPerSm, 8);
  EXPECT_EQ(generic.rowsPerCta, 4);
  auto plan = planDecodeSplits(I32(64, 32768), generic);
  ASSERT_EQ(errorText(plan), "success");
  EXPECT_EQ(plan->numSmParts, 264);
  EXPECT_EQ(plan->blocksPerSplit, 128);
  EXPECT_EQ(plan->numSplits, I32(64, 4));
  // 128 heads: 32 CTAs per split, 33 parts.
  auto wide = planDecodeSplits({32768}, genericDecodeSchedule(132, 128, 1, 64));
  ASSERT_EQ(errorText(wide), "success");
  EXPECT_EQ(wide->numSmParts, 33);
  EXPECT_EQ(wide->blocksPerSplit, 16);
  EXPECT_EQ(wide->numSplits, (I32{32}));
  DecodeSplitConfig none = generic;
  none.ctasPerSm = 0;
  auto refused = planDecodeSplits({10}, none);
  EXPECT_EQ(errorText(refused),
            "decode split config: ctasPerSm is 0, must be in [1, 65536]");
}

TEST(MetadataDecodeSplits, TensorCoreSchedule) {
  // DeepSeek dims in bf16: (16 + 64) x 584 x 2 + 16 x 72 x 2 + 512 bytes.
  EXPECT_EQ(mmaDecodeSharedBytes(mla::DecodeOperandTypes::SameTwoByte, 512, 64),
            96256);
  // Over an FP8 cache: Q 16 x 608 x 2, two code stages 64 x 608, P 16 x 72
  // x 2, 512 bytes of row statistics; two blocks an SM as well.
  EXPECT_EQ(mmaDecodeSharedBytes(mla::DecodeOperandTypes::Fp8Cache, 512, 64),
            100096);
  // An H100 SM (228 KiB) holds two such blocks; 16 rows per CTA: 16 heads
  // take 1 CTA per split, 132 * 2 = 264 parts.
  DecodeSplitConfig c = mmaDecodeSchedule(132, 233472 / 96256, 16, 1, 64);
  EXPECT_EQ(c.ctasPerSm, 2);
  EXPECT_EQ(c.rowsPerCta, 16);
  auto plan = planDecodeSplits({32768}, c);
  ASSERT_EQ(errorText(plan), "success");
  EXPECT_EQ(plan->numSmParts, 264);
  // 128 heads: 8 CTAs per split, 33 parts; no resident block counts as 1.
  auto wide = planDecodeSplits({32768}, mmaDecodeSchedule(132, 0, 128, 1, 64));
  ASSERT_EQ(errorText(wide), "success");
  EXPECT_EQ(wide->numSmParts, 16);
}

TEST(MetadataDecodeSplits, ScheduleFollowsTheKernelTheStrategyPicks) {
  // An H100: 132 SMs of 228 KiB, blocks of up to 226 KiB under sm_90a.
  DecodeKernelShape shape;
  shape.strategy = mla::KernelStrategy::Warpgroup;
  shape.operandTypes = mla::DecodeOperandTypes::SameTwoByte;
  shape.dims.numHeads = 128;
  shape.dims.kvLoraRank = 512;
  shape.dims.ropeDim = 64;
  shape.blockSize = 64;
  shape.numSms = 132;
  shape.sharedBytesPerSm = 233472;
  shape.maxSharedBytesPerBlock = 226 * 1024;
  auto rowsAndCtas = [](const DecodeSplitConfig &c) {
    return std::make_pair(c.rowsPerCta, c.ctasPerSm);
  };
  using Pair = std::pair<int64_t, int64_t>;
  // wgmma: 64 rows a CTA, one CTA an SM; also with one KV stage (rope 128).
  EXPECT_EQ(rowsAndCtas(decodeScheduleFor(shape)), Pair(64, 1));
  DecodeKernelShape wideRope = shape;
  wideRope.dims.ropeDim = 128;
  EXPECT_EQ(rowsAndCtas(decodeScheduleFor(wideRope)), Pair(64, 1));
  // Fewer heads than the wgmma kernel takes: mma-sync's 16 rows, two
  // 96,256-byte CTAs an SM.
  DecodeKernelShape few = shape;
  few.dims.numHeads = 8;
  EXPECT_EQ(rowsAndCtas(decodeScheduleFor(few)), Pair(16, 2));
  // mma-sync, and with too little shared memory a block for its kernel.
  DecodeKernelShape mma = shape;
  mma.strategy = mla::KernelStrategy::TensorCore;
  EXPECT_EQ(rowsAndCtas(decodeScheduleFor(mma)), Pair(16, 2));
  mma.maxSharedBytesPerBlock = 64 * 1024;
  EXPECT_EQ(rowsAndCtas(decodeScheduleFor(mma)), Pair(4, 8));
  // Mixed dtypes or the generic strategy: 4 rows, 8 CTAs an SM.
  DecodeKernelShape mixed = shape;
  mixed.operandTypes = mla::DecodeOperandTypes::Other;
  EXPECT_EQ(rowsAndCtas(decodeScheduleFor(mixed)), Pair(4, 8));
  DecodeKernelShape generic = shape;
  generic.strategy = mla::KernelStrategy::Generic;
  EXPECT_EQ(rowsAndCtas(decodeScheduleFor(generic)), Pair(4, 8));
}

TEST(MetadataDecodeSplits, SplitsFitTheWavesTheBatchNeeds) {
  // mma-sync at 128 heads: 8 CTAs a split, 33 parts. 4 x 32768 tokens cost
  // 4 * 517 = 2068, 63 blocks a split would give 9 splits a request: 36 >
  // 33, a second wave of 3 splits. 64 blocks give 8 a request, 32 splits.
  DecodeSplitConfig c = mmaDecodeSchedule(132, 2, 128, 1, 64);
  auto plan = planDecodeSplits(I32(4, 32768), c);
  ASSERT_EQ(errorText(plan), "success");
  EXPECT_EQ(plan->numSmParts, 33);
  EXPECT_EQ(plan->blocksPerSplit, 64);
  EXPECT_EQ(plan->numSplits, I32(4, 8));
  EXPECT_LE(plan->totalSplits(), plan->numSmParts);

  // More requests than parts: one split each is the least there can be,
  // and the plan keeps to it.
  auto many = planDecodeSplits(I32(40, 2000), c);
  ASSERT_EQ(errorText(many), "success");
  EXPECT_EQ(many->totalSplits(), 40);

  // Random batches: the plan either keeps the cost formula's budget or
  // fits the waves the batch needs, and its estimated time (waves x blocks
  // a split) is never worse than the budget's.
  std::mt19937 gen(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<int32_t> lens(1 + gen() % 40);
    for (int32_t &len : lens)
      len = gen() % 70000;
    auto p = planDecodeSplits(lens, c);
    ASSERT_EQ(errorText(p), "success");
    int64_t limit = std::max<int64_t>(p->numSmParts, lens.size());
    int64_t cost = 0;
    for (int32_t len : lens)
      cost += (len + 63) / 64 + c.fixedOverheadBlocks;
    int64_t budget = std::max<int64_t>((cost + p->numSmParts - 1) / p->numSmParts,
                                       c.minTokensPerSplit / 64);
    auto splitsAt = [&](int64_t perSplit) {
      int64_t total = 0;
      for (int32_t len : lens)
        total += std::max<int64_t>(1, ((len + 63) / 64 + perSplit - 1) / perSplit);
      return total;
    };
    auto time = [&](int64_t perSplit) {
      return (splitsAt(perSplit) + limit - 1) / limit * perSplit;
    };
    EXPECT_EQ(p->totalSplits(), splitsAt(p->blocksPerSplit));
    EXPECT_TRUE(p->blocksPerSplit == budget || p->totalSplits() <= limit)
        << "trial " << trial;
    EXPECT_LE(time(p->blocksPerSplit), time(budget)) << "trial " << trial;
  }
}

TEST(MetadataDecodeSplits, MixedLengthsAreProportional) {
  // Blocks 512, 64, 1, 0; cost 517 + 69 + 6 + 5 = 597; cdiv(597, 132) = 5.
  auto plan = planDecodeSplits({32768, 4096, 40, 0}, h100(16));
  ASSERT_EQ(errorText(plan), "success");
  EXPECT_EQ(plan->blocksPerSplit, 5);
  EXPECT_EQ(plan->numSplits, (I32{103, 13, 1, 1}));
  EXPECT_EQ(plan->cuNumSplits, (I32{0, 103, 116, 117, 118}));
  EXPECT_EQ(plan->totalSplits(), 118);
  // 64 blocks over 13 splits: 12 of 5 blocks, 1 of 4.
  EXPECT_EQ(plan->splitEnd(1, 0) - plan->splitBegin(1, 0), 5 * 64);
  EXPECT_EQ(plan->splitEnd(1, 12) - plan->splitBegin(1, 12), 4 * 64);
  // A short request: one split of its 40 tokens; an empty one: one empty.
  EXPECT_EQ(plan->splitBegin(2, 0), 0);
  EXPECT_EQ(plan->splitEnd(2, 0), 40);
  EXPECT_EQ(plan->splitEnd(3, 0), 0);
}

TEST(MetadataDecodeSplits, LargeBatchNeedsNoSplits) {
  // 128 requests of 4096 tokens, 128 heads: 66 parts, cost 128 * 69 = 8832,
  // 134 blocks per split: every request fits one split.
  auto plan = planDecodeSplits(I32(128, 4096), h100(128));
  ASSERT_EQ(errorText(plan), "success");
  EXPECT_EQ(plan->blocksPerSplit, 134);
  EXPECT_EQ(plan->numSplits, I32(128, 1));
  EXPECT_EQ(plan->totalSplits(), 128);

  // Splits per request never grow with the batch.
  int32_t previous = INT32_MAX;
  for (int64_t batch = 1; batch <= 256; batch *= 2) {
    auto p = planDecodeSplits(I32(batch, 32768), h100(16));
    ASSERT_EQ(errorText(p), "success");
    EXPECT_LE(p->numSplits[0], previous);
    previous = p->numSplits[0];
  }
  EXPECT_EQ(previous, 1);
}

TEST(MetadataDecodeSplits, CapAndFloor) {
  DecodeSplitConfig capped = h100(16);
  capped.maxSplitsPerRequest = 32;
  auto plan = planDecodeSplits({32768}, capped);
  ASSERT_EQ(errorText(plan), "success");
  EXPECT_EQ(plan->numSplits, (I32{32}));
  EXPECT_EQ(plan->splitEnd(0, 0), 1024);

  // A floor of 4096 tokens (64 blocks) keeps the splits long.
  DecodeSplitConfig floor = h100(16);
  floor.minTokensPerSplit = 4096;
  auto floored = planDecodeSplits({32768}, floor);
  ASSERT_EQ(errorText(floored), "success");
  EXPECT_EQ(floored->blocksPerSplit, 64);
  EXPECT_EQ(floored->numSplits, (I32{8}));
}

TEST(MetadataDecodeSplits, Errors) {
  auto negative = planDecodeSplits({10, -3}, h100(16));
  EXPECT_EQ(errorText(negative),
            "decode seq_lens[1] is -3, must be non-negative");
  DecodeSplitConfig noSms = h100(16);
  noSms.numSms = 0;
  auto a = planDecodeSplits({10}, noSms);
  EXPECT_EQ(errorText(a),
            "decode split config: numSms is 0, must be in [1, 65536]");
  DecodeSplitConfig noHeads = h100(0);
  auto b = planDecodeSplits({10}, noHeads);
  EXPECT_EQ(errorText(b),
            "decode split config: numHeads is 0, must be in [1, 65536]");
  DecodeSplitConfig overhead = h100(16);
  overhead.fixedOverheadBlocks = -1;
  auto c = planDecodeSplits({10}, overhead);
  EXPECT_EQ(errorText(c),
            "decode split config: fixedOverheadBlocks is -1, must be in [0, "
            "2147483648]");
  DecodeSplitConfig noFloor = h100(16);
  noFloor.minTokensPerSplit = 0;
  auto d = planDecodeSplits({10}, noFloor);
  EXPECT_EQ(errorText(d),
            "decode split config: minTokensPerSplit is 0, must be in [1, "
            "2147483648]");
  // Found by the plan fuzzer: SMs x CTAs overflowed int64.
  DecodeSplitConfig huge = h100(16);
  huge.numSms = int64_t(1) << 40;
  auto e = planDecodeSplits({10}, huge);
  EXPECT_EQ(errorText(e),
            "decode split config: numSms is 1099511627776, must be in [1, "
            "65536]");
}

TEST(MetadataDecodeSplits, RandomBatchesBalanced) {
  std::mt19937 gen(777);
  const int64_t sms[] = {1, 8, 108, 132};
  const int64_t heads[] = {1, 16, 64, 128};
  for (int iter = 0; iter < 1000; ++iter) {
    SCOPED_TRACE("iteration " + std::to_string(iter));
    DecodeSplitConfig config;
    config.numSms = sms[gen() % 4];
    config.numHeads = heads[gen() % 4];
    config.queryLen = 1 + gen() % 2;
    config.minTokensPerSplit = 64 << (gen() % 4);
    int64_t batch = std::uniform_int_distribution<int64_t>(0, 64)(gen);
    I32 seqLens;
    for (int64_t b = 0; b < batch; ++b)
      seqLens.push_back(gen() % 10 == 0
                            ? 0
                            : std::uniform_int_distribution<int32_t>(
                                  1, gen() % 2 ? 2000 : 100000)(gen));
    auto plan = planDecodeSplits(seqLens, config);
    ASSERT_EQ(errorText(plan), "success");
    ASSERT_EQ(static_cast<int64_t>(plan->cuNumSplits.size()), batch + 1);
    EXPECT_EQ(plan->cuNumSplits[0], 0);
    int64_t sum = 0;
    for (int64_t b = 0; b < batch; ++b) {
      sum += plan->numSplits[b];
      EXPECT_EQ(plan->cuNumSplits[b + 1], sum);
    }
    EXPECT_EQ(plan->totalSplits(), sum);

    int64_t bps = plan->blocksPerSplit, tpb = plan->tokensPerBlock;
    for (int64_t b = 0; b < batch; ++b) {
      int64_t n = plan->numSplits[b], blocks = cdiv(seqLens[b], tpb);
      ASSERT_GE(n, 1);
      EXPECT_EQ(n, std::max<int64_t>(1, cdiv(blocks, bps)));
      // The splits tile [0, seq_len) in order.
      EXPECT_EQ(plan->splitBegin(b, 0), 0);
      EXPECT_EQ(plan->splitEnd(b, n - 1), seqLens[b]);
      int64_t fewest = INT64_MAX, most = 0;
      for (int64_t s = 0; s < n; ++s) {
        if (s > 0) {
          EXPECT_EQ(plan->splitBegin(b, s), plan->splitEnd(b, s - 1));
        }
        int64_t splitBlocks =
            cdiv(plan->splitEnd(b, s) - plan->splitBegin(b, s), tpb);
        if (seqLens[b] > 0) {
          EXPECT_GE(splitBlocks, 1);
        }
        fewest = std::min(fewest, splitBlocks);
        most = std::max(most, splitBlocks);
      }
      // Balanced: within a request to one block, across the batch no split
      // over the budget, and a split request's splits at least half of it.
      EXPECT_LE(most - fewest, 1);
      EXPECT_LE(most, bps);
      if (n > 1) {
        EXPECT_GE(2 * fewest + 1, bps);
      }
    }
  }
}

//===----------------------------------------------------------------------===//
// Fixed-capacity buffers
//===----------------------------------------------------------------------===//

TEST(MetadataBuffers, UpdateInPlaceWithPadding) {
  auto created = DecodeMetadataBuffers::create(4, 5);
  ASSERT_EQ(errorText(created), "success");
  DecodeMetadataBuffers buffers = std::move(*created);
  int32_t *lens = buffers.seqLensData();
  int32_t *table = buffers.blockTableData();
  EXPECT_EQ(buffers.batchSize(), 0);
  EXPECT_TRUE(std::all_of(lens, lens + 4, [](int32_t v) { return v == 0; }));

  ASSERT_EQ(errorText(buffers.update({7, 3, 9}, {4, 5, 6, 1, 0, 0, 2, 8, 3},
                                     /*tableWidth=*/3)),
            "success");
  EXPECT_EQ(buffers.seqLensData(), lens);
  EXPECT_EQ(buffers.blockTableData(), table);
  EXPECT_EQ(buffers.batchSize(), 3);
  EXPECT_EQ(I32(lens, lens + 4), (I32{7, 3, 9, 0}));
  EXPECT_EQ(I32(table, table + 20), (I32{4, 5, 6, 0, 0, //
                                         1, 0, 0, 0, 0, //
                                         2, 8, 3, 0, 0, //
                                         0, 0, 0, 0, 0}));

  // A smaller batch: the rows it no longer uses go back to padding.
  ASSERT_EQ(errorText(buffers.update({12}, {9, 10, 11, 12, 13}, 5)), "success");
  EXPECT_EQ(buffers.seqLensData(), lens);
  EXPECT_EQ(buffers.blockTableData(), table);
  EXPECT_EQ(I32(lens, lens + 4), (I32{12, 0, 0, 0}));
  EXPECT_EQ(I32(table, table + 20), (I32{9, 10, 11, 12, 13, //
                                         0, 0,  0,  0,  0,  //
                                         0, 0,  0,  0,  0,  //
                                         0, 0,  0,  0,  0}));

  // Views cover the full capacity at the same addresses.
  mla::BufferView lensView = buffers.seqLensView();
  mla::BufferView tableView = buffers.blockTableView();
  EXPECT_EQ(lensView.data, lens);
  EXPECT_EQ(lensView.shape, (I64{4}));
  EXPECT_EQ(tableView.data, table);
  EXPECT_EQ(tableView.shape, (I64{4, 5}));
  EXPECT_EQ(tableView.dtype, mla::DType::I32);

  // Moving keeps the storage.
  DecodeMetadataBuffers moved = std::move(buffers);
  EXPECT_EQ(moved.seqLensData(), lens);
  EXPECT_EQ(moved.blockTableData(), table);
}

TEST(MetadataBuffers, RefusesWhatDoesNotFit) {
  auto created = DecodeMetadataBuffers::create(2, 3);
  ASSERT_EQ(errorText(created), "success");
  DecodeMetadataBuffers buffers = std::move(*created);
  ASSERT_EQ(errorText(buffers.update({5, 6}, {1, 2, 3, 4}, 2)), "success");
  I32 lensBefore(buffers.seqLensData(), buffers.seqLensData() + 2);
  I32 tableBefore(buffers.blockTableData(), buffers.blockTableData() + 6);

  EXPECT_EQ(errorText(buffers.update({1, 2, 3}, {0, 0, 0}, 1)),
            "decode batch of 3 requests exceeds the captured capacity "
            "maxBatch = 2");
  EXPECT_EQ(errorText(buffers.update({1}, {0, 0, 0, 0}, 4)),
            "block table width 4 exceeds the captured capacity max_blocks = 3");
  EXPECT_EQ(errorText(buffers.update({1, 2}, {0, 0, 0}, 2)),
            "block table has 3 entries, expected 2 requests * 2 columns = 4");
  EXPECT_EQ(errorText(buffers.update({1, -2}, {0, 0}, 1)),
            "seq_lens[1] is -2, must be non-negative");

  // Refused batches leave the last good one in place.
  EXPECT_EQ(buffers.batchSize(), 2);
  EXPECT_EQ(I32(buffers.seqLensData(), buffers.seqLensData() + 2), lensBefore);
  EXPECT_EQ(I32(buffers.blockTableData(), buffers.blockTableData() + 6),
            tableBefore);

  auto empty = DecodeMetadataBuffers::create(0, 3);
  EXPECT_EQ(errorText(empty),
            "decode metadata buffers need a positive capacity, got maxBatch = "
            "0, max_blocks = 3");
}

} // namespace
