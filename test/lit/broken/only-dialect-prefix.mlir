// A file whose only IR is the dialect prefix `mla.` with no op name.
// RUN: not mla-opt %s 2>&1 | FileCheck %s

// CHECK: error: custom op 'mla.' is unknown
// CHECK-NOT: Stack dump
mla.