//===- MLAOps.td - Operations of the mla dialect -----------*- tablegen -*-===//
//
// Each operation's description is its reference; docs/dialect.md collects
// them with the conventions they share.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_OPS_TD
#define MLA_OPS_TD

include "mla/Dialect/MLADialect.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// Operand roles with their memory effects.
class MLA_In<string desc> : Arg<AnyMemRef, desc, [MemRead]>;
class MLA_Out<string desc> : Arg<AnyMemRef, desc, [MemWrite]>;
class MLA_InOut<string desc> : Arg<AnyMemRef, desc, [MemRead, MemWrite]>;

// A model dimension: positive and bounded, so sums of dims cannot overflow.
def MLA_DimAttr : ConfinedAttr<I64Attr, [IntPositive, IntMaxValue<65536>]>;

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

def MLA_PrefillAttentionOp : MLA_Op<"prefill_attention"> {
  let summary = "varlen multi-head attention with LSE (the MHA form of MLA prefill)";
  let description = [{
    Attention over packed variable-length sequences. Sequence `b` owns query
    rows `[cu_seqlens_q[b], cu_seqlens_q[b+1])` of `q` and key/value rows
    `[cu_seqlens_k[b], cu_seqlens_k[b+1])` of `k` and `v`. The qk head dim
    (`P + R`, 192 for DeepSeek) and the v head dim (128) are independent.

    With `causal`, masking is bottom-right aligned: query `i` of a sequence
    with `Sq` queries and `Skv` keys sees keys `0 .. i + (Skv - Sq)`.

    Writes `out[t, h, :]` and `lse[h, t]` (natural log, f32). A row that sees
    no key gets `out = 0` and `lse = -inf`.

    With `accumulate`, `out` and `lse` hold an attention state over other
    keys on entry, and the op merges its own result into it exactly as
    `mla.merge_attn_states` would (the chunked prefill's running state
    takes each context chunk this way, with no chunk output written and
    read back). A row whose entry `lse` is `-inf` (or `+inf`) is an empty
    state: its entry `out` is not used. Rows of no sequence are left as
    they are.

    Shapes: q [T, N, Dqk], k [S, N, Dqk], v [S, N, Dv], cu_seqlens_q and
    cu_seqlens_k [B+1] i32, out [T, N, Dv], lse [N, T] f32. q, k, v and out
    share one element type (f32, f16 or bf16); arithmetic is f32.

    ```mlir
    mla.prefill_attention
        ins(%q, %k, %v, %cu_q, %cu_k : memref<?x16x192xbf16>, memref<?x16x192xbf16>,
            memref<?x16x128xbf16>, memref<?xi32>, memref<?xi32>)
        outs(%out, %lse : memref<?x16x128xbf16>, memref<16x?xf32>)
        {num_heads = 16 : i64, qk_head_dim = 192 : i64, v_head_dim = 128 : i64,
         softmax_scale = 0.0722 : f32, causal}
    ```
  }];
  let arguments = (ins
    MLA_In<"queries [T, N, Dqk]">:$q,
    MLA_In<"keys [S, N, Dqk]">:$k,
    MLA_In<"values [S, N, Dv]">:$v,
    MLA_In<"query offsets per sequence [B+1]">:$cu_seqlens_q,
    MLA_In<"key offsets per sequence [B+1]">:$cu_seqlens_k,
    MLA_InOut<"attention output [T, N, Dv] (read with accumulate)">:$out,
    MLA_InOut<"log-sum-exp [N, T] (read with accumulate)">:$lse,
    MLA_DimAttr:$num_heads,
    MLA_DimAttr:$qk_head_dim,
    MLA_DimAttr:$v_head_dim,
    F32Attr:$softmax_scale,
    UnitAttr:$causal,
    UnitAttr:$accumulate
  );
  let assemblyFormat = [{
    `ins` `(` $q `,` $k `,` $v `,` $cu_seqlens_q `,` $cu_seqlens_k `:`
      type($q) `,` type($k) `,` type($v) `,` type($cu_seqlens_q) `,` type($cu_seqlens_k) `)`
    `outs` `(` $out `,` $lse `:` type($out) `,` type($lse) `)`
    attr-dict
  }];
}

