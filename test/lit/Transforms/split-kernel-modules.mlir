// mla-split-kernel-modules gives every kernel a gpu.module of its own,
// named after it (renamed where the name is taken), with a copy of what
// else its module held, and the launches follow; a module's only kernel
// too, so that every module (and its PTX, and its driver compile) is named
// after its kernel. A kernel marked to load at its first launch passes the
// mark to its module (the unit the runtime loads).
// RUN: mla-opt %s --mla-split-kernel-modules | FileCheck %s

module attributes {gpu.container_module} {
  // CHECK-LABEL: func.func @host
  // CHECK: gpu.launch_func @first::@first
  // CHECK: gpu.launch_func @[[SECOND:second_[0-9]+]]::@second
  // CHECK: gpu.launch_func @only::@only
  func.func @host() {
    %c1 = arith.constant 1 : index
    gpu.launch_func @kernels::@first blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
    gpu.launch_func @kernels::@second blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
    gpu.launch_func @alone::@only blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
    return
  }
  // A host symbol with a kernel's name.
  func.func private @second()

  // CHECK: gpu.module @first [#nvvm.target<chip = "sm_90a">] {
  // CHECK-NOT: mla.load_at_first_launch
  // CHECK-NEXT: memref.global "private" constant @table
  // CHECK-NEXT: gpu.func @first() kernel
  // CHECK-NOT: gpu.func
  // CHECK: gpu.module @[[SECOND]] [#nvvm.target<chip = "sm_90a">] attributes {mla.load_at_first_launch} {
  // CHECK-NEXT: memref.global "private" constant @table
  // CHECK-NEXT: gpu.func @second() kernel attributes {mla.load_at_first_launch}
  // CHECK-NEXT: memref.get_global @table
  // CHECK-NOT: gpu.module @kernels
  // CHECK-NOT: gpu.module @alone
  // CHECK: gpu.module @only {
  // CHECK-NEXT: gpu.func @only() kernel
  gpu.module @kernels [#nvvm.target<chip = "sm_90a">] {
    memref.global "private" constant @table : memref<4xf32> = dense<1.0>
    gpu.func @first() kernel {
      gpu.return
    }
    gpu.func @second() kernel attributes {mla.load_at_first_launch} {
      %0 = memref.get_global @table : memref<4xf32>
      gpu.return
    }
  }
  gpu.module @alone {
    gpu.func @only() kernel {
      gpu.return
    }
  }
}
