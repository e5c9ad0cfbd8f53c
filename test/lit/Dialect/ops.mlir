// Round trip of every mla op: parse, print, parse the print, print again.
// RUN: mla-opt %s | mla-opt | FileCheck %s
// RUN: mla-opt %s --mlir-print-op-generic | mla-opt | FileCheck %s

// CHECK-LABEL: func.func @prefill
func.func @prefill(%q: memref<?x16x192xbf16>, %k: memref<?x16x192xbf16>,
                   %v: memref<?x16x128xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>,
                   %o: memref<?x16x128xbf16>, %lse: memref<16x?xf32>) {
  // CHECK: mla.prefill_attention ins(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : memref<?x16x192xbf16>, memref<?x16x192xbf16>, memref<?x16x128xbf16>, memref<?xi32>, memref<?xi32>) outs(%{{.*}}, %{{.*}} : memref<?x16x128xbf16>, memref<16x?xf32>)
  // CHECK-SAME: causal
  // CHECK-SAME: num_heads = 16 : i64, qk_head_dim = 192 : i64
  // CHECK-SAME: v_head_dim = 128 : i64
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<?x16x192xbf16>, memref<?x16x192xbf16>, memref<?x16x128xbf16>, memref<?xi32>, memref<?xi32>)
      outs(%o, %lse : memref<?x16x128xbf16>, memref<16x?xf32>)
      {num_heads = 16 : i64, qk_head_dim = 192 : i64, v_head_dim = 128 : i64, softmax_scale = 0.0722 : f32, causal}
  // CHECK: mla.prefill_attention
  // CHECK-NOT: causal
  // CHECK-SAME: num_heads = 16
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<?x16x192xbf16>, memref<?x16x192xbf16>, memref<?x16x128xbf16>, memref<?xi32>, memref<?xi32>)
      outs(%o, %lse : memref<?x16x128xbf16>, memref<16x?xf32>)
      {num_heads = 16 : i64, qk_head_dim = 192 : i64, v_head_dim = 128 : i64, softmax_scale = 0.0722 : f32}
  return
}

// CHECK-LABEL: func.func @decode
func.func @decode(%q: memref<?x?x128x576xbf16>, %cache: memref<?x64x576xbf16>,
                  %bt: memref<?x?xi32>, %lens: memref<?xi32>,
                  %o: memref<?x?x128x512xbf16>, %lse: memref<?x128x?xf32>) {
  // CHECK: mla.decode_attention ins({{.*}} : memref<?x?x128x576xbf16>, memref<?x64x576xbf16>, memref<?x?xi32>, memref<?xi32>) outs({{.*}} : memref<?x?x128x512xbf16>, memref<?x128x?xf32>)
  // CHECK-SAME: block_size = 64 : i64, cache_dtype = bf16, causal, kv_lora_rank = 512 : i64, num_heads = 128 : i64, rope_dim = 64 : i64
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<?x?x128x576xbf16>, memref<?x64x576xbf16>, memref<?x?xi32>, memref<?xi32>)
      outs(%o, %lse : memref<?x?x128x512xbf16>, memref<?x128x?xf32>)
      {num_heads = 128 : i64, kv_lora_rank = 512 : i64, rope_dim = 64 : i64, block_size = 64 : i64,
       cache_dtype = bf16, softmax_scale = 0.0722 : f32, causal}
  return
}

// Mixed precision: f32 activations over an f16 cache.
// CHECK-LABEL: func.func @decode_f16_cache
func.func @decode_f16_cache(%q: memref<2x1x16x576xf32>, %cache: memref<10x16x576xf16>,
                            %bt: memref<2x5xi32>, %lens: memref<2xi32>,
                            %o: memref<2x1x16x512xf32>, %lse: memref<2x16x1xf32>) {
  // CHECK: mla.decode_attention
  // CHECK-SAME: cache_dtype = f16
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x16x576xf32>, memref<10x16x576xf16>, memref<2x5xi32>, memref<2xi32>)
      outs(%o, %lse : memref<2x1x16x512xf32>, memref<2x16x1xf32>)
      {num_heads = 16 : i64, kv_lora_rank = 512 : i64, rope_dim = 64 : i64, block_size = 16 : i64,
       cache_dtype = f16, softmax_scale = 0.0722 : f32}
  return
}

