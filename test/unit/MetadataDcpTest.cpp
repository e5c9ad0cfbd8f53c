//===- MetadataDcpTest.cpp - A DCP rank's tokens and slots ----------------===//
//
// Local sequence lengths and local slots of decode context parallelism,
// against hand-computed cases and, on random batches, against counting the
// tokens each rank owns one by one.
//
//===----------------------------------------------------------------------===//

#include "mla/Runtime/MetadataDcp.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

using namespace mla::runtime;

namespace {

std::string errorText(llvm::Error error) {
  return error ? llvm::toString(std::move(error)) : "success";
}

template <typename T> T take(llvm::Expected<T> value) {
  if (!value) {
    ADD_FAILURE() << llvm::toString(value.takeError());
    return T();
  }
  return std::move(*value);
}

/// Token `position`'s index among the tokens `dcp.rank` owns, counted one
/// by one (independent of DcpConfig::localPosition).
int64_t countedLocalPosition(int64_t position, const DcpConfig &dcp) {
  int64_t local = 0;
  for (int64_t p = 0; p < position; ++p)
    local += dcp.ownerOf(p) == dcp.rank;
  return local;
}

TEST(MetadataDcp, LocalLengthsByHand) {
  // Interleave 1 over 2 ranks: even positions on rank 0.
  EXPECT_EQ(take(dcpLocalSeqLens({5, 0, 1}, {2, 0, 1})),
            (std::vector<int32_t>{3, 0, 1}));
  EXPECT_EQ(take(dcpLocalSeqLens({5, 0, 1}, {2, 1, 1})),
            (std::vector<int32_t>{2, 0, 0}));
  // Interleave 16 over 2 ranks, 40 tokens: rank 0 holds 0-15 and 32-39.
  EXPECT_EQ(take(dcpLocalSeqLens({40}, {2, 0, 16})), std::vector<int32_t>{24});
  EXPECT_EQ(take(dcpLocalSeqLens({40}, {2, 1, 16})), std::vector<int32_t>{16});
  // Interleave 16 over 4 ranks, 100 tokens: one cycle of 64, then 16, 16
  // and 4 more on ranks 0, 1 and 2.
  std::vector<int32_t> perRank;
  for (int64_t rank = 0; rank < 4; ++rank)
    perRank.push_back(take(dcpLocalSeqLens({100}, {4, rank, 16}))[0]);
  EXPECT_EQ(perRank, (std::vector<int32_t>{32, 32, 20, 16}));
  // One rank holds everything.
  EXPECT_EQ(take(dcpLocalSeqLens({7, 64}, {1, 0, 16})),
            (std::vector<int32_t>{7, 64}));
}

TEST(MetadataDcp, LocalLengthsAndPositionsOnRandomSequences) {
  std::mt19937 rng(2027);
  for (int64_t worldSize : {1, 2, 3, 4, 8})
    for (int64_t interleave : {1, 16}) {
      std::vector<int32_t> seqLens;
      for (int i = 0; i < 20; ++i)
        seqLens.push_back(int32_t(rng() % 300));
      std::vector<int64_t> total(seqLens.size(), 0);
      for (int64_t rank = 0; rank < worldSize; ++rank) {
        DcpConfig dcp{worldSize, rank, interleave};
        std::vector<int32_t> local = take(dcpLocalSeqLens(seqLens, dcp));
        for (size_t b = 0; b < seqLens.size(); ++b) {
          total[b] += local[b];
          // The rank's tokens, in order, take local positions 0, 1, ...
          int64_t next = 0;
          for (int64_t p = 0; p < seqLens[b]; ++p)
            if (dcp.ownerOf(p) == rank) {
              ASSERT_EQ(dcp.localPosition(p), next)
                  << "position " << p << ", " << worldSize << " ranks, "
                  << "interleave " << interleave;
              ++next;
            }
          EXPECT_EQ(local[b], next);
        }
      }
      for (size_t b = 0; b < seqLens.size(); ++b)
        EXPECT_EQ(total[b], seqLens[b]);
    }
}

TEST(MetadataDcp, LocalSlotsByHand) {
  // One request of 6 tokens, 2 new (positions 4 and 5), pages of 4 tokens,
  // interleave 1: position 4 is rank 0's third token, 5 rank 1's third.
  // Each rank's block table names its own page: 3 on rank 0, 7 on rank 1.
  CommonAttentionMetadata rank0 =
      makeCommonAttentionMetadata({2}, {3}, {3}, /*maxBlocks=*/1, 4);
  rank0.seqLens = {6};
  EXPECT_EQ(take(dcpLocalSlotMapping(rank0, 4, {2, 0, 1})),
            (std::vector<int64_t>{3 * 4 + 2, kPaddingSlot}));
  CommonAttentionMetadata rank1 = rank0;
  rank1.blockTable = {7};
  EXPECT_EQ(take(dcpLocalSlotMapping(rank1, 4, {2, 1, 1})),
            (std::vector<int64_t>{kPaddingSlot, 7 * 4 + 2}));

  // A prefill of 40 tokens over 2 ranks, interleave 16, pages of 16: rank
  // 1 holds positions 16-31, its page 0 (block_table 9) whole.
  CommonAttentionMetadata prefill =
      makeCommonAttentionMetadata({40}, {40}, {9, 5, 0}, /*maxBlocks=*/3, 16);
  std::vector<int64_t> slots = take(dcpLocalSlotMapping(prefill, 16, {2, 1, 16}));
  ASSERT_EQ(slots.size(), 40u);
  for (int64_t p = 0; p < 40; ++p)
    EXPECT_EQ(slots[p], p >= 16 && p < 32 ? 9 * 16 + (p - 16) : kPaddingSlot)
        << "position " << p;
  // Rank 0 holds 0-15 (page 9) and 32-39 (page 5, rows 0-7).
  slots = take(dcpLocalSlotMapping(prefill, 16, {2, 0, 16}));
  EXPECT_EQ(slots[0], 9 * 16);
  EXPECT_EQ(slots[15], 9 * 16 + 15);
  EXPECT_EQ(slots[20], kPaddingSlot);
  EXPECT_EQ(slots[32], 5 * 16);
  EXPECT_EQ(slots[39], 5 * 16 + 7);
}

TEST(MetadataDcp, EveryNewTokenHasOneOwnerOnRandomBatches) {
  std::mt19937 rng(7);
  const int64_t blockSize = 16;
  for (int64_t worldSize : {2, 3, 4})
    for (int64_t interleave : {1, 16}) {
      int64_t reqs = 1 + rng() % 6;
      std::vector<int32_t> queryLens, seqLens;
      for (int64_t b = 0; b < reqs; ++b) {
        int32_t context = int32_t(rng() % 200);
        int32_t query = int32_t(1 + rng() % (b % 2 ? 1 : 40));
        queryLens.push_back(query);
        seqLens.push_back(context + query);
      }
      const int64_t maxBlocks = 16;
      std::vector<std::vector<int64_t>> slotsOf;
      for (int64_t rank = 0; rank < worldSize; ++rank) {
        // Each rank's pages: request b's page k is 1000 rank + 100 b + k.
        std::vector<int32_t> table;
        for (int64_t b = 0; b < reqs; ++b)
          for (int64_t k = 0; k < maxBlocks; ++k)
            table.push_back(int32_t(1000 * rank + 100 * b + k));
        CommonAttentionMetadata m = makeCommonAttentionMetadata(
            queryLens, seqLens, table, maxBlocks, blockSize);
        slotsOf.push_back(take(dcpLocalSlotMapping(
            m, blockSize, {worldSize, rank, interleave})));
      }
      int64_t row = 0;
      for (int64_t b = 0; b < reqs; ++b)
        for (int64_t j = 0; j < queryLens[b]; ++j, ++row) {
          int64_t position = seqLens[b] - queryLens[b] + j;
          int64_t owner = (position / interleave) % worldSize;
          DcpConfig dcp{worldSize, owner, interleave};
          int64_t local = countedLocalPosition(position, dcp);
          for (int64_t rank = 0; rank < worldSize; ++rank) {
            int64_t expected =
                rank == owner
                    ? (1000 * rank + 100 * b + local / blockSize) * blockSize +
                          local % blockSize
                    : kPaddingSlot;
            ASSERT_EQ(slotsOf[rank][row], expected)
                << "request " << b << ", position " << position << ", rank "
                << rank << " of " << worldSize << ", interleave "
                << interleave;
          }
        }
    }
}

TEST(MetadataDcp, BadConfigsAndMetadataAreErrors) {
  EXPECT_EQ(errorText(checkDcp({0, 0, 1}, 16)),
            "dcp_world_size must be in [1, 65536], got 0");
  EXPECT_EQ(errorText(checkDcp({2, 2, 1}, 16)),
            "dcp_rank must be in [0, dcp_world_size = 2), got 2");
  EXPECT_EQ(errorText(checkDcp({2, -1, 1}, 16)),
            "dcp_rank must be in [0, dcp_world_size = 2), got -1");
  EXPECT_EQ(errorText(checkDcp({2, 0, 3}, 16)),
            "cp_kv_cache_interleave_size (dcp_interleave) must divide block_size = 16, got 3");
  EXPECT_EQ(errorText(checkDcp({2, 0, 32}, 16)),
            "cp_kv_cache_interleave_size (dcp_interleave) must divide block_size = 16, got 32");
  EXPECT_EQ(errorText(checkDcp({2, 0, 16}, 16)), "success");
  EXPECT_EQ(errorText(checkDcp({2, 0, 0}, 16)),
            "cp_kv_cache_interleave_size (dcp_interleave) must be in [1, 1048576], got 0");
  EXPECT_EQ(errorText(checkDcp({2, 0, 1}, 0)),
            "block_size must be in [1, 1048576], got 0");
  auto noInterleave = dcpLocalSeqLens({4}, {2, 0, -3});
  ASSERT_FALSE(noInterleave);
  EXPECT_EQ(llvm::toString(noInterleave.takeError()),
            "cp_kv_cache_interleave_size (dcp_interleave) must be in [1, 1048576], got -3");

  auto lens = dcpLocalSeqLens({4, -1}, {2, 0, 1});
  ASSERT_FALSE(lens);
  EXPECT_EQ(llvm::toString(lens.takeError()), "seq_lens[1] = -1 is negative");

  // Rank 0 holds 6 of 11 tokens at interleave 1: two pages of 4, one named.
  CommonAttentionMetadata m =
      makeCommonAttentionMetadata({3}, {11}, {4}, /*maxBlocks=*/1, 4);
  auto slots = dcpLocalSlotMapping(m, 4, {2, 0, 1});
  ASSERT_FALSE(slots);
  EXPECT_EQ(llvm::toString(slots.takeError()),
            "request 0: rank 0 holds 6 of its tokens, more than max_blocks = "
            "1 pages of 4 hold");
  m.seqLens = {2};
  slots = dcpLocalSlotMapping(m, 4, {2, 0, 1});
  ASSERT_FALSE(slots);
  EXPECT_EQ(llvm::toString(slots.takeError()),
            "seq_lens[0] = 2 is shorter than the request's query (3 tokens)");
}

} // namespace

