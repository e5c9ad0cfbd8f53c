// An operand that names an SSA value defined nowhere.
// RUN: not mla-opt %s 2>&1 | FileCheck %s
// RUN: not mla-opt %s --convert-mla-to-loops 2>&1 | FileCheck %s

// CHECK: undefined-ssa.mlir:[[@LINE+4]]:24: error: use of undeclared SSA value name
// CHECK-NOT: scf.for
// CHECK-NOT: Stack dump
func.func @f(%a: memref<4x2x6xf32>, %b: memref<2x6x8xf32>, %c: memref<4x2x8xf32>) {
  mla.q_absorb ins(%a, %zz : memref<4x2x6xf32>, memref<2x6x8xf32>) outs(%c : memref<4x2x8xf32>) {num_heads = 2 : i64, qk_nope_head_dim = 6 : i64, kv_lora_rank = 8 : i64}
  return
}