def MLA_DecodeAttentionOp : MLA_Op<"decode_attention",
                                   [AttrSizedOperandSegments]> {
  let summary = "absorbed MLA decode attention over a paged latent KV cache";
  let description = [{
    The data-movement friendly form: every head attends over the shared
    latent cache (multi-query attention) with qk dim `kv_lora_rank +
    rope_dim` (576) and v dim `kv_lora_rank` (512); the value of a cached
    token is the first `kv_lora_rank` entries of its cache row.

    Request `b` has `seq_lens[b]` cached tokens, which already include its
    `Sq` new tokens. Token `j` lives in page `block_table[b, j / block_size]`
    at row `j % block_size`. With `causal` (the usual case for `Sq > 1`,
    speculative tokens), query `s` sees tokens `0 .. seq_lens[b] - Sq + s`;
    without it every query sees all `seq_lens[b]` tokens. A query that sees
    no token gets `out = 0` and `lse = -inf`.

    With `kv_share = array<i64: W, I>` the cache holds a share of each
    sequence, as a rank of a decode-context-parallel group of W ranks does
    with runs of I tokens: of the tokens counted by `seq_lens[b]`, those in
    runs `0, W, 2W, ...` (token j when `(j / I) mod W == 0`), in order, so
    `held(n) = (n / (W I)) I + min(n mod (W I), I)` of the first n tokens.
    The caller counts from the rank's first token (a rank r passes the
    sequence's length minus `r I`, at least 0), so every rank runs the same
    kernel. Token j of the request is then held token j of its pages; the
    request attends over its `held(seq_lens[b])` tokens, and under `causal`
    query `s` over `held(seq_lens[b] - Sq + 1 + s)` of them: the rank's part
    of the sequence's causal mask, which a mask over its own tokens alone
    would not be when Sq > 1. Split plans count held tokens.

    Shapes: q [B, Sq, N, 576] (absorbed q_nope followed by q_pe), kv_cache
    [num_blocks, block_size, 576] of `cache_dtype`, block_table
    [B, max_blocks] i32, seq_lens [B] i32, out [B, Sq, N, 512], lse
    [B, N, Sq] f32 (natural log). Heads: 1 to 128.

    Split-KV schedule (optional; the three operands are given together or
    not at all): `num_splits` [B] i32, `split_out` [B, Sq, N, S, Lkv] f32
    and `split_lse` [B, Sq, N, S] f32, S being the most splits any request
    may use. These are scheduling operands: they never change the result
    (up to float rounding), only how a kernel divides the work and where it
    keeps its partial results, so that the runtime owns the workspace
    (allocated once; calls allocate nothing and can be captured in CUDA
    graphs). The CPU lowering ignores them. On the GPU, request `b` is
    split into `n = clamp(num_splits[b], 1, S)` parts (metadata is clamped,
    so bad metadata never reads or writes outside the buffers); with
    `blocks = cdiv(seq_lens[b], block_size)`, `base = blocks / n` and
    `rem = blocks % n`, split `s < n` covers the tokens of blocks
    `[s * base + min(s, rem), that + base + (s < rem ? 1 : 0))` (as
    DecodeSplitPlan::splitBegin/splitEnd deal them with tokensPerBlock =
    `block_size`), each query row further clamped to the tokens it sees
    under `causal`. Splits `s >= n` write nothing, and the combine reads the
    first `n` partials only; an empty request still gets `out = 0`,
    `lse = -inf`. Without these operands the GPU lowering allocates its own
    partials and splits every request into fixed-size chunks.

    ```mlir
    mla.decode_attention
        ins(%q, %cache, %bt, %lens : memref<?x?x16x576xbf16>,
            memref<?x64x576xbf16>, memref<?x?xi32>, memref<?xi32>)
        splits(%num_splits, %split_out, %split_lse : memref<?xi32>,
               memref<?x?x16x?x512xf32>, memref<?x?x16x?xf32>)
        outs(%out, %lse : memref<?x?x16x512xbf16>, memref<?x16x?xf32>)
        {num_heads = 16 : i64, kv_lora_rank = 512 : i64, rope_dim = 64 : i64,
         block_size = 64 : i64, cache_dtype = bf16, softmax_scale = 0.0722 : f32,
         causal}
    ```
  }];
  let arguments = (ins
    MLA_In<"absorbed queries [B, Sq, N, Lkv + R]">:$q,
    MLA_In<"paged latent cache [num_blocks, block_size, Lkv + R]">:$kv_cache,
    MLA_In<"page ids per request [B, max_blocks]">:$block_table,
    MLA_In<"cached tokens per request, new ones included [B]">:$seq_lens,
    Arg<Optional<AnyMemRef>, "FP8 cache scale [1] f32", [MemRead]>:$kv_scale,
    Arg<Optional<AnyMemRef>, "splits per request [B] (schedule)",
        [MemRead]>:$num_splits,
    Arg<Optional<AnyMemRef>, "partial outputs workspace [B, Sq, N, S, Lkv]",
        [MemRead, MemWrite]>:$split_out,
    Arg<Optional<AnyMemRef>, "partial log-sum-exp workspace [B, Sq, N, S]",
        [MemRead, MemWrite]>:$split_lse,
    MLA_Out<"latent output [B, Sq, N, Lkv]">:$out,
    MLA_Out<"log-sum-exp [B, N, Sq]">:$lse,
    MLA_DimAttr:$num_heads,
    MLA_DimAttr:$kv_lora_rank,
    MLA_DimAttr:$rope_dim,
    MLA_DimAttr:$block_size,
    TypeAttr:$cache_dtype,
    F32Attr:$softmax_scale,
    UnitAttr:$causal,
    OptionalAttr<DenseI64ArrayAttr>:$kv_share
  );
  let assemblyFormat = [{
    `ins` `(` $q `,` $kv_cache `,` $block_table `,` $seq_lens `:`
      type($q) `,` type($kv_cache) `,` type($block_table) `,` type($seq_lens) `)`
    (`scale` `(` $kv_scale^ `:` type($kv_scale) `)`)?
    (`splits` `(` $num_splits^ `,` $split_out `,` $split_lse `:`
      type($num_splits) `,` type($split_out) `,` type($split_lse) `)`)?
    `outs` `(` $out `,` $lse `:` type($out) `,` type($lse) `)`
    attr-dict
  }];
  let extraClassDeclaration = [{
    /// True when the split-KV schedule operands (num_splits, split_out,
    /// split_lse) are present.
    bool hasSplitPlan() { return getNumSplits() != nullptr; }
  }];
}

