//===- MetadataDcp.h - Decode context parallelism: a rank's tokens -*- C++ -*-===//
//
// Decode context parallelism (DCP, vLLM's dcp_world_size / dcp_rank)
// spreads each request's latent KV cache over the N ranks of a group: the
// tokens go round-robin in runs of I (vLLM's cp_kv_cache_interleave_size),
// token i living on rank (i / I) mod N, so each rank stores and reads about
// 1/N of every context. A rank keeps its tokens in its own pages, in token
// order: its local position of token i is (i / (I N)) I + i mod I.
//
// This header is the metadata builder's part: which tokens a rank holds
// (vLLM's dcp_local_seq_lens) and where the new tokens it owns go in its
// cache (the slot mapping, padding for the tokens other ranks own), both
// checked like every other metadata field.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_METADATADCP_H
#define MLA_RUNTIME_METADATADCP_H

#include "mla/Runtime/Metadata.h"
#include "mla/Runtime/MetadataChunkedContext.h"

#include <cstdint>
#include <vector>

namespace mla::runtime {

/// A rank's place in its DCP group.
struct DcpConfig {
  int64_t worldSize = 1;  ///< N, `dcp_world_size`
  int64_t rank = 0;       ///< `dcp_rank`, in [0, N)
  int64_t interleave = 1; ///< I, `cp_kv_cache_interleave_size`

  /// The rank holding token `position` of a sequence.
  int64_t ownerOf(int64_t position) const {
    return (position / interleave) % worldSize;
  }
  /// Where token `position` lies among its owner's tokens.
  int64_t localPosition(int64_t position) const {
    return position / (interleave * worldSize) * interleave +
           position % interleave;
  }
  /// How many of a sequence's first `tokens` tokens this rank holds.
  int64_t localLength(int64_t tokens) const;
};

/// Errors unless 1 <= worldSize <= 65536, 0 <= rank < worldSize,
/// 1 <= interleave <= blockSize <= 2^20 and blockSize a multiple of the
/// interleave (a rank's runs of I tokens then never straddle its pages, as
/// vLLM requires).
llvm::Error checkDcp(const DcpConfig &dcp, int64_t blockSize);

/// vLLM's dcp_local_seq_lens: the tokens of each sequence of `seqLens` this
/// rank holds. Errors on a negative length, naming seq_lens[b].
llvm::Expected<std::vector<int32_t>>
dcpLocalSeqLens(llvm::ArrayRef<int32_t> seqLens, const DcpConfig &dcp);

/// The slot mapping of this rank for the new tokens of `metadata`: the
/// batch as every rank sees it (query_start_loc and the global seq_lens;
/// the new tokens are the last query_len positions of each sequence), with
/// the rank's own block table (the pages of its local tokens). Gives the
/// slot of each new token this rank owns, kPaddingSlot for the others and
/// for the padding tail; errors name the request whose local tokens its
/// block table cannot hold.
llvm::Expected<std::vector<int64_t>>
dcpLocalSlotMapping(const CommonAttentionMetadata &metadata, int64_t blockSize,
                    const DcpConfig &dcp);

/// `validate` for a DCP rank: the batch as every rank sees it (global
/// seq_lens) with this rank's block table, wide enough for the rank's share
/// of each sequence, and its slot mapping, which must be what
/// dcpLocalSlotMapping gives (padding for the new tokens other ranks own).
/// Also checks `dcp` (checkDcp).
llvm::Error validateDcp(const CommonAttentionMetadata &m,
                        int64_t numCacheBlocks, int64_t blockSize,
                        const DcpConfig &dcp);

/// How the prefills of a DCP rank read their whole cached context, chunk by
/// chunk of the batch's chunked-context plan (vLLM's context-parallel chunk
/// gather): every rank gathers the tokens it holds of chunk c into
/// `rowsPerRank` rows, packed prefill by prefill; the group all-gathers
/// those rows, rank by rank, into W * rowsPerRank rows; and the chunk's
/// workspace takes them back in token order, token j of prefill b's part
/// of the chunk from gathered row gatherOrder[c][b][j]. Every rank plans
/// the same chunks (the batch as every rank sees it) and knows every rank's
/// share, so the rows line up without exchanging lengths. Arrays are int32
/// and row-major, as gather_cache and mla.chunked_prefill read them.
struct DcpContextPlan {
  /// Rows each rank sends per chunk: the most any rank holds of any chunk.
  int64_t rowsPerRank = 0;
  /// [C][B + 1]: this rank's rows of chunk c, prefill by prefill.
  std::vector<int32_t> localCuSeqLens;
  /// [C][B]: this rank's first local token of prefill b in chunk c (its
  /// tokens of the chunk are consecutive among the tokens it holds).
  std::vector<int32_t> localStarts;
  /// [C][B][orderWidth]: the gathered row of each token of the chunk,
  /// orderWidth being the plan's maxContextChunk; entries past a prefill's
  /// part of the chunk are 0 and never read.
  std::vector<int32_t> gatherOrder;
  int64_t orderWidth = 0;
  /// [B] zeros: each prefill's part of a chunk starts at entry 0 of its
  /// gatherOrder row.
  std::vector<int32_t> orderStarts;

  /// Gathered rows of one chunk, W * rowsPerRank.
  int64_t gatheredRows(const DcpConfig &dcp) const {
    return dcp.worldSize * rowsPerRank;
  }
};

/// The DCP context plan of `chunks` (planned over the global context
/// lengths) for rank dcp.rank. Errors when the gathered rows would not fit
/// int32 (checkDcp's bounds hold for `dcp`).
llvm::Expected<DcpContextPlan> planDcpContext(const ChunkedContextPlan &chunks,
                                              const DcpConfig &dcp);

} // namespace mla::runtime

#endif // MLA_RUNTIME_METADATADCP_H
