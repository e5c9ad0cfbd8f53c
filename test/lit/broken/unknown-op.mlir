// An op name the mla dialect does not define.
// RUN: not mla-opt %s 2>&1 | FileCheck %s
// RUN: not mla-opt %s --convert-mla-to-loops 2>&1 | FileCheck %s

// CHECK: error: custom op 'mla.nope' is unknown
// CHECK-NOT: Stack dump
func.func @f(%a: memref<4x2x6xf32>) {
  mla.nope ins(%a : memref<4x2x6xf32>)
  return
}
