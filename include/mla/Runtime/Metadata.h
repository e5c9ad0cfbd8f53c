//===- Metadata.h - Per-batch attention metadata and its checks -*- C++ -*-===//
//
// The host-side description of one batch of requests, as vLLM's
// CommonAttentionMetadata describes it: where each request's new tokens sit
// in the flattened query, how long each sequence is, which cache pages hold
// it and where each new token's latent KV goes. Everything else the runtime
// derives per op (the decode/prefill split, the chunked-context plan, the
// decode split plan, fixed-capacity CUDA-graph buffers) starts from it; see
// MetadataChunkedContext.h, MetadataDecodeSplits.h and MetadataBuffers.h.
//
// Kernels clamp the metadata they read, so bad metadata cannot make them
// touch memory outside their buffers, but it can make them compute the wrong
// thing silently; `validate` is what turns such metadata into an error that
// names the problem before anything is launched.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_METADATA_H
#define MLA_RUNTIME_METADATA_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <vector>

namespace mla::runtime {

/// The slot id vLLM writes for a token whose KV is not stored (padding).
inline constexpr int64_t kPaddingSlot = -1;

/// One batch of requests, mirroring vLLM's CommonAttentionMetadata (host
/// copies only; device copies are the caller's). Field comments give the
/// vLLM name. For request `b`:
///   query_len   = queryStartLoc[b + 1] - queryStartLoc[b]  (new tokens)
///   seq_len     = seqLens[b]            (cached context + new tokens)
///   context_len = seq_len - query_len   (tokens already in the cache)
/// Token `j` of request `b` lives in page `blockTable[b * maxBlocks +
/// j / block_size]`, row `j % block_size`.
struct CommonAttentionMetadata {
  /// `query_start_loc` [numReqs + 1]: request `b` owns query rows
  /// [queryStartLoc[b], queryStartLoc[b + 1]).
  std::vector<int32_t> queryStartLoc;
  /// `seq_lens` [numReqs]: context plus new tokens per request.
  std::vector<int32_t> seqLens;
  /// `block_table_tensor` [numReqs, maxBlocks], row-major.
  std::vector<int32_t> blockTable;
  /// Width of `blockTable` (pages per request it can name).
  int64_t maxBlocks = 0;
  /// `slot_mapping` [num_tokens]: cache slot (page * block_size + row) of
  /// each new token; kPaddingSlot skips the write. It may be longer than
  /// numActualTokens (CUDA-graph padding); the tail is then all padding.
  std::vector<int64_t> slotMapping;
  /// `num_reqs`.
  int64_t numReqs = 0;
  /// `num_actual_tokens`: queryStartLoc[numReqs].
  int64_t numActualTokens = 0;
  /// `max_query_len`: the longest query in the batch (exact).
  int64_t maxQueryLen = 0;
  /// `max_seq_len`: the longest sequence; as in vLLM it may be an upper
  /// bound, never less than the longest.
  int64_t maxSeqLen = 0;

