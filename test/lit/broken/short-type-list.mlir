// Custom assembly whose type lists do not match the operand lists.
// RUN: not mla-opt %s -split-input-file 2>&1 | FileCheck %s

// Five inputs, four types: the parser wants a fifth type after the fourth.
// CHECK: short-type-list.mlir:[[@LINE+2]]:122: error: expected ','
func.func @fewer_types(%q: memref<4x2x8xf32>, %k: memref<6x2x8xf32>, %v: memref<6x2x4xf32>, %cq: memref<3xi32>, %ck: memref<3xi32>, %o: memref<4x2x4xf32>, %lse: memref<2x4xf32>) {
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<4x2x8xf32>, memref<6x2x8xf32>, memref<6x2x4xf32>, memref<3xi32>) outs(%o, %lse : memref<4x2x4xf32>, memref<2x4xf32>) {num_heads = 2 : i64, qk_head_dim = 8 : i64, v_head_dim = 4 : i64, softmax_scale = 0.5 : f32}
  return
}

// -----

// Two inputs, three types.
// CHECK: short-type-list.mlir:[[@LINE+2]]:65: error: expected ')'
func.func @more_types(%a: memref<4x2x6xf32>, %b: memref<2x6x8xf32>, %c: memref<4x2x8xf32>) {
  mla.q_absorb ins(%a, %b : memref<4x2x6xf32>, memref<2x6x8xf32>, memref<4x2x8xf32>) outs(%c : memref<4x2x8xf32>) {num_heads = 2 : i64, qk_nope_head_dim = 6 : i64, kv_lora_rank = 8 : i64}
  return
}

// -----

// A type that does not match the value's own type.
// CHECK: short-type-list.mlir:[[@LINE+2]]:24: error: use of value '%b' expects different type than prior uses: 'memref<2x6x9xf32>' vs 'memref<2x6x8xf32>'
func.func @mismatched_type(%a: memref<4x2x6xf32>, %b: memref<2x6x8xf32>, %c: memref<4x2x8xf32>) {
  mla.q_absorb ins(%a, %b : memref<4x2x6xf32>, memref<2x6x9xf32>) outs(%c : memref<4x2x8xf32>) {num_heads = 2 : i64, qk_nope_head_dim = 6 : i64, kv_lora_rank = 8 : i64}
  return
}
// CHECK-NOT: Stack dump
