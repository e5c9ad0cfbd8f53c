// mla-serialize-kernel-modules turns every gpu.module into a gpu.binary of
// PTX, one per target; a module without a target is an error naming it,
// and nothing is serialized.
// RUN: mla-opt %s --split-input-file --verify-diagnostics --mla-serialize-kernel-modules | FileCheck %s

// CHECK: gpu.binary @first {{ *}}[#gpu.object<#nvvm.target<chip = "sm_80">,
// CHECK-SAME: assembly = "
// CHECK-SAME: .target sm_80
// CHECK-SAME: .visible .entry first(
// CHECK: gpu.binary @second {{ *}}[#gpu.object<#nvvm.target<chip = "sm_80">,
// CHECK-SAME: assembly = "
// CHECK-SAME: .visible .entry second(
// CHECK-NOT: gpu.module
module attributes {gpu.container_module} {
  gpu.module @first [#nvvm.target<chip = "sm_80">] {
    llvm.func @first() attributes {gpu.kernel, nvvm.kernel} {
      llvm.return
    }
  }
  gpu.module @second [#nvvm.target<chip = "sm_80">] {
    llvm.func @second() attributes {gpu.kernel, nvvm.kernel} {
      llvm.return
    }
  }
}

// -----

module attributes {gpu.container_module} {
  // expected-error @+1 {{the module has no target to serialize for}}
  gpu.module @untargeted {
    llvm.func @k() attributes {gpu.kernel, nvvm.kernel} {
      llvm.return
    }
  }
}
