//===- MetadataDcp.cpp - Decode context parallelism: a rank's tokens ------===//

#include "mla/Runtime/MetadataDcp.h"

#include "MetadataSupport.h"

#include <algorithm>

namespace mla::runtime {

using detail::fail;

namespace {
/// Bounds of the interleave and the block size: their product with the
/// world size stays far from int64's end.
constexpr int64_t kMaxTokensInARow = int64_t(1) << 20;

llvm::Error checkInterleave(int64_t interleave) {
  if (interleave < 1 || interleave > kMaxTokensInARow)
    return fail("cp_kv_cache_interleave_size (dcp_interleave) must be in [1, " +
                llvm::Twine(kMaxTokensInARow) + "], got " +
                llvm::Twine(interleave));
  return llvm::Error::success();
}
} // namespace

int64_t DcpConfig::localLength(int64_t tokens) const {
  int64_t cycle = interleave * worldSize;
  int64_t inLastCycle = tokens % cycle - rank * interleave;
  return tokens / cycle * interleave +
         std::clamp<int64_t>(inLastCycle, 0, interleave);
}

llvm::Error checkDcp(const DcpConfig &dcp, int64_t blockSize) {
  if (dcp.worldSize < 1 || dcp.worldSize > 65536)
    return fail("dcp_world_size must be in [1, 65536], got " +
                llvm::Twine(dcp.worldSize));
  if (dcp.rank < 0 || dcp.rank >= dcp.worldSize)
    return fail("dcp_rank must be in [0, dcp_world_size = " +
                llvm::Twine(dcp.worldSize) + "), got " +
                llvm::Twine(dcp.rank));
  if (llvm::Error error = checkInterleave(dcp.interleave))
    return error;
  if (blockSize < 1 || blockSize > kMaxTokensInARow)
    return fail("block_size must be in [1, " + llvm::Twine(kMaxTokensInARow) +
                "], got " + llvm::Twine(blockSize));
  if (dcp.interleave > blockSize || blockSize % dcp.interleave != 0)
    return fail("cp_kv_cache_interleave_size (dcp_interleave) must divide block_size = " +
                llvm::Twine(blockSize) + ", got " +
                llvm::Twine(dcp.interleave));
  return llvm::Error::success();
}

llvm::Expected<std::vector<int32_t>>
dcpLocalSeqLens(llvm::ArrayRef<int32_t> seqLens, const DcpConfig &dcp) {
  // The block size does not matter here: a config without one.
  if (llvm::Error error = checkInterleave(dcp.interleave))
    return std::move(error);
  if (llvm::Error error = checkDcp(dcp, dcp.interleave))
    return std::move(error);
  std::vector<int32_t> local(seqLens.size());
  for (size_t b = 0; b < seqLens.size(); ++b) {
    if (seqLens[b] < 0)
      return fail("seq_lens[" + llvm::Twine(b) + "] = " +
                  llvm::Twine(seqLens[b]) + " is negative");
    local[b] = int32_t(dcp.localLength(seqLens[b]));
  }
  return local;
}

llvm::Expected<std::vector<int64_t>>
dcpLocalSlotMapping(const CommonAttentionMetadata &m, int64_t blockSize,
                    const DcpConfig &dcp) {
  if (llvm::Error error = checkDcp(dcp, blockSize))
    return std::move(error);
  if (llvm::Error error = detail::checkShape(m))
    return std::move(error);
  // checkShape: slotMapping holds numActualTokens, perhaps a padding tail.
  std::vector<int64_t> slots(m.slotMapping.size(), kPaddingSlot);
  for (int64_t b = 0; b < m.numReqs; ++b) {
    int64_t seqLen = m.seqLens[b], context = m.contextLen(b);
    if (context < 0)
      return fail("seq_lens[" + llvm::Twine(b) + "] = " + llvm::Twine(seqLen) +
                  " is shorter than the request's query (" +
                  llvm::Twine(m.queryLen(b)) + " tokens)");
    llvm::ArrayRef<int32_t> pages = m.blockTableRow(b);
    for (int64_t position = context; position < seqLen; ++position) {
      if (dcp.ownerOf(position) != dcp.rank)
        continue;
      int64_t local = dcp.localPosition(position);
      int64_t page = local / blockSize;
      if (page >= m.maxBlocks)
        return fail("request " + llvm::Twine(b) + ": rank " +
                    llvm::Twine(dcp.rank) + " holds " +
                    llvm::Twine(dcp.localLength(seqLen)) +
                    " of its tokens, more than max_blocks = " +
                    llvm::Twine(m.maxBlocks) + " pages of " +
                    llvm::Twine(blockSize) + " hold");
      if (pages[page] < 0)
        return fail("block_table[" + llvm::Twine(b) + ", " +
                    llvm::Twine(page) + "] = " + llvm::Twine(pages[page]) +
                    " is negative");
      int64_t row = m.queryStartLoc[b] + (position - context);
      slots[row] = int64_t(pages[page]) * blockSize + local % blockSize;
    }
  }
  return slots;
}

} // namespace mla::runtime
