// convert-mla-to-gpu with strategy mma-sync: a bf16/f16 mla.prefill_attention
// gets the tensor-core prefill kernel (128-row query tiles of one head, 32
// rows per warp, four warps sharing 32-key K/V tiles in a cp.async ring,
// m16n8k16 mma.sync), launched on (heads of a group, ceil(T / 128) + B,
// head groups) blocks of 128 threads (a group's K and V fit in L2 together;
// here all 16 heads are one group). Two stages of K/V tiles: Q 128 x 200, K 2 x 32 x 200, V 2 x 32 x
// 136 (bf16) = 94208 bytes, which fit every chip from sm_80 on.
//
// RUN: mla-opt %s -split-input-file --mla-select-gpu-target="chip=sm_80 strategy=mma-sync" --convert-mla-to-gpu --canonicalize | FileCheck %s
// RUN: mla-opt %s -split-input-file --mla-select-gpu-target="chip=sm_86 strategy=mma-sync" --convert-mla-to-gpu --canonicalize | FileCheck %s --check-prefix=SM86
// The generic strategy keeps the CUDA-core kernel.
// RUN: mla-opt %s -split-input-file --mla-select-gpu-target=chip=sm_80 --convert-mla-to-gpu | FileCheck %s --check-prefix=GENERIC

// GENERIC-NOT: prefill_attention_mma
// GENERIC-NOT: nvvm.mma.sync

// CHECK-LABEL: func.func @prefill_bf16_causal(
// 200 tokens in 3 sequences: at most 2 + 3 row tiles, 16 heads.
// CHECK: gpu.launch_func @mla_kernels::@prefill_attention_mma_0 blocks in (%c16, %c5, %c1) threads in (%c128, %c1, %c1) dynamic_shared_memory_size %c94208_i32
// SM86-LABEL: func.func @prefill_bf16_causal(
// SM86: gpu.launch_func @mla_kernels::@prefill_attention_mma_0 blocks in (%c16, %c5, %c1) threads in (%c128, %c1, %c1) dynamic_shared_memory_size %c94208_i32
// CHECK: gpu.func @prefill_attention_mma_0(
// CHECK-SAME: kernel attributes {known_block_size = array<i32: 128, 1, 1>, nvvm.minctasm = 2 : i32}
// The block's head is blockIdx.z * gridDim.x + blockIdx.x, and blocks take
// tiles from the last: tile = gridDim.y - 1 - blockIdx.y.
// CHECK-DAG: %[[BX:.+]] = gpu.block_id x
// CHECK-DAG: %[[GX:.+]] = gpu.grid_dim x
// CHECK-DAG: %[[BZ:.+]] = gpu.block_id z
// CHECK: %[[GROUP0:.+]] = arith.muli %[[BZ]], %[[GX]]
// CHECK: arith.addi %[[GROUP0]], %[[BX]]
// CHECK-DAG: %[[BY:.+]] = gpu.block_id y
// CHECK-DAG: %[[GY:.+]] = gpu.grid_dim y
// CHECK: %[[LAST:.+]] = arith.subi %[[GY]], %c1
// CHECK: arith.subi %[[LAST]], %[[BY]]
// The sequence walk over cu_seqlens_q.
// CHECK: scf.for
// The Q tile and the first K/V tile in one cp.async group.
// CHECK: nvgpu.device_async_copy
// CHECK: nvgpu.device_async_create_group
// The key tiles: prefetch the next into the other stage, wait for this one.
// CHECK: scf.for
// CHECK: nvgpu.device_async_create_group
// CHECK: nvgpu.device_async_wait %{{.+}} {numGroups = 1 : i32}
// CHECK: gpu.barrier
// S = Q K^T: a loop over the 12 k-steps carrying 32 accumulators, each
// step 2 ldmatrix of Q and 2 of K for 2 row tiles x 4 key tiles of mma.
// CHECK: scf.for %{{.+}} = %c0 to %c192 step %c16 iter_args(
// CHECK-COUNT-8: nvvm.mma.sync
// CHECK: scf.yield
// Only tiles crossing the diagonal or the end of the keys are masked.
// CHECK: scf.if %{{.+}} -> (f32, f32
// CHECK: llvm.nvvm.ex2.approx.ftz.f32
// O += P V: 2 k-steps x 16 n8 tiles x 2 row tiles, V through ldmatrix.trans.
// CHECK: nvgpu.ldmatrix %{{.+}} {numTiles = 4 : i32, transpose = true}
// CHECK-COUNT-64: nvvm.mma.sync
// CHECK: gpu.barrier
// The results: lse by the quads' leaders; out staged as bf16 rows (stride
// 136) over the block's shared memory, then copied out by the block,
// 8-column pieces of the real rows in turn (2048 pieces, 128 at a time):
// 16-byte stores where out is aligned, else element stores.
// CHECK: memref.store %{{.+}} : memref<16x200xf32>
// CHECK: gpu.barrier
// CHECK: vector.store %{{.+}} : memref<128x136xbf16, #gpu.address_space<workgroup>>, vector<2xbf16>
// CHECK: gpu.barrier
// CHECK: scf.for %{{.+}} = %{{.+}} to %c2048 step %c128 {
// CHECK: vector.load %{{.+}} : memref<128x136xbf16, #gpu.address_space<workgroup>>, vector<8xbf16>
// CHECK: vector.store %{{.+}} : memref<200x16x128xbf16>, vector<8xbf16>
// CHECK-NEXT: } else {
// CHECK-COUNT-8: memref.store %{{.+}} : memref<200x16x128xbf16>
func.func @prefill_bf16_causal(%q: memref<200x16x192xbf16>, %k: memref<300x16x192xbf16>,
                               %v: memref<300x16x128xbf16>, %cq: memref<4xi32>, %ck: memref<4xi32>,
                               %o: memref<200x16x128xbf16>, %lse: memref<16x200xf32>) {
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<200x16x192xbf16>, memref<300x16x192xbf16>, memref<300x16x128xbf16>, memref<4xi32>, memref<4xi32>)
      outs(%o, %lse : memref<200x16x128xbf16>, memref<16x200xf32>)
      {num_heads = 16 : i64, qk_head_dim = 192 : i64, v_head_dim = 128 : i64, softmax_scale = 0.0722 : f32, causal}
  return
}

