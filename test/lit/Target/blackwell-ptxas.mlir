// Blackwell chips (sm_100, sm_103, sm_120) run the code of the closest
// older chip that is not arch-specific, sm_90 (GpuTarget::forCapability),
// with the mma-sync strategy (backend TC_SM80) or the generic one
// (GENERIC_GPU); the driver compiles that PTX for the chip at load time.
// No such GPU is lent here, so this is the evidence: every kernel of every
// mla op (the functions of ptxas.mlir) in both strategies assembles with
// the toolkit's ptxas for each chip, with no stack frame and no spills on
// sm_100 and sm_103. On sm_120 (99 KiB of shared memory per block, which
// the sm_90 code is sized for) the four mma.sync prefill kernels, at 255
// registers, spill 8 to 16 bytes; the other 23 do not.
// REQUIRES: ptxas
//
// RUN: mla-opt %S/ptxas.mlir --mla-select-gpu-target="chip=sm_90 strategy=mma-sync" --mla-lower-to-gpu=chip=sm_90 --mla-print-ptx=output=%t.mma.ptx -o /dev/null
// RUN: mla-opt %S/ptxas.mlir --mla-lower-to-gpu=chip=sm_90 --mla-print-ptx=output=%t.generic.ptx -o /dev/null
// RUN: FileCheck %s --check-prefix=TARGET < %t.mma.ptx
// RUN: FileCheck %s --check-prefix=TARGET < %t.generic.ptx
//
// RUN: %ptxas -arch=sm_100 -v %t.mma.ptx -o %t.mma.sm_100.cubin 2>&1 | FileCheck %s --check-prefix=CLEAN --implicit-check-not="bytes stack frame" --implicit-check-not=error
// RUN: %ptxas -arch=sm_103 -v %t.mma.ptx -o %t.mma.sm_103.cubin 2>&1 | FileCheck %s --check-prefix=CLEAN --implicit-check-not="bytes stack frame" --implicit-check-not=error
// RUN: %ptxas -arch=sm_120 -v %t.mma.ptx -o %t.mma.sm_120.cubin > %t.mma.sm_120.log 2>&1
// RUN: FileCheck %s --check-prefix=SM120 --implicit-check-not=error < %t.mma.sm_120.log
// RUN: awk '/Function properties for/ { kernel = $NF } /bytes stack frame/ { print kernel ": " $1 }' %t.mma.sm_120.log | grep -v ': 0$' | FileCheck %s --check-prefix=SPILLS --implicit-check-not=:
// RUN: %ptxas -arch=sm_100 -v %t.generic.ptx -o %t.generic.sm_100.cubin 2>&1 | FileCheck %s --check-prefix=CLEAN --implicit-check-not="bytes stack frame" --implicit-check-not=error
// RUN: %ptxas -arch=sm_103 -v %t.generic.ptx -o %t.generic.sm_103.cubin 2>&1 | FileCheck %s --check-prefix=CLEAN --implicit-check-not="bytes stack frame" --implicit-check-not=error
// RUN: %ptxas -arch=sm_120 -v %t.generic.ptx -o %t.generic.sm_120.cubin 2>&1 | FileCheck %s --check-prefix=CLEAN --implicit-check-not="bytes stack frame" --implicit-check-not=error

// TARGET: {{^}}.target sm_90{{$}}

// CLEAN-COUNT-27: {{^}}    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads{{$}}

// SM120-COUNT-23: {{^}}    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads{{$}}
// Only the four mma.sync prefill kernels have a stack frame (the spills):
// SPILLS-COUNT-4: {{^}}prefill_attention_mma_{{[0-9]+}}: {{8|16}}{{$}}
