// Ops that fail verification are reported before any pass runs: neither the
// lowering nor the pipeline sees them.
// RUN: not mla-opt %s -split-input-file --convert-mla-to-loops 2>&1 | FileCheck %s
// RUN: not mla-opt %s -split-input-file --mla-expand-chunked-prefill 2>&1 | FileCheck %s
// RUN: not mla-opt %s -split-input-file --mla-lower-to-cpu 2>&1 | FileCheck %s

// CHECK: invalid-through-passes.mlir:[[@LINE+2]]:3: error: 'mla.decode_attention' op num_heads must be at most 128, got 256
func.func @too_many_heads(%q: memref<?x?x256x576xbf16>, %cache: memref<?x64x576xbf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %o: memref<?x?x256x512xbf16>, %lse: memref<?x256x?xf32>) {
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<?x?x256x576xbf16>, memref<?x64x576xbf16>, memref<?x?xi32>, memref<?xi32>) outs(%o, %lse : memref<?x?x256x512xbf16>, memref<?x256x?xf32>) {num_heads = 256 : i64, kv_lora_rank = 512 : i64, rope_dim = 64 : i64, block_size = 64 : i64, cache_dtype = bf16, softmax_scale = 0.0722 : f32}
  return
}

// -----

// CHECK: invalid-through-passes.mlir:[[@LINE+2]]:3: error: 'mla.chunked_prefill' op 'kv_cache' holds 'f16', but cache_dtype is 'bf16'
func.func @chunked_dtype(%q: memref<?x2x10xbf16>, %kvc: memref<?x8xbf16>, %kpe: memref<?x4xbf16>, %cq: memref<?xi32>, %cache: memref<?x4x12xf16>, %bt: memref<?x?xi32>, %ccu: memref<?x?xi32>, %cst: memref<?x?xi32>, %w: memref<8x2x11xbf16>, %ws: memref<?x12xbf16>, %o: memref<?x2x5xbf16>, %lse: memref<2x?xf32>) {
  mla.chunked_prefill ins(%q, %kvc, %kpe, %cq : memref<?x2x10xbf16>, memref<?x8xbf16>, memref<?x4xbf16>, memref<?xi32>) cache(%cache, %bt : memref<?x4x12xf16>, memref<?x?xi32>) chunks(%ccu, %cst : memref<?x?xi32>, memref<?x?xi32>) weights(%w : memref<8x2x11xbf16>) workspace(%ws : memref<?x12xbf16>) outs(%o, %lse : memref<?x2x5xbf16>, memref<2x?xf32>) {num_heads = 2 : i64, kv_lora_rank = 8 : i64, qk_nope_head_dim = 6 : i64, rope_dim = 4 : i64, v_head_dim = 5 : i64, block_size = 4 : i64, cache_dtype = bf16, softmax_scale = 0.5 : f32}
  return
}
// CHECK-NOT: scf.for
// CHECK-NOT: llvm.func
// CHECK-NOT: Stack dump