namespace {

/// validateDcp: the rank's block table need only hold its share, and its
/// slots must be its local ones.
TEST(MetadataDcp, ValidationReadsTheRanksShare) {
  DcpConfig dcp{2, 0, 1};
  // 40 tokens: rank 0 holds 20, two pages of 16 (the whole sequence would
  // need three).
  std::vector<int32_t> table = {5, 6};
  auto m = makeCommonAttentionMetadata({1}, {40}, table, 2, 16);
  auto slots = dcpLocalSlotMapping(m, 16, dcp);
  ASSERT_TRUE(bool(slots)) << llvm::toString(slots.takeError());
  m.slotMapping = *slots;
  // Position 39 lives on rank 1.
  EXPECT_EQ(m.slotMapping[0], kPaddingSlot);
  llvm::Error accepted = validateDcp(m, 8, 16, dcp);
  EXPECT_FALSE(bool(accepted)) << llvm::toString(std::move(accepted));
  // Without DCP the whole sequence would need 3 pages.
  llvm::Error whole = validate(m, 8, 16);
  EXPECT_TRUE(bool(whole));
  llvm::consumeError(std::move(whole));

  // One page is too few for rank 0's 20 tokens.
  auto narrow = makeCommonAttentionMetadata({1}, {40}, {5}, 1, 16);
  narrow.slotMapping[0] = kPaddingSlot;
  llvm::Error error = validateDcp(narrow, 8, 16, dcp);
  ASSERT_TRUE(bool(error));
  std::string text = llvm::toString(std::move(error));
  EXPECT_NE(text.find("2 pages for 20 tokens (DCP rank 0's share of 40)"),
            std::string::npos)
      << text;
  // A page outside the cache.
  std::vector<int32_t> outside = {5, 9};
  auto far = makeCommonAttentionMetadata({1}, {40}, outside, 2, 16);
  far.slotMapping[0] = kPaddingSlot;
  error = validateDcp(far, 8, 16, dcp);
  ASSERT_TRUE(bool(error));
  text = llvm::toString(std::move(error));
  EXPECT_NE(text.find("block_table[0][1] = 9"), std::string::npos) << text;
  // A bad config is named before the batch is read.
  error = validateDcp(m, 8, 16, {2, 0, 32});
  ASSERT_TRUE(bool(error));
  text = llvm::toString(std::move(error));
  EXPECT_NE(text.find("cp_kv_cache_interleave_size"), std::string::npos)
      << text;
}

} // namespace