def MLA_MergeAttnStatesOp : MLA_Op<"merge_attn_states"> {
  let summary = "merges two partial attention states through their LSEs";
  let description = [{
    Combines the attention of the same queries over two disjoint key sets:
    with `m = max(lse_p, lse_s)`,
    `out = (exp(lse_p - m) * out_p + exp(lse_s - m) * out_s) /
           (exp(lse_p - m) + exp(lse_s - m))` and
    `output_lse = m + log(exp(lse_p - m) + exp(lse_s - m))`.

    An LSE of `+inf` is read as `-inf` (an empty state, as some kernels
    write it). Merging two empty states gives `out = 0`, `lse = -inf`, never
    NaN. The output may alias either input: the operation is elementwise.

    Shapes: outputs [T, N, D], LSEs [N, T] f32. `prefix_lse`, `suffix_lse`
    and `output_lse` may be strided differently from one another.
  }];
  let arguments = (ins
    MLA_In<"prefix output [T, N, D]">:$prefix_output,
    MLA_In<"prefix log-sum-exp [N, T]">:$prefix_lse,
    MLA_In<"suffix output [T, N, D]">:$suffix_output,
    MLA_In<"suffix log-sum-exp [N, T]">:$suffix_lse,
    MLA_Out<"merged output [T, N, D]">:$output,
    Arg<Optional<AnyMemRef>, "merged log-sum-exp [N, T]", [MemWrite]>:$output_lse
  );
  let assemblyFormat = [{
    `ins` `(` $prefix_output `,` $prefix_lse `,` $suffix_output `,` $suffix_lse `:`
      type($prefix_output) `,` type($prefix_lse) `,` type($suffix_output) `,` type($suffix_lse) `)`
    `outs` `(` $output (`,` $output_lse^)? `:` type($output) (`,` type($output_lse)^)? `)`
    attr-dict
  }];
}

