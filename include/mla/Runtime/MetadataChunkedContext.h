//===- MetadataChunkedContext.h - The chunked-context plan ------*- C++ -*-===//
//
// Prefills with cached context attend over that context in chunks, so the
// up-projected keys and values of only one chunk exist at a time: each chunk
// gathers at most `workspace` latent cache rows for the whole batch (vLLM's
// MLACommonMetadataBuilder, seed 001). This file plans those chunks and
// lays the plan out as mla.chunked_prefill takes it.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_METADATACHUNKEDCONTEXT_H
#define MLA_RUNTIME_METADATACHUNKEDCONTEXT_H

#include "mla/Runtime/Metadata.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <vector>

namespace mla::runtime {

/// vLLM's default context workspace, in tokens:
///   min(max(8 * maxModelLen, 4 * maxNumSeqs * blockSize), 128 * 1024)
/// enough for eight full-length requests or four pages per request, capped
/// so that long-context models do not give up cache space for it (128K
/// tokens of 576 bf16 values are 144 MiB; their keys up-projected for 128
/// heads alone 6 GiB).
int64_t defaultContextWorkspaceTokens(int64_t maxModelLen, int64_t maxNumSeqs,
                                      int64_t blockSize);

/// The chunks in which prefills gather their cached context. With
/// B = numPrefills and C = numChunks, chunk c covers, for prefill b, context
/// tokens [start(c, b), start(c, b) + len(c, b)); all 2-D arrays are
/// row-major [C][...] and int32, as mla.chunked_prefill and gather_cache
/// read them.
///
/// Formula (vLLM's):
///   context_len[b]    = seq_len[b] - query_len[b]
///   maxContextChunk   = round_down(workspace / num_prefills_with_context,
///                                  page_size)
///   numChunks         = cdiv(max(context_len), maxContextChunk)
///   chunk_starts[c][b] = min(c * maxContextChunk, context_len[b])
///   chunk_ends[c][b]   = min(context_len[b], (c + 1) * maxContextChunk)
///   chunk_seq_lens    = chunk_ends - chunk_starts
///   chunk_cu_seq_lens[c] = [0, prefix sums of chunk_seq_lens[c]]
/// vLLM leaves chunk_starts at c * maxContextChunk for every request; here
/// it is clamped to the context length so that no start points past a
/// request's context (the chunk is empty for that request either way).
/// Starts are multiples of the page size (gather_cache then starts on a page
/// boundary) except where clamped to the end of a context.
struct ChunkedContextPlan {
  /// B.
  int64_t numPrefills = 0;
  /// C; 0 when no prefill has context (vLLM then builds no chunk metadata).
  int64_t numChunks = 0;
  /// Workspace rows the plan was made for; every chunk fits in them.
  int64_t workspaceTokens = 0;
  /// Context tokens one prefill gathers per chunk at most; 0 when C is 0.
  int64_t maxContextChunk = 0;
  /// [B] context_len of each prefill.
  std::vector<int32_t> contextLens;
  /// [C][B] `chunk_starts`, operand of mla.chunked_prefill.
  std::vector<int32_t> chunkStarts;
  /// [C][B] chunk_ends (exclusive).
  std::vector<int32_t> chunkEnds;
  /// [C][B] chunk_seq_lens: tokens prefill b gathers in chunk c.
  std::vector<int32_t> chunkSeqLens;
  /// [C][B + 1] `chunk_cu_seq_lens`, operand of mla.chunked_prefill:
  /// workspace rows [cu[c][b], cu[c][b + 1]) hold prefill b's tokens.
  std::vector<int32_t> chunkCuSeqLens;
  /// [C] context_chunk_seq_tot: workspace rows chunk c fills.
  std::vector<int64_t> chunkSeqTot;
  /// [C] context_chunk_max_seq_lens: the longest run in chunk c (max_seqlen_k
  /// of its attention).
  std::vector<int32_t> chunkMaxSeqLens;

  /// First context token prefill b gathers in chunk c.
  int32_t start(int64_t c, int64_t b) const {
    return chunkStarts[c * numPrefills + b];
  }
  /// Context tokens prefill b gathers in chunk c.
  int32_t length(int64_t c, int64_t b) const {
    return chunkSeqLens[c * numPrefills + b];
  }
  /// The [B + 1] cumulative lengths of chunk c.
  llvm::ArrayRef<int32_t> cuSeqLens(int64_t c) const {
    return llvm::ArrayRef<int32_t>(chunkCuSeqLens)
        .slice(c * (numPrefills + 1), numPrefills + 1);
  }
};

/// Plans the chunks for prefills with the given context lengths over a
/// workspace of `workspaceTokens` rows and pages of `pageSize` tokens.
/// Errors when a length is negative, the workspace or page size is not
/// positive, the workspace exceeds int32 offsets, or the workspace cannot
/// hold one page for each prefill with context.
llvm::Expected<ChunkedContextPlan>
planChunkedContext(llvm::ArrayRef<int32_t> contextLens, int64_t workspaceTokens,
                   int64_t pageSize);

/// Everything mla.chunked_prefill takes besides activations, weights and
/// buffers, for the prefills of one batch (with B prefills):
/// cu_seqlens_q [B + 1] (rebased to the first prefill token), block_table
/// [B, maxBlocks] and the chunk plan.
struct ChunkedPrefillMetadata {
  /// Index in the batch of the first prefill (= the number of decodes).
  int64_t firstPrefill = 0;
  /// Flattened query row of the first prefill token (= decode tokens):
  /// the prefill op's `q` starts there.
  int64_t firstPrefillToken = 0;
  /// [B + 1] `cu_seqlens_q`, starting at 0.
  std::vector<int32_t> cuSeqlensQ;
  /// [B, maxBlocks] `block_table`, the prefills' rows.
  std::vector<int32_t> blockTable;
  int64_t maxBlocks = 0;
  ChunkedContextPlan chunks;
};

/// Builds the prefill metadata of `m`, a batch ordered decodes-first (see
/// decodesFirstOrder): the requests after the decodes are the prefills.
/// `workspaceTokens` and `blockSize` as for planChunkedContext (the page
/// size is the cache's block size). Errors from splitDecodesAndPrefills and
/// planChunkedContext pass through.
llvm::Expected<ChunkedPrefillMetadata>
buildChunkedPrefillMetadata(const CommonAttentionMetadata &m,
                            int64_t workspaceTokens, int64_t blockSize,
                            int64_t decodeThreshold = 1);

} // namespace mla::runtime

#endif // MLA_RUNTIME_METADATACHUNKEDCONTEXT_H