// With a split-KV schedule: per-request split counts and caller-owned
// workspaces of S splits, in the `splits(...)` clause.
// CHECK-LABEL: func.func @decode_scheduled
func.func @decode_scheduled(%q: memref<?x?x16x576xbf16>, %cache: memref<?x64x576xbf16>,
                            %bt: memref<?x?xi32>, %lens: memref<?xi32>,
                            %ns: memref<?xi32>, %so: memref<?x?x16x?x512xf32>, %sl: memref<?x?x16x?xf32>,
                            %o: memref<?x?x16x512xbf16>, %lse: memref<?x16x?xf32>) {
  // CHECK: mla.decode_attention ins({{.*}} : memref<?x?x16x576xbf16>, memref<?x64x576xbf16>, memref<?x?xi32>, memref<?xi32>)
  // CHECK-SAME: splits(%{{.*}}, %{{.*}}, %{{.*}} : memref<?xi32>, memref<?x?x16x?x512xf32>, memref<?x?x16x?xf32>)
  // CHECK-SAME: outs({{.*}} : memref<?x?x16x512xbf16>, memref<?x16x?xf32>)
  // CHECK-SAME: block_size = 64 : i64, cache_dtype = bf16, causal
  // CHECK-NOT: operandSegmentSizes
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<?x?x16x576xbf16>, memref<?x64x576xbf16>, memref<?x?xi32>, memref<?xi32>)
      splits(%ns, %so, %sl : memref<?xi32>, memref<?x?x16x?x512xf32>, memref<?x?x16x?xf32>)
      outs(%o, %lse : memref<?x?x16x512xbf16>, memref<?x16x?xf32>)
      {num_heads = 16 : i64, kv_lora_rank = 512 : i64, rope_dim = 64 : i64, block_size = 64 : i64,
       cache_dtype = bf16, softmax_scale = 0.0722 : f32, causal}
  return
}

// Static shapes: B = 2, Sq = 1, S = 7.
// CHECK-LABEL: func.func @decode_scheduled_static
func.func @decode_scheduled_static(%q: memref<2x1x16x576xf32>, %cache: memref<10x16x576xf16>,
                                   %bt: memref<2x5xi32>, %lens: memref<2xi32>,
                                   %ns: memref<2xi32>, %so: memref<2x1x16x7x512xf32>, %sl: memref<2x1x16x7xf32>,
                                   %o: memref<2x1x16x512xf32>, %lse: memref<2x16x1xf32>) {
  // CHECK: mla.decode_attention
  // CHECK-SAME: splits(%{{.*}}, %{{.*}}, %{{.*}} : memref<2xi32>, memref<2x1x16x7x512xf32>, memref<2x1x16x7xf32>)
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x16x576xf32>, memref<10x16x576xf16>, memref<2x5xi32>, memref<2xi32>)
      splits(%ns, %so, %sl : memref<2xi32>, memref<2x1x16x7x512xf32>, memref<2x1x16x7xf32>)
      outs(%o, %lse : memref<2x1x16x512xf32>, memref<2x16x1xf32>)
      {num_heads = 16 : i64, kv_lora_rank = 512 : i64, rope_dim = 64 : i64, block_size = 16 : i64,
       cache_dtype = f16, softmax_scale = 0.0722 : f32}
  return
}

// CHECK-LABEL: func.func @merge
func.func @merge(%po: memref<?x16x128xf16>, %pl: memref<16x?xf32>,
                 %so: memref<?x16x128xf16>, %sl: memref<16x?xf32>,
                 %o: memref<?x16x128xf16>, %ol: memref<16x?xf32>) {
  // CHECK: mla.merge_attn_states ins({{.*}}) outs(%{{.*}}, %{{.*}} : memref<?x16x128xf16>, memref<16x?xf32>)
  mla.merge_attn_states ins(%po, %pl, %so, %sl : memref<?x16x128xf16>, memref<16x?xf32>, memref<?x16x128xf16>, memref<16x?xf32>)
      outs(%o, %ol : memref<?x16x128xf16>, memref<16x?xf32>)
  // CHECK: mla.merge_attn_states ins({{.*}}) outs(%{{.*}} : memref<?x16x128xf16>)
  mla.merge_attn_states ins(%po, %pl, %so, %sl : memref<?x16x128xf16>, memref<16x?xf32>, memref<?x16x128xf16>, memref<16x?xf32>)
      outs(%o : memref<?x16x128xf16>)
  return
}