  /// New tokens of request `b` (in int64: before validation the entries
  /// may be anything, and their difference overflows int32).
  int64_t queryLen(int64_t b) const {
    return int64_t(queryStartLoc[b + 1]) - queryStartLoc[b];
  }
  /// Tokens of request `b` already in the cache.
  int64_t contextLen(int64_t b) const { return seqLens[b] - queryLen(b); }
  /// The `maxBlocks` page ids of request `b`.
  llvm::ArrayRef<int32_t> blockTableRow(int64_t b) const {
    return llvm::ArrayRef<int32_t>(blockTable).slice(b * maxBlocks, maxBlocks);
  }
};

/// Builds metadata from per-request query lengths, sequence lengths and
/// block table (row-major [queryLens.size(), maxBlocks]): prefix-sums the
/// query lengths, derives every new token's slot from the block table (the
/// new tokens are the last query_len positions of each sequence) and sets
/// the counts and maxima from the data. The result is what `validate`
/// accepts when the inputs are consistent; nothing is checked here.
CommonAttentionMetadata makeCommonAttentionMetadata(
    llvm::ArrayRef<int32_t> queryLens, llvm::ArrayRef<int32_t> seqLens,
    llvm::ArrayRef<int32_t> blockTable, int64_t maxBlocks, int64_t blockSize);

/// Checks `m` against itself and against a paged cache of `numCacheBlocks`
/// pages of `blockSize` tokens. Errors name the field, the request or token
/// and both sides of the failed comparison. Checked, in order:
///  - sizes: numReqs, numActualTokens, maxBlocks non-negative;
///    queryStartLoc has numReqs + 1 entries, starts at 0, never decreases
///    and ends at numActualTokens; seqLens has numReqs entries; blockTable
///    has numReqs * maxBlocks; slotMapping at least numActualTokens;
///  - per request: seq_len >= 0, seq_len >= query_len, the block table row
///    wide enough for ceil(seq_len / blockSize) pages, each of those pages
///    in [0, numCacheBlocks) (entries past them are padding, unchecked);
///  - per token: a slot is kPaddingSlot or in [0, numCacheBlocks *
///    blockSize), and equal to the slot the block table gives that token's
///    position (a mismatch writes KV where attention will not read it);
///    slots past numActualTokens are padding;
///  - maxQueryLen equals the longest query; maxSeqLen is at least the
///    longest sequence.
llvm::Error validate(const CommonAttentionMetadata &m, int64_t numCacheBlocks,
                     int64_t blockSize);

//===----------------------------------------------------------------------===//
// Decodes first, then prefills
//===----------------------------------------------------------------------===//

/// How a batch ordered decodes-first divides, as vLLM's
/// split_decodes_and_prefills returns it.
struct BatchSplit {
  int64_t numDecodes = 0;
  int64_t numPrefills = 0;
  int64_t numDecodeTokens = 0;
  int64_t numPrefillTokens = 0;
};

/// The order that puts every decode (query_len <= decodeThreshold) before
/// every prefill: result[i] is the old index of the request that moves to
/// position i.
///
/// vLLM's reorder_batch_to_split_decodes_and_prefills reorders its
/// persistent batch in place and moves as few requests as it can: only the
/// requests outside their class's region are swapped, so the relative order
/// within a class is generally not kept (a decode from the back lands where
/// the first misplaced prefill was). Here nothing persists between steps
/// and moving a request costs the same wherever it goes, so the partition is
/// stable instead: requests keep their relative order within each class.
/// That makes the result a function of the batch alone, and keeps requests
/// that arrive in order (e.g. by age) in that order. (Recent vLLM also
/// orders prefills with context before those without and counts a request
/// with nothing computed yet as a prefill even at one new token; the class
/// here is the query length alone, as in split_decodes_and_prefills.)
/// Errors when decodeThreshold < 1 or the query start locations are
/// malformed.
llvm::Expected<std::vector<int64_t>>
decodesFirstOrder(const CommonAttentionMetadata &m,
                  int64_t decodeThreshold = 1);

/// `m` with its requests in the order `order` (as decodesFirstOrder returns
/// it): query start locations recomputed, sequence lengths, block table
/// rows and each request's slots moved with their request; slot padding past
/// the actual tokens stays at the end. Errors when `order` is not a
/// permutation of [0, numReqs).
llvm::Expected<CommonAttentionMetadata>
applyOrder(const CommonAttentionMetadata &m, llvm::ArrayRef<int64_t> order);

/// Counts the leading decodes of a batch ordered decodes-first and the
/// prefills after them. Errors when a decode follows a prefill (the batch
/// was not reordered) or decodeThreshold < 1.
llvm::Expected<BatchSplit>
splitDecodesAndPrefills(const CommonAttentionMetadata &m,
                        int64_t decodeThreshold = 1);

} // namespace mla::runtime

#endif // MLA_RUNTIME_METADATA_H
