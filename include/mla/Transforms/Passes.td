//===- Passes.td - Passes of the mla compiler --------------*- tablegen -*-===//

#ifndef MLA_TRANSFORMS_PASSES_TD
#define MLA_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def ExpandChunkedPrefill : Pass<"mla-expand-chunked-prefill"> {
  let summary = "rewrites mla.chunked_prefill into its loop of primitive ops";
  let description = [{
    Replaces each `mla.chunked_prefill` with the algorithm it stands for:
    `mla.kv_up_proj` and causal `mla.prefill_attention` over the new tokens,
    then an `scf.for` over context chunks whose body gathers the chunk
    (`mla.gather_cache`), up-projects it, attends non-causally and merges
    into the running output (`mla.merge_attn_states`). Scratch buffers for
    the up-projected keys and values and the per-chunk attention state are
    allocated around the loop and freed after it.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
  ];
}

def ConvertMLAToLoops : Pass<"convert-mla-to-loops"> {
  let summary = "lowers primitive mla ops to vectorized loops over memrefs (CPU)";
  let description = [{
    Lowers every primitive `mla` operation to `scf` loops over the memrefs,
    with the innermost head-dimension loops written as `vector` operations
    of `vector-width` f32 lanes and a scalar tail. Attention uses blocked
    online softmax (FlashAttention-2 style) with f32 accumulators in small
    stack buffers: no scratch grows with sequence length. The composite
    `mla.chunked_prefill` must be expanded first.
  }];
  let options = [
    Option<"vectorWidth", "vector-width", "int64_t", /*default=*/"16",
           "f32 lanes per vector operation in the inner loops">,
    Option<"keyBlock", "key-block", "int64_t", /*default=*/"32",
           "keys scored per online-softmax step">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect",
  ];
}

#endif // MLA_TRANSFORMS_PASSES_TD
