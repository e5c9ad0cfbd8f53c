//===- Suites.h - The kernels mla-bench times, shape by shape ---*- C++ -*-===//
//
// One function a suite: the kernels it compiles (per strategy and head
// count), the shapes it runs them on, and the bytes and FLOPs of a call.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TOOLS_MLABENCH_SUITES_H
#define MLA_TOOLS_MLABENCH_SUITES_H

#include "mlir/IR/MLIRContext.h"

namespace mla::bench {

/// The decode: DeepSeek dims, bf16, page 64, one query a request, split
/// by the runtime's decode schedule.
void benchDecode(mlir::MLIRContext &ctx);
/// The prefill attention: qk 192 / v 128, bf16, one sequence, causal and
/// not.
void benchPrefill(mlir::MLIRContext &ctx);
/// merge_attn_states: bf16, head dim 128, with output LSE.
void benchMerge(mlir::MLIRContext &ctx);
/// gather_cache: 576-wide bf16 entries, page 64.
void benchGather(mlir::MLIRContext &ctx);
/// The up-projections of a decode step (the decode query from q_absorb,
/// v_up_proj of its latent output) and of a chunked-context prefill
/// (kv_up_proj of a workspace chunk), per strategy: their kernels are the
/// CUDA-core product (generic) or the tensor-core one (mma-sync, wgmma).
void benchProjections(mlir::MLIRContext &ctx);
/// The chunked-context prefill (mla.chunked_prefill) of one request: its
/// new tokens' causal attention, then per context chunk a gather, the
/// up-projection of the chunk's latent rows, the attention of the new
/// tokens over them and a merge. Timed as direct calls: the op's host code
/// reads the chunk plan from the device, which a graph cannot capture.
void benchChunkedPrefill(mlir::MLIRContext &ctx);

} // namespace mla::bench

#endif // MLA_TOOLS_MLABENCH_SUITES_H
