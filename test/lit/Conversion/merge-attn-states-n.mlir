// mla.merge_attn_states_n: S partial states (here 3, the ranks of a DCP
// group) merged into one, on the CPU and on the GPU, through the one
// merge formula of every merge (LoopBuilder::mergeWeights): the LSEs read
// with +inf as -inf, their max, a weight exp(lse - max) each (0 when all
// are empty), the normalized weights and max + log(sum).
//
// RUN: mla-opt %s --convert-mla-to-loops | FileCheck %s --check-prefix=CPU
// RUN: mla-opt %s --mla-select-gpu-target=chip=sm_90a --convert-mla-to-gpu | FileCheck %s --check-prefix=GPU
// RUN: env -u CUDA_HOME -u CUDA_PATH -u CUDA_ROOT mla-opt %s --mla-lower-to-gpu=chip=sm_80 --mla-print-ptx=output=%t.sm_80.ptx -o /dev/null
// RUN: %ptxas -arch=sm_80 -v %t.sm_80.ptx -o %t.sm_80.cubin 2>&1 | FileCheck %s --check-prefix=RESOURCES --implicit-check-not="bytes stack frame" --implicit-check-not=error
// RUN: env -u CUDA_HOME -u CUDA_PATH -u CUDA_ROOT mla-opt %s --mla-lower-to-gpu=chip=sm_90a --mla-print-ptx=output=%t.sm_90a.ptx -o /dev/null
// RUN: %ptxas -arch=sm_90a -v %t.sm_90a.ptx -o %t.sm_90a.cubin 2>&1 | FileCheck %s --check-prefix=RESOURCES --implicit-check-not="bytes stack frame" --implicit-check-not=error

// CPU-LABEL: func.func @merge_n(
// CPU-COUNT-3: memref.load %arg1[
// CPU-COUNT-3: arith.select
// CPU: arith.maximumf
// CPU: arith.maximumf
// CPU-COUNT-3: math.exp
// CPU: math.log
// CPU: scf.for
// CPU-COUNT-3: vector.load %arg0[
// CPU: vector.store {{.+}}, %arg2[
// CPU: memref.store {{.+}}, %arg3[
// CPU-NOT: mla.

// One kernel: a (request, query, head) row per group of lanes, the three
// LSEs read once, three exponentials and one logarithm; the rows in
// 16-byte vectors where the bases and the views' dynamic strides allow
// (checked at run time), element by element otherwise; outputs do not
// overlap inputs, so the LSE is written without a block barrier.
// GPU: gpu.launch_func @mla_kernels::@merge_attn_states_n_0 blocks in
// GPU: gpu.func @merge_attn_states_n_0(
// GPU-COUNT-3: memref.load %arg1[
// GPU-COUNT-3: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// GPU: llvm.call_intrinsic "llvm.nvvm.lg2.approx.ftz.f"
// GPU: memref.extract_strided_metadata %arg0
// GPU: scf.if
// GPU-COUNT-3: vector.load %arg0[{{.+}}] {alignment = 16 : i64} : {{.+}}, vector<8xbf16>
// GPU: vector.store {{.+}}, %arg2[{{.+}}] {alignment = 16 : i64}
// GPU: } else {
// GPU: memref.store {{.+}}, %arg2[
// GPU-NOT: gpu.barrier
// GPU: memref.store {{.+}}, %arg3[
// GPU: gpu.return

// RESOURCES: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads

func.func @merge_n(%po: memref<3x?x?x16x128xbf16, strided<[?, ?, ?, ?, 1], offset: ?>>, %pl: memref<3x?x16x?xf32, strided<[?, ?, ?, 1], offset: ?>>,
                   %o: memref<?x?x16x128xbf16, strided<[?, ?, ?, 1], offset: ?>>, %ol: memref<?x16x?xf32, strided<[?, ?, 1], offset: ?>>) {
  mla.merge_attn_states_n ins(%po, %pl : memref<3x?x?x16x128xbf16, strided<[?, ?, ?, ?, 1], offset: ?>>, memref<3x?x16x?xf32, strided<[?, ?, ?, 1], offset: ?>>)
      outs(%o, %ol : memref<?x?x16x128xbf16, strided<[?, ?, ?, 1], offset: ?>>, memref<?x16x?xf32, strided<[?, ?, 1], offset: ?>>)
  return
}
