//===- MetadataDcpContext.cpp - A DCP rank's prefill context chunks -------===//

#include "mla/Runtime/MetadataDcp.h"

#include "MetadataSupport.h"

#include <algorithm>
#include <limits>

namespace mla::runtime {

namespace {
/// Every rank's share of one chunk: local first tokens [W][B] and packed
/// row offsets [W][B + 1].
struct ChunkShares {
  std::vector<int64_t> starts, cu;
};

ChunkShares sharesOf(const ChunkedContextPlan &chunks, int64_t c,
                     const DcpConfig &dcp) {
  const int64_t b = chunks.numPrefills;
  ChunkShares shares;
  for (int64_t rank = 0; rank < dcp.worldSize; ++rank) {
    DcpConfig holder = dcp;
    holder.rank = rank;
    int64_t rows = 0;
    shares.cu.push_back(0);
    for (int64_t p = 0; p < b; ++p) {
      int64_t first = holder.localLength(chunks.start(c, p));
      int64_t end = holder.localLength(chunks.start(c, p) + chunks.length(c, p));
      shares.starts.push_back(first);
      rows += end - first;
      shares.cu.push_back(rows);
    }
  }
  return shares;
}
} // namespace

llvm::Expected<DcpContextPlan> planDcpContext(const ChunkedContextPlan &chunks,
                                              const DcpConfig &dcp) {
  const int64_t b = chunks.numPrefills, w = dcp.worldSize;
  DcpContextPlan plan;
  plan.orderWidth = chunks.maxContextChunk;
  plan.orderStarts.assign(b, 0);
  std::vector<ChunkShares> shares;
  for (int64_t c = 0; c < chunks.numChunks; ++c) {
    shares.push_back(sharesOf(chunks, c, dcp));
    for (int64_t rank = 0; rank < w; ++rank)
      plan.rowsPerRank =
          std::max(plan.rowsPerRank, shares.back().cu[rank * (b + 1) + b]);
  }
  if (w * plan.rowsPerRank > std::numeric_limits<int32_t>::max())
    return detail::fail(
        "the group's gathered context rows (" + llvm::Twine(w) + " ranks x " +
        llvm::Twine(plan.rowsPerRank) +
        ") do not fit the int32 offsets gather_cache reads");

  plan.gatherOrder.assign(chunks.numChunks * b * plan.orderWidth, 0);
  for (int64_t c = 0; c < chunks.numChunks; ++c) {
    const ChunkShares &chunk = shares[c];
    auto cuOf = [&](int64_t rank, int64_t p) {
      return chunk.cu[rank * (b + 1) + p];
    };
    for (int64_t p = 0; p <= b; ++p)
      plan.localCuSeqLens.push_back(cuOf(dcp.rank, p));
    for (int64_t p = 0; p < b; ++p) {
      plan.localStarts.push_back(chunk.starts[dcp.rank * b + p]);
      int32_t *order = &plan.gatherOrder[(c * b + p) * plan.orderWidth];
      for (int64_t j = 0; j < chunks.length(c, p); ++j) {
        int64_t token = chunks.start(c, p) + j;
        int64_t holder = dcp.ownerOf(token);
        // The holder's tokens of the chunk sit in its rows in token order.
        int64_t withinShare =
            dcp.localPosition(token) - chunk.starts[holder * b + p];
        order[j] = static_cast<int32_t>(holder * plan.rowsPerRank +
                                        cuOf(holder, p) + withinShare);
      }
    }
  }
  return plan;
}

} // namespace mla::runtime
