// mla.chunked_prefill given to convert-mla-to-loops without expanding it first.
// RUN: not mla-opt %s --convert-mla-to-loops 2>&1 | FileCheck %s
// The same input is fine once expanded (or through the whole pipeline).
// RUN: mla-opt %s --mla-expand-chunked-prefill --convert-mla-to-loops | FileCheck %s --check-prefix=EXPANDED

// CHECK: composite-to-loops.mlir:[[@LINE+8]]:3: error: 'mla.chunked_prefill' op is a composite; run mla-expand-chunked-prefill first
// CHECK-NOT: Stack dump
// CHECK-NOT: PLEASE submit a bug report

// EXPANDED-LABEL: func.func @chunked
// EXPANDED-NOT: mla.
// EXPANDED: return
func.func @chunked(%q: memref<?x2x10xf32>, %kvc: memref<?x8xf32>, %kpe: memref<?x4xf32>, %cq: memref<?xi32>, %cache: memref<?x4x12xf32>, %bt: memref<?x?xi32>, %ccu: memref<?x?xi32>, %cst: memref<?x?xi32>, %w: memref<8x2x11xf32>, %ws: memref<?x12xf32>, %o: memref<?x2x5xf32>, %lse: memref<2x?xf32>) {
  mla.chunked_prefill ins(%q, %kvc, %kpe, %cq : memref<?x2x10xf32>, memref<?x8xf32>, memref<?x4xf32>, memref<?xi32>)
      cache(%cache, %bt : memref<?x4x12xf32>, memref<?x?xi32>)
      chunks(%ccu, %cst : memref<?x?xi32>, memref<?x?xi32>)
      weights(%w : memref<8x2x11xf32>)
      workspace(%ws : memref<?x12xf32>)
      outs(%o, %lse : memref<?x2x5xf32>, memref<2x?xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, qk_nope_head_dim = 6 : i64, rope_dim = 4 : i64, v_head_dim = 5 : i64, block_size = 4 : i64, cache_dtype = f32, softmax_scale = 0.5 : f32}
  return
}