// CHECK-LABEL: func.func @cache_ops
func.func @cache_ops(%cache: memref<?x64x576xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>,
                     %starts: memref<?xi32>, %ws: memref<?x576xbf16>,
                     %kvc: memref<?x512xbf16>, %kpe: memref<?x64xbf16>, %slots: memref<?xi64>) {
  // CHECK: mla.gather_cache ins({{.*}}) outs(%{{.*}} : memref<?x576xbf16>) {block_size = 64 : i64}
  mla.gather_cache ins(%cache, %bt, %cu, %starts : memref<?x64x576xbf16>, memref<?x?xi32>, memref<?xi32>, memref<?xi32>)
      outs(%ws : memref<?x576xbf16>) {block_size = 64 : i64}
  // CHECK: mla.concat_and_cache ins({{.*}}) outs(%{{.*}} : memref<?x64x576xbf16>)
  mla.concat_and_cache ins(%kvc, %kpe, %slots : memref<?x512xbf16>, memref<?x64xbf16>, memref<?xi64>)
      outs(%cache : memref<?x64x576xbf16>)
      {kv_lora_rank = 512 : i64, rope_dim = 64 : i64, block_size = 64 : i64, cache_dtype = bf16}
  return
}

// CHECK-LABEL: func.func @projections
func.func @projections(%kvc: memref<?x512xbf16>, %kpe: memref<?x64xbf16>, %w: memref<512x16x256xbf16>,
                       %k: memref<?x16x192xbf16>, %v: memref<?x16x128xbf16>,
                       %qn: memref<?x16x128xbf16>, %wuk: memref<16x128x512xbf16>,
                       %ql: memref<?x16x512xbf16>, %wuv: memref<16x512x128xbf16>,
                       %o: memref<?x16x128xbf16>) {
  // CHECK: mla.kv_up_proj
  mla.kv_up_proj ins(%kvc, %kpe, %w : memref<?x512xbf16>, memref<?x64xbf16>, memref<512x16x256xbf16>)
      outs(%k, %v : memref<?x16x192xbf16>, memref<?x16x128xbf16>)
      {num_heads = 16 : i64, kv_lora_rank = 512 : i64, qk_nope_head_dim = 128 : i64, rope_dim = 64 : i64, v_head_dim = 128 : i64}
  // CHECK: mla.q_absorb
  mla.q_absorb ins(%qn, %wuk : memref<?x16x128xbf16>, memref<16x128x512xbf16>)
      outs(%ql : memref<?x16x512xbf16>)
      {num_heads = 16 : i64, qk_nope_head_dim = 128 : i64, kv_lora_rank = 512 : i64}
  // CHECK: mla.v_up_proj
  mla.v_up_proj ins(%ql, %wuv : memref<?x16x512xbf16>, memref<16x512x128xbf16>)
      outs(%o : memref<?x16x128xbf16>)
      {num_heads = 16 : i64, kv_lora_rank = 512 : i64, v_head_dim = 128 : i64}
  return
}

// The absorbed query is written into a strided view of the decode query.
// CHECK-LABEL: func.func @absorb_into_view
func.func @absorb_into_view(%qn: memref<?x16x128xf32>, %wuk: memref<16x128x512xf32>,
                            %ql: memref<?x16x512xf32, strided<[9216, 576, 1]>>) {
  // CHECK: mla.q_absorb {{.*}} outs(%{{.*}} : memref<?x16x512xf32, strided<[9216, 576, 1]>>)
  mla.q_absorb ins(%qn, %wuk : memref<?x16x128xf32>, memref<16x128x512xf32>)
      outs(%ql : memref<?x16x512xf32, strided<[9216, 576, 1]>>)
      {num_heads = 16 : i64, qk_nope_head_dim = 128 : i64, kv_lora_rank = 512 : i64}
  return
}

