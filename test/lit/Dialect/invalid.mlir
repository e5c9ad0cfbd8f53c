// Verifier diagnostics of every mla op: one case per error path.
// RUN: mla-opt %s -split-input-file -verify-diagnostics
// The same diagnostics come before any pass runs; the valid baselines lower.
// RUN: mla-opt %s -split-input-file -verify-diagnostics --mla-lower-to-cpu | FileCheck %s --check-prefix=LOWERED

// Every baseline (the last chunk) reaches the LLVM dialect.
// LOWERED-COUNT-10: llvm.func @{{[a-z_]+}}_baseline(

// prefill_attention: q of rank 2.
func.func @prefill_q_rank(%q: memref<4x16xf32>, %k: memref<6x2x8xf32>, %v: memref<6x2x4xf32>, %cq: memref<3xi32>, %ck: memref<3xi32>, %o: memref<4x2x4xf32>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{'q' must have rank 3 [tokens, heads, qk_head_dim], got 'memref<4x16xf32>'}}
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<4x16xf32>, memref<6x2x8xf32>, memref<6x2x4xf32>, memref<3xi32>, memref<3xi32>)
      outs(%o, %lse : memref<4x2x4xf32>, memref<2x4xf32>)
      {num_heads = 2 : i64, qk_head_dim = 8 : i64, v_head_dim = 4 : i64, softmax_scale = 0.5 : f32}
  return
}

// -----

// prefill_attention: q holds an integer type.
func.func @prefill_q_i32(%q: memref<4x2x8xi32>, %k: memref<6x2x8xf32>, %v: memref<6x2x4xf32>, %cq: memref<3xi32>, %ck: memref<3xi32>, %o: memref<4x2x4xf32>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{'q' must hold f32, f16 or bf16, got 'i32'}}
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<4x2x8xi32>, memref<6x2x8xf32>, memref<6x2x4xf32>, memref<3xi32>, memref<3xi32>)
      outs(%o, %lse : memref<4x2x4xf32>, memref<2x4xf32>)
      {num_heads = 2 : i64, qk_head_dim = 8 : i64, v_head_dim = 4 : i64, softmax_scale = 0.5 : f32}
  return
}

// -----

// prefill_attention: q holds f64, which is not an activation type.
func.func @prefill_q_f64(%q: memref<4x2x8xf64>, %k: memref<6x2x8xf32>, %v: memref<6x2x4xf32>, %cq: memref<3xi32>, %ck: memref<3xi32>, %o: memref<4x2x4xf32>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{'q' must hold f32, f16 or bf16, got 'f64'}}
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<4x2x8xf64>, memref<6x2x8xf32>, memref<6x2x4xf32>, memref<3xi32>, memref<3xi32>)
      outs(%o, %lse : memref<4x2x4xf32>, memref<2x4xf32>)
      {num_heads = 2 : i64, qk_head_dim = 8 : i64, v_head_dim = 4 : i64, softmax_scale = 0.5 : f32}
  return
}

// -----

// prefill_attention: k holds f16 while q holds f32.
func.func @prefill_mixed_k(%q: memref<4x2x8xf32>, %k: memref<6x2x8xf16>, %v: memref<6x2x4xf32>, %cq: memref<3xi32>, %ck: memref<3xi32>, %o: memref<4x2x4xf32>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{'k' holds 'f16' but 'q' holds 'f32'; activations must share one element type}}
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<4x2x8xf32>, memref<6x2x8xf16>, memref<6x2x4xf32>, memref<3xi32>, memref<3xi32>)
      outs(%o, %lse : memref<4x2x4xf32>, memref<2x4xf32>)
      {num_heads = 2 : i64, qk_head_dim = 8 : i64, v_head_dim = 4 : i64, softmax_scale = 0.5 : f32}
  return
}

// -----

// prefill_attention: out holds bf16 while q holds f32.
func.func @prefill_mixed_out(%q: memref<4x2x8xf32>, %k: memref<6x2x8xf32>, %v: memref<6x2x4xf32>, %cq: memref<3xi32>, %ck: memref<3xi32>, %o: memref<4x2x4xbf16>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{'out' holds 'bf16' but 'q' holds 'f32'; activations must share one element type}}
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<4x2x8xf32>, memref<6x2x8xf32>, memref<6x2x4xf32>, memref<3xi32>, memref<3xi32>)
      outs(%o, %lse : memref<4x2x4xbf16>, memref<2x4xf32>)
      {num_heads = 2 : i64, qk_head_dim = 8 : i64, v_head_dim = 4 : i64, softmax_scale = 0.5 : f32}
  return
}

// -----

// prefill_attention: q has 3 heads, num_heads is 2.
func.func @prefill_q_heads(%q: memref<4x3x8xf32>, %k: memref<6x2x8xf32>, %v: memref<6x2x4xf32>, %cq: memref<3xi32>, %ck: memref<3xi32>, %o: memref<4x2x4xf32>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{'q' dimension 1 (heads) is 3, but num_heads is 2}}
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<4x3x8xf32>, memref<6x2x8xf32>, memref<6x2x4xf32>, memref<3xi32>, memref<3xi32>)
      outs(%o, %lse : memref<4x2x4xf32>, memref<2x4xf32>)
      {num_heads = 2 : i64, qk_head_dim = 8 : i64, v_head_dim = 4 : i64, softmax_scale = 0.5 : f32}
  return
}

// -----

// prefill_attention: k head dim differs from qk_head_dim.
func.func @prefill_k_qk_dim(%q: memref<4x2x8xf32>, %k: memref<6x2x7xf32>, %v: memref<6x2x4xf32>, %cq: memref<3xi32>, %ck: memref<3xi32>, %o: memref<4x2x4xf32>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{'k' dimension 2 (qk_head_dim) is 7, but qk_head_dim is 8}}
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<4x2x8xf32>, memref<6x2x7xf32>, memref<6x2x4xf32>, memref<3xi32>, memref<3xi32>)
      outs(%o, %lse : memref<4x2x4xf32>, memref<2x4xf32>)
      {num_heads = 2 : i64, qk_head_dim = 8 : i64, v_head_dim = 4 : i64, softmax_scale = 0.5 : f32}
  return
}

// -----

// prefill_attention: v head dim differs from v_head_dim.
func.func @prefill_v_v_dim(%q: memref<4x2x8xf32>, %k: memref<6x2x8xf32>, %v: memref<6x2x5xf32>, %cq: memref<3xi32>, %ck: memref<3xi32>, %o: memref<4x2x4xf32>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{'v' dimension 2 (v_head_dim) is 5, but v_head_dim is 4}}
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<4x2x8xf32>, memref<6x2x8xf32>, memref<6x2x5xf32>, memref<3xi32>, memref<3xi32>)
      outs(%o, %lse : memref<4x2x4xf32>, memref<2x4xf32>)
      {num_heads = 2 : i64, qk_head_dim = 8 : i64, v_head_dim = 4 : i64, softmax_scale = 0.5 : f32}
  return
}

// -----

// prefill_attention: out head dim differs from v_head_dim.
func.func @prefill_out_v_dim(%q: memref<4x2x8xf32>, %k: memref<6x2x8xf32>, %v: memref<6x2x4xf32>, %cq: memref<3xi32>, %ck: memref<3xi32>, %o: memref<4x2x8xf32>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{'out' dimension 2 (v_head_dim) is 8, but v_head_dim is 4}}
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<4x2x8xf32>, memref<6x2x8xf32>, memref<6x2x4xf32>, memref<3xi32>, memref<3xi32>)
      outs(%o, %lse : memref<4x2x8xf32>, memref<2x4xf32>)
      {num_heads = 2 : i64, qk_head_dim = 8 : i64, v_head_dim = 4 : i64, softmax_scale = 0.5 : f32}
  return
}

// -----

// prefill_attention: k has 6 rows but v has 5.
func.func @prefill_kv_tokens(%q: memref<4x2x8xf32>, %k: memref<6x2x8xf32>, %v: memref<5x2x4xf32>, %cq: memref<3xi32>, %ck: memref<3xi32>, %o: memref<4x2x4xf32>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{'v' dimension 0 (kv_tokens) is 5, inconsistent with 'k' dimension 0 (kv_tokens = 6)}}
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<4x2x8xf32>, memref<6x2x8xf32>, memref<5x2x4xf32>, memref<3xi32>, memref<3xi32>)
      outs(%o, %lse : memref<4x2x4xf32>, memref<2x4xf32>)
      {num_heads = 2 : i64, qk_head_dim = 8 : i64, v_head_dim = 4 : i64, softmax_scale = 0.5 : f32}
  return
}

// -----

// prefill_attention: q has 4 tokens but out has 3.
func.func @prefill_out_tokens(%q: memref<4x2x8xf32>, %k: memref<6x2x8xf32>, %v: memref<6x2x4xf32>, %cq: memref<3xi32>, %ck: memref<3xi32>, %o: memref<3x2x4xf32>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{'out' dimension 0 (tokens) is 3, inconsistent with 'q' dimension 0 (tokens = 4)}}
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<4x2x8xf32>, memref<6x2x8xf32>, memref<6x2x4xf32>, memref<3xi32>, memref<3xi32>)
      outs(%o, %lse : memref<3x2x4xf32>, memref<2x4xf32>)
      {num_heads = 2 : i64, qk_head_dim = 8 : i64, v_head_dim = 4 : i64, softmax_scale = 0.5 : f32}
  return
}

// -----

// prefill_attention: cu_seqlens_q has 5 entries, cu_seqlens_k 4.
func.func @prefill_batch(%q: memref<4x2x8xf32>, %k: memref<6x2x8xf32>, %v: memref<6x2x4xf32>, %cq: memref<5xi32>, %ck: memref<4xi32>, %o: memref<4x2x4xf32>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{'cu_seqlens_k' dimension 0 (batch+1) is 4, inconsistent with 'cu_seqlens_q' dimension 0 (batch = 4)}}
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<4x2x8xf32>, memref<6x2x8xf32>, memref<6x2x4xf32>, memref<5xi32>, memref<4xi32>)
      outs(%o, %lse : memref<4x2x4xf32>, memref<2x4xf32>)
      {num_heads = 2 : i64, qk_head_dim = 8 : i64, v_head_dim = 4 : i64, softmax_scale = 0.5 : f32}
  return
}

// -----

// prefill_attention: an offset array needs at least one entry.
func.func @prefill_cu_empty(%q: memref<4x2x8xf32>, %k: memref<6x2x8xf32>, %v: memref<6x2x4xf32>, %cq: memref<0xi32>, %ck: memref<3xi32>, %o: memref<4x2x4xf32>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{'cu_seqlens_q' dimension 0 must hold batch+1 entries, got 0}}
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<4x2x8xf32>, memref<6x2x8xf32>, memref<6x2x4xf32>, memref<0xi32>, memref<3xi32>)
      outs(%o, %lse : memref<4x2x4xf32>, memref<2x4xf32>)
      {num_heads = 2 : i64, qk_head_dim = 8 : i64, v_head_dim = 4 : i64, softmax_scale = 0.5 : f32}
  return
}

// -----

// prefill_attention: offsets must be i32.
func.func @prefill_cu_i64(%q: memref<4x2x8xf32>, %k: memref<6x2x8xf32>, %v: memref<6x2x4xf32>, %cq: memref<3xi64>, %ck: memref<3xi32>, %o: memref<4x2x4xf32>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{'cu_seqlens_q' must hold i32, got 'i64'}}
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<4x2x8xf32>, memref<6x2x8xf32>, memref<6x2x4xf32>, memref<3xi64>, memref<3xi32>)
      outs(%o, %lse : memref<4x2x4xf32>, memref<2x4xf32>)
      {num_heads = 2 : i64, qk_head_dim = 8 : i64, v_head_dim = 4 : i64, softmax_scale = 0.5 : f32}
  return
}

// -----

// prefill_attention: offsets must be rank 1.
func.func @prefill_cu_rank(%q: memref<4x2x8xf32>, %k: memref<6x2x8xf32>, %v: memref<6x2x4xf32>, %cq: memref<3xi32>, %ck: memref<3x1xi32>, %o: memref<4x2x4xf32>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{'cu_seqlens_k' must have rank 1 [batch+1], got 'memref<3x1xi32>'}}
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<4x2x8xf32>, memref<6x2x8xf32>, memref<6x2x4xf32>, memref<3xi32>, memref<3x1xi32>)
      outs(%o, %lse : memref<4x2x4xf32>, memref<2x4xf32>)
      {num_heads = 2 : i64, qk_head_dim = 8 : i64, v_head_dim = 4 : i64, softmax_scale = 0.5 : f32}
  return
}

// -----

// prefill_attention: lse must be f32 whatever the activations.
func.func @prefill_lse_f16(%q: memref<4x2x8xf32>, %k: memref<6x2x8xf32>, %v: memref<6x2x4xf32>, %cq: memref<3xi32>, %ck: memref<3xi32>, %o: memref<4x2x4xf32>, %lse: memref<2x4xf16>) {
  // expected-error @+1 {{'lse' must hold f32, got 'f16'}}
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<4x2x8xf32>, memref<6x2x8xf32>, memref<6x2x4xf32>, memref<3xi32>, memref<3xi32>)
      outs(%o, %lse : memref<4x2x4xf32>, memref<2x4xf16>)
      {num_heads = 2 : i64, qk_head_dim = 8 : i64, v_head_dim = 4 : i64, softmax_scale = 0.5 : f32}
  return
}

// -----

// prefill_attention: lse is [N, T], not [T, N].
func.func @prefill_lse_transposed(%q: memref<4x2x8xf32>, %k: memref<6x2x8xf32>, %v: memref<6x2x4xf32>, %cq: memref<3xi32>, %ck: memref<3xi32>, %o: memref<4x2x4xf32>, %lse: memref<4x2xf32>) {
  // expected-error @+1 {{'lse' dimension 0 (heads) is 4, but num_heads is 2}}
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<4x2x8xf32>, memref<6x2x8xf32>, memref<6x2x4xf32>, memref<3xi32>, memref<3xi32>)
      outs(%o, %lse : memref<4x2x4xf32>, memref<4x2xf32>)
      {num_heads = 2 : i64, qk_head_dim = 8 : i64, v_head_dim = 4 : i64, softmax_scale = 0.5 : f32}
  return
}

// -----

// prefill_attention: lse token count differs from q.
func.func @prefill_lse_tokens(%q: memref<4x2x8xf32>, %k: memref<6x2x8xf32>, %v: memref<6x2x4xf32>, %cq: memref<3xi32>, %ck: memref<3xi32>, %o: memref<4x2x4xf32>, %lse: memref<2x5xf32>) {
  // expected-error @+1 {{'lse' dimension 1 (tokens) is 5, inconsistent with 'q' dimension 0 (tokens = 4)}}
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<4x2x8xf32>, memref<6x2x8xf32>, memref<6x2x4xf32>, memref<3xi32>, memref<3xi32>)
      outs(%o, %lse : memref<4x2x4xf32>, memref<2x5xf32>)
      {num_heads = 2 : i64, qk_head_dim = 8 : i64, v_head_dim = 4 : i64, softmax_scale = 0.5 : f32}
  return
}

// -----

// prefill_attention: out with a non-unit innermost stride.
func.func @prefill_out_stride(%q: memref<4x2x8xf32>, %k: memref<6x2x8xf32>, %v: memref<6x2x4xf32>, %cq: memref<3xi32>, %ck: memref<3xi32>, %o: memref<4x2x4xf32, strided<[16, 8, 2]>>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{'out' must be contiguous in its innermost dimension (stride 1), got 'memref<4x2x4xf32, strided<[16, 8, 2]>>'}}
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<4x2x8xf32>, memref<6x2x8xf32>, memref<6x2x4xf32>, memref<3xi32>, memref<3xi32>)
      outs(%o, %lse : memref<4x2x4xf32, strided<[16, 8, 2]>>, memref<2x4xf32>)
      {num_heads = 2 : i64, qk_head_dim = 8 : i64, v_head_dim = 4 : i64, softmax_scale = 0.5 : f32}
  return
}

// -----

// prefill_attention: q with a layout that is not strided.
func.func @prefill_q_not_strided(%q: memref<4x2x8xf32, affine_map<(d0, d1, d2) -> (d0 mod 2, d1, d2)>>, %k: memref<6x2x8xf32>, %v: memref<6x2x4xf32>, %cq: memref<3xi32>, %ck: memref<3xi32>, %o: memref<4x2x4xf32>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{'q' must have a strided layout, got 'memref<4x2x8xf32, affine_map<(d0, d1, d2) -> (d0 mod 2, d1, d2)>>'}}
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<4x2x8xf32, affine_map<(d0, d1, d2) -> (d0 mod 2, d1, d2)>>, memref<6x2x8xf32>, memref<6x2x4xf32>, memref<3xi32>, memref<3xi32>)
      outs(%o, %lse : memref<4x2x4xf32>, memref<2x4xf32>)
      {num_heads = 2 : i64, qk_head_dim = 8 : i64, v_head_dim = 4 : i64, softmax_scale = 0.5 : f32}
  return
}

// -----

