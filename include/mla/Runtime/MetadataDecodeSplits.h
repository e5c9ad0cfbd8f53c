//===- MetadataDecodeSplits.h - Split-KV plan for decode --------*- C++ -*-===//
//
// Decode attention reads every cached token of a request once per step; with
// a small batch and long contexts one CTA per request would leave most SMs
// idle, so each request's KV is split across CTAs whose partial outputs a
// combine step merges by LSE. A fixed split length (the generic GPU kernels
// use 256 tokens per 16 heads) is wrong at both ends: long contexts at
// batch 1 need many more splits to fill the GPU, big batches need fewer to
// avoid paying for partials and the combine. This plan sizes splits from the
// whole batch instead, in the manner of FlashMLA's get_mla_metadata.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_METADATADECODESPLITS_H
#define MLA_RUNTIME_METADATADECODESPLITS_H

#include "mla/Support/MlaDims.h"
#include "mla/Target/DecodeOperandTypes.h"
#include "mla/Target/KernelStrategy.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <vector>

namespace mla::runtime {

/// What the split plan depends on besides the sequence lengths.
struct DecodeSplitConfig {
  /// SMs of the device.
  int64_t numSms = 0;
  /// CTAs of the decode kernel one SM runs at once: 1 for kernels that
  /// fill an SM (FlashMLA's), more for small CTAs that co-reside.
  int64_t ctasPerSm = 1;
  /// Query heads (MLA has one KV head, which all of them share).
  int64_t numHeads = 0;
  /// New tokens per request (Sq; > 1 for speculative decoding).
  int64_t queryLen = 1;
  /// Query rows (head, token) one CTA handles (FlashMLA's block_size_m).
  int64_t rowsPerCta = 64;
  /// KV tokens per unit of work (FlashMLA's block_size_n).
  int64_t tokensPerBlock = 64;
  /// Cost of a request beyond its blocks, in blocks: prologue, partial
  /// output write and its share of the combine (FlashMLA uses 5).
  int64_t fixedOverheadBlocks = 5;
  /// The target floor for a split's length: splits shorter than this cost
  /// more in partials and combine than their parallelism gains, so splits
  /// are never planned shorter (a shorter request keeps one split).
  int64_t minTokensPerSplit = 256;
  /// Most splits of one request the combine step accepts; 0: no limit.
  int64_t maxSplitsPerRequest = 0;
};

/// How each request's KV is split. Formula, with cdiv rounding up:
///   ctasPerSplit     = cdiv(numHeads * queryLen, rowsPerCta)
///   numSmParts       = max(1, numSms * ctasPerSm / ctasPerSplit)
///   blocks[b]        = cdiv(seq_len[b], tokensPerBlock)
///   totalCost        = sum over b of (blocks[b] + fixedOverheadBlocks)
///   budget           = max(cdiv(totalCost, numSmParts),
///                          cdiv(minTokensPerSplit, tokensPerBlock))
///   numSplits[b]     = max(1, cdiv(blocks[b], blocksPerSplit)), at most
///                      maxSplitsPerRequest
/// where blocksPerSplit is `budget`, unless the splits that gives exceed
/// the waves the batch needs (limit = max(numSmParts, B) splits at once):
/// then it is the smallest budget whose splits fit the limit, if that
/// budget is at most cdiv(splits at `budget`, limit) times `budget` (one
/// full wave beats a partial extra one).
/// numSmParts is how many splits run at once; blocksPerSplit is the share
/// of the whole batch's work one of them gets, so a request's split count
/// is proportional to its length, and a lone long request is spread over
/// every part. A request's blocks are dealt out evenly: its first
/// blocks[b] % numSplits[b] splits get one block more than the rest, so the
/// splits of one request differ by at most one block and, as numSplits[b]
/// <= blocks[b] for a non-empty request, none is empty; each holds at most
/// blocksPerSplit blocks unless maxSplitsPerRequest forced fewer splits. An
/// empty request (seq_len 0, e.g. CUDA-graph padding) keeps one empty split, so
/// that the combine still writes its defined empty result (out 0, lse -inf).
struct DecodeSplitPlan {
  /// Splits the device runs at once.
  int64_t numSmParts = 0;
  /// Most blocks one split holds (without a maxSplitsPerRequest cap).
  int64_t blocksPerSplit = 0;
  /// The config's tokensPerBlock: splits begin on multiples of it.
  int64_t tokensPerBlock = 0;
  /// [B] sequence lengths the plan was made for.
  std::vector<int32_t> seqLens;
  /// [B] splits of each request.
  std::vector<int32_t> numSplits;
  /// [B + 1] prefix sums of numSplits (FlashMLA's num_splits): request b's
  /// partial outputs are partials [cuNumSplits[b], cuNumSplits[b + 1]).
  std::vector<int32_t> cuNumSplits;

