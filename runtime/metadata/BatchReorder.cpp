//===- BatchReorder.cpp - Decodes first, then prefills --------------------===//

#include "MetadataSupport.h"

#include "mla/Runtime/Metadata.h"

namespace mla::runtime {

using detail::fail;
using llvm::Twine;

llvm::Expected<std::vector<int64_t>>
decodesFirstOrder(const CommonAttentionMetadata &m, int64_t decodeThreshold) {
  if (llvm::Error err = detail::checkDecodeThreshold(decodeThreshold))
    return std::move(err);
  // All that classifying requests by query length needs.
  if (llvm::Error err = detail::checkQueryStartLocSize(m))
    return std::move(err);
  // A stable partition: two passes keep each class in its original order.
  std::vector<int64_t> order;
  order.reserve(m.numReqs);
  for (int64_t b = 0; b < m.numReqs; ++b)
    if (m.queryLen(b) <= decodeThreshold)
      order.push_back(b);
  for (int64_t b = 0; b < m.numReqs; ++b)
    if (m.queryLen(b) > decodeThreshold)
      order.push_back(b);
  return order;
}

/// Errors unless `order` names each of [0, numReqs) exactly once.
static llvm::Error checkPermutation(llvm::ArrayRef<int64_t> order,
                                    int64_t numReqs) {
  if (static_cast<int64_t>(order.size()) != numReqs)
    return fail("order has " + Twine(order.size()) +
                " entries, but the batch has " + Twine(numReqs) + " requests");
  std::vector<bool> seen(numReqs, false);
  for (size_t i = 0; i < order.size(); ++i) {
    int64_t b = order[i];
    if (b < 0 || b >= numReqs)
      return fail("order[" + Twine(i) + "] = " + Twine(b) +
                  " is not a request of the batch [0, " + Twine(numReqs) + ")");
    if (seen[b])
      return fail("order[" + Twine(i) + "] = " + Twine(b) +
                  " names a request twice: not a permutation");
    seen[b] = true;
  }
  return llvm::Error::success();
}

llvm::Expected<CommonAttentionMetadata>
applyOrder(const CommonAttentionMetadata &m, llvm::ArrayRef<int64_t> order) {
  if (llvm::Error err = detail::checkShape(m))
    return std::move(err);
  if (llvm::Error err = checkPermutation(order, m.numReqs))
    return std::move(err);

  CommonAttentionMetadata out;
  out.numReqs = m.numReqs;
  out.numActualTokens = m.numActualTokens;
  out.maxQueryLen = m.maxQueryLen;
  out.maxSeqLen = m.maxSeqLen;
  out.maxBlocks = m.maxBlocks;
  out.queryStartLoc.assign(1, 0);
  out.seqLens.reserve(m.numReqs);
  out.blockTable.reserve(m.blockTable.size());
  out.slotMapping.reserve(m.slotMapping.size());
  for (int64_t old : order) {
    out.queryStartLoc.push_back(out.queryStartLoc.back() + m.queryLen(old));
    out.seqLens.push_back(m.seqLens[old]);
    llvm::ArrayRef<int32_t> row = m.blockTableRow(old);
    out.blockTable.insert(out.blockTable.end(), row.begin(), row.end());
    auto slots = m.slotMapping.begin();
    out.slotMapping.insert(out.slotMapping.end(), slots + m.queryStartLoc[old],
                           slots + m.queryStartLoc[old + 1]);
  }
  // Padding past the actual tokens belongs to no request: it stays last.
  out.slotMapping.insert(out.slotMapping.end(),
                         m.slotMapping.begin() + m.numActualTokens,
                         m.slotMapping.end());
  return out;
}

llvm::Expected<BatchSplit>
splitDecodesAndPrefills(const CommonAttentionMetadata &m,
                        int64_t decodeThreshold) {
  if (llvm::Error err = detail::checkDecodeThreshold(decodeThreshold))
    return std::move(err);
  if (llvm::Error err = detail::checkQueryStartLocSize(m))
    return std::move(err);

  int64_t firstPrefill = m.numReqs;
  for (int64_t b = 0; b < m.numReqs; ++b) {
    bool isDecode = m.queryLen(b) <= decodeThreshold;
    if (!isDecode && firstPrefill == m.numReqs)
      firstPrefill = b;
    // Everything after the boundary is treated as a prefill, so a decode
    // there would silently run through the prefill path.
    if (isDecode && firstPrefill < b)
      return fail("request " + Twine(b) + " (query length " +
                  Twine(m.queryLen(b)) +
                  ") is a decode after prefill request " + Twine(firstPrefill) +
                  " (query length " + Twine(m.queryLen(firstPrefill)) +
                  "): order the batch decodes-first (decodesFirstOrder, "
                  "applyOrder)");
  }
  BatchSplit split;
  split.numDecodes = firstPrefill;
  split.numPrefills = m.numReqs - firstPrefill;
  split.numDecodeTokens = m.queryStartLoc[firstPrefill];
  split.numPrefillTokens = m.queryStartLoc[m.numReqs] - split.numDecodeTokens;
  return split;
}

} // namespace mla::runtime