def MLA_MergeAttnStatesNOp : MLA_Op<"merge_attn_states_n"> {
  let summary = "merges S partial attention states through their LSEs";
  let description = [{
    The S-way form of `mla.merge_attn_states`: combines the attention of the
    same queries over S disjoint key sets (the ranks of decode context
    parallelism, each holding a share of every request's tokens). With
    `m = max_s lse_s`, `w_s = exp(lse_s - m)`,
    `out = sum_s w_s * out_s / sum_s w_s` and
    `output_lse = m + log(sum_s w_s)`: the two-way formula, to which it
    reduces at S = 2.

    An LSE of `+inf` is read as `-inf` (an empty state). A state that is
    empty gets weight 0, and when all are, `out = 0` and `lse = -inf`, never
    NaN. A NaN LSE makes its row NaN.

    Shapes follow the decode's outputs: partial_outputs [S, B, Q, N, D]
    (request b's query token q at token row b * Q + q of a [B * Q, N, D]
    output), partial_lses [S, B, N, Q] f32, output [B, Q, N, D],
    output_lse [B, N, Q] f32. S is static, 1 to 64. Every operand may be a
    strided view (a range of heads, say); the outputs must not overlap the
    inputs.
  }];
  let arguments = (ins
    MLA_In<"partial outputs [S, B, Q, N, D]">:$partial_outputs,
    MLA_In<"partial log-sum-exps [S, B, N, Q]">:$partial_lses,
    MLA_Out<"merged output [B, Q, N, D]">:$output,
    Arg<Optional<AnyMemRef>, "merged log-sum-exp [B, N, Q]", [MemWrite]>:$output_lse
  );
  let assemblyFormat = [{
    `ins` `(` $partial_outputs `,` $partial_lses `:`
      type($partial_outputs) `,` type($partial_lses) `)`
    `outs` `(` $output (`,` $output_lse^)? `:` type($output) (`,` type($output_lse)^)? `)`
    attr-dict
  }];
}

//===----------------------------------------------------------------------===//
// Paged cache movement
//===----------------------------------------------------------------------===//

def MLA_GatherCacheOp : MLA_Op<"gather_cache"> {
  let summary = "gathers a chunk of cached context into a contiguous workspace";
  let description = [{
    For request `b`, copies `cu_seq_lens[b+1] - cu_seq_lens[b]` consecutive
    cached tokens, starting at token `seq_starts[b]` of its context, into
    workspace rows `[cu_seq_lens[b], cu_seq_lens[b+1])`. Token `j` of request
    `b` is row `j % block_size` of page `block_table[b, j / block_size]`.
    Entries are converted from the cache dtype to the workspace's.

    Shapes: kv_cache [num_blocks, block_size, E], block_table [B, max_blocks]
    i32, cu_seq_lens [B+1] i32, seq_starts [B] i32, workspace [W, E].
  }];
  let arguments = (ins
    MLA_In<"paged cache [num_blocks, block_size, E]">:$kv_cache,
    MLA_In<"page ids per request [B, max_blocks]">:$block_table,
    MLA_In<"workspace offsets per request [B+1]">:$cu_seq_lens,
    MLA_In<"first context token to copy per request [B]">:$seq_starts,
    Arg<Optional<AnyMemRef>, "FP8 cache scale [1] f32", [MemRead]>:$kv_scale,
    MLA_Out<"contiguous rows [W, E]">:$workspace,
    MLA_DimAttr:$block_size
  );
  let assemblyFormat = [{
    `ins` `(` $kv_cache `,` $block_table `,` $cu_seq_lens `,` $seq_starts `:`
      type($kv_cache) `,` type($block_table) `,` type($cu_seq_lens) `,` type($seq_starts) `)`
    (`scale` `(` $kv_scale^ `:` type($kv_scale) `)`)?
    `outs` `(` $workspace `:` type($workspace) `)`
    attr-dict
  }];
}

def MLA_ConcatAndCacheOp : MLA_Op<"concat_and_cache"> {
  let summary = "writes new latent and rope entries into the paged cache";
  let description = [{
    For each new token `t` with `slot = slot_mapping[t] >= 0`, writes
    `concat(kv_c[t], k_pe[t])` (converted to the cache dtype) into row
    `slot % block_size` of page `slot / block_size`. Slots of `-1` are
    padding and are skipped; so is any slot past the end of the cache, which
    the runtime's metadata validation reports before a launch.

    Shapes: kv_c [T, Lkv], k_pe [T, R], kv_cache [num_blocks, block_size,
    Lkv + R] of `cache_dtype`, slot_mapping [T] i64.
  }];
  let arguments = (ins
    MLA_In<"new latent entries [T, Lkv]">:$kv_c,
    MLA_In<"new rope keys [T, R]">:$k_pe,
    MLA_In<"cache slot per token, -1 for padding [T]">:$slot_mapping,
    Arg<Optional<AnyMemRef>, "FP8 cache scale [1] f32", [MemRead]>:$kv_scale,
    MLA_InOut<"paged cache [num_blocks, block_size, Lkv + R]">:$kv_cache,
    MLA_DimAttr:$kv_lora_rank,
    MLA_DimAttr:$rope_dim,
    MLA_DimAttr:$block_size,
    TypeAttr:$cache_dtype
  );
  let assemblyFormat = [{
    `ins` `(` $kv_c `,` $k_pe `,` $slot_mapping `:`
      type($kv_c) `,` type($k_pe) `,` type($slot_mapping) `)`
    (`scale` `(` $kv_scale^ `:` type($kv_scale) `)`)?
    `outs` `(` $kv_cache `:` type($kv_cache) `)`
    attr-dict
  }];
}

//===----------------------------------------------------------------------===//
// Up-projections (batched matrix products)
//===----------------------------------------------------------------------===//

def MLA_KvUpProjOp : MLA_Op<"kv_up_proj"> {
  let summary = "expands latent entries into per-head keys and values (kv_b_proj)";
  let description = [{
    `k_nope[s, h, :] = kv_c[s, :] x kv_b_proj[:, h, 0:P]` and
    `v[s, h, :] = kv_c[s, :] x kv_b_proj[:, h, P:P+V]`. The keys of the MHA
    form are written whole: `k[s, h, 0:P] = k_nope[s, h]` and
    `k[s, h, P:P+R] = k_pe[s]` (the rope key is shared by every head).

    Shapes: kv_c [S, Lkv], k_pe [S, R], kv_b_proj [Lkv, N, P + V],
    k [S, N, P + R], v [S, N, V]; one element type throughout.
  }];
  let arguments = (ins
    MLA_In<"latent entries [S, Lkv]">:$kv_c,
    MLA_In<"rope keys [S, R]">:$k_pe,
    MLA_In<"up-projection weight [Lkv, N, P + V]">:$kv_b_proj,
    MLA_Out<"keys [S, N, P + R]">:$k,
    MLA_Out<"values [S, N, V]">:$v,
    MLA_DimAttr:$num_heads,
    MLA_DimAttr:$kv_lora_rank,
    MLA_DimAttr:$qk_nope_head_dim,
    MLA_DimAttr:$rope_dim,
    MLA_DimAttr:$v_head_dim
  );
  let assemblyFormat = [{
    `ins` `(` $kv_c `,` $k_pe `,` $kv_b_proj `:` type($kv_c) `,` type($k_pe) `,` type($kv_b_proj) `)`
    `outs` `(` $k `,` $v `:` type($k) `,` type($v) `)`
    attr-dict
  }];
}

def MLA_QAbsorbOp : MLA_Op<"q_absorb"> {
  let summary = "projects q_nope into the latent space with W_UK_T";
  let description = [{
    `ql_nope[t, h, :] = q_nope[t, h, :] x w_uk_t[h]`, per head a
    [P] x [P, Lkv] product: the query side of the absorbed decode.

    Shapes: q_nope [T, N, P], w_uk_t [N, P, Lkv], ql_nope [T, N, Lkv]
    (typically a strided view of the decode query's first Lkv columns).

    With `rope_dim` = R the op builds the whole decode query from the whole
    MLA query, as serving engines do with `cat([ql_nope, q_pe], -1)`:
    `q_nope` is then the query [T, N, P + R] (q_nope followed by q_pe) and
    `ql_nope` the decode query [T, N, Lkv + R], whose last R columns are the
    query's q_pe, copied. One pass, no strided views or extra copy kernel.
  }];
  let arguments = (ins
    MLA_In<"non-rope queries [T, N, P] (with rope_dim: queries [T, N, P + R])">:$q_nope,
    MLA_In<"absorbed key weight [N, P, Lkv]">:$w_uk_t,
    MLA_Out<"latent queries [T, N, Lkv] (with rope_dim: [T, N, Lkv + R])">:$ql_nope,
    MLA_DimAttr:$num_heads,
    MLA_DimAttr:$qk_nope_head_dim,
    MLA_DimAttr:$kv_lora_rank,
    OptionalAttr<MLA_DimAttr>:$rope_dim
  );
  let assemblyFormat = [{
    `ins` `(` $q_nope `,` $w_uk_t `:` type($q_nope) `,` type($w_uk_t) `)`
    `outs` `(` $ql_nope `:` type($ql_nope) `)`
    attr-dict
  }];
}

def MLA_VUpProjOp : MLA_Op<"v_up_proj"> {
  let summary = "projects the latent attention output to V with W_UV";
  let description = [{
    `out[t, h, :] = o_latent[t, h, :] x w_uv[h]`, per head a [Lkv] x
    [Lkv, V] product: the output side of the absorbed decode.

    Shapes: o_latent [T, N, Lkv], w_uv [N, Lkv, V], out [T, N, V].
  }];
  let arguments = (ins
    MLA_In<"latent attention output [T, N, Lkv]">:$o_latent,
    MLA_In<"value up-projection weight [N, Lkv, V]">:$w_uv,
    MLA_Out<"per-head values [T, N, V]">:$out,
    MLA_DimAttr:$num_heads,
    MLA_DimAttr:$kv_lora_rank,
    MLA_DimAttr:$v_head_dim
  );
  let assemblyFormat = [{
    `ins` `(` $o_latent `,` $w_uv `:` type($o_latent) `,` type($w_uv) `)`
    `outs` `(` $out `:` type($out) `)`
    attr-dict
  }];
}

//===----------------------------------------------------------------------===//
// Composite: the chunked-context prefill of a batch
//===----------------------------------------------------------------------===//

def MLA_ChunkedPrefillOp : MLA_Op<"chunked_prefill"> {
  let summary = "the whole MLA prefill: new tokens causal, cached context in chunks, merged";
  let description = [{
    For each prefill request, attention of its new tokens over its cached
    context followed by the new tokens themselves, computed as the chunked
    loop of the compute-friendly form:

    1. up-project the new tokens' latent entries (`kv_up_proj`) and attend
       causally with LSE: the running state;
    2. for each context chunk `c`: gather the chunk's cached entries into the
       workspace (`gather_cache` with `chunk_cu_seq_lens[c]` and
       `chunk_starts[c]`), up-project them, attend non-causally with LSE and
       merge into the running state.

    The result equals causal attention of the new tokens over context plus
    new tokens.

    With `context_only`, step 1 is skipped: `out` and `lse` already hold a
    running state (the new tokens' attention and any earlier chunks), and
    only the given chunks are attended and merged into it. `kv_c` and `k_pe`
    are then not read. A decode-context-parallel rank runs its chunks this
    way, one at a time, over the group's all-gathered context: its
    `kv_cache` is then the gathered rows as pages of one token, and
    `block_table` puts them back in token order. `mla-expand-chunked-prefill` rewrites the operation into that
    loop of primitive operations; the chunk plan comes from the runtime and
    must keep every chunk's total within the workspace rows.

    Shapes: q [T, N, P + R], kv_c [T, Lkv], k_pe [T, R], cu_seqlens_q [B+1]
    i32, kv_cache [num_blocks, block_size, Lkv + R] of `cache_dtype`,
    block_table [B, max_blocks] i32, chunk_cu_seq_lens [C, B+1] i32,
    chunk_starts [C, B] i32, kv_b_proj [Lkv, N, P + V], workspace
    [W, Lkv + R], out [T, N, V], lse [N, T] f32.
  }];
  let arguments = (ins
    MLA_In<"queries of the new tokens [T, N, P + R]">:$q,
    MLA_In<"latent entries of the new tokens [T, Lkv]">:$kv_c,
    MLA_In<"rope keys of the new tokens [T, R]">:$k_pe,
    MLA_In<"new-token offsets per request [B+1]">:$cu_seqlens_q,
    MLA_In<"paged latent cache [num_blocks, block_size, Lkv + R]">:$kv_cache,
    MLA_In<"page ids per request [B, max_blocks]">:$block_table,
    Arg<Optional<AnyMemRef>, "FP8 cache scale [1] f32", [MemRead]>:$kv_scale,
    MLA_In<"workspace offsets per chunk and request [C, B+1]">:$chunk_cu_seq_lens,
    MLA_In<"first context token per chunk and request [C, B]">:$chunk_starts,
    MLA_In<"up-projection weight [Lkv, N, P + V]">:$kv_b_proj,
    MLA_InOut<"gather workspace [W, Lkv + R]">:$workspace,
    MLA_Out<"attention output [T, N, V]">:$out,
    MLA_Out<"log-sum-exp [N, T]">:$lse,
    MLA_DimAttr:$num_heads,
    MLA_DimAttr:$kv_lora_rank,
    MLA_DimAttr:$qk_nope_head_dim,
    MLA_DimAttr:$rope_dim,
    MLA_DimAttr:$v_head_dim,
    MLA_DimAttr:$block_size,
    TypeAttr:$cache_dtype,
    F32Attr:$softmax_scale,
    UnitAttr:$context_only
  );
  let assemblyFormat = [{
    `ins` `(` $q `,` $kv_c `,` $k_pe `,` $cu_seqlens_q `:`
      type($q) `,` type($kv_c) `,` type($k_pe) `,` type($cu_seqlens_q) `)`
    `cache` `(` $kv_cache `,` $block_table `:` type($kv_cache) `,` type($block_table) `)`
    (`scale` `(` $kv_scale^ `:` type($kv_scale) `)`)?
    `chunks` `(` $chunk_cu_seq_lens `,` $chunk_starts `:`
      type($chunk_cu_seq_lens) `,` type($chunk_starts) `)`
    `weights` `(` $kv_b_proj `:` type($kv_b_proj) `)`
    `workspace` `(` $workspace `:` type($workspace) `)`
    `outs` `(` $out `,` $lse `:` type($out) `,` type($lse) `)`
    attr-dict
  }];
}

#endif // MLA_OPS_TD
