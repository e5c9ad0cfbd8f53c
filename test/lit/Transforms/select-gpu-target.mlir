// mla-select-gpu-target records {chip, ptx_features, strategy} as the module
// attribute mla.target. A chip given as option replaces whatever the module
// had (an existing target, valid or not); without a chip the existing
// target is kept after checking it.
//
// Every supported chip, with the PTX ISA that introduced it: every module of
// the file (none, a preset target, an invalid preset) gets the same target.
// RUN: mla-opt %s -split-input-file --mla-select-gpu-target=chip=sm_80 | FileCheck %s --check-prefix=SM80
// RUN: mla-opt %s -split-input-file --mla-select-gpu-target=chip=sm_86 | FileCheck %s --check-prefix=SM86
// RUN: mla-opt %s -split-input-file --mla-select-gpu-target=chip=sm_89 | FileCheck %s --check-prefix=SM89
// RUN: mla-opt %s -split-input-file --mla-select-gpu-target=chip=sm_90 | FileCheck %s --check-prefix=SM90
// RUN: mla-opt %s -split-input-file --mla-select-gpu-target=chip=sm_90a | FileCheck %s --check-prefix=SM90A
//
// No chip: the valid preset (sm_86, not the default sm_90a) is kept as is;
// the other modules fail and print nothing.
// RUN: not mla-opt %s -split-input-file --mla-select-gpu-target 2>/dev/null | FileCheck %s --check-prefix=KEEP
// ... and the failures say why.
// RUN: not mla-opt %s -split-input-file --mla-select-gpu-target 2>&1 | FileCheck %s --check-prefix=NOCHIP
// An unknown chip is refused for every module.
// RUN: not mla-opt %s -split-input-file --mla-select-gpu-target=chip=sm_75 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// SM80-COUNT-4: {{^}}module attributes {mla.target = {chip = "sm_80", ptx_features = "+ptx70", strategy = "generic"}} {
// SM80-NOT: mla.target
// SM86-COUNT-4: {{^}}module attributes {mla.target = {chip = "sm_86", ptx_features = "+ptx71", strategy = "generic"}} {
// SM86-NOT: mla.target
// SM89-COUNT-4: {{^}}module attributes {mla.target = {chip = "sm_89", ptx_features = "+ptx78", strategy = "generic"}} {
// SM89-NOT: mla.target
// SM90-COUNT-4: {{^}}module attributes {mla.target = {chip = "sm_90", ptx_features = "+ptx78", strategy = "generic"}} {
// SM90-NOT: mla.target
// SM90A-COUNT-4: {{^}}module attributes {mla.target = {chip = "sm_90a", ptx_features = "+ptx80", strategy = "generic"}} {
// SM90A-NOT: mla.target

// KEEP: {{^}}module attributes {mla.target = {chip = "sm_86", ptx_features = "+ptx71", strategy = "generic"}} {
// KEEP-NEXT: func.func @preset()
// KEEP-NOT: mla.target
// KEEP-NOT: func.func

// UNKNOWN-NOT: chip = "sm_90a"
// UNKNOWN-NOT: Stack dump

// UNKNOWN: select-gpu-target.mlir:[[@LINE+1]]:1: error: mla-select-gpu-target: unknown chip 'sm_75'
module attributes {mla.target = {chip = "sm_86", ptx_features = "+ptx71", strategy = "generic"}} {
  func.func @preset() {
    return
  }
}

// -----

// NOCHIP: select-gpu-target.mlir:[[@LINE+2]]:1: error: the module has no 'mla.target' attribute: run mla-select-gpu-target first (or pass chip=sm_XX)
// UNKNOWN: select-gpu-target.mlir:[[@LINE+1]]:1: error: mla-select-gpu-target: unknown chip 'sm_75' (supported: sm_80, sm_86, sm_89, sm_90, sm_90a)
module {
  func.func @plain() {
    return
  }
}

// -----

// A preset naming a chip without generated code.
// NOCHIP: select-gpu-target.mlir:[[@LINE+2]]:1: error: unknown chip 'sm_75' (supported: sm_80, sm_86, sm_89, sm_90, sm_90a) (or pass chip=sm_XX)
// UNKNOWN: select-gpu-target.mlir:[[@LINE+1]]:1: error: mla-select-gpu-target: unknown chip 'sm_75'
module attributes {mla.target = {chip = "sm_75", ptx_features = "+ptx70", strategy = "generic"}} {
  func.func @old_chip() {
    return
  }
}

// -----

// A preset with a strategy the compiler does not have.
// NOCHIP: select-gpu-target.mlir:[[@LINE+3]]:1: error: unknown kernel strategy 'wmma' (supported: generic, mma-sync, wgmma) (or pass chip=sm_XX)
// NOCHIP-NOT: Stack dump
// UNKNOWN: select-gpu-target.mlir:[[@LINE+1]]:1: error: mla-select-gpu-target: unknown chip 'sm_75'
module attributes {mla.target = {chip = "sm_90a", ptx_features = "+ptx80", strategy = "wmma"}} {
  func.func @other_strategy() {
    return
  }
}