// prefill_attention: softmax_scale of zero.
func.func @prefill_scale_zero(%q: memref<4x2x8xf32>, %k: memref<6x2x8xf32>, %v: memref<6x2x4xf32>, %cq: memref<3xi32>, %ck: memref<3xi32>, %o: memref<4x2x4xf32>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{softmax_scale must be finite and positive, got 0.000000e+00}}
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<4x2x8xf32>, memref<6x2x8xf32>, memref<6x2x4xf32>, memref<3xi32>, memref<3xi32>)
      outs(%o, %lse : memref<4x2x4xf32>, memref<2x4xf32>)
      {num_heads = 2 : i64, qk_head_dim = 8 : i64, v_head_dim = 4 : i64, softmax_scale = 0.0 : f32}
  return
}

// -----

// prefill_attention: negative softmax_scale.
func.func @prefill_scale_negative(%q: memref<4x2x8xf32>, %k: memref<6x2x8xf32>, %v: memref<6x2x4xf32>, %cq: memref<3xi32>, %ck: memref<3xi32>, %o: memref<4x2x4xf32>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{softmax_scale must be finite and positive, got -5.000000e-01}}
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<4x2x8xf32>, memref<6x2x8xf32>, memref<6x2x4xf32>, memref<3xi32>, memref<3xi32>)
      outs(%o, %lse : memref<4x2x4xf32>, memref<2x4xf32>)
      {num_heads = 2 : i64, qk_head_dim = 8 : i64, v_head_dim = 4 : i64, softmax_scale = -0.5 : f32}
  return
}

// -----

// prefill_attention: infinite softmax_scale.
func.func @prefill_scale_inf(%q: memref<4x2x8xf32>, %k: memref<6x2x8xf32>, %v: memref<6x2x4xf32>, %cq: memref<3xi32>, %ck: memref<3xi32>, %o: memref<4x2x4xf32>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{softmax_scale must be finite and positive, got INF}}
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<4x2x8xf32>, memref<6x2x8xf32>, memref<6x2x4xf32>, memref<3xi32>, memref<3xi32>)
      outs(%o, %lse : memref<4x2x4xf32>, memref<2x4xf32>)
      {num_heads = 2 : i64, qk_head_dim = 8 : i64, v_head_dim = 4 : i64, softmax_scale = 0x7F800000 : f32}
  return
}

// -----

// prefill_attention: NaN softmax_scale.
func.func @prefill_scale_nan(%q: memref<4x2x8xf32>, %k: memref<6x2x8xf32>, %v: memref<6x2x4xf32>, %cq: memref<3xi32>, %ck: memref<3xi32>, %o: memref<4x2x4xf32>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{softmax_scale must be finite and positive, got nan}}
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<4x2x8xf32>, memref<6x2x8xf32>, memref<6x2x4xf32>, memref<3xi32>, memref<3xi32>)
      outs(%o, %lse : memref<4x2x4xf32>, memref<2x4xf32>)
      {num_heads = 2 : i64, qk_head_dim = 8 : i64, v_head_dim = 4 : i64, softmax_scale = 0x7FC00000 : f32}
  return
}

// -----

// prefill_attention: softmax_scale must be an f32 attribute.
func.func @prefill_scale_f64(%q: memref<4x2x8xf32>, %k: memref<6x2x8xf32>, %v: memref<6x2x4xf32>, %cq: memref<3xi32>, %ck: memref<3xi32>, %o: memref<4x2x4xf32>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{attribute 'softmax_scale' failed to satisfy constraint: 32-bit float attribute}}
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<4x2x8xf32>, memref<6x2x8xf32>, memref<6x2x4xf32>, memref<3xi32>, memref<3xi32>) outs(%o, %lse : memref<4x2x4xf32>, memref<2x4xf32>) {num_heads = 2 : i64, qk_head_dim = 8 : i64, v_head_dim = 4 : i64, softmax_scale = 0.5 : f64}
  return
}

// -----

// prefill_attention: num_heads = 0 (IntPositive).
func.func @prefill_heads_zero(%q: memref<4x2x8xf32>, %k: memref<6x2x8xf32>, %v: memref<6x2x4xf32>, %cq: memref<3xi32>, %ck: memref<3xi32>, %o: memref<4x2x4xf32>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{attribute 'num_heads' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<4x2x8xf32>, memref<6x2x8xf32>, memref<6x2x4xf32>, memref<3xi32>, memref<3xi32>) outs(%o, %lse : memref<4x2x4xf32>, memref<2x4xf32>) {num_heads = 0 : i64, qk_head_dim = 8 : i64, v_head_dim = 4 : i64, softmax_scale = 0.5 : f32}
  return
}

// -----

// prefill_attention: negative v_head_dim (IntPositive).
func.func @prefill_v_dim_negative(%q: memref<4x2x8xf32>, %k: memref<6x2x8xf32>, %v: memref<6x2x4xf32>, %cq: memref<3xi32>, %ck: memref<3xi32>, %o: memref<4x2x4xf32>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{attribute 'v_head_dim' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<4x2x8xf32>, memref<6x2x8xf32>, memref<6x2x4xf32>, memref<3xi32>, memref<3xi32>) outs(%o, %lse : memref<4x2x4xf32>, memref<2x4xf32>) {num_heads = 2 : i64, qk_head_dim = 8 : i64, v_head_dim = -4 : i64, softmax_scale = 0.5 : f32}
  return
}

// -----

// prefill_attention: num_heads must be an i64 attribute.
func.func @prefill_heads_i32(%q: memref<4x2x8xf32>, %k: memref<6x2x8xf32>, %v: memref<6x2x4xf32>, %cq: memref<3xi32>, %ck: memref<3xi32>, %o: memref<4x2x4xf32>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{attribute 'num_heads' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<4x2x8xf32>, memref<6x2x8xf32>, memref<6x2x4xf32>, memref<3xi32>, memref<3xi32>) outs(%o, %lse : memref<4x2x4xf32>, memref<2x4xf32>) {num_heads = 2 : i32, qk_head_dim = 8 : i64, v_head_dim = 4 : i64, softmax_scale = 0.5 : f32}
  return
}

// -----

// prefill_attention: causal is a unit attribute.
func.func @prefill_causal_value(%q: memref<4x2x8xf32>, %k: memref<6x2x8xf32>, %v: memref<6x2x4xf32>, %cq: memref<3xi32>, %ck: memref<3xi32>, %o: memref<4x2x4xf32>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{attribute 'causal' failed to satisfy constraint: unit attribute}}
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<4x2x8xf32>, memref<6x2x8xf32>, memref<6x2x4xf32>, memref<3xi32>, memref<3xi32>) outs(%o, %lse : memref<4x2x4xf32>, memref<2x4xf32>) {num_heads = 2 : i64, qk_head_dim = 8 : i64, v_head_dim = 4 : i64, softmax_scale = 0.5 : f32, causal = 1 : i64}
  return
}

// -----

// prefill_attention: qk_head_dim is required.
func.func @prefill_missing_qk_dim(%q: memref<4x2x8xf32>, %k: memref<6x2x8xf32>, %v: memref<6x2x4xf32>, %cq: memref<3xi32>, %ck: memref<3xi32>, %o: memref<4x2x4xf32>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{requires attribute 'qk_head_dim'}}
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<4x2x8xf32>, memref<6x2x8xf32>, memref<6x2x4xf32>, memref<3xi32>, memref<3xi32>)
      outs(%o, %lse : memref<4x2x4xf32>, memref<2x4xf32>)
      {num_heads = 2 : i64, v_head_dim = 4 : i64, softmax_scale = 0.5 : f32}
  return
}

// -----

// prefill_attention: softmax_scale is required.
func.func @prefill_missing_scale(%q: memref<4x2x8xf32>, %k: memref<6x2x8xf32>, %v: memref<6x2x4xf32>, %cq: memref<3xi32>, %ck: memref<3xi32>, %o: memref<4x2x4xf32>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{requires attribute 'softmax_scale'}}
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<4x2x8xf32>, memref<6x2x8xf32>, memref<6x2x4xf32>, memref<3xi32>, memref<3xi32>)
      outs(%o, %lse : memref<4x2x4xf32>, memref<2x4xf32>)
      {num_heads = 2 : i64, qk_head_dim = 8 : i64, v_head_dim = 4 : i64}
  return
}

// -----

// prefill_attention: a tensor operand is rejected by the parser.
func.func @prefill_q_tensor(%q: tensor<4x2x8xf32>, %k: memref<6x2x8xf32>, %v: memref<6x2x4xf32>, %cq: memref<3xi32>, %ck: memref<3xi32>, %o: memref<4x2x4xf32>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{invalid kind of type specified: expected builtin.memref, but found 'tensor<4x2x8xf32>'}}
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : tensor<4x2x8xf32>, memref<6x2x8xf32>, memref<6x2x4xf32>, memref<3xi32>, memref<3xi32>) outs(%o, %lse : memref<4x2x4xf32>, memref<2x4xf32>) {num_heads = 2 : i64, qk_head_dim = 8 : i64, v_head_dim = 4 : i64, softmax_scale = 0.5 : f32}
  return
}

// -----

// decode_attention: at most 128 heads.
func.func @decode_too_many_heads(%q: memref<2x1x129x12xf32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %lens: memref<2xi32>, %o: memref<2x1x129x8xf32>, %lse: memref<2x129x1xf32>) {
  // expected-error @+1 {{num_heads must be at most 128, got 129}}
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x129x12xf32>, memref<5x4x12xbf16>, memref<2x3xi32>, memref<2xi32>)
      outs(%o, %lse : memref<2x1x129x8xf32>, memref<2x129x1xf32>)
      {num_heads = 129 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// decode_attention: kv_share is [ranks, run length], both positive.
func.func @decode_bad_kv_share(%q: memref<2x1x2x12xf32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %lens: memref<2xi32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xf32>) {
  // expected-error @+1 {{kv_share must be [ranks, run length] with ranks in [1, 65536] and run length in [1, 2^20], got [2, 0]}}
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x2x12xf32>, memref<5x4x12xbf16>, memref<2x3xi32>, memref<2xi32>)
      outs(%o, %lse : memref<2x1x2x8xf32>, memref<2x2x1xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32, kv_share = array<i64: 2, 0>}
  return
}

// -----

// decode_attention: kv_share has two entries.
func.func @decode_kv_share_rank(%q: memref<2x1x2x12xf32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %lens: memref<2xi32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xf32>) {
  // expected-error @+1 {{kv_share must be [ranks, run length]}}
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x2x12xf32>, memref<5x4x12xbf16>, memref<2x3xi32>, memref<2xi32>)
      outs(%o, %lse : memref<2x1x2x8xf32>, memref<2x2x1xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32, kv_share = array<i64: 2, 1, 1>}
  return
}

// -----

// decode_attention: num_heads = 0 (IntPositive).
func.func @decode_heads_zero(%q: memref<2x1x2x12xf32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %lens: memref<2xi32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xf32>) {
  // expected-error @+1 {{attribute 'num_heads' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x2x12xf32>, memref<5x4x12xbf16>, memref<2x3xi32>, memref<2xi32>) outs(%o, %lse : memref<2x1x2x8xf32>, memref<2x2x1xf32>) {num_heads = 0 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// decode_attention: block_size is required.
func.func @decode_missing_block_size(%q: memref<2x1x2x12xf32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %lens: memref<2xi32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xf32>) {
  // expected-error @+1 {{requires attribute 'block_size'}}
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x2x12xf32>, memref<5x4x12xbf16>, memref<2x3xi32>, memref<2xi32>)
      outs(%o, %lse : memref<2x1x2x8xf32>, memref<2x2x1xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// decode_attention: cache_dtype must be a float type.
func.func @decode_cache_dtype_i8(%q: memref<2x1x2x12xf32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %lens: memref<2xi32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xf32>) {
  // expected-error @+1 {{cache_dtype must be f32, f16, bf16, f8E4M3FN or f8E5M2, got 'i8'}}
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x2x12xf32>, memref<5x4x12xbf16>, memref<2x3xi32>, memref<2xi32>)
      outs(%o, %lse : memref<2x1x2x8xf32>, memref<2x2x1xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = i8, softmax_scale = 0.5 : f32}
  return
}

// -----

// decode_attention: cache_dtype must be a type attribute.
func.func @decode_cache_dtype_not_type(%q: memref<2x1x2x12xf32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %lens: memref<2xi32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xf32>) {
  // expected-error @+1 {{attribute 'cache_dtype' failed to satisfy constraint: any type attribute}}
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x2x12xf32>, memref<5x4x12xbf16>, memref<2x3xi32>, memref<2xi32>) outs(%o, %lse : memref<2x1x2x8xf32>, memref<2x2x1xf32>) {num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = 16 : i64, softmax_scale = 0.5 : f32}
  return
}

// -----

