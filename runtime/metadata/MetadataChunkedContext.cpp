//===- MetadataChunkedContext.cpp - Context chunks for prefills -----------===//

#include "MetadataSupport.h"

#include "mla/Runtime/MetadataChunkedContext.h"

#include <algorithm>
#include <limits>

namespace mla::runtime {

using detail::cdiv;
using detail::fail;
using llvm::Twine;

int64_t defaultContextWorkspaceTokens(int64_t maxModelLen, int64_t maxNumSeqs,
                                      int64_t blockSize) {
  return std::min<int64_t>(
      std::max<int64_t>(8 * maxModelLen, 4 * maxNumSeqs * blockSize),
      128 * 1024);
}

static llvm::Error checkPlanInputs(llvm::ArrayRef<int32_t> contextLens,
                                   int64_t workspaceTokens, int64_t pageSize) {
  if (pageSize <= 0)
    return fail("page size is " + Twine(pageSize) + ", must be positive");
  if (workspaceTokens <= 0)
    return fail("workspace of " + Twine(workspaceTokens) +
                " tokens: must be positive");
  // Workspace rows are addressed by the int32 chunk_cu_seq_lens.
  if (workspaceTokens > std::numeric_limits<int32_t>::max())
    return fail("workspace of " + Twine(workspaceTokens) +
                " tokens does not fit the int32 offsets of chunk_cu_seq_lens");
  for (size_t b = 0; b < contextLens.size(); ++b)
    if (contextLens[b] < 0)
      return fail("context length of prefill " + Twine(b) + " is " +
                  Twine(contextLens[b]) + ", must be non-negative");
  return llvm::Error::success();
}

/// Fills the per-chunk arrays of `plan`, whose contextLens, numPrefills,
/// numChunks and maxContextChunk are set.
static void fillChunks(ChunkedContextPlan &plan) {
  int64_t numPrefills = plan.numPrefills;
  for (int64_t c = 0; c < plan.numChunks; ++c) {
    int64_t chunkBegin = c * plan.maxContextChunk;
    int64_t chunkEnd = chunkBegin + plan.maxContextChunk;
    int32_t cu = 0, longest = 0;
    plan.chunkCuSeqLens.push_back(0);
    for (int64_t b = 0; b < numPrefills; ++b) {
      int64_t context = plan.contextLens[b];
      auto start = static_cast<int32_t>(std::min(chunkBegin, context));
      auto end = static_cast<int32_t>(std::min(chunkEnd, context));
      plan.chunkStarts.push_back(start);
      plan.chunkEnds.push_back(end);
      plan.chunkSeqLens.push_back(end - start);
      cu += end - start;
      plan.chunkCuSeqLens.push_back(cu);
      longest = std::max(longest, end - start);
    }
    plan.chunkSeqTot.push_back(cu);
    plan.chunkMaxSeqLens.push_back(longest);
  }
}

llvm::Expected<ChunkedContextPlan>
planChunkedContext(llvm::ArrayRef<int32_t> contextLens, int64_t workspaceTokens,
                   int64_t pageSize) {
  if (llvm::Error err = checkPlanInputs(contextLens, workspaceTokens, pageSize))
    return std::move(err);

  ChunkedContextPlan plan;
  plan.numPrefills = static_cast<int64_t>(contextLens.size());
  plan.workspaceTokens = workspaceTokens;
  plan.contextLens.assign(contextLens.begin(), contextLens.end());

  int64_t withContext = 0, longestContext = 0;
  for (int32_t len : contextLens) {
    withContext += len > 0;
    longestContext = std::max<int64_t>(longestContext, len);
  }
  if (withContext == 0)
    return plan;

  // Every prefill with context gets an equal share of the workspace, in
  // whole pages: gather_cache starts each run on a page boundary.
  int64_t share = workspaceTokens / withContext;
  plan.maxContextChunk = share / pageSize * pageSize;
  if (plan.maxContextChunk == 0)
    return fail("a workspace of " + Twine(workspaceTokens) +
                " tokens cannot hold one page (" + Twine(pageSize) +
                " tokens) for each of the " + Twine(withContext) +
                " prefills with context: it needs at least " +
                Twine(withContext * pageSize) + " tokens");
  plan.numChunks = cdiv(longestContext, plan.maxContextChunk);
  fillChunks(plan);
  return plan;
}

llvm::Expected<ChunkedPrefillMetadata>
buildChunkedPrefillMetadata(const CommonAttentionMetadata &m,
                            int64_t workspaceTokens, int64_t blockSize,
                            int64_t decodeThreshold) {
  if (llvm::Error err = detail::checkShape(m))
    return std::move(err);
  llvm::Expected<BatchSplit> split =
      splitDecodesAndPrefills(m, decodeThreshold);
  if (!split)
    return split.takeError();

  ChunkedPrefillMetadata out;
  out.firstPrefill = split->numDecodes;
  out.firstPrefillToken = split->numDecodeTokens;
  out.maxBlocks = m.maxBlocks;
  out.cuSeqlensQ.push_back(0);
  std::vector<int32_t> contextLens;
  for (int64_t b = out.firstPrefill; b < m.numReqs; ++b) {
    out.cuSeqlensQ.push_back(m.queryStartLoc[b + 1] -
                             static_cast<int32_t>(out.firstPrefillToken));
    llvm::ArrayRef<int32_t> row = m.blockTableRow(b);
    out.blockTable.insert(out.blockTable.end(), row.begin(), row.end());
    if (m.contextLen(b) < 0)
      return fail("request " + Twine(b) + ": seq_lens[" + Twine(b) +
                  "] = " + Twine(m.seqLens[b]) +
                  " is less than its query length " + Twine(m.queryLen(b)));
    contextLens.push_back(m.contextLen(b));
  }

  llvm::Expected<ChunkedContextPlan> plan =
      planChunkedContext(contextLens, workspaceTokens, blockSize);
  if (!plan)
    return plan.takeError();
  out.chunks = std::move(*plan);
  return out;
}

} // namespace mla::runtime
