// A primitive op at module level, outside any function: it verifies, but
// convert-mla-to-loops has no function entry for its scratch buffers.
// RUN: mla-opt %s | FileCheck %s --check-prefix=VALID
// RUN: not mla-opt %s --convert-mla-to-loops 2>&1 | FileCheck %s
// RUN: not mla-opt %s --mla-lower-to-cpu 2>&1 | FileCheck %s

// VALID: mla.q_absorb
// CHECK: outside-function.mlir:[[@LINE+6]]:1: error: 'mla.q_absorb' op must be nested in a function
// CHECK-NOT: llvm.
// CHECK-NOT: Stack dump
%a = memref.alloc() : memref<4x2x6xf32>
%b = memref.alloc() : memref<2x6x8xf32>
%c = memref.alloc() : memref<4x2x8xf32>
mla.q_absorb ins(%a, %b : memref<4x2x6xf32>, memref<2x6x8xf32>) outs(%c : memref<4x2x8xf32>) {num_heads = 2 : i64, qk_nope_head_dim = 6 : i64, kv_lora_rank = 8 : i64}
