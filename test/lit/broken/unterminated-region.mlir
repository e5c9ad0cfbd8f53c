// Function bodies that are not closed: the file ends inside the region, or
// the region has no terminator.
// RUN: not mla-opt %s -split-input-file 2>&1 | FileCheck %s

// CHECK: error: block with no terminator, has "mla.q_absorb"
func.func @no_return(%a: memref<4x2x6xf32>, %b: memref<2x6x8xf32>, %c: memref<4x2x8xf32>) {
  mla.q_absorb ins(%a, %b : memref<4x2x6xf32>, memref<2x6x8xf32>) outs(%c : memref<4x2x8xf32>) {num_heads = 2 : i64, qk_nope_head_dim = 6 : i64, kv_lora_rank = 8 : i64}
}

// -----

// CHECK: unterminated-region.mlir:[[@LINE+2]]:169: error: expected operation name in quotes
func.func @no_brace(%a: memref<4x2x6xf32>, %b: memref<2x6x8xf32>, %c: memref<4x2x8xf32>) {
  mla.q_absorb ins(%a, %b : memref<4x2x6xf32>, memref<2x6x8xf32>) outs(%c : memref<4x2x8xf32>) {num_heads = 2 : i64, qk_nope_head_dim = 6 : i64, kv_lora_rank = 8 : i64}
