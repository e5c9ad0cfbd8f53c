//===- Metadata.cpp - Building and validating batch metadata --------------===//

#include "MetadataSupport.h"

#include "mla/Runtime/Metadata.h"
#include "mla/Runtime/MetadataDcp.h"

#include <algorithm>
#include <limits>
#include <string>

namespace mla::runtime {

using detail::cdiv;
using detail::fail;
using llvm::Twine;

//===----------------------------------------------------------------------===//
// Construction
//===----------------------------------------------------------------------===//

/// The cache slot of position `pos` of request `b`, or kPaddingSlot where
/// the table does not name one (inconsistent inputs are validate's to
/// report, not a reason to index out of bounds here).
static int64_t slotOf(llvm::ArrayRef<int32_t> blockTable, int64_t maxBlocks,
                      int64_t blockSize, int64_t b, int64_t pos) {
  if (pos < 0 || blockSize <= 0)
    return kPaddingSlot;
  int64_t column = pos / blockSize;
  int64_t index = b * maxBlocks + column;
  if (column >= maxBlocks || index >= static_cast<int64_t>(blockTable.size()))
    return kPaddingSlot;
  return static_cast<int64_t>(blockTable[index]) * blockSize + pos % blockSize;
}

CommonAttentionMetadata makeCommonAttentionMetadata(
    llvm::ArrayRef<int32_t> queryLens, llvm::ArrayRef<int32_t> seqLens,
    llvm::ArrayRef<int32_t> blockTable, int64_t maxBlocks, int64_t blockSize) {
  CommonAttentionMetadata m;
  m.numReqs = static_cast<int64_t>(queryLens.size());
  m.seqLens.assign(seqLens.begin(), seqLens.end());
  m.blockTable.assign(blockTable.begin(), blockTable.end());
  m.maxBlocks = maxBlocks;
  m.queryStartLoc.assign(1, 0);
  for (int32_t len : queryLens) {
    m.queryStartLoc.push_back(m.queryStartLoc.back() + len);
    m.maxQueryLen = std::max<int64_t>(m.maxQueryLen, len);
  }
  m.numActualTokens = m.queryStartLoc.back();
  for (int32_t len : seqLens)
    m.maxSeqLen = std::max<int64_t>(m.maxSeqLen, len);

  // New tokens are the last query_len positions of their sequence.
  for (int64_t b = 0; b < m.numReqs; ++b) {
    int64_t seqLen = b < static_cast<int64_t>(seqLens.size()) ? seqLens[b] : 0;
    for (int64_t i = 0; i < queryLens[b]; ++i)
      m.slotMapping.push_back(slotOf(blockTable, maxBlocks, blockSize, b,
                                     seqLen - queryLens[b] + i));
  }
  return m;
}

//===----------------------------------------------------------------------===//
// Shape
//===----------------------------------------------------------------------===//

llvm::Error
detail::checkQueryStartLocSize(const CommonAttentionMetadata &m) {
  if (m.numReqs < 0)
    return fail("num_reqs is " + Twine(m.numReqs) + ", must be non-negative");
  // Unsigned: num_reqs + 1 overflows int64 for the largest count (found by
  // the plan fuzzer).
  uint64_t expected = uint64_t(m.numReqs) + 1;
  if (m.queryStartLoc.size() != expected)
    return fail("query_start_loc has " + Twine(m.queryStartLoc.size()) +
                " entries, expected num_reqs + 1 = " + Twine(expected));
  return llvm::Error::success();
}

llvm::Error detail::checkShape(const CommonAttentionMetadata &m) {
  if (llvm::Error err = checkQueryStartLocSize(m))
    return err;
  if (m.numActualTokens < 0)
    return fail("num_actual_tokens is " + Twine(m.numActualTokens) +
                ", must be non-negative");
  if (m.maxBlocks < 0)
    return fail("max_blocks is " + Twine(m.maxBlocks) +
                ", must be non-negative");

  const std::vector<int32_t> &loc = m.queryStartLoc;
  if (loc[0] != 0)
    return fail("query_start_loc[0] is " + Twine(loc[0]) + ", must be 0");
  for (int64_t b = 0; b < m.numReqs; ++b)
    if (loc[b + 1] < loc[b])
      return fail("query_start_loc decreases at request " + Twine(b) +
                  ": query_start_loc[" + Twine(b + 1) +
                  "] = " + Twine(loc[b + 1]) + " < query_start_loc[" + Twine(b) +
                  "] = " + Twine(loc[b]) + " (a negative query length)");
  if (loc.back() != m.numActualTokens)
    return fail("query_start_loc[" + Twine(m.numReqs) + "] is " +
                Twine(loc.back()) + ", but num_actual_tokens is " +
                Twine(m.numActualTokens));

  if (static_cast<int64_t>(m.seqLens.size()) != m.numReqs)
    return fail("seq_lens has " + Twine(m.seqLens.size()) +
                " entries, expected num_reqs = " + Twine(m.numReqs));
  // A bounded product: num_reqs x max_blocks may overflow (plan fuzzer).
  if (m.maxBlocks != 0 &&
      m.numReqs > std::numeric_limits<int64_t>::max() / m.maxBlocks)
    return fail("num_reqs * max_blocks = " + Twine(m.numReqs) + " * " +
                Twine(m.maxBlocks) + " overflows int64");
  if (static_cast<int64_t>(m.blockTable.size()) != m.numReqs * m.maxBlocks)
    return fail("block_table has " + Twine(m.blockTable.size()) +
                " entries, expected num_reqs * max_blocks = " + Twine(m.numReqs) +
                " * " + Twine(m.maxBlocks) + " = " +
                Twine(m.numReqs * m.maxBlocks));
  if (static_cast<int64_t>(m.slotMapping.size()) < m.numActualTokens)
    return fail(
        "slot_mapping has " + Twine(m.slotMapping.size()) +
        " entries, fewer than num_actual_tokens = " + Twine(m.numActualTokens));
  return llvm::Error::success();
}

llvm::Error detail::checkDecodeThreshold(int64_t decodeThreshold) {
  if (decodeThreshold < 1)
    return fail("decodeThreshold is " + Twine(decodeThreshold) +
                ", must be at least 1");
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Validation
//===----------------------------------------------------------------------===//

/// Lengths and pages of request `b`; under DCP its pages hold the rank's
/// share of its tokens.
static llvm::Error checkRequest(const CommonAttentionMetadata &m, int64_t b,
                                int64_t numCacheBlocks, int64_t blockSize,
                                const DcpConfig *dcp) {
  int64_t seqLen = m.seqLens[b];
  int64_t queryLen = m.queryLen(b);
  if (seqLen < 0)
    return fail("seq_lens[" + Twine(b) + "] is " + Twine(seqLen) +
                ", must be non-negative");
  if (seqLen < queryLen)
    return fail("request " + Twine(b) + ": seq_lens[" + Twine(b) +
                "] = " + Twine(seqLen) + " is less than its query length " +
                Twine(queryLen) + " (the new tokens are part of the sequence)");
  int64_t stored = dcp ? dcp->localLength(seqLen) : seqLen;
  int64_t pages = cdiv(stored, blockSize);
  if (pages > m.maxBlocks) {
    std::string tokens = std::to_string(stored) + " tokens";
    if (dcp)
      tokens += " (DCP rank " + std::to_string(dcp->rank) + "'s share of " +
                std::to_string(seqLen) + ")";
    return fail("request " + Twine(b) + " needs " + Twine(pages) +
                " pages for " + tokens + " of block size " + Twine(blockSize) +
                ", but the block table has max_blocks = " +
                Twine(m.maxBlocks) + " columns");
  }
  llvm::ArrayRef<int32_t> row = m.blockTableRow(b);
  for (int64_t j = 0; j < pages; ++j)
    if (row[j] < 0 || row[j] >= numCacheBlocks)
      return fail("block_table[" + Twine(b) + "][" + Twine(j) +
                  "] = " + Twine(row[j]) + " is not a page of the cache [0, " +
                  Twine(numCacheBlocks) + ")");
  return llvm::Error::success();
}

/// Slots of request `b`'s new tokens: padding, or in the cache and where
/// the block table puts the token's position.
static llvm::Error checkSlots(const CommonAttentionMetadata &m, int64_t b,
                              int64_t numCacheBlocks, int64_t blockSize) {
  int64_t numSlots = numCacheBlocks * blockSize;
  int64_t context = m.contextLen(b);
  for (int64_t i = 0; i < m.queryLen(b); ++i) {
    int64_t t = m.queryStartLoc[b] + i;
    int64_t slot = m.slotMapping[t];
    if (slot == kPaddingSlot)
      continue;
    if (slot < 0 || slot >= numSlots)
      return fail("slot_mapping[" + Twine(t) + "] = " + Twine(slot) +
                  " is neither -1 (padding) nor a slot of the cache [0, " +
                  Twine(numSlots) + ")");
    int64_t pos = context + i;
    int64_t page = m.blockTableRow(b)[pos / blockSize];
    int64_t expected = page * blockSize + pos % blockSize;
    if (slot != expected)
      return fail("slot_mapping[" + Twine(t) + "] = " + Twine(slot) +
                  ", but token " + Twine(t) + " is position " + Twine(pos) +
                  " of request " + Twine(b) + ", which the block table puts" +
                  " in slot " + Twine(expected) + " (page " + Twine(page) +
                  ", row " + Twine(pos % blockSize) + ")");
  }
  return llvm::Error::success();
}

/// Slots past the actual tokens belong to no request.
static llvm::Error checkSlotPadding(const CommonAttentionMetadata &m) {
  for (size_t t = m.numActualTokens; t < m.slotMapping.size(); ++t)
    if (m.slotMapping[t] != kPaddingSlot)
      return fail("slot_mapping[" + Twine(t) + "] = " + Twine(m.slotMapping[t]) +
                  " is past num_actual_tokens = " + Twine(m.numActualTokens) +
                  " and must be -1 (padding)");
  return llvm::Error::success();
}

/// Under DCP: each new token's slot is the one dcpLocalSlotMapping gives
/// this rank, padding for the tokens other ranks own.
static llvm::Error checkDcpSlots(const CommonAttentionMetadata &m,
                                 int64_t numCacheBlocks, int64_t blockSize,
                                 const DcpConfig &dcp) {
  auto expected = dcpLocalSlotMapping(m, blockSize, dcp);
  if (!expected)
    return expected.takeError();
  int64_t numSlots = numCacheBlocks * blockSize;
  for (int64_t t = 0; t < m.numActualTokens; ++t) {
    int64_t slot = m.slotMapping[t], want = (*expected)[t];
    if (slot == want)
      continue;
    if (want == kPaddingSlot)
      return fail("slot_mapping[" + Twine(t) + "] = " + Twine(slot) +
                  ", but token " + Twine(t) + " belongs to another DCP rank: " +
                  "rank " + Twine(dcp.rank) + " maps it to -1 (padding)");
    if (want >= numSlots)
      return fail("slot_mapping[" + Twine(t) + "]: DCP rank " +
                  Twine(dcp.rank) + " stores the token in slot " + Twine(want) +
                  ", which is not a slot of the cache [0, " + Twine(numSlots) +
                  ")");
    return fail("slot_mapping[" + Twine(t) + "] = " + Twine(slot) +
                ", but DCP rank " + Twine(dcp.rank) +
                " stores the token in slot " + Twine(want) +
                " (its local position in the rank's block table)");
  }
  return llvm::Error::success();
}

static llvm::Error checkMaxima(const CommonAttentionMetadata &m) {
  int64_t longestQuery = 0, longestSeq = 0;
  for (int64_t b = 0; b < m.numReqs; ++b) {
    longestQuery = std::max<int64_t>(longestQuery, m.queryLen(b));
    longestSeq = std::max<int64_t>(longestSeq, m.seqLens[b]);
  }
  // Kernels and the decode/prefill split size work by maxQueryLen, so it
  // must be exact; vLLM documents maxSeqLen as possibly an upper bound.
  if (m.maxQueryLen != longestQuery)
    return fail("max_query_len is " + Twine(m.maxQueryLen) +
                ", but the longest query is " + Twine(longestQuery));
  if (m.maxSeqLen < longestSeq)
    return fail("max_seq_len is " + Twine(m.maxSeqLen) +
                ", less than the longest sequence " + Twine(longestSeq));
  return llvm::Error::success();
}

static llvm::Error validateFor(const CommonAttentionMetadata &m,
                               int64_t numCacheBlocks, int64_t blockSize,
                               const DcpConfig *dcp) {
  if (numCacheBlocks <= 0)
    return fail("numCacheBlocks is " + Twine(numCacheBlocks) +
                ", must be positive");
  if (blockSize <= 0)
    return fail("blockSize is " + Twine(blockSize) + ", must be positive");
  // Slots are int64 (found by the plan fuzzer: the product overflowed).
  if (numCacheBlocks > std::numeric_limits<int64_t>::max() / blockSize)
    return fail("a cache of " + Twine(numCacheBlocks) + " pages of " +
                Twine(blockSize) + " tokens has more slots than int64 indexes");
  if (llvm::Error err = detail::checkShape(m))
    return err;
  for (int64_t b = 0; b < m.numReqs; ++b)
    if (llvm::Error err = checkRequest(m, b, numCacheBlocks, blockSize, dcp))
      return err;
  if (dcp) {
    if (llvm::Error err = checkDcpSlots(m, numCacheBlocks, blockSize, *dcp))
      return err;
  } else {
    for (int64_t b = 0; b < m.numReqs; ++b)
      if (llvm::Error err = checkSlots(m, b, numCacheBlocks, blockSize))
        return err;
  }
  if (llvm::Error err = checkSlotPadding(m))
    return err;
  return checkMaxima(m);
}

llvm::Error validate(const CommonAttentionMetadata &m, int64_t numCacheBlocks,
                     int64_t blockSize) {
  return validateFor(m, numCacheBlocks, blockSize, nullptr);
}

llvm::Error validateDcp(const CommonAttentionMetadata &m,
                        int64_t numCacheBlocks, int64_t blockSize,
                        const DcpConfig &dcp) {
  if (llvm::Error error = checkDcp(dcp, blockSize))
    return error;
  return validateFor(m, numCacheBlocks, blockSize, &dcp);
}

} // namespace mla::runtime