// With rope_dim, q_absorb builds the whole decode query [ql_nope | q_pe].
// CHECK-LABEL: func.func @decode_query
func.func @decode_query(%q: memref<?x16x192xbf16>, %wuk: memref<16x128x512xbf16>,
                        %dq: memref<?x16x576xbf16>) {
  // CHECK: mla.q_absorb {{.*}} rope_dim = 64 : i64
  mla.q_absorb ins(%q, %wuk : memref<?x16x192xbf16>, memref<16x128x512xbf16>)
      outs(%dq : memref<?x16x576xbf16>)
      {num_heads = 16 : i64, qk_nope_head_dim = 128 : i64, kv_lora_rank = 512 : i64, rope_dim = 64 : i64}
  return
}

// CHECK-LABEL: func.func @chunked
func.func @chunked(%q: memref<?x16x192xbf16>, %kvc: memref<?x512xbf16>, %kpe: memref<?x64xbf16>,
                   %cq: memref<?xi32>, %cache: memref<?x64x576xbf16>, %bt: memref<?x?xi32>,
                   %ccu: memref<?x?xi32>, %cst: memref<?x?xi32>, %w: memref<512x16x256xbf16>,
                   %ws: memref<?x576xbf16>, %o: memref<?x16x128xbf16>, %lse: memref<16x?xf32>) {
  // CHECK: mla.chunked_prefill ins({{.*}}) cache({{.*}}) chunks({{.*}}) weights({{.*}}) workspace({{.*}}) outs({{.*}})
  mla.chunked_prefill ins(%q, %kvc, %kpe, %cq : memref<?x16x192xbf16>, memref<?x512xbf16>, memref<?x64xbf16>, memref<?xi32>)
      cache(%cache, %bt : memref<?x64x576xbf16>, memref<?x?xi32>)
      chunks(%ccu, %cst : memref<?x?xi32>, memref<?x?xi32>)
      weights(%w : memref<512x16x256xbf16>)
      workspace(%ws : memref<?x576xbf16>)
      outs(%o, %lse : memref<?x16x128xbf16>, memref<16x?xf32>)
      {num_heads = 16 : i64, kv_lora_rank = 512 : i64, qk_nope_head_dim = 128 : i64, rope_dim = 64 : i64,
       v_head_dim = 128 : i64, block_size = 64 : i64, cache_dtype = bf16, softmax_scale = 0.0722 : f32}
  return
}

// CHECK-LABEL: func.func @merge_n
func.func @merge_n(%po: memref<4x?x1x16x128xf32>, %pl: memref<4x?x16x1xf32>,
                   %o: memref<?x1x16x128xbf16>, %ol: memref<?x16x1xf32>,
                   %vo: memref<2x?x?x8x128xbf16, strided<[?, ?, ?, ?, 1], offset: ?>>,
                   %vl: memref<2x?x8x?xf32, strided<[?, ?, ?, 1], offset: ?>>) {
  // CHECK: mla.merge_attn_states_n ins({{.*}}) outs(%{{.*}}, %{{.*}} : memref<?x1x16x128xbf16>, memref<?x16x1xf32>)
  mla.merge_attn_states_n ins(%po, %pl : memref<4x?x1x16x128xf32>, memref<4x?x16x1xf32>)
      outs(%o, %ol : memref<?x1x16x128xbf16>, memref<?x16x1xf32>)
  // CHECK: mla.merge_attn_states_n ins({{.*}}) outs(%{{.*}} : memref<4x1x8x128xbf16, strided<[2048, 2048, 128, 1]>>)
  %ov = memref.subview %o[0, 0, 0, 0] [4, 1, 8, 128] [1, 1, 1, 1] : memref<?x1x16x128xbf16> to memref<4x1x8x128xbf16, strided<[2048, 2048, 128, 1]>>
  mla.merge_attn_states_n ins(%vo, %vl : memref<2x?x?x8x128xbf16, strided<[?, ?, ?, ?, 1], offset: ?>>, memref<2x?x8x?xf32, strided<[?, ?, ?, 1], offset: ?>>)
      outs(%ov : memref<4x1x8x128xbf16, strided<[2048, 2048, 128, 1]>>)
  return
}