// -----

// Cases the tensor-core kernel does not take keep the generic kernel: f32,
// head dims that are not multiples of 16, v head dim above 128.
// CHECK-LABEL: func.func @prefill_generic_cases(
// CHECK: gpu.launch_func @mla_kernels::@prefill_attention_0
// CHECK: gpu.launch_func @mla_kernels::@prefill_attention_1
// CHECK: gpu.launch_func @mla_kernels::@prefill_attention_2
// CHECK-NOT: prefill_attention_mma
func.func @prefill_generic_cases(%q: memref<?x4x192xf32>, %k: memref<?x4x192xf32>,
                                 %v: memref<?x4x128xf32>, %cq: memref<?xi32>, %ck: memref<?xi32>,
                                 %o: memref<?x4x128xf32>, %lse: memref<4x?xf32>,
                                 %q2: memref<?x4x40xbf16>, %v2: memref<?x4x24xbf16>, %o2: memref<?x4x24xbf16>,
                                 %q3: memref<?x4x64xbf16>, %v3: memref<?x4x256xbf16>, %o3: memref<?x4x256xbf16>) {
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<?x4x192xf32>, memref<?x4x192xf32>, memref<?x4x128xf32>, memref<?xi32>, memref<?xi32>)
      outs(%o, %lse : memref<?x4x128xf32>, memref<4x?xf32>)
      {num_heads = 4 : i64, qk_head_dim = 192 : i64, v_head_dim = 128 : i64, softmax_scale = 0.0722 : f32}
  mla.prefill_attention ins(%q2, %q2, %v2, %cq, %ck : memref<?x4x40xbf16>, memref<?x4x40xbf16>, memref<?x4x24xbf16>, memref<?xi32>, memref<?xi32>)
      outs(%o2, %lse : memref<?x4x24xbf16>, memref<4x?xf32>)
      {num_heads = 4 : i64, qk_head_dim = 40 : i64, v_head_dim = 24 : i64, softmax_scale = 0.0722 : f32}
  mla.prefill_attention ins(%q3, %q3, %v3, %cq, %ck : memref<?x4x64xbf16>, memref<?x4x64xbf16>, memref<?x4x256xbf16>, memref<?xi32>, memref<?xi32>)
      outs(%o3, %lse : memref<?x4x256xbf16>, memref<4x?xf32>)
      {num_heads = 4 : i64, qk_head_dim = 64 : i64, v_head_dim = 256 : i64, softmax_scale = 0.0722 : f32}
  return
}

// -----

// qk 256: Q 128 x 264, K 32 x 264, V 32 x 136. Two stages (118784 bytes)
// on sm_80; on the 99 KiB chips one stage (93184 bytes), whose tile is
// waited for whole, and the next copied after the last use of the stage.
// CHECK-LABEL: func.func @prefill_qk256(
// CHECK: dynamic_shared_memory_size %c118784_i32
// SM86-LABEL: func.func @prefill_qk256(
// SM86: dynamic_shared_memory_size %c93184_i32
// SM86: scf.for
// SM86: nvgpu.device_async_wait %{{.+}} {numGroups = 0 : i32}
// SM86: gpu.barrier
// SM86: gpu.barrier
// SM86: nvgpu.device_async_copy
// SM86: nvgpu.device_async_create_group
// SM86: scf.yield
func.func @prefill_qk256(%q: memref<?x2x256xbf16>, %v: memref<?x2x128xbf16>,
                         %cq: memref<?xi32>, %ck: memref<?xi32>,
                         %o: memref<?x2x128xbf16>, %lse: memref<2x?xf32>) {
  mla.prefill_attention ins(%q, %q, %v, %cq, %ck : memref<?x2x256xbf16>, memref<?x2x256xbf16>, memref<?x2x128xbf16>, memref<?xi32>, memref<?xi32>)
      outs(%o, %lse : memref<?x2x128xbf16>, memref<2x?xf32>)
      {num_heads = 2 : i64, qk_head_dim = 256 : i64, v_head_dim = 128 : i64, softmax_scale = 0.0625 : f32, causal}
  return
}
