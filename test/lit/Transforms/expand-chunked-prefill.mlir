// mla-expand-chunked-prefill rewrites mla.chunked_prefill into its loop of
// primitive ops: new tokens causal, then one non-causal attention per context
// chunk that merges into the running state as it writes it (accumulate): no
// chunk output buffers, no separate merge.
// RUN: mla-opt %s --mla-expand-chunked-prefill | FileCheck %s
// The expansion verifies and is idempotent on IR without composites.
// RUN: mla-opt %s --mla-expand-chunked-prefill --mla-expand-chunked-prefill | FileCheck %s --check-prefix=NOCOMPOSITE

// NOCOMPOSITE-NOT: mla.chunked_prefill
// NOCOMPOSITE-COUNT-3: accumulate
// NOCOMPOSITE-NOT: mla.chunked_prefill

// DeepSeek dims, bf16 cache and activations.
// CHECK-LABEL: func.func @chunked(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: memref<?x16x192xbf16>, %[[KVC:[a-z0-9]+]]: memref<?x512xbf16>, %[[KPE:[a-z0-9]+]]: memref<?x64xbf16>,
// CHECK-SAME: %[[CQ:[a-z0-9]+]]: memref<?xi32>, %[[CACHE:[a-z0-9]+]]: memref<?x64x576xbf16>, %[[BT:[a-z0-9]+]]: memref<?x?xi32>,
// CHECK-SAME: %[[CCU:[a-z0-9]+]]: memref<?x?xi32>, %[[CST:[a-z0-9]+]]: memref<?x?xi32>, %[[W:[a-z0-9]+]]: memref<512x16x256xbf16>,
// CHECK-SAME: %[[WS:[a-z0-9]+]]: memref<?x576xbf16>, %[[O:[a-z0-9]+]]: memref<?x16x128xbf16>, %[[LSE:[a-z0-9]+]]: memref<16x?xf32>)
// CHECK-NOT: mla.chunked_prefill
// New tokens: scratch k/v sized by the token count, up-projected, causal attention into out/lse.
// CHECK: %[[T:.+]] = memref.dim %[[Q]], %{{.+}} : memref<?x16x192xbf16>
// CHECK: %[[K_NEW:.+]] = memref.alloc(%[[T]]) : memref<?x16x192xbf16>
// CHECK: %[[V_NEW:.+]] = memref.alloc(%[[T]]) : memref<?x16x128xbf16>
// CHECK: mla.kv_up_proj ins(%[[KVC]], %[[KPE]], %[[W]] : {{.*}}) outs(%[[K_NEW]], %[[V_NEW]] : memref<?x16x192xbf16>, memref<?x16x128xbf16>)
// CHECK-SAME: {kv_lora_rank = 512 : i64, num_heads = 16 : i64, qk_nope_head_dim = 128 : i64, rope_dim = 64 : i64, v_head_dim = 128 : i64}
// CHECK: mla.prefill_attention ins(%[[Q]], %[[K_NEW]], %[[V_NEW]], %[[CQ]], %[[CQ]] : {{.*}}) outs(%[[O]], %[[LSE]] : {{.*}})
// CHECK-SAME: {causal, num_heads = 16 : i64, qk_head_dim = 192 : i64, softmax_scale = 7.220000e-02 : f32, v_head_dim = 128 : i64}
// Context scratch: k/v sized by the workspace rows.
// CHECK: %[[ROWS:.+]] = memref.dim %[[WS]], %{{.+}} : memref<?x576xbf16>
// CHECK: %[[K_CTX:.+]] = memref.alloc(%[[ROWS]]) : memref<?x16x192xbf16>
// CHECK: %[[V_CTX:.+]] = memref.alloc(%[[ROWS]]) : memref<?x16x128xbf16>
// CHECK-NOT: memref.alloc
// The loop runs over chunk_starts' first dimension.
// CHECK: %[[C:.+]] = memref.dim %[[CST]], %{{.+}} : memref<?x?xi32>
// CHECK: %[[B:.+]] = memref.dim %[[CST]], %{{.+}} : memref<?x?xi32>
// CHECK: scf.for %[[I:.+]] = %{{.+}} to %[[C]] step %{{.+}} {
// Row c of each chunk array, the chunk's total clamped to the workspace.
// CHECK: %[[CU_ROW:.+]] = memref.subview %[[CCU]][%[[I]], 0] [1, %{{.+}}] [1, 1] : memref<?x?xi32> to memref<?xi32, strided<[1], offset: ?>>
// CHECK: %[[ST_ROW:.+]] = memref.subview %[[CST]][%[[I]], 0] [1, %{{.+}}] [1, 1] : memref<?x?xi32> to memref<?xi32, strided<[1], offset: ?>>
// CHECK: %[[TOTAL_I32:.+]] = memref.load %[[CU_ROW]][%[[B]]]
// CHECK: %[[TOTAL_IDX:.+]] = arith.index_cast %[[TOTAL_I32]] : i32 to index
// CHECK: %[[TOTAL_POS:.+]] = arith.maxsi %[[TOTAL_IDX]], %{{.+}} : index
// CHECK: %[[TOTAL:.+]] = arith.minsi %[[TOTAL_POS]], %[[ROWS]] : index
// CHECK: %[[WS_ROWS:.+]] = memref.subview %[[WS]][0, 0] [%[[TOTAL]], 576] [1, 1]
// CHECK: mla.gather_cache ins(%[[CACHE]], %[[BT]], %[[CU_ROW]], %[[ST_ROW]] : {{.*}}) outs(%[[WS_ROWS]] : {{.*}}) {block_size = 64 : i64}
// CHECK: %[[K_CHUNK:.+]] = memref.subview %[[K_CTX]][0, 0, 0] [%[[TOTAL]], 16, 192] [1, 1, 1]
// CHECK: %[[V_CHUNK:.+]] = memref.subview %[[V_CTX]][0, 0, 0] [%[[TOTAL]], 16, 128] [1, 1, 1]
// The workspace rows split into their latent and rope columns.
// CHECK-DAG: %[[ROPE:.+]] = memref.subview %[[WS_ROWS]][0, 512] [%[[TOTAL]], 64] [1, 1]
// CHECK-DAG: %[[LATENT:.+]] = memref.subview %[[WS_ROWS]][0, 0] [%[[TOTAL]], 512] [1, 1]
// CHECK: mla.kv_up_proj ins(%[[LATENT]], %[[ROPE]], %[[W]] : {{.*}}) outs(%[[K_CHUNK]], %[[V_CHUNK]] : {{.*}})
// Non-causal attention of the new tokens over the chunk (keys offset by the
// chunk's cu row), merged into the running state in out/lse.
// CHECK: mla.prefill_attention ins(%[[Q]], %[[K_CHUNK]], %[[V_CHUNK]], %[[CQ]], %[[CU_ROW]] : {{.*}}) outs(%[[O]], %[[LSE]] : {{.*}})
// CHECK-SAME: {accumulate, num_heads = 16 : i64, qk_head_dim = 192 : i64, softmax_scale = 7.220000e-02 : f32, v_head_dim = 128 : i64}
// CHECK-NEXT: }
// Every scratch buffer is freed after the loop.
// CHECK-DAG: memref.dealloc %[[K_NEW]]
// CHECK-DAG: memref.dealloc %[[V_NEW]]
// CHECK-DAG: memref.dealloc %[[K_CTX]]
// CHECK-DAG: memref.dealloc %[[V_CTX]]
// CHECK-NOT: mla.chunked_prefill
// CHECK: return
func.func @chunked(%q: memref<?x16x192xbf16>, %kvc: memref<?x512xbf16>, %kpe: memref<?x64xbf16>,
                   %cq: memref<?xi32>, %cache: memref<?x64x576xbf16>, %bt: memref<?x?xi32>,
                   %ccu: memref<?x?xi32>, %cst: memref<?x?xi32>, %w: memref<512x16x256xbf16>,
                   %ws: memref<?x576xbf16>, %o: memref<?x16x128xbf16>, %lse: memref<16x?xf32>) {
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

// Small static dims, f32 activations over an f16 cache: the scratch buffers
// take the activation type and the dims come from the attributes
// (P + R = 10, V = 5, Lkv = 8, R = 4).
// CHECK-LABEL: func.func @chunked_small(
// CHECK-NOT: mla.chunked_prefill
// CHECK: memref.alloc(%{{.+}}) : memref<?x2x10xf32>
// CHECK: memref.alloc(%{{.+}}) : memref<?x2x5xf32>
// CHECK: mla.prefill_attention {{.*}} {causal, num_heads = 2 : i64, qk_head_dim = 10 : i64, softmax_scale = 5.000000e-01 : f32, v_head_dim = 5 : i64}
// CHECK: scf.for
// CHECK: mla.gather_cache ins({{.*}} : memref<5x4x12xf16>, memref<2x3xi32>, {{.*}}) outs(%{{.+}} : memref<?x12xf32, strided<[12, 1]>>) {block_size = 4 : i64}
// CHECK: memref.subview %{{.+}}[0, 8] [%{{.+}}, 4] [1, 1] : memref<?x12xf32, strided<[12, 1]>> to memref<?x4xf32, strided<[12, 1], offset: 8>>
// CHECK: memref.subview %{{.+}}[0, 0] [%{{.+}}, 8] [1, 1] : memref<?x12xf32, strided<[12, 1]>> to memref<?x8xf32, strided<[12, 1]>>
// CHECK: mla.kv_up_proj
// CHECK: mla.prefill_attention {{.*}} {accumulate, num_heads = 2 : i64, qk_head_dim = 10 : i64, softmax_scale = 5.000000e-01 : f32, v_head_dim = 5 : i64}
// CHECK-NEXT: }
// CHECK-COUNT-4: memref.dealloc
// CHECK-NOT: mla.chunked_prefill
// CHECK: return
func.func @chunked_small(%q: memref<4x2x10xf32>, %kvc: memref<4x8xf32>, %kpe: memref<4x4xf32>, %cq: memref<3xi32>,
                         %cache: memref<5x4x12xf16>, %bt: memref<2x3xi32>, %ccu: memref<2x3xi32>, %cst: memref<2x2xi32>,
                         %w: memref<8x2x11xf32>, %ws: memref<16x12xf32>, %o: memref<4x2x5xf32>, %lse: memref<2x4xf32>) {
  mla.chunked_prefill ins(%q, %kvc, %kpe, %cq : memref<4x2x10xf32>, memref<4x8xf32>, memref<4x4xf32>, memref<3xi32>)
      cache(%cache, %bt : memref<5x4x12xf16>, memref<2x3xi32>)
      chunks(%ccu, %cst : memref<2x3xi32>, memref<2x2xi32>)
      weights(%w : memref<8x2x11xf32>)
      workspace(%ws : memref<16x12xf32>)
      outs(%o, %lse : memref<4x2x5xf32>, memref<2x4xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, qk_nope_head_dim = 6 : i64, rope_dim = 4 : i64,
       v_head_dim = 5 : i64, block_size = 4 : i64, cache_dtype = f16, softmax_scale = 0.5 : f32}
  return
}

// context_only (a DCP rank's chunk over the group's gathered rows, pages of
// one token): no new-token attention, no new-token scratch; kv_c and k_pe
// are not read; the chunk merges into the state out/lse already hold.
// CHECK-LABEL: func.func @chunked_context_only(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: memref<?x2x10xf32>, %[[KVC:[a-z0-9]+]]: memref<?x8xf32>, %[[KPE:[a-z0-9]+]]: memref<?x4xf32>,
// CHECK-NOT: causal
// CHECK-NOT: ins(%[[KVC]], %[[KPE]]
// CHECK: %[[ROWS:.+]] = memref.dim %{{.+}}, %{{.+}} : memref<?x12xf32>
// CHECK: %[[K_CTX:.+]] = memref.alloc(%[[ROWS]]) : memref<?x2x10xf32>
// CHECK: %[[V_CTX:.+]] = memref.alloc(%[[ROWS]]) : memref<?x2x5xf32>
// CHECK-NOT: memref.alloc
// CHECK: scf.for
// CHECK: mla.gather_cache ins({{.*}} : memref<?x1x12xf32>, {{.*}}) {block_size = 1 : i64}
// CHECK: mla.kv_up_proj
// CHECK: mla.prefill_attention {{.*}} {accumulate, num_heads = 2 : i64{{.*}}
// CHECK-NEXT: }
// CHECK-COUNT-2: memref.dealloc
// CHECK-NOT: memref.dealloc
// CHECK: return
func.func @chunked_context_only(%q: memref<?x2x10xf32>, %kvc: memref<?x8xf32>, %kpe: memref<?x4xf32>, %cq: memref<?xi32>,
                                %rows: memref<?x1x12xf32>, %order: memref<?x?xi32>, %ccu: memref<?x?xi32>, %cst: memref<?x?xi32>,
                                %w: memref<8x2x11xf32>, %ws: memref<?x12xf32>, %o: memref<?x2x5xf32>, %lse: memref<2x?xf32>) {
  mla.chunked_prefill ins(%q, %kvc, %kpe, %cq : memref<?x2x10xf32>, memref<?x8xf32>, memref<?x4xf32>, memref<?xi32>)
      cache(%rows, %order : memref<?x1x12xf32>, memref<?x?xi32>)
      chunks(%ccu, %cst : memref<?x?xi32>, memref<?x?xi32>)
      weights(%w : memref<8x2x11xf32>)
      workspace(%ws : memref<?x12xf32>)
      outs(%o, %lse : memref<?x2x5xf32>, memref<2x?xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, qk_nope_head_dim = 6 : i64, rope_dim = 4 : i64,
       v_head_dim = 5 : i64, block_size = 1 : i64, cache_dtype = f32, softmax_scale = 0.5 : f32, context_only}
  return
}

// Primitive ops are left alone.
// CHECK-LABEL: func.func @primitive_untouched
// CHECK-NEXT: mla.merge_attn_states
// CHECK-NEXT: return
func.func @primitive_untouched(%po: memref<4x2x8xf32>, %pl: memref<2x4xf32>) {
  mla.merge_attn_states ins(%po, %pl, %po, %pl : memref<4x2x8xf32>, memref<2x4xf32>, memref<4x2x8xf32>, memref<2x4xf32>) outs(%po : memref<4x2x8xf32>)
  return
}
