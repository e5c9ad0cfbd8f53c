// Lowering options that are out of range or not numbers fail cleanly.
// RUN: not mla-opt %s --convert-mla-to-loops=key-block=0 2>&1 | FileCheck %s --check-prefix=RANGE
// RUN: not mla-opt %s "--convert-mla-to-loops=vector-width=-4 key-block=8" 2>&1 | FileCheck %s --check-prefix=RANGE
// RUN: not mla-opt %s --mla-lower-to-cpu=key-block=0 2>&1 | FileCheck %s --check-prefix=RANGE
// RUN: not mla-opt %s --convert-mla-to-loops=vector-width=x 2>&1 | FileCheck %s --check-prefix=PARSE
// RUN: not mla-opt %s --mla-lower-to-cpu=lanes=8 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// RANGE: error: convert-mla-to-loops: vector-width and key-block must be positive, got
// RANGE-NOT: scf.for
// RANGE-NOT: Stack dump
// PARSE: for the --vector-width option: 'x' value invalid for long argument!
// PARSE-NOT: Stack dump
// UNKNOWN: no such option lanes
// UNKNOWN-NOT: Stack dump
func.func @f(%a: memref<4x2x6xf32>, %b: memref<2x6x8xf32>, %c: memref<4x2x8xf32>) {
  mla.q_absorb ins(%a, %b : memref<4x2x6xf32>, memref<2x6x8xf32>) outs(%c : memref<4x2x8xf32>) {num_heads = 2 : i64, qk_nope_head_dim = 6 : i64, kv_lora_rank = 8 : i64}
  return
}
