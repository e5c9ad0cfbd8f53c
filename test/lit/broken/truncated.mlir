// A file cut off in the middle of an op's attribute dictionary.
// RUN: not mla-opt %s 2>&1 | FileCheck %s
// RUN: not mla-opt %s --mla-lower-to-cpu 2>&1 | FileCheck %s

// CHECK: truncated.mlir:[[@LINE+4]]:124: error: expected '}' in attribute dictionary
// CHECK-NOT: llvm.func
// CHECK-NOT: Stack dump
func.func @f(%a: memref<4x2x6xf32>, %b: memref<2x6x8xf32>, %c: memref<4x2x8xf32>) {
  mla.q_absorb ins(%a, %b : memref<4x2x6xf32>, memref<2x6x8xf32>) outs(%c : memref<4x2x8xf32>) {num_heads = 2 : i64, qk_nope