//===----------------------------------------------------------------------===//
// Prefill context chunks across the group
//===----------------------------------------------------------------------===//

namespace {
/// A plan's gathered rows of chunk c, built rank by rank from what each
/// rank's plan says it sends (its local starts and packed offsets), the
/// rank's local tokens listed by counting ownership one token at a time:
/// entry i is the global context token in gathered row i (-1: padding).
std::vector<int64_t> gatheredTokens(const ChunkedContextPlan &chunks,
                                    int64_t c, DcpConfig dcp) {
  const int64_t b = chunks.numPrefills;
  std::vector<int64_t> rows;
  int64_t rowsPerRank = 0;
  std::vector<std::vector<int64_t>> perRank;
  for (dcp.rank = 0; dcp.rank < dcp.worldSize; ++dcp.rank) {
    DcpContextPlan plan = take(planDcpContext(chunks, dcp));
    rowsPerRank = plan.rowsPerRank;
    std::vector<int64_t> sent(plan.rowsPerRank, -1);
    for (int64_t p = 0; p < b; ++p) {
      int64_t begin = plan.localCuSeqLens[c * (b + 1) + p];
      int64_t end = plan.localCuSeqLens[c * (b + 1) + p + 1];
      int64_t local = plan.localStarts[c * b + p];
      // The rank's tokens in order; its local token k is the k-th.
      std::vector<int64_t> held;
      for (int64_t t = 0; t < chunks.contextLens[p]; ++t)
        if (dcp.ownerOf(t) == dcp.rank)
          held.push_back(t);
      for (int64_t row = begin; row < end; ++row)
        sent[row] = held[local + row - begin];
    }
    perRank.push_back(sent);
  }
  for (const std::vector<int64_t> &sent : perRank) {
    EXPECT_EQ(int64_t(sent.size()), rowsPerRank);
    rows.insert(rows.end(), sent.begin(), sent.end());
  }
  return rows;
}
} // namespace

