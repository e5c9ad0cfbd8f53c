//===- MlaReference.h - Float64 reference for MLA attention -----*- C++ -*-===//
//
// Straightforward double-precision implementations of the pieces of DeepSeek
// Multi-head Latent Attention (MLA): MHA-form prefill attention, absorbed
// (latent) paged decode attention, attention-state merging, paged-cache
// gather/scatter, the up-projections, and a direct (unchunked) prefill with
// cached context. They exist to check optimized implementations, so they
// favour obviously-correct loops over speed.
//
// Conventions shared by every function:
//  * Tensors are dense, row-major std::vector values; shapes are given in
//    brackets, the last dimension contiguous.
//  * LSE (log-sum-exp of the scaled scores) uses the natural logarithm. A query
//    that sees no key has output 0 and LSE -infinity.
//  * Causal masking with fewer queries than keys is bottom-right aligned: the
//    last query lines up with the last key.
//  * Malformed arguments (size mismatches, out-of-range indices) throw
//    std::invalid_argument so that a broken test setup cannot pass silently.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TEST_REFERENCE_MLAREFERENCE_H
#define MLA_TEST_REFERENCE_MLAREFERENCE_H

#include <cstdint>
#include <string>
#include <vector>

namespace mla {
namespace ref {

/// Variable-length MHA attention (FlashAttention varlen semantics).
///
///   q           [T, N, qkDim]
///   k           [S, N, qkDim]
///   v           [S, N, vDim]
///   cuSeqlensQ  [B + 1]  sequence b owns query rows [cuq[b], cuq[b+1])
///   cuSeqlensK  [B + 1]  sequence b owns key rows   [cuk[b], cuk[b+1])
///   out         [T, N, vDim]  pre-sized by the caller
///   lse         [N, T]        pre-sized by the caller
///
/// score = scale * dot(q, k). With `causal`, query i of a sequence with Sq
/// queries and Skv keys sees keys 0 .. i + (Skv - Sq) inclusive (possibly
/// none). Rows that belong to no sequence are left untouched.
void prefillAttention(const std::vector<double> &q,
                      const std::vector<double> &k,
                      const std::vector<double> &v,
                      const std::vector<int32_t> &cuSeqlensQ,
                      const std::vector<int32_t> &cuSeqlensK, int64_t numHeads,
                      int64_t qkDim, int64_t vDim, double scale, bool causal,
                      std::vector<double> &out, std::vector<double> &lse);

/// Absorbed MLA decode attention over a paged latent cache (MQA form: one
/// latent key/value row shared by all heads).
///
///   q           [B, Sq, N, L + R]   (absorbed q_nope followed by q_pe)
///   kvCache     [numBlocks, blockSize, L + R]
///   blockTable  [B, maxBlocks]
///   seqLens     [B]  cached tokens of each request, including its Sq new ones
///   out         [B, Sq, N, L]   resized and fully written
///   lse         [B, N, Sq]      resized and fully written
///
/// Token j of request b lives in row j % blockSize of page
/// blockTable[b][j / blockSize]. Its key is the whole cache row (L + R values)
/// and its value is the first L values. With `causal`, query s sees tokens
/// 0 .. seqLens[b] - Sq + s inclusive; otherwise all seqLens[b] tokens.
void decodeAttention(const std::vector<double> &q,
                     const std::vector<double> &kvCache,
                     const std::vector<int32_t> &blockTable,
                     const std::vector<int32_t> &seqLens, int64_t numBlocks,
                     int64_t blockSize, int64_t maxBlocks, int64_t batch,
                     int64_t queryLen, int64_t numHeads, int64_t kvLoraRank,
                     int64_t ropeDim, double scale, bool causal,
                     std::vector<double> &out, std::vector<double> &lse);

/// Merges two partial attention results over disjoint key sets.
///
///   prefixOut, suffixOut  [T, N, D]
///   prefixLse, suffixLse  [N, T]
///   out                   [T, N, D]  resized and fully written
///   outLse                [N, T]     resized and fully written
///
/// An LSE of +inf is treated as -inf (an empty state), as some kernels emit
/// +inf for an empty key set. If both states are empty the result is out = 0,
/// lse = -inf (never NaN). The output of an empty state is ignored entirely.
void mergeAttnStates(const std::vector<double> &prefixOut,
                     const std::vector<double> &prefixLse,
                     const std::vector<double> &suffixOut,
                     const std::vector<double> &suffixLse, int64_t T, int64_t N,
                     int64_t D, std::vector<double> &out,
                     std::vector<double> &outLse);

/// Gathers consecutive tokens of each request's paged context into a dense
/// workspace.
///
///   kvCache     [numBlocks, blockSize, E]
///   blockTable  [B, maxBlocks]
///   cuSeqLens   [B + 1]  request b writes workspace rows [cu[b], cu[b+1])
///   seqStarts   [B]      first context token that request b copies
///   workspace   [W, E]   pre-sized; rows no request writes are untouched
///
/// Workspace row cu[b] + i receives context token seqStarts[b] + i.
void gatherCache(const std::vector<double> &kvCache,
                 const std::vector<int32_t> &blockTable,
                 const std::vector<int32_t> &cuSeqLens,
                 const std::vector<int32_t> &seqStarts, int64_t blockSize,
                 int64_t maxBlocks, int64_t E, std::vector<double> &workspace);

/// Writes new latent rows into the paged cache.
///
///   kvC          [T, L]
///   kPe          [T, R]
///   slotMapping  [T]  slot < 0 marks a padded token and is skipped
///   kvCache      [numBlocks, blockSize, L + R]  updated in place
///
/// Row slot % blockSize of page slot / blockSize becomes concat(kvC[t],
/// kPe[t]).
void concatAndCache(const std::vector<double> &kvC,
                    const std::vector<double> &kPe,
                    const std::vector<int64_t> &slotMapping, int64_t L,
                    int64_t R, int64_t blockSize, int64_t numBlocks,
                    std::vector<double> &kvCache);

/// Up-projects latent rows into per-head MHA keys and values (kv_b_proj).
///
///   kvC      [S, L]
///   kPe      [S, R]
///   kvBProj  [L, N, P + V]  (first P columns: W_UK, last V: W_UV)
///   k        [S, N, P + R]  resized and fully written
///   v        [S, N, V]      resized and fully written
///
/// k[s,h,0:P] = kvC[s] x W[:,h,0:P]; k[s,h,P:P+R] = kPe[s] (shared by heads);
/// v[s,h,:]   = kvC[s] x W[:,h,P:P+V].
void kvUpProj(const std::vector<double> &kvC, const std::vector<double> &kPe,
              const std::vector<double> &kvBProj, int64_t S, int64_t N,
              int64_t L, int64_t P, int64_t R, int64_t V,
              std::vector<double> &k, std::vector<double> &v);

/// Absorbs W_UK into the no-rope part of the queries.
///
///   qNope   [T, N, P]
///   wUkT    [N, P, L]
///   qlNope  [T, N, L]  resized and fully written
///
/// qlNope[t,h,l] = sum_p qNope[t,h,p] * wUkT[h,p,l].
void qAbsorb(const std::vector<double> &qNope, const std::vector<double> &wUkT,
             int64_t T, int64_t N, int64_t P, int64_t L,
             std::vector<double> &qlNope);

/// Projects latent attention outputs to the value head dimension.
///
///   oLatent  [T, N, L]
///   wUv      [N, L, V]
///   out      [T, N, V]  resized and fully written
///
/// out[t,h,v] = sum_l oLatent[t,h,l] * wUv[h,l,v].
void vUpProj(const std::vector<double> &oLatent, const std::vector<double> &wUv,
             int64_t T, int64_t N, int64_t L, int64_t V,
             std::vector<double> &out);

/// MHA-form prefill with cached context, computed directly (no chunking and no
/// merging) so that it independently checks a chunked implementation.
///
///   q            [T, N, P + R]
///   kvCNew       [T, L]   latent rows of the new tokens (same rows as q)
///   kPeNew       [T, R]
///   cuSeqlensQ   [B + 1]  request b's new tokens are rows [cuq[b], cuq[b+1])
///   contextLens  [B]      tokens of request b already in the paged cache
///   kvCache      [numBlocks, blockSize, L + R]
///   blockTable   [B, maxBlocks]
///   kvBProj      [L, N, P + V]
///   out          [T, N, V]  pre-sized; rows outside all requests untouched
///   lse          [N, T]     pre-sized; rows outside all requests untouched
///
/// For request b the key sequence is its ctx[b] context tokens (token j at row
/// j % blockSize of page blockTable[b][j / blockSize]) followed by its new
/// tokens; each latent row is up-projected as in kvUpProj. Masking is causal
/// bottom-right over the whole sequence: new token i sees every context token
/// and new tokens 0 .. i.
void mlaPrefillWithContext(
    const std::vector<double> &q, const std::vector<double> &kvCNew,
    const std::vector<double> &kPeNew, const std::vector<int32_t> &cuSeqlensQ,
    const std::vector<int32_t> &contextLens, const std::vector<double> &kvCache,
    const std::vector<int32_t> &blockTable, const std::vector<double> &kvBProj,
    int64_t numBlocks, int64_t blockSize, int64_t maxBlocks, int64_t N,
    int64_t L, int64_t P, int64_t R, int64_t V, double scale,
    std::vector<double> &out, std::vector<double> &lse);

/// ||got - want||_2 / max(||want||_2, tiny).
///
/// Returns +inf when the sizes differ, when any `got` is NaN, or when a `got`
/// is infinite where `want` is finite (or differs from an infinite `want`).
/// Positions where both hold the same infinity count as exact matches and are
/// left out of both norms; a NaN in `want` also gives +inf.
double relativeL2Error(const std::vector<double> &got,
                       const std::vector<double> &want);

/// Compares LSE tensors. -inf must match -inf exactly (+inf in `got` is NOT
/// accepted as an empty row here), finite values must agree within `absTol`,
/// and NaN never matches. On a mismatch, `why` (if non-null) describes the
/// first one: index, got, want.
bool lseMatches(const std::vector<double> &got, const std::vector<double> &want,
                double absTol, std::string *why);

} // namespace ref
} // namespace mla

#endif // MLA_TEST_REFERENCE_MLAREFERENCE_H
