// mla-serialize-kernel-modules turns every gpu.module into a gpu.binary of
// PTX, one per target; a module without a target is an error naming it,
// and nothing is serialized. The PTX of a module marked to load at its
// kernel's first launch starts with the line that tells the runtime so.
// RUN: mla-opt %s --split-input-file --verify-diagnostics --mla-serialize-kernel-modules | FileCheck %s
//
// NVPTX's straight-line strength reduction is off: it would compute
// (i + 2) * s below as i * s + s + s, leaving one multiplication.
// RUN: mla-opt %s --split-input-file --verify-diagnostics --mla-serialize-kernel-modules --mla-print-ptx=output=%t.ptx -o /dev/null
// RUN: FileCheck %s --check-prefix=NO-SLSR < %t.ptx

// CHECK: gpu.binary @first {{ *}}[#gpu.object<#nvvm.target<chip = "sm_80">,
// CHECK-SAME: assembly = "//
// CHECK-NOT: mla: loaded
// CHECK-SAME: .target sm_80
// CHECK-SAME: .visible .entry first(
// CHECK: gpu.binary @second {{ *}}[#gpu.object<#nvvm.target<chip = "sm_80">,
// CHECK-SAME: assembly = "// mla: loaded at its kernel's first launch\0A//
// CHECK-SAME: .visible .entry second(
// CHECK-NOT: gpu.module
module attributes {gpu.container_module} {
  gpu.module @first [#nvvm.target<chip = "sm_80">] {
    llvm.func @first() attributes {gpu.kernel, nvvm.kernel} {
      llvm.return
    }
  }
  gpu.module @second [#nvvm.target<chip = "sm_80">] attributes {mla.load_at_first_launch} {
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

// -----

// NO-SLSR-LABEL: .visible .entry strided(
// NO-SLSR-COUNT-2: mul.lo.s32
// NO-SLSR-NOT: mul.lo.s32
// NO-SLSR: ret;
module attributes {gpu.container_module} {
  gpu.module @strided [#nvvm.target<chip = "sm_80">] {
    llvm.func @strided(%out: !llvm.ptr<1>, %i: i32, %s: i32) attributes {gpu.kernel, nvvm.kernel} {
      %c1 = llvm.mlir.constant(1 : i32) : i32
      %c2 = llvm.mlir.constant(2 : i32) : i32
      %i1 = llvm.add %i, %c1 : i32
      %i2 = llvm.add %i, %c2 : i32
      %a = llvm.mul %i, %s : i32
      %b = llvm.mul %i1, %s : i32
      %c = llvm.mul %i2, %s : i32
      %p1 = llvm.getelementptr %out[1] : (!llvm.ptr<1>) -> !llvm.ptr<1>, i32
      %p2 = llvm.getelementptr %out[2] : (!llvm.ptr<1>) -> !llvm.ptr<1>, i32
      llvm.store %a, %out : i32, !llvm.ptr<1>
      llvm.store %b, %p1 : i32, !llvm.ptr<1>
      llvm.store %c, %p2 : i32, !llvm.ptr<1>
      llvm.return
    }
  }
}