TEST(MetadataDcpContext, OneChunkByHand) {
  // Context of 5 over 2 ranks, interleave 1: rank 0 holds 0, 2, 4 and
  // rank 1 holds 1, 3. Gathered rows: [0 2 4 | 1 3 pad].
  ChunkedContextPlan chunks = take(planChunkedContext({5}, 64, 1));
  ASSERT_EQ(chunks.numChunks, 1);
  DcpContextPlan rank0 = take(planDcpContext(chunks, {2, 0, 1}));
  DcpContextPlan rank1 = take(planDcpContext(chunks, {2, 1, 1}));
  EXPECT_EQ(rank0.rowsPerRank, 3);
  EXPECT_EQ(rank1.rowsPerRank, 3);
  EXPECT_EQ(rank0.localCuSeqLens, (std::vector<int32_t>{0, 3}));
  EXPECT_EQ(rank1.localCuSeqLens, (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(rank0.localStarts, std::vector<int32_t>{0});
  EXPECT_EQ(rank0.orderWidth, 64);
  std::vector<int32_t> order(rank0.gatherOrder.begin(),
                             rank0.gatherOrder.begin() + 5);
  EXPECT_EQ(order, (std::vector<int32_t>{0, 3, 1, 4, 2}));
  EXPECT_EQ(rank0.gatherOrder, rank1.gatherOrder);
  EXPECT_EQ(rank0.orderStarts, std::vector<int32_t>{0});
}

TEST(MetadataDcpContext, SecondChunkStartsMidShare) {
  // Two prefills, contexts 40 and 8, pages of 8, a workspace of 32: each
  // takes 16 tokens a chunk. Over 2 ranks with interleave 4, chunk 1 of
  // prefill 0 (tokens 16-31) is rank 0's local tokens 8-15 (16-19, 24-27).
  ChunkedContextPlan chunks = take(planChunkedContext({40, 8}, 32, 8));
  ASSERT_EQ(chunks.maxContextChunk, 16);
  ASSERT_EQ(chunks.numChunks, 3);
  DcpContextPlan rank0 = take(planDcpContext(chunks, {2, 0, 4}));
  EXPECT_EQ(rank0.localStarts, (std::vector<int32_t>{0, 0, 8, 4, 16, 4}));
  // Chunk 0: 8 of prefill 0's tokens and 4 of prefill 1's; chunk 1: 8 and
  // none; chunk 2: 4 (tokens 32-35) and none.
  EXPECT_EQ(rank0.localCuSeqLens,
            (std::vector<int32_t>{0, 8, 12, 0, 8, 8, 0, 4, 4}));
  EXPECT_EQ(rank0.rowsPerRank, 12);
}

TEST(MetadataDcpContext, GatheredRowsComeBackInTokenOrder) {
  std::mt19937 rng(20261127);
  for (int trial = 0; trial < 300; ++trial) {
    DcpConfig dcp;
    dcp.worldSize = 1 + rng() % 4;
    int64_t page = int64_t(1) << (rng() % 5);
    dcp.interleave = int64_t(1) << (rng() % 5);
    if (dcp.interleave > page)
      std::swap(dcp.interleave, page);
    std::vector<int32_t> contexts(1 + rng() % 4);
    for (int32_t &len : contexts)
      len = rng() % 3 ? int32_t(rng() % 200) : 0;
    int64_t workspace = int64_t(contexts.size()) * page * (1 + rng() % 6);
    ChunkedContextPlan chunks =
        take(planChunkedContext(contexts, workspace, page));
    DcpContextPlan plan = take(planDcpContext(chunks, dcp));
    const int64_t b = chunks.numPrefills;
    for (int64_t c = 0; c < chunks.numChunks; ++c) {
      std::vector<int64_t> rows = gatheredTokens(chunks, c, dcp);
      ASSERT_EQ(int64_t(rows.size()), plan.gatheredRows(dcp));
      for (int64_t p = 0; p < b; ++p)
        for (int64_t j = 0; j < chunks.length(c, p); ++j) {
          int32_t row = plan.gatherOrder[(c * b + p) * plan.orderWidth + j];
          ASSERT_GE(row, 0);
          ASSERT_LT(row, int64_t(rows.size()));
          ASSERT_EQ(rows[row], chunks.start(c, p) + j)
              << "trial " << trial << ", chunk " << c << ", prefill " << p
              << ", token " << j;
        }
    }
  }
}
