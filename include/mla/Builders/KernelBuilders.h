//===- KernelBuilders.h - One-op kernel modules -----------------*- C++ -*-===//
//
// Builds, for one mla operation and one specialization (dims, dtypes,
// flags), a module holding `func.func @kernel` whose arguments are the op's
// operands in operand order, with dynamic token, batch and block counts.
// These are the units the runtime compiles and caches, and what tests and
// tools run.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_BUILDERS_KERNELBUILDERS_H
#define MLA_BUILDERS_KERNELBUILDERS_H

#include "mla/Support/DType.h"
#include "mla/Support/MlaDims.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <array>
#include <optional>

namespace mla {

/// Name of the function every builder creates.
inline constexpr const char *kKernelEntry = "kernel";

struct PrefillAttentionSpec {
  int64_t numHeads, qkHeadDim, vHeadDim;
  DType activation;
  bool causal;
  float softmaxScale;
  /// Merge into the state in out/lse (see mla.prefill_attention).
  bool accumulate = false;
};
/// @kernel(q, k, v, cu_seqlens_q, cu_seqlens_k, out, lse)
mlir::OwningOpRef<mlir::ModuleOp>
buildPrefillAttention(mlir::MLIRContext &ctx, const PrefillAttentionSpec &s);

struct DecodeAttentionSpec {
  MlaDims dims;
  DType activation, cache;
  int64_t blockSize;
  bool causal;
  float softmaxScale;
  /// Takes the split-KV schedule: num_splits [B] i32 (DecodeSplitPlan::
  /// numSplits) and the f32 workspaces split_out [B, Sq, N, S, Lkv] and
  /// split_lse [B, Sq, N, S], S the most splits of any request.
  bool withSplitPlan = false;
  /// The cache holds a DCP rank's share: [ranks, run length] (see
  /// mla.decode_attention's kv_share).
  std::optional<std::array<int64_t, 2>> kvShare;
};
/// @kernel(q, kv_cache, block_table, seq_lens, out, lse), or with
/// withSplitPlan
/// @kernel(q, kv_cache, block_table, seq_lens, num_splits, split_out,
///         split_lse, out, lse)
mlir::OwningOpRef<mlir::ModuleOp>
buildDecodeAttention(mlir::MLIRContext &ctx, const DecodeAttentionSpec &s);

struct MergeAttnStatesSpec {
  int64_t numHeads, headDim;
  DType activation;
  bool withOutputLse;
};
/// @kernel(prefix_output, prefix_lse, suffix_output, suffix_lse, output
///         [, output_lse])
mlir::OwningOpRef<mlir::ModuleOp>
buildMergeAttnStates(mlir::MLIRContext &ctx, const MergeAttnStatesSpec &s);

struct MergeAttnStatesNSpec {
  /// States merged (DCP ranks), 1 to 64.
  int64_t numStates;
  /// Heads of the output (a rank's share of the partials' heads); 0: any
  /// number, given at run time.
  int64_t numHeads, headDim;
  DType partials, output;
  bool withOutputLse;
};
/// @kernel(partial_outputs [S, B, Q, N, D], partial_lses [S, B, N, Q],
///         output [B, Q, N, D] [, output_lse [B, N, Q]]), every operand a
/// strided view (rows contiguous): a range of heads of wider buffers.
mlir::OwningOpRef<mlir::ModuleOp>
buildMergeAttnStatesN(mlir::MLIRContext &ctx, const MergeAttnStatesNSpec &s);

struct GatherCacheSpec {
  int64_t entry, blockSize;
  DType cache, workspace;
};
/// @kernel(kv_cache, block_table, cu_seq_lens, seq_starts, workspace)
mlir::OwningOpRef<mlir::ModuleOp>
buildGatherCache(mlir::MLIRContext &ctx, const GatherCacheSpec &s);

struct ConcatAndCacheSpec {
  int64_t kvLoraRank, ropeDim, blockSize;
  DType activation, cache;
};
/// @kernel(kv_c, k_pe, slot_mapping, kv_cache)
mlir::OwningOpRef<mlir::ModuleOp>
buildConcatAndCache(mlir::MLIRContext &ctx, const ConcatAndCacheSpec &s);

struct ProjectionSpec {
  MlaDims dims;
  DType activation;
};
/// @kernel(kv_c, k_pe, kv_b_proj, k, v)
mlir::OwningOpRef<mlir::ModuleOp> buildKvUpProj(mlir::MLIRContext &ctx,
                                                const ProjectionSpec &s);
/// @kernel(q_nope, w_uk_t, ql_nope)
mlir::OwningOpRef<mlir::ModuleOp> buildQAbsorb(mlir::MLIRContext &ctx,
                                               const ProjectionSpec &s);
/// @kernel(q, w_uk_t, decode_q): q [T, N, P + R] -> the absorbed decode
/// query [T, N, Lkv + R] (q_absorb with rope_dim).
mlir::OwningOpRef<mlir::ModuleOp> buildDecodeQuery(mlir::MLIRContext &ctx,
                                                   const ProjectionSpec &s);
/// @kernel(o_latent, w_uv, out)
mlir::OwningOpRef<mlir::ModuleOp> buildVUpProj(mlir::MLIRContext &ctx,
                                               const ProjectionSpec &s);

struct ChunkedPrefillSpec {
  MlaDims dims;
  DType activation, cache;
  int64_t blockSize;
  float softmaxScale;
  /// Only the context chunks, merged into the state out/lse hold (see
  /// mla.chunked_prefill's `context_only`).
  bool contextOnly = false;
};
/// @kernel(q, kv_c, k_pe, cu_seqlens_q, kv_cache, block_table,
///         chunk_cu_seq_lens, chunk_starts, kv_b_proj, workspace, out, lse)
mlir::OwningOpRef<mlir::ModuleOp>
buildChunkedPrefill(mlir::MLIRContext &ctx, const ChunkedPrefillSpec &s);

/// Loads the dialects every built module needs into `ctx`.
void loadKernelDialects(mlir::MLIRContext &ctx);

} // namespace mla

#endif // MLA_BUILDERS_KERNELBUILDERS_H