// decode_attention: kv_cache element type differs from cache_dtype.
func.func @decode_cache_dtype_mismatch(%q: memref<2x1x2x12xf32>, %cache: memref<5x4x12xf16>, %bt: memref<2x3xi32>, %lens: memref<2xi32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xf32>) {
  // expected-error @+1 {{'kv_cache' holds 'f16', but cache_dtype is 'bf16'}}
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x2x12xf32>, memref<5x4x12xf16>, memref<2x3xi32>, memref<2xi32>)
      outs(%o, %lse : memref<2x1x2x8xf32>, memref<2x2x1xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// decode_attention: an integer cache is rejected before the dtype comparison.
func.func @decode_cache_i8(%q: memref<2x1x2x12xf32>, %cache: memref<5x4x12xi8>, %bt: memref<2x3xi32>, %lens: memref<2xi32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xf32>) {
  // expected-error @+1 {{'kv_cache' must hold f32, f16, bf16, f8E4M3FN or f8E5M2, got 'i8'}}
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x2x12xf32>, memref<5x4x12xi8>, memref<2x3xi32>, memref<2xi32>)
      outs(%o, %lse : memref<2x1x2x8xf32>, memref<2x2x1xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// decode_attention: negative softmax_scale.
func.func @decode_scale_negative(%q: memref<2x1x2x12xf32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %lens: memref<2xi32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xf32>) {
  // expected-error @+1 {{softmax_scale must be finite and positive, got -1.000000e+00}}
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x2x12xf32>, memref<5x4x12xbf16>, memref<2x3xi32>, memref<2xi32>)
      outs(%o, %lse : memref<2x1x2x8xf32>, memref<2x2x1xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = -1.0 : f32}
  return
}

// -----

// decode_attention: q of rank 3.
func.func @decode_q_rank(%q: memref<2x2x12xf32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %lens: memref<2xi32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xf32>) {
  // expected-error @+1 {{'q' must have rank 4 [batch, query_len, heads, qk_dim], got 'memref<2x2x12xf32>'}}
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x2x12xf32>, memref<5x4x12xbf16>, memref<2x3xi32>, memref<2xi32>)
      outs(%o, %lse : memref<2x1x2x8xf32>, memref<2x2x1xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// decode_attention: out holds f32 while q holds bf16.
func.func @decode_q_bf16_out_f32(%q: memref<2x1x2x12xbf16>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %lens: memref<2xi32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xf32>) {
  // expected-error @+1 {{'out' holds 'f32' but 'q' holds 'bf16'; activations must share one element type}}
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x2x12xbf16>, memref<5x4x12xbf16>, memref<2x3xi32>, memref<2xi32>)
      outs(%o, %lse : memref<2x1x2x8xf32>, memref<2x2x1xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// decode_attention: q has 4 heads, num_heads is 2.
func.func @decode_q_heads(%q: memref<2x1x4x12xf32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %lens: memref<2xi32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xf32>) {
  // expected-error @+1 {{'q' dimension 2 (heads) is 4, but num_heads is 2}}
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x4x12xf32>, memref<5x4x12xbf16>, memref<2x3xi32>, memref<2xi32>)
      outs(%o, %lse : memref<2x1x2x8xf32>, memref<2x2x1xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// decode_attention: q last dim differs from kv_lora_rank + rope_dim.
func.func @decode_q_entry(%q: memref<2x1x2x10xf32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %lens: memref<2xi32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xf32>) {
  // expected-error @+1 {{'q' dimension 3 (qk_dim) is 10, but kv_lora_rank + rope_dim is 12}}
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x2x10xf32>, memref<5x4x12xbf16>, memref<2x3xi32>, memref<2xi32>)
      outs(%o, %lse : memref<2x1x2x8xf32>, memref<2x2x1xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// decode_attention: cache page size differs from block_size.
func.func @decode_cache_block(%q: memref<2x1x2x12xf32>, %cache: memref<5x8x12xbf16>, %bt: memref<2x3xi32>, %lens: memref<2xi32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xf32>) {
  // expected-error @+1 {{'kv_cache' dimension 1 (block_size) is 8, but block_size is 4}}
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x2x12xf32>, memref<5x8x12xbf16>, memref<2x3xi32>, memref<2xi32>)
      outs(%o, %lse : memref<2x1x2x8xf32>, memref<2x2x1xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// decode_attention: cache entry differs from kv_lora_rank + rope_dim.
func.func @decode_cache_entry(%q: memref<2x1x2x12xf32>, %cache: memref<5x4x16xbf16>, %bt: memref<2x3xi32>, %lens: memref<2xi32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xf32>) {
  // expected-error @+1 {{'kv_cache' dimension 2 (entry) is 16, but kv_lora_rank + rope_dim is 12}}
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x2x12xf32>, memref<5x4x16xbf16>, memref<2x3xi32>, memref<2xi32>)
      outs(%o, %lse : memref<2x1x2x8xf32>, memref<2x2x1xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// decode_attention: out last dim differs from kv_lora_rank.
func.func @decode_out_latent(%q: memref<2x1x2x12xf32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %lens: memref<2xi32>, %o: memref<2x1x2x12xf32>, %lse: memref<2x2x1xf32>) {
  // expected-error @+1 {{'out' dimension 3 (kv_lora_rank) is 12, but kv_lora_rank is 8}}
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x2x12xf32>, memref<5x4x12xbf16>, memref<2x3xi32>, memref<2xi32>)
      outs(%o, %lse : memref<2x1x2x12xf32>, memref<2x2x1xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// decode_attention: block_table batch differs from q.
func.func @decode_block_table_batch(%q: memref<2x1x2x12xf32>, %cache: memref<5x4x12xbf16>, %bt: memref<3x3xi32>, %lens: memref<2xi32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xf32>) {
  // expected-error @+1 {{'block_table' dimension 0 (batch) is 3, inconsistent with 'q' dimension 0 (batch = 2)}}
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x2x12xf32>, memref<5x4x12xbf16>, memref<3x3xi32>, memref<2xi32>)
      outs(%o, %lse : memref<2x1x2x8xf32>, memref<2x2x1xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// decode_attention: block_table must be i32.
func.func @decode_block_table_i64(%q: memref<2x1x2x12xf32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi64>, %lens: memref<2xi32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xf32>) {
  // expected-error @+1 {{'block_table' must hold i32, got 'i64'}}
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x2x12xf32>, memref<5x4x12xbf16>, memref<2x3xi64>, memref<2xi32>)
      outs(%o, %lse : memref<2x1x2x8xf32>, memref<2x2x1xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// decode_attention: seq_lens batch differs from q.
func.func @decode_seq_lens_batch(%q: memref<2x1x2x12xf32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %lens: memref<3xi32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xf32>) {
  // expected-error @+1 {{'seq_lens' dimension 0 (batch) is 3, inconsistent with 'q' dimension 0 (batch = 2)}}
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x2x12xf32>, memref<5x4x12xbf16>, memref<2x3xi32>, memref<3xi32>)
      outs(%o, %lse : memref<2x1x2x8xf32>, memref<2x2x1xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// decode_attention: seq_lens must be rank 1.
func.func @decode_seq_lens_rank(%q: memref<2x1x2x12xf32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %lens: memref<2x1xi32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xf32>) {
  // expected-error @+1 {{'seq_lens' must have rank 1 [batch], got 'memref<2x1xi32>'}}
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x2x12xf32>, memref<5x4x12xbf16>, memref<2x3xi32>, memref<2x1xi32>)
      outs(%o, %lse : memref<2x1x2x8xf32>, memref<2x2x1xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// decode_attention: lse query_len differs from q.
func.func @decode_lse_query_len(%q: memref<2x1x2x12xf32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %lens: memref<2xi32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x2xf32>) {
  // expected-error @+1 {{'lse' dimension 2 (query_len) is 2, inconsistent with 'q' dimension 1 (query_len = 1)}}
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x2x12xf32>, memref<5x4x12xbf16>, memref<2x3xi32>, memref<2xi32>)
      outs(%o, %lse : memref<2x1x2x8xf32>, memref<2x2x2xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// decode_attention: lse must be f32.
func.func @decode_lse_bf16(%q: memref<2x1x2x12xf32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %lens: memref<2xi32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xbf16>) {
  // expected-error @+1 {{'lse' must hold f32, got 'bf16'}}
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x2x12xf32>, memref<5x4x12xbf16>, memref<2x3xi32>, memref<2xi32>)
      outs(%o, %lse : memref<2x1x2x8xf32>, memref<2x2x1xbf16>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// decode_attention: a cache whose entries are not contiguous.
func.func @decode_cache_stride(%q: memref<2x1x2x12xf32>, %cache: memref<5x4x12xbf16, strided<[96, 24, 2]>>, %bt: memref<2x3xi32>, %lens: memref<2xi32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xf32>) {
  // expected-error @+1 {{'kv_cache' must be contiguous in its innermost dimension (stride 1), got 'memref<5x4x12xbf16, strided<[96, 24, 2]>>'}}
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x2x12xf32>, memref<5x4x12xbf16, strided<[96, 24, 2]>>, memref<2x3xi32>, memref<2xi32>)
      outs(%o, %lse : memref<2x1x2x8xf32>, memref<2x2x1xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// decode_attention: num_splits must be i32.
func.func @decode_num_splits_i64(%q: memref<2x1x2x12xf32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %lens: memref<2xi32>, %ns: memref<2xi64>, %so: memref<2x1x2x4x8xf32>, %sl: memref<2x1x2x4xf32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xf32>) {
  // expected-error @+1 {{'num_splits' must hold i32, got 'i64'}}
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x2x12xf32>, memref<5x4x12xbf16>, memref<2x3xi32>, memref<2xi32>)
      splits(%ns, %so, %sl : memref<2xi64>, memref<2x1x2x4x8xf32>, memref<2x1x2x4xf32>)
      outs(%o, %lse : memref<2x1x2x8xf32>, memref<2x2x1xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// decode_attention: num_splits must be rank 1.
func.func @decode_num_splits_rank(%q: memref<2x1x2x12xf32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %lens: memref<2xi32>, %ns: memref<2x1xi32>, %so: memref<2x1x2x4x8xf32>, %sl: memref<2x1x2x4xf32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xf32>) {
  // expected-error @+1 {{'num_splits' must have rank 1 [batch], got 'memref<2x1xi32>'}}
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x2x12xf32>, memref<5x4x12xbf16>, memref<2x3xi32>, memref<2xi32>)
      splits(%ns, %so, %sl : memref<2x1xi32>, memref<2x1x2x4x8xf32>, memref<2x1x2x4xf32>)
      outs(%o, %lse : memref<2x1x2x8xf32>, memref<2x2x1xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// decode_attention: num_splits batch differs from q.
func.func @decode_num_splits_batch(%q: memref<2x1x2x12xf32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %lens: memref<2xi32>, %ns: memref<3xi32>, %so: memref<2x1x2x4x8xf32>, %sl: memref<2x1x2x4xf32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xf32>) {
  // expected-error @+1 {{'num_splits' dimension 0 (batch) is 3, inconsistent with 'q' dimension 0 (batch = 2)}}
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x2x12xf32>, memref<5x4x12xbf16>, memref<2x3xi32>, memref<2xi32>)
      splits(%ns, %so, %sl : memref<3xi32>, memref<2x1x2x4x8xf32>, memref<2x1x2x4xf32>)
      outs(%o, %lse : memref<2x1x2x8xf32>, memref<2x2x1xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// decode_attention: split_out of rank 4 (no splits dimension).
func.func @decode_split_out_rank(%q: memref<2x1x2x12xf32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %lens: memref<2xi32>, %ns: memref<2xi32>, %so: memref<2x1x2x8xf32>, %sl: memref<2x1x2x4xf32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xf32>) {
  // expected-error @+1 {{'split_out' must have rank 5 [batch, query_len, heads, splits, kv_lora_rank], got 'memref<2x1x2x8xf32>'}}
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x2x12xf32>, memref<5x4x12xbf16>, memref<2x3xi32>, memref<2xi32>)
      splits(%ns, %so, %sl : memref<2xi32>, memref<2x1x2x8xf32>, memref<2x1x2x4xf32>)
      outs(%o, %lse : memref<2x1x2x8xf32>, memref<2x2x1xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// decode_attention: split_out must be f32, whatever the activations.
func.func @decode_split_out_bf16(%q: memref<2x1x2x12xf32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %lens: memref<2xi32>, %ns: memref<2xi32>, %so: memref<2x1x2x4x8xbf16>, %sl: memref<2x1x2x4xf32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xf32>) {
  // expected-error @+1 {{'split_out' must hold f32, got 'bf16'}}
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x2x12xf32>, memref<5x4x12xbf16>, memref<2x3xi32>, memref<2xi32>)
      splits(%ns, %so, %sl : memref<2xi32>, memref<2x1x2x4x8xbf16>, memref<2x1x2x4xf32>)
      outs(%o, %lse : memref<2x1x2x8xf32>, memref<2x2x1xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// decode_attention: split_out batch differs from q.
func.func @decode_split_out_batch(%q: memref<2x1x2x12xf32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %lens: memref<2xi32>, %ns: memref<2xi32>, %so: memref<1x1x2x4x8xf32>, %sl: memref<2x1x2x4xf32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xf32>) {
  // expected-error @+1 {{'split_out' dimension 0 (batch) is 1, inconsistent with 'q' dimension 0 (batch = 2)}}
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x2x12xf32>, memref<5x4x12xbf16>, memref<2x3xi32>, memref<2xi32>)
      splits(%ns, %so, %sl : memref<2xi32>, memref<1x1x2x4x8xf32>, memref<2x1x2x4xf32>)
      outs(%o, %lse : memref<2x1x2x8xf32>, memref<2x2x1xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// decode_attention: split_out query_len differs from q.
func.func @decode_split_out_query_len(%q: memref<2x1x2x12xf32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %lens: memref<2xi32>, %ns: memref<2xi32>, %so: memref<2x2x2x4x8xf32>, %sl: memref<2x1x2x4xf32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xf32>) {
  // expected-error @+1 {{'split_out' dimension 1 (query_len) is 2, inconsistent with 'q' dimension 1 (query_len = 1)}}
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x2x12xf32>, memref<5x4x12xbf16>, memref<2x3xi32>, memref<2xi32>)
      splits(%ns, %so, %sl : memref<2xi32>, memref<2x2x2x4x8xf32>, memref<2x1x2x4xf32>)
      outs(%o, %lse : memref<2x1x2x8xf32>, memref<2x2x1xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// decode_attention: split_out has 4 heads, num_heads is 2.
func.func @decode_split_out_heads(%q: memref<2x1x2x12xf32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %lens: memref<2xi32>, %ns: memref<2xi32>, %so: memref<2x1x4x4x8xf32>, %sl: memref<2x1x2x4xf32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xf32>) {
  // expected-error @+1 {{'split_out' dimension 2 (heads) is 4, but num_heads is 2}}
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x2x12xf32>, memref<5x4x12xbf16>, memref<2x3xi32>, memref<2xi32>)
      splits(%ns, %so, %sl : memref<2xi32>, memref<2x1x4x4x8xf32>, memref<2x1x2x4xf32>)
      outs(%o, %lse : memref<2x1x2x8xf32>, memref<2x2x1xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// decode_attention: split_out heads must be static.
func.func @decode_split_out_dynamic_heads(%q: memref<2x1x2x12xf32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %lens: memref<2xi32>, %ns: memref<2xi32>, %so: memref<2x1x?x4x8xf32>, %sl: memref<2x1x2x4xf32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xf32>) {
  // expected-error @+1 {{'split_out' dimension 2 (heads) must be static (num_heads is 2)}}
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x2x12xf32>, memref<5x4x12xbf16>, memref<2x3xi32>, memref<2xi32>)
      splits(%ns, %so, %sl : memref<2xi32>, memref<2x1x?x4x8xf32>, memref<2x1x2x4xf32>)
      outs(%o, %lse : memref<2x1x2x8xf32>, memref<2x2x1xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// decode_attention: split_out last dim differs from kv_lora_rank.
func.func @decode_split_out_latent(%q: memref<2x1x2x12xf32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %lens: memref<2xi32>, %ns: memref<2xi32>, %so: memref<2x1x2x4x12xf32>, %sl: memref<2x1x2x4xf32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xf32>) {
  // expected-error @+1 {{'split_out' dimension 4 (kv_lora_rank) is 12, but kv_lora_rank is 8}}
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x2x12xf32>, memref<5x4x12xbf16>, memref<2x3xi32>, memref<2xi32>)
      splits(%ns, %so, %sl : memref<2xi32>, memref<2x1x2x4x12xf32>, memref<2x1x2x4xf32>)
      outs(%o, %lse : memref<2x1x2x8xf32>, memref<2x2x1xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// decode_attention: split_lse of rank 5.
func.func @decode_split_lse_rank(%q: memref<2x1x2x12xf32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %lens: memref<2xi32>, %ns: memref<2xi32>, %so: memref<2x1x2x4x8xf32>, %sl: memref<2x1x2x4x1xf32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xf32>) {
  // expected-error @+1 {{'split_lse' must have rank 4 [batch, query_len, heads, splits], got 'memref<2x1x2x4x1xf32>'}}
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x2x12xf32>, memref<5x4x12xbf16>, memref<2x3xi32>, memref<2xi32>)
      splits(%ns, %so, %sl : memref<2xi32>, memref<2x1x2x4x8xf32>, memref<2x1x2x4x1xf32>)
      outs(%o, %lse : memref<2x1x2x8xf32>, memref<2x2x1xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// decode_attention: split_lse must be f32.
func.func @decode_split_lse_f16(%q: memref<2x1x2x12xf32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %lens: memref<2xi32>, %ns: memref<2xi32>, %so: memref<2x1x2x4x8xf32>, %sl: memref<2x1x2x4xf16>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xf32>) {
  // expected-error @+1 {{'split_lse' must hold f32, got 'f16'}}
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x2x12xf32>, memref<5x4x12xbf16>, memref<2x3xi32>, memref<2xi32>)
      splits(%ns, %so, %sl : memref<2xi32>, memref<2x1x2x4x8xf32>, memref<2x1x2x4xf16>)
      outs(%o, %lse : memref<2x1x2x8xf32>, memref<2x2x1xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// decode_attention: split_lse batch differs from q.
func.func @decode_split_lse_batch(%q: memref<2x1x2x12xf32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %lens: memref<2xi32>, %ns: memref<2xi32>, %so: memref<2x1x2x4x8xf32>, %sl: memref<3x1x2x4xf32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xf32>) {
  // expected-error @+1 {{'split_lse' dimension 0 (batch) is 3, inconsistent with 'q' dimension 0 (batch = 2)}}
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x2x12xf32>, memref<5x4x12xbf16>, memref<2x3xi32>, memref<2xi32>)
      splits(%ns, %so, %sl : memref<2xi32>, memref<2x1x2x4x8xf32>, memref<3x1x2x4xf32>)
      outs(%o, %lse : memref<2x1x2x8xf32>, memref<2x2x1xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// decode_attention: split_lse query_len differs from q.
func.func @decode_split_lse_query_len(%q: memref<2x1x2x12xf32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %lens: memref<2xi32>, %ns: memref<2xi32>, %so: memref<2x1x2x4x8xf32>, %sl: memref<2x3x2x4xf32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xf32>) {
  // expected-error @+1 {{'split_lse' dimension 1 (query_len) is 3, inconsistent with 'q' dimension 1 (query_len = 1)}}
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x2x12xf32>, memref<5x4x12xbf16>, memref<2x3xi32>, memref<2xi32>)
      splits(%ns, %so, %sl : memref<2xi32>, memref<2x1x2x4x8xf32>, memref<2x3x2x4xf32>)
      outs(%o, %lse : memref<2x1x2x8xf32>, memref<2x2x1xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// decode_attention: split_lse has 3 heads, num_heads is 2.
func.func @decode_split_lse_heads(%q: memref<2x1x2x12xf32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %lens: memref<2xi32>, %ns: memref<2xi32>, %so: memref<2x1x2x4x8xf32>, %sl: memref<2x1x3x4xf32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xf32>) {
  // expected-error @+1 {{'split_lse' dimension 2 (heads) is 3, but num_heads is 2}}
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x2x12xf32>, memref<5x4x12xbf16>, memref<2x3xi32>, memref<2xi32>)
      splits(%ns, %so, %sl : memref<2xi32>, memref<2x1x2x4x8xf32>, memref<2x1x3x4xf32>)
      outs(%o, %lse : memref<2x1x2x8xf32>, memref<2x2x1xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// decode_attention: split_lse holds 3 splits, split_out 4.
func.func @decode_split_lse_splits(%q: memref<2x1x2x12xf32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %lens: memref<2xi32>, %ns: memref<2xi32>, %so: memref<2x1x2x4x8xf32>, %sl: memref<2x1x2x3xf32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xf32>) {
  // expected-error @+1 {{'split_lse' dimension 3 (splits) is 3, inconsistent with 'split_out' dimension 3 (splits = 4)}}
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x2x12xf32>, memref<5x4x12xbf16>, memref<2x3xi32>, memref<2xi32>)
      splits(%ns, %so, %sl : memref<2xi32>, memref<2x1x2x4x8xf32>, memref<2x1x2x3xf32>)
      outs(%o, %lse : memref<2x1x2x8xf32>, memref<2x2x1xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// decode_attention: the schedule operands come together; the generic form can
// give num_splits alone.
func.func @decode_num_splits_alone(%q: memref<2x1x2x12xf32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %lens: memref<2xi32>, %ns: memref<2xi32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xf32>) {
  // expected-error @+1 {{'num_splits', 'split_out' and 'split_lse' must be given together (got 'num_splits', no 'split_out', no 'split_lse')}}
  "mla.decode_attention"(%q, %cache, %bt, %lens, %ns, %o, %lse) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 1, 0, 0, 1, 1>, num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}> : (memref<2x1x2x12xf32>, memref<5x4x12xbf16>, memref<2x3xi32>, memref<2xi32>, memref<2xi32>, memref<2x1x2x8xf32>, memref<2x2x1xf32>) -> ()
  return
}

// -----

// decode_attention: workspaces without num_splits (generic form).
func.func @decode_workspaces_alone(%q: memref<2x1x2x12xf32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %lens: memref<2xi32>, %so: memref<2x1x2x4x8xf32>, %sl: memref<2x1x2x4xf32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xf32>) {
  // expected-error @+1 {{'num_splits', 'split_out' and 'split_lse' must be given together (got no 'num_splits', 'split_out', 'split_lse')}}
  "mla.decode_attention"(%q, %cache, %bt, %lens, %so, %sl, %o, %lse) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0, 1, 1, 1, 1>, num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}> : (memref<2x1x2x12xf32>, memref<5x4x12xbf16>, memref<2x3xi32>, memref<2xi32>, memref<2x1x2x4x8xf32>, memref<2x1x2x4xf32>, memref<2x1x2x8xf32>, memref<2x2x1xf32>) -> ()
  return
}

// -----

// decode_attention: the splits clause takes all three operands.
func.func @decode_splits_clause_short(%q: memref<2x1x2x12xf32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %lens: memref<2xi32>, %ns: memref<2xi32>, %so: memref<2x1x2x4x8xf32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xf32>) {
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x2x12xf32>, memref<5x4x12xbf16>, memref<2x3xi32>, memref<2xi32>)
      // expected-error @+1 {{expected ','}}
      splits(%ns, %so : memref<2xi32>, memref<2x1x2x4x8xf32>)
      outs(%o, %lse : memref<2x1x2x8xf32>, memref<2x2x1xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// merge_attn_states: prefix_output of rank 2.
func.func @merge_prefix_rank(%po: memref<4x16xf32>, %pl: memref<2x4xf32>, %so: memref<4x2x8xf32>, %sl: memref<2x4xf32>, %o: memref<4x2x8xf32>, %ol: memref<2x4xf32>) {
  // expected-error @+1 {{'prefix_output' must have rank 3 [tokens, heads, head_dim], got 'memref<4x16xf32>'}}
  mla.merge_attn_states ins(%po, %pl, %so, %sl : memref<4x16xf32>, memref<2x4xf32>, memref<4x2x8xf32>, memref<2x4xf32>)
      outs(%o, %ol : memref<4x2x8xf32>, memref<2x4xf32>)
  return
}

// -----

// merge_attn_states: prefix_output holds i8.
func.func @merge_prefix_i8(%po: memref<4x2x8xi8>, %pl: memref<2x4xf32>, %so: memref<4x2x8xf32>, %sl: memref<2x4xf32>, %o: memref<4x2x8xf32>, %ol: memref<2x4xf32>) {
  // expected-error @+1 {{'prefix_output' must hold f32, f16 or bf16, got 'i8'}}
  mla.merge_attn_states ins(%po, %pl, %so, %sl : memref<4x2x8xi8>, memref<2x4xf32>, memref<4x2x8xf32>, memref<2x4xf32>)
      outs(%o, %ol : memref<4x2x8xf32>, memref<2x4xf32>)
  return
}

// -----

// merge_attn_states: prefix_lse must be f32.
func.func @merge_prefix_lse_f16(%po: memref<4x2x8xf32>, %pl: memref<2x4xf16>, %so: memref<4x2x8xf32>, %sl: memref<2x4xf32>, %o: memref<4x2x8xf32>, %ol: memref<2x4xf32>) {
  // expected-error @+1 {{'prefix_lse' must hold f32, got 'f16'}}
  mla.merge_attn_states ins(%po, %pl, %so, %sl : memref<4x2x8xf32>, memref<2x4xf16>, memref<4x2x8xf32>, memref<2x4xf32>)
      outs(%o, %ol : memref<4x2x8xf32>, memref<2x4xf32>)
  return
}

// -----

// merge_attn_states: suffix_output holds bf16, prefix_output f32.
func.func @merge_mixed(%po: memref<4x2x8xf32>, %pl: memref<2x4xf32>, %so: memref<4x2x8xbf16>, %sl: memref<2x4xf32>, %o: memref<4x2x8xf32>, %ol: memref<2x4xf32>) {
  // expected-error @+1 {{'suffix_output' holds 'bf16' but 'prefix_output' holds 'f32'; activations must share one element type}}
  mla.merge_attn_states ins(%po, %pl, %so, %sl : memref<4x2x8xf32>, memref<2x4xf32>, memref<4x2x8xbf16>, memref<2x4xf32>)
      outs(%o, %ol : memref<4x2x8xf32>, memref<2x4xf32>)
  return
}

// -----

// merge_attn_states: suffix_output head dim differs from prefix_output.
func.func @merge_head_dim(%po: memref<4x2x8xf32>, %pl: memref<2x4xf32>, %so: memref<4x2x16xf32>, %sl: memref<2x4xf32>, %o: memref<4x2x8xf32>, %ol: memref<2x4xf32>) {
  // expected-error @+1 {{'suffix_output' dimension 2 (head_dim) is 16, inconsistent with 'prefix_output' dimension 2 (head_dim = 8)}}
  mla.merge_attn_states ins(%po, %pl, %so, %sl : memref<4x2x8xf32>, memref<2x4xf32>, memref<4x2x16xf32>, memref<2x4xf32>)
      outs(%o, %ol : memref<4x2x8xf32>, memref<2x4xf32>)
  return
}

// -----

// merge_attn_states: prefix_lse token count differs from prefix_output.
func.func @merge_lse_tokens(%po: memref<4x2x8xf32>, %pl: memref<2x5xf32>, %so: memref<4x2x8xf32>, %sl: memref<2x4xf32>, %o: memref<4x2x8xf32>, %ol: memref<2x4xf32>) {
  // expected-error @+1 {{'prefix_lse' dimension 1 (tokens) is 5, inconsistent with 'prefix_output' dimension 0 (tokens = 4)}}
  mla.merge_attn_states ins(%po, %pl, %so, %sl : memref<4x2x8xf32>, memref<2x5xf32>, memref<4x2x8xf32>, memref<2x4xf32>)
      outs(%o, %ol : memref<4x2x8xf32>, memref<2x4xf32>)
  return
}

// -----

// merge_attn_states: output token count differs.
func.func @merge_output_tokens(%po: memref<4x2x8xf32>, %pl: memref<2x4xf32>, %so: memref<4x2x8xf32>, %sl: memref<2x4xf32>, %o: memref<8x2x8xf32>, %ol: memref<2x4xf32>) {
  // expected-error @+1 {{'output' dimension 0 (tokens) is 8, inconsistent with 'prefix_output' dimension 0 (tokens = 4)}}
  mla.merge_attn_states ins(%po, %pl, %so, %sl : memref<4x2x8xf32>, memref<2x4xf32>, memref<4x2x8xf32>, memref<2x4xf32>)
      outs(%o, %ol : memref<8x2x8xf32>, memref<2x4xf32>)
  return
}

// -----

// merge_attn_states: optional output_lse given as [T, N].
func.func @merge_output_lse_shape(%po: memref<4x2x8xf32>, %pl: memref<2x4xf32>, %so: memref<4x2x8xf32>, %sl: memref<2x4xf32>, %o: memref<4x2x8xf32>, %ol: memref<4x2xf32>) {
  // expected-error @+1 {{'output_lse' dimension 0 (heads) is 4, inconsistent with 'prefix_output' dimension 1 (heads = 2)}}
  mla.merge_attn_states ins(%po, %pl, %so, %sl : memref<4x2x8xf32>, memref<2x4xf32>, memref<4x2x8xf32>, memref<2x4xf32>)
      outs(%o, %ol : memref<4x2x8xf32>, memref<4x2xf32>)
  return
}

// -----

// merge_attn_states: optional output_lse of rank 1.
func.func @merge_output_lse_rank(%po: memref<4x2x8xf32>, %pl: memref<2x4xf32>, %so: memref<4x2x8xf32>, %sl: memref<2x4xf32>, %o: memref<4x2x8xf32>, %ol: memref<8xf32>) {
  // expected-error @+1 {{'output_lse' must have rank 2 [heads, tokens], got 'memref<8xf32>'}}
  mla.merge_attn_states ins(%po, %pl, %so, %sl : memref<4x2x8xf32>, memref<2x4xf32>, memref<4x2x8xf32>, memref<2x4xf32>)
      outs(%o, %ol : memref<4x2x8xf32>, memref<8xf32>)
  return
}

// -----

// merge_attn_states: optional output_lse must be f32.
func.func @merge_output_lse_bf16(%po: memref<4x2x8xf32>, %pl: memref<2x4xf32>, %so: memref<4x2x8xf32>, %sl: memref<2x4xf32>, %o: memref<4x2x8xf32>, %ol: memref<2x4xbf16>) {
  // expected-error @+1 {{'output_lse' must hold f32, got 'bf16'}}
  mla.merge_attn_states ins(%po, %pl, %so, %sl : memref<4x2x8xf32>, memref<2x4xf32>, memref<4x2x8xf32>, memref<2x4xf32>)
      outs(%o, %ol : memref<4x2x8xf32>, memref<2x4xbf16>)
  return
}

// -----

// merge_attn_states without output_lse: output still checked.
func.func @merge_no_output_lse_bad_output(%po: memref<4x2x8xf32>, %pl: memref<2x4xf32>, %so: memref<4x2x8xf32>, %sl: memref<2x4xf32>, %o: memref<4x3x8xf32>) {
  // expected-error @+1 {{'output' dimension 1 (heads) is 3, inconsistent with 'prefix_output' dimension 1 (heads = 2)}}
  mla.merge_attn_states ins(%po, %pl, %so, %sl : memref<4x2x8xf32>, memref<2x4xf32>, memref<4x2x8xf32>, memref<2x4xf32>)
      outs(%o : memref<4x3x8xf32>)
  return
}

// -----

// merge_attn_states: suffix_lse with a non-unit innermost stride.
func.func @merge_suffix_lse_stride(%po: memref<4x2x8xf32>, %pl: memref<2x4xf32>, %so: memref<4x2x8xf32>, %sl: memref<2x4xf32, strided<[1, 2]>>, %o: memref<4x2x8xf32>, %ol: memref<2x4xf32>) {
  // expected-error @+1 {{'suffix_lse' must be contiguous in its innermost dimension (stride 1), got 'memref<2x4xf32, strided<[1, 2]>>'}}
  mla.merge_attn_states ins(%po, %pl, %so, %sl : memref<4x2x8xf32>, memref<2x4xf32>, memref<4x2x8xf32>, memref<2x4xf32, strided<[1, 2]>>)
      outs(%o, %ol : memref<4x2x8xf32>, memref<2x4xf32>)
  return
}

// -----

// gather_cache: kv_cache of rank 2.
func.func @gather_cache_rank(%cache: memref<20x12xbf16>, %bt: memref<2x3xi32>, %cu: memref<3xi32>, %starts: memref<2xi32>, %ws: memref<16x12xbf16>) {
  // expected-error @+1 {{'kv_cache' must have rank 3 [num_blocks, block_size, entry], got 'memref<20x12xbf16>'}}
  mla.gather_cache ins(%cache, %bt, %cu, %starts : memref<20x12xbf16>, memref<2x3xi32>, memref<3xi32>, memref<2xi32>)
      outs(%ws : memref<16x12xbf16>)
      {block_size = 4 : i64}
  return
}

// -----

// gather_cache: kv_cache must hold a float type.
func.func @gather_cache_i8(%cache: memref<5x4x12xi8>, %bt: memref<2x3xi32>, %cu: memref<3xi32>, %starts: memref<2xi32>, %ws: memref<16x12xbf16>) {
  // expected-error @+1 {{'kv_cache' must hold f32, f16, bf16, f8E4M3FN or f8E5M2, got 'i8'}}
  mla.gather_cache ins(%cache, %bt, %cu, %starts : memref<5x4x12xi8>, memref<2x3xi32>, memref<3xi32>, memref<2xi32>)
      outs(%ws : memref<16x12xbf16>)
      {block_size = 4 : i64}
  return
}

// -----

// gather_cache: workspace must hold a float type.
func.func @gather_workspace_i32(%cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %cu: memref<3xi32>, %starts: memref<2xi32>, %ws: memref<16x12xi32>) {
  // expected-error @+1 {{'workspace' must hold f32, f16 or bf16, got 'i32'}}
  mla.gather_cache ins(%cache, %bt, %cu, %starts : memref<5x4x12xbf16>, memref<2x3xi32>, memref<3xi32>, memref<2xi32>)
      outs(%ws : memref<16x12xi32>)
      {block_size = 4 : i64}
  return
}

// -----

// gather_cache: workspace rows shorter than cache entries.
func.func @gather_entry(%cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %cu: memref<3xi32>, %starts: memref<2xi32>, %ws: memref<16x10xbf16>) {
  // expected-error @+1 {{'workspace' dimension 1 (entry) is 10, inconsistent with 'kv_cache' dimension 2 (entry = 12)}}
  mla.gather_cache ins(%cache, %bt, %cu, %starts : memref<5x4x12xbf16>, memref<2x3xi32>, memref<3xi32>, memref<2xi32>)
      outs(%ws : memref<16x10xbf16>)
      {block_size = 4 : i64}
  return
}

// -----

// gather_cache: cache page size differs from block_size.
func.func @gather_block_size(%cache: memref<5x8x12xbf16>, %bt: memref<2x3xi32>, %cu: memref<3xi32>, %starts: memref<2xi32>, %ws: memref<16x12xbf16>) {
  // expected-error @+1 {{'kv_cache' dimension 1 (block_size) is 8, but block_size is 4}}
  mla.gather_cache ins(%cache, %bt, %cu, %starts : memref<5x8x12xbf16>, memref<2x3xi32>, memref<3xi32>, memref<2xi32>)
      outs(%ws : memref<16x12xbf16>)
      {block_size = 4 : i64}
  return
}

// -----

// gather_cache: cu_seq_lens has 4 entries for 2 requests.
func.func @gather_cu_batch(%cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %cu: memref<4xi32>, %starts: memref<2xi32>, %ws: memref<16x12xbf16>) {
  // expected-error @+1 {{'cu_seq_lens' dimension 0 (batch+1) is 4, inconsistent with 'block_table' dimension 0 (batch = 2)}}
  mla.gather_cache ins(%cache, %bt, %cu, %starts : memref<5x4x12xbf16>, memref<2x3xi32>, memref<4xi32>, memref<2xi32>)
      outs(%ws : memref<16x12xbf16>)
      {block_size = 4 : i64}
  return
}

// -----

// gather_cache: seq_starts has 3 entries for 2 requests.
func.func @gather_starts_batch(%cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %cu: memref<3xi32>, %starts: memref<3xi32>, %ws: memref<16x12xbf16>) {
  // expected-error @+1 {{'seq_starts' dimension 0 (batch) is 3, inconsistent with 'block_table' dimension 0 (batch = 2)}}
  mla.gather_cache ins(%cache, %bt, %cu, %starts : memref<5x4x12xbf16>, memref<2x3xi32>, memref<3xi32>, memref<3xi32>)
      outs(%ws : memref<16x12xbf16>)
      {block_size = 4 : i64}
  return
}

// -----

// gather_cache: seq_starts must be i32.
func.func @gather_starts_i64(%cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %cu: memref<3xi32>, %starts: memref<2xi64>, %ws: memref<16x12xbf16>) {
  // expected-error @+1 {{'seq_starts' must hold i32, got 'i64'}}
  mla.gather_cache ins(%cache, %bt, %cu, %starts : memref<5x4x12xbf16>, memref<2x3xi32>, memref<3xi32>, memref<2xi64>)
      outs(%ws : memref<16x12xbf16>)
      {block_size = 4 : i64}
  return
}

// -----

// gather_cache: block_table of rank 1.
func.func @gather_block_table_rank(%cache: memref<5x4x12xbf16>, %bt: memref<6xi32>, %cu: memref<3xi32>, %starts: memref<2xi32>, %ws: memref<16x12xbf16>) {
  // expected-error @+1 {{'block_table' must have rank 2 [batch, max_blocks], got 'memref<6xi32>'}}
  mla.gather_cache ins(%cache, %bt, %cu, %starts : memref<5x4x12xbf16>, memref<6xi32>, memref<3xi32>, memref<2xi32>)
      outs(%ws : memref<16x12xbf16>)
      {block_size = 4 : i64}
  return
}

// -----

// gather_cache: block_size = 0 (IntPositive).
func.func @gather_block_size_zero(%cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %cu: memref<3xi32>, %starts: memref<2xi32>, %ws: memref<16x12xbf16>) {
  // expected-error @+1 {{attribute 'block_size' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  mla.gather_cache ins(%cache, %bt, %cu, %starts : memref<5x4x12xbf16>, memref<2x3xi32>, memref<3xi32>, memref<2xi32>) outs(%ws : memref<16x12xbf16>) {block_size = 0 : i64}
  return
}

// -----

// gather_cache: block_size is required.
func.func @gather_missing_block_size(%cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %cu: memref<3xi32>, %starts: memref<2xi32>, %ws: memref<16x12xbf16>) {
  // expected-error @+1 {{requires attribute 'block_size'}}
  mla.gather_cache ins(%cache, %bt, %cu, %starts : memref<5x4x12xbf16>, memref<2x3xi32>, memref<3xi32>, memref<2xi32>)
      outs(%ws : memref<16x12xbf16>)
  return
}

// -----

// concat_and_cache: slot_mapping must be i64.
func.func @concat_slots_i32(%kvc: memref<3x8xf32>, %kpe: memref<3x4xf32>, %slots: memref<3xi32>, %cache: memref<5x4x12xbf16>) {
  // expected-error @+1 {{'slot_mapping' must hold i64, got 'i32'}}
  mla.concat_and_cache ins(%kvc, %kpe, %slots : memref<3x8xf32>, memref<3x4xf32>, memref<3xi32>)
      outs(%cache : memref<5x4x12xbf16>)
      {kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16}
  return
}

// -----

// concat_and_cache: slot_mapping length differs from kv_c.
func.func @concat_slots_tokens(%kvc: memref<3x8xf32>, %kpe: memref<3x4xf32>, %slots: memref<2xi64>, %cache: memref<5x4x12xbf16>) {
  // expected-error @+1 {{'slot_mapping' dimension 0 (tokens) is 2, inconsistent with 'kv_c' dimension 0 (tokens = 3)}}
  mla.concat_and_cache ins(%kvc, %kpe, %slots : memref<3x8xf32>, memref<3x4xf32>, memref<2xi64>)
      outs(%cache : memref<5x4x12xbf16>)
      {kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16}
  return
}

// -----

// concat_and_cache: k_pe token count differs from kv_c.
func.func @concat_k_pe_tokens(%kvc: memref<3x8xf32>, %kpe: memref<4x4xf32>, %slots: memref<3xi64>, %cache: memref<5x4x12xbf16>) {
  // expected-error @+1 {{'k_pe' dimension 0 (tokens) is 4, inconsistent with 'kv_c' dimension 0 (tokens = 3)}}
  mla.concat_and_cache ins(%kvc, %kpe, %slots : memref<3x8xf32>, memref<4x4xf32>, memref<3xi64>)
      outs(%cache : memref<5x4x12xbf16>)
      {kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16}
  return
}

// -----

// concat_and_cache: kv_c of rank 3.
func.func @concat_kv_c_rank(%kvc: memref<3x1x8xf32>, %kpe: memref<3x4xf32>, %slots: memref<3xi64>, %cache: memref<5x4x12xbf16>) {
  // expected-error @+1 {{'kv_c' must have rank 2 [tokens, kv_lora_rank], got 'memref<3x1x8xf32>'}}
  mla.concat_and_cache ins(%kvc, %kpe, %slots : memref<3x1x8xf32>, memref<3x4xf32>, memref<3xi64>)
      outs(%cache : memref<5x4x12xbf16>)
      {kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16}
  return
}

// -----

// concat_and_cache: kv_c width differs from kv_lora_rank.
func.func @concat_kv_c_latent(%kvc: memref<3x6xf32>, %kpe: memref<3x4xf32>, %slots: memref<3xi64>, %cache: memref<5x4x12xbf16>) {
  // expected-error @+1 {{'kv_c' dimension 1 (kv_lora_rank) is 6, but kv_lora_rank is 8}}
  mla.concat_and_cache ins(%kvc, %kpe, %slots : memref<3x6xf32>, memref<3x4xf32>, memref<3xi64>)
      outs(%cache : memref<5x4x12xbf16>)
      {kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16}
  return
}

// -----

// concat_and_cache: k_pe width differs from rope_dim.
func.func @concat_k_pe_rope(%kvc: memref<3x8xf32>, %kpe: memref<3x5xf32>, %slots: memref<3xi64>, %cache: memref<5x4x12xbf16>) {
  // expected-error @+1 {{'k_pe' dimension 1 (rope_dim) is 5, but rope_dim is 4}}
  mla.concat_and_cache ins(%kvc, %kpe, %slots : memref<3x8xf32>, memref<3x5xf32>, memref<3xi64>)
      outs(%cache : memref<5x4x12xbf16>)
      {kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16}
  return
}

// -----

// concat_and_cache: k_pe holds f16 while kv_c holds f32.
func.func @concat_mixed(%kvc: memref<3x8xf32>, %kpe: memref<3x4xf16>, %slots: memref<3xi64>, %cache: memref<5x4x12xbf16>) {
  // expected-error @+1 {{'k_pe' holds 'f16' but 'kv_c' holds 'f32'; activations must share one element type}}
  mla.concat_and_cache ins(%kvc, %kpe, %slots : memref<3x8xf32>, memref<3x4xf16>, memref<3xi64>)
      outs(%cache : memref<5x4x12xbf16>)
      {kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16}
  return
}

// -----

// concat_and_cache: kv_c holds an integer type.
func.func @concat_kv_c_i32(%kvc: memref<3x8xi32>, %kpe: memref<3x4xf32>, %slots: memref<3xi64>, %cache: memref<5x4x12xbf16>) {
  // expected-error @+1 {{'kv_c' must hold f32, f16 or bf16, got 'i32'}}
  mla.concat_and_cache ins(%kvc, %kpe, %slots : memref<3x8xi32>, memref<3x4xf32>, memref<3xi64>)
      outs(%cache : memref<5x4x12xbf16>)
      {kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16}
  return
}

// -----

// concat_and_cache: cache entry differs from kv_lora_rank + rope_dim.
func.func @concat_cache_entry(%kvc: memref<3x8xf32>, %kpe: memref<3x4xf32>, %slots: memref<3xi64>, %cache: memref<5x4x16xbf16>) {
  // expected-error @+1 {{'kv_cache' dimension 2 (entry) is 16, but kv_lora_rank + rope_dim is 12}}
  mla.concat_and_cache ins(%kvc, %kpe, %slots : memref<3x8xf32>, memref<3x4xf32>, memref<3xi64>)
      outs(%cache : memref<5x4x16xbf16>)
      {kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16}
  return
}

// -----

// concat_and_cache: cache page size differs from block_size.
func.func @concat_cache_block(%kvc: memref<3x8xf32>, %kpe: memref<3x4xf32>, %slots: memref<3xi64>, %cache: memref<10x2x12xbf16>) {
  // expected-error @+1 {{'kv_cache' dimension 1 (block_size) is 2, but block_size is 4}}
  mla.concat_and_cache ins(%kvc, %kpe, %slots : memref<3x8xf32>, memref<3x4xf32>, memref<3xi64>)
      outs(%cache : memref<10x2x12xbf16>)
      {kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16}
  return
}

// -----

// concat_and_cache: kv_cache holds f32 but cache_dtype is bf16.
func.func @concat_cache_dtype_mismatch(%kvc: memref<3x8xf32>, %kpe: memref<3x4xf32>, %slots: memref<3xi64>, %cache: memref<5x4x12xf32>) {
  // expected-error @+1 {{'kv_cache' holds 'f32', but cache_dtype is 'bf16'}}
  mla.concat_and_cache ins(%kvc, %kpe, %slots : memref<3x8xf32>, memref<3x4xf32>, memref<3xi64>)
      outs(%cache : memref<5x4x12xf32>)
      {kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16}
  return
}

// -----

// concat_and_cache: cache_dtype must be a float type.
func.func @concat_cache_dtype_i8(%kvc: memref<3x8xf32>, %kpe: memref<3x4xf32>, %slots: memref<3xi64>, %cache: memref<5x4x12xi8>) {
  // expected-error @+1 {{cache_dtype must be f32, f16, bf16, f8E4M3FN or f8E5M2, got 'i8'}}
  mla.concat_and_cache ins(%kvc, %kpe, %slots : memref<3x8xf32>, memref<3x4xf32>, memref<3xi64>)
      outs(%cache : memref<5x4x12xi8>)
      {kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = i8}
  return
}

// -----

// concat_and_cache: cache_dtype is required.
func.func @concat_missing_cache_dtype(%kvc: memref<3x8xf32>, %kpe: memref<3x4xf32>, %slots: memref<3xi64>, %cache: memref<5x4x12xbf16>) {
  // expected-error @+1 {{requires attribute 'cache_dtype'}}
  mla.concat_and_cache ins(%kvc, %kpe, %slots : memref<3x8xf32>, memref<3x4xf32>, memref<3xi64>)
      outs(%cache : memref<5x4x12xbf16>)
      {kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64}
  return
}

// -----

// kv_up_proj: kv_c of rank 1.
func.func @kv_up_proj_kv_c_rank(%kvc: memref<24xf32>, %kpe: memref<3x4xf32>, %w: memref<8x2x11xf32>, %k: memref<3x2x10xf32>, %v: memref<3x2x5xf32>) {
  // expected-error @+1 {{'kv_c' must have rank 2 [tokens, kv_lora_rank], got 'memref<24xf32>'}}
  mla.kv_up_proj ins(%kvc, %kpe, %w : memref<24xf32>, memref<3x4xf32>, memref<8x2x11xf32>)
      outs(%k, %v : memref<3x2x10xf32>, memref<3x2x5xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, qk_nope_head_dim = 6 : i64, rope_dim = 4 : i64, v_head_dim = 5 : i64}
  return
}

// -----

// kv_up_proj: k_pe holds i8.
func.func @kv_up_proj_k_pe_i8(%kvc: memref<3x8xf32>, %kpe: memref<3x4xi8>, %w: memref<8x2x11xf32>, %k: memref<3x2x10xf32>, %v: memref<3x2x5xf32>) {
  // expected-error @+1 {{'k_pe' must hold f32, f16 or bf16, got 'i8'}}
  mla.kv_up_proj ins(%kvc, %kpe, %w : memref<3x8xf32>, memref<3x4xi8>, memref<8x2x11xf32>)
      outs(%k, %v : memref<3x2x10xf32>, memref<3x2x5xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, qk_nope_head_dim = 6 : i64, rope_dim = 4 : i64, v_head_dim = 5 : i64}
  return
}

// -----

// kv_up_proj: k holds bf16 while kv_c holds f32.
func.func @kv_up_proj_mixed(%kvc: memref<3x8xf32>, %kpe: memref<3x4xf32>, %w: memref<8x2x11xf32>, %k: memref<3x2x10xbf16>, %v: memref<3x2x5xf32>) {
  // expected-error @+1 {{'k' holds 'bf16' but 'kv_c' holds 'f32'; activations must share one element type}}
  mla.kv_up_proj ins(%kvc, %kpe, %w : memref<3x8xf32>, memref<3x4xf32>, memref<8x2x11xf32>)
      outs(%k, %v : memref<3x2x10xbf16>, memref<3x2x5xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, qk_nope_head_dim = 6 : i64, rope_dim = 4 : i64, v_head_dim = 5 : i64}
  return
}

// -----

// kv_up_proj: kv_b_proj rows differ from kv_lora_rank.
func.func @kv_up_proj_weight_latent(%kvc: memref<3x8xf32>, %kpe: memref<3x4xf32>, %w: memref<4x2x11xf32>, %k: memref<3x2x10xf32>, %v: memref<3x2x5xf32>) {
  // expected-error @+1 {{'kv_b_proj' dimension 0 (kv_lora_rank) is 4, but kv_lora_rank is 8}}
  mla.kv_up_proj ins(%kvc, %kpe, %w : memref<3x8xf32>, memref<3x4xf32>, memref<4x2x11xf32>)
      outs(%k, %v : memref<3x2x10xf32>, memref<3x2x5xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, qk_nope_head_dim = 6 : i64, rope_dim = 4 : i64, v_head_dim = 5 : i64}
  return
}

// -----

// kv_up_proj: kv_b_proj heads differ from num_heads.
func.func @kv_up_proj_weight_heads(%kvc: memref<3x8xf32>, %kpe: memref<3x4xf32>, %w: memref<8x3x11xf32>, %k: memref<3x2x10xf32>, %v: memref<3x2x5xf32>) {
  // expected-error @+1 {{'kv_b_proj' dimension 1 (heads) is 3, but num_heads is 2}}
  mla.kv_up_proj ins(%kvc, %kpe, %w : memref<3x8xf32>, memref<3x4xf32>, memref<8x3x11xf32>)
      outs(%k, %v : memref<3x2x10xf32>, memref<3x2x5xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, qk_nope_head_dim = 6 : i64, rope_dim = 4 : i64, v_head_dim = 5 : i64}
  return
}

// -----

// kv_up_proj: kv_b_proj columns differ from qk_nope_head_dim + v_head_dim.
func.func @kv_up_proj_weight_nope_plus_v(%kvc: memref<3x8xf32>, %kpe: memref<3x4xf32>, %w: memref<8x2x10xf32>, %k: memref<3x2x10xf32>, %v: memref<3x2x5xf32>) {
  // expected-error @+1 {{'kv_b_proj' dimension 2 (nope_plus_v) is 10, but qk_nope_head_dim + v_head_dim is 11}}
  mla.kv_up_proj ins(%kvc, %kpe, %w : memref<3x8xf32>, memref<3x4xf32>, memref<8x2x10xf32>)
      outs(%k, %v : memref<3x2x10xf32>, memref<3x2x5xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, qk_nope_head_dim = 6 : i64, rope_dim = 4 : i64, v_head_dim = 5 : i64}
  return
}

// -----

// kv_up_proj: k head dim differs from qk_nope_head_dim + rope_dim.
func.func @kv_up_proj_k_qk_dim(%kvc: memref<3x8xf32>, %kpe: memref<3x4xf32>, %w: memref<8x2x11xf32>, %k: memref<3x2x11xf32>, %v: memref<3x2x5xf32>) {
  // expected-error @+1 {{'k' dimension 2 (qk_head_dim) is 11, but qk_nope_head_dim + rope_dim is 10}}
  mla.kv_up_proj ins(%kvc, %kpe, %w : memref<3x8xf32>, memref<3x4xf32>, memref<8x2x11xf32>)
      outs(%k, %v : memref<3x2x11xf32>, memref<3x2x5xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, qk_nope_head_dim = 6 : i64, rope_dim = 4 : i64, v_head_dim = 5 : i64}
  return
}

// -----

// kv_up_proj: v head dim differs from v_head_dim.
func.func @kv_up_proj_v_dim(%kvc: memref<3x8xf32>, %kpe: memref<3x4xf32>, %w: memref<8x2x11xf32>, %k: memref<3x2x10xf32>, %v: memref<3x2x6xf32>) {
  // expected-error @+1 {{'v' dimension 2 (v_head_dim) is 6, but v_head_dim is 5}}
  mla.kv_up_proj ins(%kvc, %kpe, %w : memref<3x8xf32>, memref<3x4xf32>, memref<8x2x11xf32>)
      outs(%k, %v : memref<3x2x10xf32>, memref<3x2x6xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, qk_nope_head_dim = 6 : i64, rope_dim = 4 : i64, v_head_dim = 5 : i64}
  return
}

// -----

// kv_up_proj: k_pe width differs from rope_dim.
func.func @kv_up_proj_k_pe_rope(%kvc: memref<3x8xf32>, %kpe: memref<3x2xf32>, %w: memref<8x2x11xf32>, %k: memref<3x2x10xf32>, %v: memref<3x2x5xf32>) {
  // expected-error @+1 {{'k_pe' dimension 1 (rope_dim) is 2, but rope_dim is 4}}
  mla.kv_up_proj ins(%kvc, %kpe, %w : memref<3x8xf32>, memref<3x2xf32>, memref<8x2x11xf32>)
      outs(%k, %v : memref<3x2x10xf32>, memref<3x2x5xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, qk_nope_head_dim = 6 : i64, rope_dim = 4 : i64, v_head_dim = 5 : i64}
  return
}

// -----

// kv_up_proj: v has 4 rows, kv_c has 3.
func.func @kv_up_proj_v_tokens(%kvc: memref<3x8xf32>, %kpe: memref<3x4xf32>, %w: memref<8x2x11xf32>, %k: memref<3x2x10xf32>, %v: memref<4x2x5xf32>) {
  // expected-error @+1 {{'v' dimension 0 (tokens) is 4, inconsistent with 'kv_c' dimension 0 (tokens = 3)}}
  mla.kv_up_proj ins(%kvc, %kpe, %w : memref<3x8xf32>, memref<3x4xf32>, memref<8x2x11xf32>)
      outs(%k, %v : memref<3x2x10xf32>, memref<4x2x5xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, qk_nope_head_dim = 6 : i64, rope_dim = 4 : i64, v_head_dim = 5 : i64}
  return
}

// -----

// kv_up_proj: v_head_dim is required.
func.func @kv_up_proj_missing_v_dim(%kvc: memref<3x8xf32>, %kpe: memref<3x4xf32>, %w: memref<8x2x11xf32>, %k: memref<3x2x10xf32>, %v: memref<3x2x5xf32>) {
  // expected-error @+1 {{requires attribute 'v_head_dim'}}
  mla.kv_up_proj ins(%kvc, %kpe, %w : memref<3x8xf32>, memref<3x4xf32>, memref<8x2x11xf32>)
      outs(%k, %v : memref<3x2x10xf32>, memref<3x2x5xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, qk_nope_head_dim = 6 : i64, rope_dim = 4 : i64}
  return
}

// -----

// kv_up_proj: rope_dim = 0 (IntPositive).
func.func @kv_up_proj_rope_zero(%kvc: memref<3x8xf32>, %kpe: memref<3x4xf32>, %w: memref<8x2x11xf32>, %k: memref<3x2x10xf32>, %v: memref<3x2x5xf32>) {
  // expected-error @+1 {{attribute 'rope_dim' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  mla.kv_up_proj ins(%kvc, %kpe, %w : memref<3x8xf32>, memref<3x4xf32>, memref<8x2x11xf32>) outs(%k, %v : memref<3x2x10xf32>, memref<3x2x5xf32>) {num_heads = 2 : i64, kv_lora_rank = 8 : i64, qk_nope_head_dim = 6 : i64, rope_dim = 0 : i64, v_head_dim = 5 : i64}
  return
}

// -----

// q_absorb: q_nope of rank 2.
func.func @q_absorb_q_nope_rank(%qn: memref<3x12xf32>, %wuk: memref<2x6x8xf32>, %ql: memref<3x2x8xf32>) {
  // expected-error @+1 {{'q_nope' must have rank 3 [tokens, heads, qk_nope_head_dim], got 'memref<3x12xf32>'}}
  mla.q_absorb ins(%qn, %wuk : memref<3x12xf32>, memref<2x6x8xf32>)
      outs(%ql : memref<3x2x8xf32>)
      {num_heads = 2 : i64, qk_nope_head_dim = 6 : i64, kv_lora_rank = 8 : i64}
  return
}

// -----

// q_absorb: w_uk_t holds i32.
func.func @q_absorb_weight_i32(%qn: memref<3x2x6xf32>, %wuk: memref<2x6x8xi32>, %ql: memref<3x2x8xf32>) {
  // expected-error @+1 {{'w_uk_t' must hold f32, f16 or bf16, got 'i32'}}
  mla.q_absorb ins(%qn, %wuk : memref<3x2x6xf32>, memref<2x6x8xi32>)
      outs(%ql : memref<3x2x8xf32>)
      {num_heads = 2 : i64, qk_nope_head_dim = 6 : i64, kv_lora_rank = 8 : i64}
  return
}

// -----

// q_absorb: w_uk_t holds f16 while q_nope holds f32.
func.func @q_absorb_mixed(%qn: memref<3x2x6xf32>, %wuk: memref<2x6x8xf16>, %ql: memref<3x2x8xf32>) {
  // expected-error @+1 {{'w_uk_t' holds 'f16' but 'q_nope' holds 'f32'; activations must share one element type}}
  mla.q_absorb ins(%qn, %wuk : memref<3x2x6xf32>, memref<2x6x8xf16>)
      outs(%ql : memref<3x2x8xf32>)
      {num_heads = 2 : i64, qk_nope_head_dim = 6 : i64, kv_lora_rank = 8 : i64}
  return
}

// -----

// q_absorb: q_nope heads differ from num_heads.
func.func @q_absorb_q_nope_heads(%qn: memref<3x3x6xf32>, %wuk: memref<2x6x8xf32>, %ql: memref<3x2x8xf32>) {
  // expected-error @+1 {{'q_nope' dimension 1 (heads) is 3, but num_heads is 2}}
  mla.q_absorb ins(%qn, %wuk : memref<3x3x6xf32>, memref<2x6x8xf32>)
      outs(%ql : memref<3x2x8xf32>)
      {num_heads = 2 : i64, qk_nope_head_dim = 6 : i64, kv_lora_rank = 8 : i64}
  return
}

// -----

// q_absorb: w_uk_t depth differs from qk_nope_head_dim.
func.func @q_absorb_weight_nope(%qn: memref<3x2x6xf32>, %wuk: memref<2x5x8xf32>, %ql: memref<3x2x8xf32>) {
  // expected-error @+1 {{'w_uk_t' dimension 1 (qk_nope_head_dim) is 5, but qk_nope_head_dim is 6}}
  mla.q_absorb ins(%qn, %wuk : memref<3x2x6xf32>, memref<2x5x8xf32>)
      outs(%ql : memref<3x2x8xf32>)
      {num_heads = 2 : i64, qk_nope_head_dim = 6 : i64, kv_lora_rank = 8 : i64}
  return
}

// -----

// q_absorb: w_uk_t width differs from kv_lora_rank.
func.func @q_absorb_weight_latent(%qn: memref<3x2x6xf32>, %wuk: memref<2x6x9xf32>, %ql: memref<3x2x8xf32>) {
  // expected-error @+1 {{'w_uk_t' dimension 2 (kv_lora_rank) is 9, but kv_lora_rank is 8}}
  mla.q_absorb ins(%qn, %wuk : memref<3x2x6xf32>, memref<2x6x9xf32>)
      outs(%ql : memref<3x2x8xf32>)
      {num_heads = 2 : i64, qk_nope_head_dim = 6 : i64, kv_lora_rank = 8 : i64}
  return
}

// -----

// q_absorb: ql_nope width differs from kv_lora_rank.
func.func @q_absorb_out_latent(%qn: memref<3x2x6xf32>, %wuk: memref<2x6x8xf32>, %ql: memref<3x2x9xf32>) {
  // expected-error @+1 {{'ql_nope' dimension 2 (kv_lora_rank) is 9, but kv_lora_rank is 8}}
  mla.q_absorb ins(%qn, %wuk : memref<3x2x6xf32>, memref<2x6x8xf32>)
      outs(%ql : memref<3x2x9xf32>)
      {num_heads = 2 : i64, qk_nope_head_dim = 6 : i64, kv_lora_rank = 8 : i64}
  return
}

// -----

// q_absorb with rope_dim: q_nope must be the whole query (P + R wide).
func.func @q_absorb_rope_query_width(%q: memref<3x2x6xf32>, %wuk: memref<2x6x8xf32>, %ql: memref<3x2x12xf32>) {
  // expected-error @+1 {{'q_nope' dimension 2 (qk_nope_head_dim + rope_dim) is 6, but qk_nope_head_dim + rope_dim is 10}}
  mla.q_absorb ins(%q, %wuk : memref<3x2x6xf32>, memref<2x6x8xf32>)
      outs(%ql : memref<3x2x12xf32>)
      {num_heads = 2 : i64, qk_nope_head_dim = 6 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64}
  return
}

// -----

// q_absorb with rope_dim: the decode query must be Lkv + R wide.
func.func @q_absorb_rope_output_width(%q: memref<3x2x10xf32>, %wuk: memref<2x6x8xf32>, %ql: memref<3x2x8xf32>) {
  // expected-error @+1 {{'ql_nope' dimension 2 (kv_lora_rank + rope_dim) is 8, but kv_lora_rank + rope_dim is 12}}
  mla.q_absorb ins(%q, %wuk : memref<3x2x10xf32>, memref<2x6x8xf32>)
      outs(%ql : memref<3x2x8xf32>)
      {num_heads = 2 : i64, qk_nope_head_dim = 6 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64}
  return
}

// -----

// q_absorb: rope_dim must be positive.
func.func @q_absorb_rope_zero(%q: memref<3x2x6xf32>, %wuk: memref<2x6x8xf32>, %ql: memref<3x2x8xf32>) {
  // expected-error @+3 {{attribute 'rope_dim' failed to satisfy constraint}}
  mla.q_absorb ins(%q, %wuk : memref<3x2x6xf32>, memref<2x6x8xf32>)
      outs(%ql : memref<3x2x8xf32>)
      {num_heads = 2 : i64, qk_nope_head_dim = 6 : i64, kv_lora_rank = 8 : i64, rope_dim = 0 : i64}
  return
}

// -----

// q_absorb: ql_nope token count differs from q_nope.
func.func @q_absorb_out_tokens(%qn: memref<3x2x6xf32>, %wuk: memref<2x6x8xf32>, %ql: memref<4x2x8xf32>) {
  // expected-error @+1 {{'ql_nope' dimension 0 (tokens) is 4, inconsistent with 'q_nope' dimension 0 (tokens = 3)}}
  mla.q_absorb ins(%qn, %wuk : memref<3x2x6xf32>, memref<2x6x8xf32>)
      outs(%ql : memref<4x2x8xf32>)
      {num_heads = 2 : i64, qk_nope_head_dim = 6 : i64, kv_lora_rank = 8 : i64}
  return
}

// -----

// q_absorb: ql_nope view with a non-unit innermost stride.
func.func @q_absorb_out_stride(%qn: memref<3x2x6xf32>, %wuk: memref<2x6x8xf32>, %ql: memref<3x2x8xf32, strided<[32, 16, 2]>>) {
  // expected-error @+1 {{'ql_nope' must be contiguous in its innermost dimension (stride 1), got 'memref<3x2x8xf32, strided<[32, 16, 2]>>'}}
  mla.q_absorb ins(%qn, %wuk : memref<3x2x6xf32>, memref<2x6x8xf32>)
      outs(%ql : memref<3x2x8xf32, strided<[32, 16, 2]>>)
      {num_heads = 2 : i64, qk_nope_head_dim = 6 : i64, kv_lora_rank = 8 : i64}
  return
}

// -----

// q_absorb: num_heads is required.
func.func @q_absorb_missing_heads(%qn: memref<3x2x6xf32>, %wuk: memref<2x6x8xf32>, %ql: memref<3x2x8xf32>) {
  // expected-error @+1 {{requires attribute 'num_heads'}}
  mla.q_absorb ins(%qn, %wuk : memref<3x2x6xf32>, memref<2x6x8xf32>)
      outs(%ql : memref<3x2x8xf32>)
      {qk_nope_head_dim = 6 : i64, kv_lora_rank = 8 : i64}
  return
}

// -----

// v_up_proj: w_uv of rank 2.
func.func @v_up_proj_weight_rank(%ol: memref<3x2x8xf32>, %wuv: memref<16x5xf32>, %o: memref<3x2x5xf32>) {
  // expected-error @+1 {{'w_uv' must have rank 3 [heads, kv_lora_rank, v_head_dim], got 'memref<16x5xf32>'}}
  mla.v_up_proj ins(%ol, %wuv : memref<3x2x8xf32>, memref<16x5xf32>)
      outs(%o : memref<3x2x5xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, v_head_dim = 5 : i64}
  return
}

// -----

// v_up_proj: out holds i32.
func.func @v_up_proj_out_i32(%ol: memref<3x2x8xf32>, %wuv: memref<2x8x5xf32>, %o: memref<3x2x5xi32>) {
  // expected-error @+1 {{'out' must hold f32, f16 or bf16, got 'i32'}}
  mla.v_up_proj ins(%ol, %wuv : memref<3x2x8xf32>, memref<2x8x5xf32>)
      outs(%o : memref<3x2x5xi32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, v_head_dim = 5 : i64}
  return
}

// -----

// v_up_proj: out holds bf16 while o_latent holds f32.
func.func @v_up_proj_mixed(%ol: memref<3x2x8xf32>, %wuv: memref<2x8x5xf32>, %o: memref<3x2x5xbf16>) {
  // expected-error @+1 {{'out' holds 'bf16' but 'o_latent' holds 'f32'; activations must share one element type}}
  mla.v_up_proj ins(%ol, %wuv : memref<3x2x8xf32>, memref<2x8x5xf32>)
      outs(%o : memref<3x2x5xbf16>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, v_head_dim = 5 : i64}
  return
}

// -----

// v_up_proj: o_latent width differs from kv_lora_rank.
func.func @v_up_proj_latent(%ol: memref<3x2x7xf32>, %wuv: memref<2x8x5xf32>, %o: memref<3x2x5xf32>) {
  // expected-error @+1 {{'o_latent' dimension 2 (kv_lora_rank) is 7, but kv_lora_rank is 8}}
  mla.v_up_proj ins(%ol, %wuv : memref<3x2x7xf32>, memref<2x8x5xf32>)
      outs(%o : memref<3x2x5xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, v_head_dim = 5 : i64}
  return
}

// -----

// v_up_proj: w_uv heads differ from num_heads.
func.func @v_up_proj_weight_heads(%ol: memref<3x2x8xf32>, %wuv: memref<3x8x5xf32>, %o: memref<3x2x5xf32>) {
  // expected-error @+1 {{'w_uv' dimension 0 (heads) is 3, but num_heads is 2}}
  mla.v_up_proj ins(%ol, %wuv : memref<3x2x8xf32>, memref<3x8x5xf32>)
      outs(%o : memref<3x2x5xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, v_head_dim = 5 : i64}
  return
}

// -----

// v_up_proj: w_uv width differs from v_head_dim.
func.func @v_up_proj_weight_v_dim(%ol: memref<3x2x8xf32>, %wuv: memref<2x8x4xf32>, %o: memref<3x2x5xf32>) {
  // expected-error @+1 {{'w_uv' dimension 2 (v_head_dim) is 4, but v_head_dim is 5}}
  mla.v_up_proj ins(%ol, %wuv : memref<3x2x8xf32>, memref<2x8x4xf32>)
      outs(%o : memref<3x2x5xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, v_head_dim = 5 : i64}
  return
}

// -----

// v_up_proj: out token count differs from o_latent.
func.func @v_up_proj_out_tokens(%ol: memref<3x2x8xf32>, %wuv: memref<2x8x5xf32>, %o: memref<2x2x5xf32>) {
  // expected-error @+1 {{'out' dimension 0 (tokens) is 2, inconsistent with 'o_latent' dimension 0 (tokens = 3)}}
  mla.v_up_proj ins(%ol, %wuv : memref<3x2x8xf32>, memref<2x8x5xf32>)
      outs(%o : memref<2x2x5xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, v_head_dim = 5 : i64}
  return
}

// -----

// v_up_proj: kv_lora_rank is required.
func.func @v_up_proj_missing_latent(%ol: memref<3x2x8xf32>, %wuv: memref<2x8x5xf32>, %o: memref<3x2x5xf32>) {
  // expected-error @+1 {{requires attribute 'kv_lora_rank'}}
  mla.v_up_proj ins(%ol, %wuv : memref<3x2x8xf32>, memref<2x8x5xf32>)
      outs(%o : memref<3x2x5xf32>)
      {num_heads = 2 : i64, v_head_dim = 5 : i64}
  return
}

// -----

// chunked_prefill: chunk_cu_seq_lens has 2 chunks, chunk_starts 3.
func.func @chunked_chunk_count(%q: memref<4x2x10xbf16>, %kvc: memref<4x8xbf16>, %kpe: memref<4x4xbf16>, %cq: memref<3xi32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %ccu: memref<2x3xi32>, %cst: memref<3x2xi32>, %w: memref<8x2x11xbf16>, %ws: memref<16x12xbf16>, %o: memref<4x2x5xbf16>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{'chunk_starts' dimension 0 (chunks) is 3, inconsistent with 'chunk_cu_seq_lens' dimension 0 (chunks = 2)}}
  mla.chunked_prefill ins(%q, %kvc, %kpe, %cq : memref<4x2x10xbf16>, memref<4x8xbf16>, memref<4x4xbf16>, memref<3xi32>)
      cache(%cache, %bt : memref<5x4x12xbf16>, memref<2x3xi32>)
      chunks(%ccu, %cst : memref<2x3xi32>, memref<3x2xi32>)
      weights(%w : memref<8x2x11xbf16>)
      workspace(%ws : memref<16x12xbf16>)
      outs(%o, %lse : memref<4x2x5xbf16>, memref<2x4xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, qk_nope_head_dim = 6 : i64, rope_dim = 4 : i64, v_head_dim = 5 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// chunked_prefill: chunk_starts is [C, B+1] instead of [C, B].
func.func @chunked_chunk_starts_batch(%q: memref<4x2x10xbf16>, %kvc: memref<4x8xbf16>, %kpe: memref<4x4xbf16>, %cq: memref<3xi32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %ccu: memref<2x3xi32>, %cst: memref<2x3xi32>, %w: memref<8x2x11xbf16>, %ws: memref<16x12xbf16>, %o: memref<4x2x5xbf16>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{'chunk_starts' dimension 1 (batch) is 3, inconsistent with 'cu_seqlens_q' dimension 0 (batch = 2)}}
  mla.chunked_prefill ins(%q, %kvc, %kpe, %cq : memref<4x2x10xbf16>, memref<4x8xbf16>, memref<4x4xbf16>, memref<3xi32>)
      cache(%cache, %bt : memref<5x4x12xbf16>, memref<2x3xi32>)
      chunks(%ccu, %cst : memref<2x3xi32>, memref<2x3xi32>)
      weights(%w : memref<8x2x11xbf16>)
      workspace(%ws : memref<16x12xbf16>)
      outs(%o, %lse : memref<4x2x5xbf16>, memref<2x4xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, qk_nope_head_dim = 6 : i64, rope_dim = 4 : i64, v_head_dim = 5 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// chunked_prefill: chunk_cu_seq_lens is [C, B] instead of [C, B+1].
func.func @chunked_chunk_cu_batch(%q: memref<4x2x10xbf16>, %kvc: memref<4x8xbf16>, %kpe: memref<4x4xbf16>, %cq: memref<3xi32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %ccu: memref<2x2xi32>, %cst: memref<2x2xi32>, %w: memref<8x2x11xbf16>, %ws: memref<16x12xbf16>, %o: memref<4x2x5xbf16>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{'chunk_cu_seq_lens' dimension 1 (batch+1) is 2, inconsistent with 'cu_seqlens_q' dimension 0 (batch = 2)}}
  mla.chunked_prefill ins(%q, %kvc, %kpe, %cq : memref<4x2x10xbf16>, memref<4x8xbf16>, memref<4x4xbf16>, memref<3xi32>)
      cache(%cache, %bt : memref<5x4x12xbf16>, memref<2x3xi32>)
      chunks(%ccu, %cst : memref<2x2xi32>, memref<2x2xi32>)
      weights(%w : memref<8x2x11xbf16>)
      workspace(%ws : memref<16x12xbf16>)
      outs(%o, %lse : memref<4x2x5xbf16>, memref<2x4xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, qk_nope_head_dim = 6 : i64, rope_dim = 4 : i64, v_head_dim = 5 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// chunked_prefill: chunk_cu_seq_lens of rank 1.
func.func @chunked_chunk_cu_rank(%q: memref<4x2x10xbf16>, %kvc: memref<4x8xbf16>, %kpe: memref<4x4xbf16>, %cq: memref<3xi32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %ccu: memref<3xi32>, %cst: memref<2x2xi32>, %w: memref<8x2x11xbf16>, %ws: memref<16x12xbf16>, %o: memref<4x2x5xbf16>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{'chunk_cu_seq_lens' must have rank 2 [chunks, batch+1], got 'memref<3xi32>'}}
  mla.chunked_prefill ins(%q, %kvc, %kpe, %cq : memref<4x2x10xbf16>, memref<4x8xbf16>, memref<4x4xbf16>, memref<3xi32>)
      cache(%cache, %bt : memref<5x4x12xbf16>, memref<2x3xi32>)
      chunks(%ccu, %cst : memref<3xi32>, memref<2x2xi32>)
      weights(%w : memref<8x2x11xbf16>)
      workspace(%ws : memref<16x12xbf16>)
      outs(%o, %lse : memref<4x2x5xbf16>, memref<2x4xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, qk_nope_head_dim = 6 : i64, rope_dim = 4 : i64, v_head_dim = 5 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// chunked_prefill: chunk_starts must be i32.
func.func @chunked_chunk_starts_i64(%q: memref<4x2x10xbf16>, %kvc: memref<4x8xbf16>, %kpe: memref<4x4xbf16>, %cq: memref<3xi32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %ccu: memref<2x3xi32>, %cst: memref<2x2xi64>, %w: memref<8x2x11xbf16>, %ws: memref<16x12xbf16>, %o: memref<4x2x5xbf16>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{'chunk_starts' must hold i32, got 'i64'}}
  mla.chunked_prefill ins(%q, %kvc, %kpe, %cq : memref<4x2x10xbf16>, memref<4x8xbf16>, memref<4x4xbf16>, memref<3xi32>)
      cache(%cache, %bt : memref<5x4x12xbf16>, memref<2x3xi32>)
      chunks(%ccu, %cst : memref<2x3xi32>, memref<2x2xi64>)
      weights(%w : memref<8x2x11xbf16>)
      workspace(%ws : memref<16x12xbf16>)
      outs(%o, %lse : memref<4x2x5xbf16>, memref<2x4xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, qk_nope_head_dim = 6 : i64, rope_dim = 4 : i64, v_head_dim = 5 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// chunked_prefill: block_table batch differs from cu_seqlens_q.
func.func @chunked_block_table_batch(%q: memref<4x2x10xbf16>, %kvc: memref<4x8xbf16>, %kpe: memref<4x4xbf16>, %cq: memref<3xi32>, %cache: memref<5x4x12xbf16>, %bt: memref<3x3xi32>, %ccu: memref<2x3xi32>, %cst: memref<2x2xi32>, %w: memref<8x2x11xbf16>, %ws: memref<16x12xbf16>, %o: memref<4x2x5xbf16>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{'block_table' dimension 0 (batch) is 3, inconsistent with 'cu_seqlens_q' dimension 0 (batch = 2)}}
  mla.chunked_prefill ins(%q, %kvc, %kpe, %cq : memref<4x2x10xbf16>, memref<4x8xbf16>, memref<4x4xbf16>, memref<3xi32>)
      cache(%cache, %bt : memref<5x4x12xbf16>, memref<3x3xi32>)
      chunks(%ccu, %cst : memref<2x3xi32>, memref<2x2xi32>)
      weights(%w : memref<8x2x11xbf16>)
      workspace(%ws : memref<16x12xbf16>)
      outs(%o, %lse : memref<4x2x5xbf16>, memref<2x4xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, qk_nope_head_dim = 6 : i64, rope_dim = 4 : i64, v_head_dim = 5 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// chunked_prefill: q head dim differs from qk_nope_head_dim + rope_dim.
func.func @chunked_q_qk_dim(%q: memref<4x2x12xbf16>, %kvc: memref<4x8xbf16>, %kpe: memref<4x4xbf16>, %cq: memref<3xi32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %ccu: memref<2x3xi32>, %cst: memref<2x2xi32>, %w: memref<8x2x11xbf16>, %ws: memref<16x12xbf16>, %o: memref<4x2x5xbf16>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{'q' dimension 2 (qk_head_dim) is 12, but qk_nope_head_dim + rope_dim is 10}}
  mla.chunked_prefill ins(%q, %kvc, %kpe, %cq : memref<4x2x12xbf16>, memref<4x8xbf16>, memref<4x4xbf16>, memref<3xi32>)
      cache(%cache, %bt : memref<5x4x12xbf16>, memref<2x3xi32>)
      chunks(%ccu, %cst : memref<2x3xi32>, memref<2x2xi32>)
      weights(%w : memref<8x2x11xbf16>)
      workspace(%ws : memref<16x12xbf16>)
      outs(%o, %lse : memref<4x2x5xbf16>, memref<2x4xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, qk_nope_head_dim = 6 : i64, rope_dim = 4 : i64, v_head_dim = 5 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// chunked_prefill: kv_c token count differs from q.
func.func @chunked_kv_c_tokens(%q: memref<4x2x10xbf16>, %kvc: memref<5x8xbf16>, %kpe: memref<4x4xbf16>, %cq: memref<3xi32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %ccu: memref<2x3xi32>, %cst: memref<2x2xi32>, %w: memref<8x2x11xbf16>, %ws: memref<16x12xbf16>, %o: memref<4x2x5xbf16>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{'kv_c' dimension 0 (tokens) is 5, inconsistent with 'q' dimension 0 (tokens = 4)}}
  mla.chunked_prefill ins(%q, %kvc, %kpe, %cq : memref<4x2x10xbf16>, memref<5x8xbf16>, memref<4x4xbf16>, memref<3xi32>)
      cache(%cache, %bt : memref<5x4x12xbf16>, memref<2x3xi32>)
      chunks(%ccu, %cst : memref<2x3xi32>, memref<2x2xi32>)
      weights(%w : memref<8x2x11xbf16>)
      workspace(%ws : memref<16x12xbf16>)
      outs(%o, %lse : memref<4x2x5xbf16>, memref<2x4xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, qk_nope_head_dim = 6 : i64, rope_dim = 4 : i64, v_head_dim = 5 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// chunked_prefill: k_pe width differs from rope_dim.
func.func @chunked_k_pe_rope(%q: memref<4x2x10xbf16>, %kvc: memref<4x8xbf16>, %kpe: memref<4x8xbf16>, %cq: memref<3xi32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %ccu: memref<2x3xi32>, %cst: memref<2x2xi32>, %w: memref<8x2x11xbf16>, %ws: memref<16x12xbf16>, %o: memref<4x2x5xbf16>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{'k_pe' dimension 1 (rope_dim) is 8, but rope_dim is 4}}
  mla.chunked_prefill ins(%q, %kvc, %kpe, %cq : memref<4x2x10xbf16>, memref<4x8xbf16>, memref<4x8xbf16>, memref<3xi32>)
      cache(%cache, %bt : memref<5x4x12xbf16>, memref<2x3xi32>)
      chunks(%ccu, %cst : memref<2x3xi32>, memref<2x2xi32>)
      weights(%w : memref<8x2x11xbf16>)
      workspace(%ws : memref<16x12xbf16>)
      outs(%o, %lse : memref<4x2x5xbf16>, memref<2x4xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, qk_nope_head_dim = 6 : i64, rope_dim = 4 : i64, v_head_dim = 5 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// chunked_prefill: kv_b_proj columns differ from qk_nope_head_dim + v_head_dim.
func.func @chunked_weight_nope_plus_v(%q: memref<4x2x10xbf16>, %kvc: memref<4x8xbf16>, %kpe: memref<4x4xbf16>, %cq: memref<3xi32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %ccu: memref<2x3xi32>, %cst: memref<2x2xi32>, %w: memref<8x2x10xbf16>, %ws: memref<16x12xbf16>, %o: memref<4x2x5xbf16>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{'kv_b_proj' dimension 2 (nope_plus_v) is 10, but qk_nope_head_dim + v_head_dim is 11}}
  mla.chunked_prefill ins(%q, %kvc, %kpe, %cq : memref<4x2x10xbf16>, memref<4x8xbf16>, memref<4x4xbf16>, memref<3xi32>)
      cache(%cache, %bt : memref<5x4x12xbf16>, memref<2x3xi32>)
      chunks(%ccu, %cst : memref<2x3xi32>, memref<2x2xi32>)
      weights(%w : memref<8x2x10xbf16>)
      workspace(%ws : memref<16x12xbf16>)
      outs(%o, %lse : memref<4x2x5xbf16>, memref<2x4xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, qk_nope_head_dim = 6 : i64, rope_dim = 4 : i64, v_head_dim = 5 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// chunked_prefill: workspace rows differ from kv_lora_rank + rope_dim.
func.func @chunked_workspace_entry(%q: memref<4x2x10xbf16>, %kvc: memref<4x8xbf16>, %kpe: memref<4x4xbf16>, %cq: memref<3xi32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %ccu: memref<2x3xi32>, %cst: memref<2x2xi32>, %w: memref<8x2x11xbf16>, %ws: memref<16x10xbf16>, %o: memref<4x2x5xbf16>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{'workspace' dimension 1 (entry) is 10, but kv_lora_rank + rope_dim is 12}}
  mla.chunked_prefill ins(%q, %kvc, %kpe, %cq : memref<4x2x10xbf16>, memref<4x8xbf16>, memref<4x4xbf16>, memref<3xi32>)
      cache(%cache, %bt : memref<5x4x12xbf16>, memref<2x3xi32>)
      chunks(%ccu, %cst : memref<2x3xi32>, memref<2x2xi32>)
      weights(%w : memref<8x2x11xbf16>)
      workspace(%ws : memref<16x10xbf16>)
      outs(%o, %lse : memref<4x2x5xbf16>, memref<2x4xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, qk_nope_head_dim = 6 : i64, rope_dim = 4 : i64, v_head_dim = 5 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// chunked_prefill: the workspace must hold the activation type.
func.func @chunked_workspace_f32(%q: memref<4x2x10xbf16>, %kvc: memref<4x8xbf16>, %kpe: memref<4x4xbf16>, %cq: memref<3xi32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %ccu: memref<2x3xi32>, %cst: memref<2x2xi32>, %w: memref<8x2x11xbf16>, %ws: memref<16x12xf32>, %o: memref<4x2x5xbf16>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{'workspace' holds 'f32' but 'q' holds 'bf16'; activations must share one element type}}
  mla.chunked_prefill ins(%q, %kvc, %kpe, %cq : memref<4x2x10xbf16>, memref<4x8xbf16>, memref<4x4xbf16>, memref<3xi32>)
      cache(%cache, %bt : memref<5x4x12xbf16>, memref<2x3xi32>)
      chunks(%ccu, %cst : memref<2x3xi32>, memref<2x2xi32>)
      weights(%w : memref<8x2x11xbf16>)
      workspace(%ws : memref<16x12xf32>)
      outs(%o, %lse : memref<4x2x5xbf16>, memref<2x4xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, qk_nope_head_dim = 6 : i64, rope_dim = 4 : i64, v_head_dim = 5 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// chunked_prefill: cache page size differs from block_size.
func.func @chunked_cache_block(%q: memref<4x2x10xbf16>, %kvc: memref<4x8xbf16>, %kpe: memref<4x4xbf16>, %cq: memref<3xi32>, %cache: memref<5x16x12xbf16>, %bt: memref<2x3xi32>, %ccu: memref<2x3xi32>, %cst: memref<2x2xi32>, %w: memref<8x2x11xbf16>, %ws: memref<16x12xbf16>, %o: memref<4x2x5xbf16>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{'kv_cache' dimension 1 (block_size) is 16, but block_size is 4}}
  mla.chunked_prefill ins(%q, %kvc, %kpe, %cq : memref<4x2x10xbf16>, memref<4x8xbf16>, memref<4x4xbf16>, memref<3xi32>)
      cache(%cache, %bt : memref<5x16x12xbf16>, memref<2x3xi32>)
      chunks(%ccu, %cst : memref<2x3xi32>, memref<2x2xi32>)
      weights(%w : memref<8x2x11xbf16>)
      workspace(%ws : memref<16x12xbf16>)
      outs(%o, %lse : memref<4x2x5xbf16>, memref<2x4xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, qk_nope_head_dim = 6 : i64, rope_dim = 4 : i64, v_head_dim = 5 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// chunked_prefill: kv_cache holds f16 but cache_dtype is bf16.
func.func @chunked_cache_dtype_mismatch(%q: memref<4x2x10xbf16>, %kvc: memref<4x8xbf16>, %kpe: memref<4x4xbf16>, %cq: memref<3xi32>, %cache: memref<5x4x12xf16>, %bt: memref<2x3xi32>, %ccu: memref<2x3xi32>, %cst: memref<2x2xi32>, %w: memref<8x2x11xbf16>, %ws: memref<16x12xbf16>, %o: memref<4x2x5xbf16>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{'kv_cache' holds 'f16', but cache_dtype is 'bf16'}}
  mla.chunked_prefill ins(%q, %kvc, %kpe, %cq : memref<4x2x10xbf16>, memref<4x8xbf16>, memref<4x4xbf16>, memref<3xi32>)
      cache(%cache, %bt : memref<5x4x12xf16>, memref<2x3xi32>)
      chunks(%ccu, %cst : memref<2x3xi32>, memref<2x2xi32>)
      weights(%w : memref<8x2x11xbf16>)
      workspace(%ws : memref<16x12xbf16>)
      outs(%o, %lse : memref<4x2x5xbf16>, memref<2x4xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, qk_nope_head_dim = 6 : i64, rope_dim = 4 : i64, v_head_dim = 5 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// chunked_prefill: cache_dtype must be a float type.
func.func @chunked_cache_dtype_i8(%q: memref<4x2x10xbf16>, %kvc: memref<4x8xbf16>, %kpe: memref<4x4xbf16>, %cq: memref<3xi32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %ccu: memref<2x3xi32>, %cst: memref<2x2xi32>, %w: memref<8x2x11xbf16>, %ws: memref<16x12xbf16>, %o: memref<4x2x5xbf16>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{cache_dtype must be f32, f16, bf16, f8E4M3FN or f8E5M2, got 'i8'}}
  mla.chunked_prefill ins(%q, %kvc, %kpe, %cq : memref<4x2x10xbf16>, memref<4x8xbf16>, memref<4x4xbf16>, memref<3xi32>)
      cache(%cache, %bt : memref<5x4x12xbf16>, memref<2x3xi32>)
      chunks(%ccu, %cst : memref<2x3xi32>, memref<2x2xi32>)
      weights(%w : memref<8x2x11xbf16>)
      workspace(%ws : memref<16x12xbf16>)
      outs(%o, %lse : memref<4x2x5xbf16>, memref<2x4xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, qk_nope_head_dim = 6 : i64, rope_dim = 4 : i64, v_head_dim = 5 : i64, block_size = 4 : i64, cache_dtype = i8, softmax_scale = 0.5 : f32}
  return
}

// -----

// chunked_prefill: out head dim differs from v_head_dim.
func.func @chunked_out_v_dim(%q: memref<4x2x10xbf16>, %kvc: memref<4x8xbf16>, %kpe: memref<4x4xbf16>, %cq: memref<3xi32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %ccu: memref<2x3xi32>, %cst: memref<2x2xi32>, %w: memref<8x2x11xbf16>, %ws: memref<16x12xbf16>, %o: memref<4x2x4xbf16>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{'out' dimension 2 (v_head_dim) is 4, but v_head_dim is 5}}
  mla.chunked_prefill ins(%q, %kvc, %kpe, %cq : memref<4x2x10xbf16>, memref<4x8xbf16>, memref<4x4xbf16>, memref<3xi32>)
      cache(%cache, %bt : memref<5x4x12xbf16>, memref<2x3xi32>)
      chunks(%ccu, %cst : memref<2x3xi32>, memref<2x2xi32>)
      weights(%w : memref<8x2x11xbf16>)
      workspace(%ws : memref<16x12xbf16>)
      outs(%o, %lse : memref<4x2x4xbf16>, memref<2x4xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, qk_nope_head_dim = 6 : i64, rope_dim = 4 : i64, v_head_dim = 5 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// chunked_prefill: lse must be f32.
func.func @chunked_lse_bf16(%q: memref<4x2x10xbf16>, %kvc: memref<4x8xbf16>, %kpe: memref<4x4xbf16>, %cq: memref<3xi32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %ccu: memref<2x3xi32>, %cst: memref<2x2xi32>, %w: memref<8x2x11xbf16>, %ws: memref<16x12xbf16>, %o: memref<4x2x5xbf16>, %lse: memref<2x4xbf16>) {
  // expected-error @+1 {{'lse' must hold f32, got 'bf16'}}
  mla.chunked_prefill ins(%q, %kvc, %kpe, %cq : memref<4x2x10xbf16>, memref<4x8xbf16>, memref<4x4xbf16>, memref<3xi32>)
      cache(%cache, %bt : memref<5x4x12xbf16>, memref<2x3xi32>)
      chunks(%ccu, %cst : memref<2x3xi32>, memref<2x2xi32>)
      weights(%w : memref<8x2x11xbf16>)
      workspace(%ws : memref<16x12xbf16>)
      outs(%o, %lse : memref<4x2x5xbf16>, memref<2x4xbf16>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, qk_nope_head_dim = 6 : i64, rope_dim = 4 : i64, v_head_dim = 5 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// chunked_prefill: NaN softmax_scale.
func.func @chunked_scale_nan(%q: memref<4x2x10xbf16>, %kvc: memref<4x8xbf16>, %kpe: memref<4x4xbf16>, %cq: memref<3xi32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %ccu: memref<2x3xi32>, %cst: memref<2x2xi32>, %w: memref<8x2x11xbf16>, %ws: memref<16x12xbf16>, %o: memref<4x2x5xbf16>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{softmax_scale must be finite and positive, got nan}}
  mla.chunked_prefill ins(%q, %kvc, %kpe, %cq : memref<4x2x10xbf16>, memref<4x8xbf16>, memref<4x4xbf16>, memref<3xi32>)
      cache(%cache, %bt : memref<5x4x12xbf16>, memref<2x3xi32>)
      chunks(%ccu, %cst : memref<2x3xi32>, memref<2x2xi32>)
      weights(%w : memref<8x2x11xbf16>)
      workspace(%ws : memref<16x12xbf16>)
      outs(%o, %lse : memref<4x2x5xbf16>, memref<2x4xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, qk_nope_head_dim = 6 : i64, rope_dim = 4 : i64, v_head_dim = 5 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0x7FC00000 : f32}
  return
}

// -----

// chunked_prefill: softmax_scale is required.
func.func @chunked_missing_scale(%q: memref<4x2x10xbf16>, %kvc: memref<4x8xbf16>, %kpe: memref<4x4xbf16>, %cq: memref<3xi32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %ccu: memref<2x3xi32>, %cst: memref<2x2xi32>, %w: memref<8x2x11xbf16>, %ws: memref<16x12xbf16>, %o: memref<4x2x5xbf16>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{requires attribute 'softmax_scale'}}
  mla.chunked_prefill ins(%q, %kvc, %kpe, %cq : memref<4x2x10xbf16>, memref<4x8xbf16>, memref<4x4xbf16>, memref<3xi32>)
      cache(%cache, %bt : memref<5x4x12xbf16>, memref<2x3xi32>)
      chunks(%ccu, %cst : memref<2x3xi32>, memref<2x2xi32>)
      weights(%w : memref<8x2x11xbf16>)
      workspace(%ws : memref<16x12xbf16>)
      outs(%o, %lse : memref<4x2x5xbf16>, memref<2x4xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, qk_nope_head_dim = 6 : i64, rope_dim = 4 : i64, v_head_dim = 5 : i64, block_size = 4 : i64, cache_dtype = bf16}
  return
}

// -----

// chunked_prefill: num_heads = 0 (IntPositive).
func.func @chunked_heads_zero(%q: memref<4x2x10xbf16>, %kvc: memref<4x8xbf16>, %kpe: memref<4x4xbf16>, %cq: memref<3xi32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %ccu: memref<2x3xi32>, %cst: memref<2x2xi32>, %w: memref<8x2x11xbf16>, %ws: memref<16x12xbf16>, %o: memref<4x2x5xbf16>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{attribute 'num_heads' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  mla.chunked_prefill ins(%q, %kvc, %kpe, %cq : memref<4x2x10xbf16>, memref<4x8xbf16>, memref<4x4xbf16>, memref<3xi32>) cache(%cache, %bt : memref<5x4x12xbf16>, memref<2x3xi32>) chunks(%ccu, %cst : memref<2x3xi32>, memref<2x2xi32>) weights(%w : memref<8x2x11xbf16>) workspace(%ws : memref<16x12xbf16>) outs(%o, %lse : memref<4x2x5xbf16>, memref<2x4xf32>) {num_heads = 0 : i64, kv_lora_rank = 8 : i64, qk_nope_head_dim = 6 : i64, rope_dim = 4 : i64, v_head_dim = 5 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// Generic form: a tensor operand fails the ODS memref constraint.
func.func @prefill_tensor_generic(%q: tensor<4x2x8xf32>, %k: memref<6x2x8xf32>, %v: memref<6x2x4xf32>, %cq: memref<3xi32>, %ck: memref<3xi32>, %o: memref<4x2x4xf32>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{operand #0 must be memref of any type values, but got 'tensor<4x2x8xf32>'}}
  "mla.prefill_attention"(%q, %k, %v, %cq, %ck, %o, %lse) <{num_heads = 2 : i64, qk_head_dim = 8 : i64, v_head_dim = 4 : i64, softmax_scale = 0.5 : f32}> : (tensor<4x2x8xf32>, memref<6x2x8xf32>, memref<6x2x4xf32>, memref<3xi32>, memref<3xi32>, memref<4x2x4xf32>, memref<2x4xf32>) -> ()
  return
}

// -----

// Generic form: an unranked memref fails the ODS (ranked) memref constraint.
func.func @gather_unranked_generic(%cache: memref<*xbf16>, %bt: memref<2x3xi32>, %cu: memref<3xi32>, %starts: memref<2xi32>, %ws: memref<16x12xbf16>) {
  // expected-error @+1 {{operand #0 must be memref of any type values, but got 'memref<*xbf16>'}}
  "mla.gather_cache"(%cache, %bt, %cu, %starts, %ws) <{block_size = 4 : i64}> : (memref<*xbf16>, memref<2x3xi32>, memref<3xi32>, memref<2xi32>, memref<16x12xbf16>) -> ()
  return
}

// -----

// Generic form: merge_attn_states with a seventh operand.
func.func @merge_extra_operand(%po: memref<4x2x8xf32>, %pl: memref<2x4xf32>) {
  // expected-error @+1 {{operand group starting at #5 requires 0 or 1 element, but found 2}}
  "mla.merge_attn_states"(%po, %pl, %po, %pl, %po, %pl, %pl) : (memref<4x2x8xf32>, memref<2x4xf32>, memref<4x2x8xf32>, memref<2x4xf32>, memref<4x2x8xf32>, memref<2x4xf32>, memref<2x4xf32>) -> ()
  return
}

// -----

// Baselines: every op with the operands the cases above start from is valid.
// mla.prefill_attention: valid baseline.
func.func @prefill_baseline(%q: memref<4x2x8xf32>, %k: memref<6x2x8xf32>, %v: memref<6x2x4xf32>, %cq: memref<3xi32>, %ck: memref<3xi32>, %o: memref<4x2x4xf32>, %lse: memref<2x4xf32>) {
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<4x2x8xf32>, memref<6x2x8xf32>, memref<6x2x4xf32>, memref<3xi32>, memref<3xi32>)
      outs(%o, %lse : memref<4x2x4xf32>, memref<2x4xf32>)
      {num_heads = 2 : i64, qk_head_dim = 8 : i64, v_head_dim = 4 : i64, softmax_scale = 0.5 : f32}
  return
}

// mla.decode_attention: valid baseline.
func.func @decode_baseline(%q: memref<2x1x2x12xf32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %lens: memref<2xi32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xf32>) {
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x2x12xf32>, memref<5x4x12xbf16>, memref<2x3xi32>, memref<2xi32>)
      outs(%o, %lse : memref<2x1x2x8xf32>, memref<2x2x1xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// mla.decode_attention with a split schedule: valid baseline.
func.func @decode_splits_baseline(%q: memref<2x1x2x12xf32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %lens: memref<2xi32>, %ns: memref<2xi32>, %so: memref<2x1x2x4x8xf32>, %sl: memref<2x1x2x4xf32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xf32>) {
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x2x12xf32>, memref<5x4x12xbf16>, memref<2x3xi32>, memref<2xi32>)
      splits(%ns, %so, %sl : memref<2xi32>, memref<2x1x2x4x8xf32>, memref<2x1x2x4xf32>)
      outs(%o, %lse : memref<2x1x2x8xf32>, memref<2x2x1xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// mla.merge_attn_states: valid baseline.
func.func @merge_baseline(%po: memref<4x2x8xf32>, %pl: memref<2x4xf32>, %so: memref<4x2x8xf32>, %sl: memref<2x4xf32>, %o: memref<4x2x8xf32>, %ol: memref<2x4xf32>) {
  mla.merge_attn_states ins(%po, %pl, %so, %sl : memref<4x2x8xf32>, memref<2x4xf32>, memref<4x2x8xf32>, memref<2x4xf32>)
      outs(%o, %ol : memref<4x2x8xf32>, memref<2x4xf32>)
  return
}

// mla.gather_cache: valid baseline.
func.func @gather_baseline(%cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %cu: memref<3xi32>, %starts: memref<2xi32>, %ws: memref<16x12xbf16>) {
  mla.gather_cache ins(%cache, %bt, %cu, %starts : memref<5x4x12xbf16>, memref<2x3xi32>, memref<3xi32>, memref<2xi32>)
      outs(%ws : memref<16x12xbf16>)
      {block_size = 4 : i64}
  return
}

// mla.concat_and_cache: valid baseline.
func.func @concat_baseline(%kvc: memref<3x8xf32>, %kpe: memref<3x4xf32>, %slots: memref<3xi64>, %cache: memref<5x4x12xbf16>) {
  mla.concat_and_cache ins(%kvc, %kpe, %slots : memref<3x8xf32>, memref<3x4xf32>, memref<3xi64>)
      outs(%cache : memref<5x4x12xbf16>)
      {kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16}
  return
}

// mla.kv_up_proj: valid baseline.
func.func @kv_up_proj_baseline(%kvc: memref<3x8xf32>, %kpe: memref<3x4xf32>, %w: memref<8x2x11xf32>, %k: memref<3x2x10xf32>, %v: memref<3x2x5xf32>) {
  mla.kv_up_proj ins(%kvc, %kpe, %w : memref<3x8xf32>, memref<3x4xf32>, memref<8x2x11xf32>)
      outs(%k, %v : memref<3x2x10xf32>, memref<3x2x5xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, qk_nope_head_dim = 6 : i64, rope_dim = 4 : i64, v_head_dim = 5 : i64}
  return
}

// mla.q_absorb: valid baseline.
func.func @q_absorb_baseline(%qn: memref<3x2x6xf32>, %wuk: memref<2x6x8xf32>, %ql: memref<3x2x8xf32>) {
  mla.q_absorb ins(%qn, %wuk : memref<3x2x6xf32>, memref<2x6x8xf32>)
      outs(%ql : memref<3x2x8xf32>)
      {num_heads = 2 : i64, qk_nope_head_dim = 6 : i64, kv_lora_rank = 8 : i64}
  return
}

// mla.v_up_proj: valid baseline.
func.func @v_up_proj_baseline(%ol: memref<3x2x8xf32>, %wuv: memref<2x8x5xf32>, %o: memref<3x2x5xf32>) {
  mla.v_up_proj ins(%ol, %wuv : memref<3x2x8xf32>, memref<2x8x5xf32>)
      outs(%o : memref<3x2x5xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, v_head_dim = 5 : i64}
  return
}

// mla.chunked_prefill: valid baseline.
func.func @chunked_baseline(%q: memref<4x2x10xbf16>, %kvc: memref<4x8xbf16>, %kpe: memref<4x4xbf16>, %cq: memref<3xi32>, %cache: memref<5x4x12xbf16>, %bt: memref<2x3xi32>, %ccu: memref<2x3xi32>, %cst: memref<2x2xi32>, %w: memref<8x2x11xbf16>, %ws: memref<16x12xbf16>, %o: memref<4x2x5xbf16>, %lse: memref<2x4xf32>) {
  mla.chunked_prefill ins(%q, %kvc, %kpe, %cq : memref<4x2x10xbf16>, memref<4x8xbf16>, memref<4x4xbf16>, memref<3xi32>)
      cache(%cache, %bt : memref<5x4x12xbf16>, memref<2x3xi32>)
      chunks(%ccu, %cst : memref<2x3xi32>, memref<2x2xi32>)
      weights(%w : memref<8x2x11xbf16>)
      workspace(%ws : memref<16x12xbf16>)
      outs(%o, %lse : memref<4x2x5xbf16>, memref<2x4xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, qk_nope_head_dim = 6 : i64, rope_dim = 4 : i64, v_head_dim = 5 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}

// -----

// A dimension named by an attribute must be static: kernels loop over it.
func.func @dynamic_fixed_dim(%qn: memref<?x2x?xf32>, %w: memref<2x6x8xf32>, %ql: memref<?x2x8xf32>) {
  // expected-error @+1 {{'q_nope' dimension 2 (qk_nope_head_dim) must be static (qk_nope_head_dim is 6)}}
  mla.q_absorb ins(%qn, %w : memref<?x2x?xf32>, memref<2x6x8xf32>) outs(%ql : memref<?x2x8xf32>) {num_heads = 2 : i64, qk_nope_head_dim = 6 : i64, kv_lora_rank = 8 : i64}
  return
}

// -----

// The head dim of merge_attn_states has no attribute but must be static.
func.func @merge_dynamic_head_dim(%o: memref<?x2x?xf32>, %l: memref<2x?xf32>) {
  // expected-error @+1 {{'prefix_output' dimension 2 (head_dim) must be static}}
  mla.merge_attn_states ins(%o, %l, %o, %l : memref<?x2x?xf32>, memref<2x?xf32>, memref<?x2x?xf32>, memref<2x?xf32>) outs(%o : memref<?x2x?xf32>)
  return
}

// -----

// The cache entry width of gather_cache must be static.
func.func @gather_dynamic_entry(%c: memref<?x16x?xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %st: memref<?xi32>, %ws: memref<?x?xbf16>) {
  // expected-error @+1 {{'kv_cache' dimension 2 (entry) must be static}}
  mla.gather_cache ins(%c, %bt, %cu, %st : memref<?x16x?xbf16>, memref<?x?xi32>, memref<?xi32>, memref<?xi32>) outs(%ws : memref<?x?xbf16>) {block_size = 16 : i64}
  return
}

// -----

// A misspelled flag is an error, not a silently different computation.
func.func @misspelled_flag(%o: memref<?x2x8xf32>, %l: memref<2x?xf32>) {
  // expected-error @+1 {{has unknown attribute 'casual'}}
  mla.merge_attn_states ins(%o, %l, %o, %l : memref<?x2x8xf32>, memref<2x?xf32>, memref<?x2x8xf32>, memref<2x?xf32>) outs(%o : memref<?x2x8xf32>) {casual}
  return
}

// -----

// Dimension attributes are bounded, so their sums cannot overflow.
func.func @huge_dim(%qn: memref<?x2x6xf32>, %w: memref<2x6x8xf32>, %ql: memref<?x2x8xf32>) {
  // expected-error @+1 {{attribute 'kv_lora_rank' failed to satisfy constraint}}
  mla.q_absorb ins(%qn, %w : memref<?x2x6xf32>, memref<2x6x8xf32>) outs(%ql : memref<?x2x8xf32>) {num_heads = 2 : i64, qk_nope_head_dim = 6 : i64, kv_lora_rank = 4611686018427387904 : i64}
  return
}

// -----

// merge_attn_states_n: the number of states must be static.
func.func @merge_n_dynamic_states(%po: memref<?x4x1x2x8xf32>, %pl: memref<?x4x2x1xf32>, %o: memref<4x1x2x8xf32>) {
  // expected-error @+1 {{'partial_outputs' dimension 0 (states) must be static}}
  mla.merge_attn_states_n ins(%po, %pl : memref<?x4x1x2x8xf32>, memref<?x4x2x1xf32>)
      outs(%o : memref<4x1x2x8xf32>)
  return
}

// -----

// merge_attn_states_n: at most 64 states.
func.func @merge_n_too_many(%po: memref<65x4x1x2x8xf32>, %pl: memref<65x4x2x1xf32>, %o: memref<4x1x2x8xf32>) {
  // expected-error @+1 {{merges 1 to 64 states (static dim 0 of partial_outputs), got 65}}
  mla.merge_attn_states_n ins(%po, %pl : memref<65x4x1x2x8xf32>, memref<65x4x2x1xf32>)
      outs(%o : memref<4x1x2x8xf32>)
  return
}

// -----

// merge_attn_states_n: the LSEs' layout is [S, B, N, Q], not [S, B, Q, N].
func.func @merge_n_lse_layout(%po: memref<2x4x3x2x8xf32>, %pl: memref<2x4x3x2xf32>, %o: memref<4x3x2x8xf32>) {
  // expected-error @+1 {{'partial_lses' dimension 2 (heads) is 3, inconsistent with 'partial_outputs' dimension 3 (heads = 2)}}
  mla.merge_attn_states_n ins(%po, %pl : memref<2x4x3x2x8xf32>, memref<2x4x3x2xf32>)
      outs(%o : memref<4x3x2x8xf32>)
  return
}

// -----

// merge_attn_states_n: the output has the partials' heads.
func.func @merge_n_heads(%po: memref<2x4x1x2x8xf32>, %pl: memref<2x4x2x1xf32>, %o: memref<4x1x4x8xbf16>) {
  // expected-error @+1 {{'output' dimension 2 (heads) is 4, inconsistent with 'partial_outputs' dimension 3 (heads = 2)}}
  mla.merge_attn_states_n ins(%po, %pl : memref<2x4x1x2x8xf32>, memref<2x4x2x1xf32>)
      outs(%o : memref<4x1x4x8xbf16>)
  return
}

// -----

// merge_attn_states_n: LSEs are f32.
func.func @merge_n_lse_bf16(%po: memref<2x4x1x2x8xf32>, %pl: memref<2x4x2x1xbf16>, %o: memref<4x1x2x8xf32>) {
  // expected-error @+1 {{'partial_lses' must hold f32, got 'bf16'}}
  mla.merge_attn_states_n ins(%po, %pl : memref<2x4x1x2x8xf32>, memref<2x4x2x1xbf16>)
      outs(%o : memref<4x1x2x8xf32>)
  return
}
