// A q_absorb whose `outs` keyword is missing: a parse error, and no pass runs.
// RUN: not mla-opt %s 2>&1 | FileCheck %s
// RUN: not mla-opt %s --convert-mla-to-loops 2>&1 | FileCheck %s --check-prefixes=CHECK,NOPASS
// RUN: not mla-opt %s --mla-lower-to-cpu 2>&1 | FileCheck %s --check-prefixes=CHECK,NOPASS

// CHECK: missing-outs.mlir:[[@LINE+6]]:67: error: custom op 'mla.q_absorb' expected 'outs'
// NOPASS-NOT: scf.for
// NOPASS-NOT: llvm.func
// CHECK-NOT: Stack dump
// CHECK-NOT: PLEASE submit a bug report
func.func @f(%a: memref<4x2x6xf32>, %b: memref<2x6x8xf32>, %c: memref<4x2x8xf32>) {
  mla.q_absorb ins(%a, %b : memref<4x2x6xf32>, memref<2x6x8xf32>) (%c : memref<4x2x8xf32>) {num_heads = 2 : i64, qk_nope_head_dim = 6 : i64, kv_lora_rank = 8 : i64}
  return
}
