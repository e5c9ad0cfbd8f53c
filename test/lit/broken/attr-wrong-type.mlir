// Attributes of the wrong kind: a string where an i64 is required, an f64
// where an f32 is required, an integer where a type is required.
// RUN: not mla-opt %s -split-input-file 2>&1 | FileCheck %s
// RUN: not mla-opt %s -split-input-file --mla-lower-to-cpu 2>&1 | FileCheck %s

// CHECK: attr-wrong-type.mlir:[[@LINE+2]]:{{[0-9]+}}: error: {{.*}}'mla.q_absorb' op attribute 'num_heads' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive
func.func @string_heads(%a: memref<4x2x6xf32>, %b: memref<2x6x8xf32>, %c: memref<4x2x8xf32>) {
  mla.q_absorb ins(%a, %b : memref<4x2x6xf32>, memref<2x6x8xf32>) outs(%c : memref<4x2x8xf32>) {num_heads = "x", qk_nope_head_dim = 6 : i64, kv_lora_rank = 8 : i64}
  return
}

// -----

// CHECK: attr-wrong-type.mlir:[[@LINE+2]]:{{[0-9]+}}: error: {{.*}}'mla.decode_attention' op attribute 'softmax_scale' failed to satisfy constraint: 32-bit float attribute
func.func @f64_scale(%q: memref<2x1x2x12xf32>, %cache: memref<5x4x12xf32>, %bt: memref<2x3xi32>, %lens: memref<2xi32>, %o: memref<2x1x2x8xf32>, %lse: memref<2x2x1xf32>) {
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x2x12xf32>, memref<5x4x12xf32>, memref<2x3xi32>, memref<2xi32>) outs(%o, %lse : memref<2x1x2x8xf32>, memref<2x2x1xf32>) {num_heads = 2 : i64, kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = f32, softmax_scale = 0.5 : f64}
  return
}

// -----

// CHECK: attr-wrong-type.mlir:[[@LINE+2]]:{{[0-9]+}}: error: {{.*}}'mla.concat_and_cache' op attribute 'cache_dtype' failed to satisfy constraint: any type attribute
func.func @integer_dtype(%kvc: memref<3x8xf32>, %kpe: memref<3x4xf32>, %slots: memref<3xi64>, %cache: memref<5x4x12xf32>) {
  mla.concat_and_cache ins(%kvc, %kpe, %slots : memref<3x8xf32>, memref<3x4xf32>, memref<3xi64>) outs(%cache : memref<5x4x12xf32>) {kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = 32 : i64}
  return
}
// CHECK-NOT: llvm.func
// CHECK-NOT: Stack dump
