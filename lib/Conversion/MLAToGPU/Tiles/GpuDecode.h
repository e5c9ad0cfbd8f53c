//===- GpuDecode.h - Decode schedule and split kernels ---------*- C++ -*-===//
//
// mla.decode_attention lowers to a split kernel, writing one normalized
// partial output and its LSE per (request, query, head, split), and a
// combine kernel merging the splits. The schedule (which tokens split s of
// request b covers) is shared by every split kernel; the generic one is in
// GpuAttention.cpp, the tensor-core ones in GpuDecodeMma.cpp (mma.sync) and
// GpuDecodeWgmma.cpp (wgmma, sm_90a).
//
//===----------------------------------------------------------------------===//

#ifndef MLA_LIB_CONVERSION_MLATOGPU_GPUDECODE_H
#define MLA_LIB_CONVERSION_MLATOGPU_GPUDECODE_H

#include "GpuKernels.h"

namespace mla::gpu {

/// How a decode call divides each request's keys among splits; one split
/// kernel and one combine kernel serve both schedules.
///  - Default: every request in fixed chunks of `splitTokens` tokens, as
///    many splits as the block table's capacity needs; the lowering
///    allocates the partials.
///  - Planned (the op's num_splits, split_out, split_lse): request b in
///    n = clamp(num_splits[b], 1, S) splits over which its blocks of
///    `page` tokens are dealt evenly (DecodeSplitPlan::splitBegin); the
///    caller owns the partials.
struct DecodeSchedule {
  bool planned;
  int64_t splitTokens; ///< default schedule only
  int64_t page;

  /// Splits request `req` uses: all `capacity` splits, or num_splits[req]
  /// clamped to [1, capacity] (0 only when capacity is 0).
  mlir::Value activeSplits(GpuEmitter &e, mlir::Value numSplits,
                           mlir::Value req, mlir::Value capacity) const;

  /// Tokens [first, end) of split `split` of `n` of a request of `seqLen`
  /// tokens (`end` may exceed what a query row sees; the caller clamps it).
  std::pair<mlir::Value, mlir::Value> tokenRange(GpuEmitter &e,
                                                 mlir::Value split,
                                                 mlir::Value n,
                                                 mlir::Value seqLen) const;
};

/// Where a split kernel writes a block's normalized rows (row: the
/// request's (query, head) row at `query`, `head`). A request with a single
/// split needs no merging, so its split writes the final out and lse and
/// the combine kernel skips it; the splits of other requests write their
/// partials and LSEs for the combine.
struct SplitResults {
  mlir::Value values, lse; ///< out and lse, or the partials and their LSEs
  mlir::Value req, split;
  bool partial;

  /// Indices of a row's values (the column appended by the caller).
  llvm::SmallVector<mlir::Value, 5> rowIndex(mlir::Value query,
                                             mlir::Value head) const {
    if (partial)
      return {req, query, head, split};
    return {req, query, head};
  }
  /// Indices of a row's LSE: [B, Sq, N, S] partials, [B, N, Sq] final.
  llvm::SmallVector<mlir::Value, 4> lseIndex(mlir::Value query,
                                             mlir::Value head) const {
    if (partial)
      return {req, query, head, split};
    return {req, head, query};
  }
};

/// Emits `write` for the final results (out, lse) where `single` (the
/// request's activeSplits is 1), else for the partials (part, partLse) of
/// split `split`. Shared by every split kernel, the generic one included
/// (defined in DecodeSplitBlock.cpp).
void writeSplitResults(GpuEmitter &e, mlir::Value single, mlir::Value req,
                       mlir::Value split, mlir::Value part, mlir::Value partLse,
                       mlir::Value out, mlir::Value lse,
                       const std::function<void(const SplitResults &)> &write);

/// The combine (GpuDecodeCombine.cpp): merges the split partials of
/// `combineArgs` (the plan's num_splits if any, the partials and their
/// LSEs, out and lse) into the op's results, for the requests of more
/// than one split (the split kernel wrote the others'). The host launches
/// the narrow kernel where the workspace has at most 4 splits, else the
/// wide one.
void launchDecodeCombine(DecodeAttentionOp op, KernelFactory &kernels,
                         const DecodeSchedule &schedule, mlir::OpBuilder &host,
                         mlir::ValueRange combineArgs);

/// Whether the tensor-core split kernel serves `op` on `target`: the
/// strategy asks for it, mma_decode::runsOn holds (the rule the MLA
/// layer's schedule uses too), and q and the cache are row-major.
bool useMmaDecodeSplit(DecodeAttentionOp op, const GpuTarget &target);

/// Creates the tensor-core split kernel for `op` and launches it from
/// `host` on grid (ceil(Sq * N / 16), B, splits). `splitArgs` are the
/// split kernel's operands: q, cache, block_table, seq_lens, [num_splits,]
/// partial out, partial lse, out, lse.
void launchMmaDecodeSplit(DecodeAttentionOp op, KernelFactory &kernels,
                          const DecodeSchedule &schedule, mlir::OpBuilder &host,
                          mlir::ValueRange splitArgs, mlir::Value splits);
/// The same over an FP8 cache (GpuDecodeMmaFp8.cpp), which
/// launchMmaDecodeSplit forwards to.
void launchMmaDecodeFp8Split(DecodeAttentionOp op, KernelFactory &kernels,
                             const DecodeSchedule &schedule,
                             mlir::OpBuilder &host, mlir::ValueRange splitArgs,
                             mlir::Value splits);

/// Whether the wgmma split kernel (GpuDecodeWgmma.cpp) serves `op` on
/// `target`: the wgmma strategy, wgmma_decode::runsOn (the MLA layer's
/// rule too), and q and the cache row-major.
bool useWgmmaDecodeSplit(DecodeAttentionOp op, const GpuTarget &target);

/// Creates the wgmma split kernel for `op` and launches it from `host` on
/// grid (ceil(Sq * N / 64), B, splits) with the same operands as
/// launchMmaDecodeSplit (and, where its KV tiles come in by tensor copies,
/// the cache's tensor map).
void launchWgmmaDecodeSplit(DecodeAttentionOp op, KernelFactory &kernels,
                            const DecodeSchedule &schedule,
                            mlir::OpBuilder &host, mlir::ValueRange splitArgs,
                            mlir::Value splits);

} // namespace mla::gpu

#endif // MLA_LIB_CONVERSION_MLATOGPU_GPUDECODE_H
