// Operand counts that do not match the op: too many in the custom form (the
// parser expects the `:` after two inputs), too few in the generic form (the
// ODS verifier counts them).
// RUN: not mla-opt %s -split-input-file 2>&1 | FileCheck %s

// CHECK: wrong-operand-count.mlir:[[@LINE+2]]:26: error: expected ':'
func.func @extra_input(%a: memref<4x2x6xf32>, %b: memref<2x6x8xf32>, %c: memref<4x2x8xf32>) {
  mla.q_absorb ins(%a, %b, %c : memref<4x2x6xf32>, memref<2x6x8xf32>, memref<4x2x8xf32>) outs(%c : memref<4x2x8xf32>) {num_heads = 2 : i64, qk_nope_head_dim = 6 : i64, kv_lora_rank = 8 : i64}
  return
}

// -----

// CHECK: wrong-operand-count.mlir:[[@LINE+2]]:3: error: 'mla.q_absorb' op expected 3 operands, but found 2
func.func @missing_output(%a: memref<4x2x6xf32>, %b: memref<2x6x8xf32>) {
  "mla.q_absorb"(%a, %b) <{num_heads = 2 : i64, qk_nope_head_dim = 6 : i64, kv_lora_rank = 8 : i64}> : (memref<4x2x6xf32>, memref<2x6x8xf32>) -> ()
  return
}

// -----

// A prefill_attention with its lse output dropped from `outs`.
// CHECK: wrong-operand-count.mlir:[[@LINE+2]]:146: error: expected ','
func.func @missing_lse(%q: memref<4x2x8xf32>, %k: memref<6x2x8xf32>, %v: memref<6x2x4xf32>, %cq: memref<3xi32>, %ck: memref<3xi32>, %o: memref<4x2x4xf32>) {
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<4x2x8xf32>, memref<6x2x8xf32>, memref<6x2x4xf32>, memref<3xi32>, memref<3xi32>) outs(%o : memref<4x2x4xf32>) {num_heads = 2 : i64, qk_head_dim = 8 : i64, v_head_dim = 4 : i64, softmax_scale = 0.5 : f32}
  return
}
// CHECK-NOT: Stack dump