  /// B.
  int64_t numRequests() const { return static_cast<int64_t>(numSplits.size()); }
  /// Partial outputs the whole batch produces.
  int64_t totalSplits() const { return cuNumSplits.back(); }
  /// First KV token of split s of request b.
  int64_t splitBegin(int64_t b, int64_t s) const;
  /// One past the last KV token of split s of request b.
  int64_t splitEnd(int64_t b, int64_t s) const;
};

/// Splits the device runs at once under `config` (DecodeSplitPlan's
/// numSmParts): the device's CTA slots over the CTAs one split takes.
int64_t decodeSplitSlots(const DecodeSplitConfig &config);

/// The schedule matched to the generic GPU decode kernels: one warp per
/// (head, query) row, 4 rows per 128-thread CTA, 8 CTAs resident per SM,
/// splits starting on cache pages (the kernel deals a request's pages, so
/// tokensPerBlock must be the cache's block size).
DecodeSplitConfig genericDecodeSchedule(int64_t numSms, int64_t numHeads,
                                        int64_t queryLen, int64_t blockSize);

/// Shared memory one block of the tensor-core (mma-sync) decode kernel
/// uses for these operand types (mla/Target/MmaDecodeShape.h): 96,256
/// bytes for DeepSeek dims in bf16, 100,096 over an FP8 cache.
int64_t mmaDecodeSharedBytes(DecodeOperandTypes types, int64_t kvLoraRank,
                             int64_t ropeDim);

/// The schedule matched to the tensor-core decode kernel: 16 (head, query)
/// rows per 128-thread CTA, `ctasPerSm` CTAs resident per SM (the SM's
/// shared memory over mmaDecodeSharedBytes: 2 on an H100, 1 on sm_8x),
/// splits on cache pages.
DecodeSplitConfig mmaDecodeSchedule(int64_t numSms, int64_t ctasPerSm,
                                    int64_t numHeads, int64_t queryLen,
                                    int64_t blockSize);

/// The schedule matched to the wgmma decode kernel (sm_90a): 64 (head,
/// query) rows per 256-thread CTA, one CTA per SM (it takes most of the
/// SM's shared memory), splits on cache pages.
DecodeSplitConfig wgmmaDecodeSchedule(int64_t numSms, int64_t numHeads,
                                      int64_t queryLen, int64_t blockSize);

/// What a decode's schedule depends on: the kernel strategy it is compiled
/// with, its shape, and the device.
struct DecodeKernelShape {
  KernelStrategy strategy = KernelStrategy::Generic;
  /// q's and the cache's element types.
  DecodeOperandTypes operandTypes = DecodeOperandTypes::Other;
  MlaDims dims; ///< the heads, latent and rope dims matter
  int64_t queryLen = 1, blockSize = 0;
  int64_t numSms = 0, sharedBytesPerSm = 0, maxSharedBytesPerBlock = 0;
};

/// The schedule of the split kernel the lowering picks for `shape` (the
/// rules of mla/Target/MmaDecodeShape.h and WgmmaDecodeShape.h): wgmma's,
/// mma-sync's or the generic one.
DecodeSplitConfig decodeScheduleFor(const DecodeKernelShape &shape);

/// Plans the splits of a decode batch with sequence lengths `seqLens`.
/// Errors when a length is negative or a config field is out of range
/// (numSms, numHeads, queryLen, rowsPerCta, tokensPerBlock and
/// minTokensPerSplit positive; fixedOverheadBlocks and maxSplitsPerRequest
/// non-negative).
llvm::Expected<DecodeSplitPlan>
planDecodeSplits(llvm::ArrayRef<int32_t> seqLens,
                 const DecodeSplitConfig &config);

} // namespace mla::runtime

#endif // MLA_RUNTIME_METADATADECODESPLITS_H
