// FP8 caches: the verifier asks for kv_scale exactly when the cache is FP8;
// the CPU pipeline lowers the ops that touch one (integer conversions, no
// f8 arithmetic left). The GPU's kernels: Target/ptxas-fp8.mlir.
// RUN: mla-opt %s -split-input-file -verify-diagnostics --mla-lower-to-cpu | FileCheck %s

// CHECK-LABEL: llvm.func @write_fp8
// CHECK-NOT: f8E4M3FN
// CHECK: llvm.fdiv
// CHECK: llvm.fadd
// CHECK: llvm.fsub
// CHECK: llvm.trunc {{.*}} to i8
func.func @write_fp8(%kvc: memref<?x8xf32>, %kpe: memref<?x4xf32>, %slots: memref<?xi64>,
                     %scale: memref<1xf32>, %cache: memref<?x4x12xf8E4M3FN>) {
  mla.concat_and_cache ins(%kvc, %kpe, %slots : memref<?x8xf32>, memref<?x4xf32>, memref<?xi64>)
      scale(%scale : memref<1xf32>)
      outs(%cache : memref<?x4x12xf8E4M3FN>)
      {kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = f8E4M3FN}
  return
}

// -----

// CHECK-LABEL: llvm.func @read_fp8
// CHECK-NOT: f8E5M2
// CHECK: llvm.fmul
func.func @read_fp8(%cache: memref<?x4x12xf8E5M2>, %bt: memref<?x?xi32>, %cu: memref<?xi32>,
                    %st: memref<?xi32>, %scale: memref<1xf32>, %ws: memref<?x12xbf16>) {
  mla.gather_cache ins(%cache, %bt, %cu, %st : memref<?x4x12xf8E5M2>, memref<?x?xi32>, memref<?xi32>, memref<?xi32>)
      scale(%scale : memref<1xf32>)
      outs(%ws : memref<?x12xbf16>) {block_size = 4 : i64}
  return
}

// -----

func.func @fp8_without_scale(%kvc: memref<?x8xf32>, %kpe: memref<?x4xf32>, %slots: memref<?xi64>,
                             %cache: memref<?x4x12xf8E4M3FN>) {
  // expected-error @+1 {{an 'f8E4M3FN' cache needs 'kv_scale'}}
  mla.concat_and_cache ins(%kvc, %kpe, %slots : memref<?x8xf32>, memref<?x4xf32>, memref<?xi64>)
      outs(%cache : memref<?x4x12xf8E4M3FN>)
      {kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = f8E4M3FN}
  return
}

// -----

func.func @scale_without_fp8(%kvc: memref<?x8xf32>, %kpe: memref<?x4xf32>, %slots: memref<?xi64>,
                             %scale: memref<1xf32>, %cache: memref<?x4x12xbf16>) {
  // expected-error @+1 {{'kv_scale' is for FP8 caches, not 'bf16'}}
  mla.concat_and_cache ins(%kvc, %kpe, %slots : memref<?x8xf32>, memref<?x4xf32>, memref<?xi64>)
      scale(%scale : memref<1xf32>)
      outs(%cache : memref<?x4x12xbf16>)
      {kv_lora_rank = 8 : i64, rope_dim = 4 : i64, block_size = 4 : i64, cache_dtype = bf16}
  return
}
