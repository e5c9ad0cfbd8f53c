// convert-mla-to-gpu with a tensor-core strategy: bf16/f16 up-projections
// get the tensor-core product kernel (64-token x 128-column tiles of one
// head, four warps, a four-stage cp.async ring of 32-deep slices, ldmatrix
// and m16n8k16 nvvm.mma.sync), launched on grid (ceil(T / 64), N,
// width / 128) with 55296 bytes of dynamic shared memory. Strided views
// with contiguous rows (the chunked prefill's column ranges of the
// workspace rows) qualify, their offset part of the alignment check. f32
// and dims the kernel does not tile keep the CUDA-core kernel.
//
// RUN: mla-opt %s -split-input-file --mla-select-gpu-target="chip=sm_80 strategy=mma-sync" --convert-mla-to-gpu | FileCheck %s
// RUN: mla-opt %s -split-input-file --mla-select-gpu-target="chip=sm_90a strategy=wgmma" --convert-mla-to-gpu | FileCheck %s
// The generic strategy keeps the CUDA-core kernel everywhere.
// RUN: mla-opt %s -split-input-file --mla-select-gpu-target=chip=sm_80 --convert-mla-to-gpu | FileCheck %s --check-prefix=GENERIC

// GENERIC-NOT: _mma_
// GENERIC-NOT: nvvm.mma.sync

// kv_up_proj on column ranges of the workspace rows (576 wide): key and
// value columns are one 128-column tile each.
// CHECK-LABEL: func.func @kv_up_proj_on_workspace_columns(
// CHECK: gpu.launch_func @mla_kernels::@kv_up_proj_mma_0 blocks in (%{{.+}}, %c16, %c2) threads in (%c128, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) dynamic_shared_memory_size %c55296_i32
// CHECK: gpu.func @kv_up_proj_mma_0(%[[X:.+]]: memref<?x512xbf16, strided<[576, 1]>>, %[[KPE:.+]]: memref<?x64xbf16, strided<[576, 1], offset: 512>>, %[[W:.+]]: memref<512x16x256xbf16>, %[[K:.+]]: memref<?x16x192xbf16>, %[[V:.+]]: memref<?x16x128xbf16>)
// The alignment check adds the view's offset.
// CHECK: %{{.+}}, %[[XOFF:.+]], %{{.+}}:2, %{{.+}}:2 = memref.extract_strided_metadata %[[X]]
// CHECK: arith.muli %[[XOFF]], %c2
// The ring's first three slices, a group each.
// CHECK: scf.for
// CHECK: nvgpu.device_async_copy %[[X]]
// CHECK: nvgpu.device_async_copy %[[W]]
// CHECK: nvgpu.device_async_create_group
// The slices: wait for the oldest, refill the stage three ahead, then two
// k16 steps of 2 x 8 mma (64 accumulators a lane).
// CHECK: scf.for %{{.+}} = %{{.+}} to %c16{{(_[0-9]+)?}} step %{{.+}} iter_args({{.+}}) -> (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32) {
// CHECK-NEXT: nvvm.cp.async.wait.group 2
// CHECK-NEXT: gpu.barrier
// CHECK: nvgpu.device_async_copy %[[X]]
// CHECK: nvgpu.device_async_create_group
// CHECK: nvgpu.ldmatrix {{.+}} {numTiles = 4 : i32, transpose = false} : memref<64x40xbf16, #gpu.address_space<workgroup>>
// CHECK: nvgpu.ldmatrix {{.+}} {numTiles = 4 : i32, transpose = true} : memref<32x136xbf16, #gpu.address_space<workgroup>>
// CHECK-COUNT-4: nvvm.mma.sync
// CHECK: scf.yield
// CHECK: nvvm.cp.async.wait.group 0
// Results staged in shared memory, then the key tile to k, the value tile
// to v, in 16-byte pieces.
// CHECK: vector.store %{{.+}} : memref<64x136xbf16, #gpu.address_space<workgroup>>, vector<2xbf16>
// CHECK: gpu.barrier
// CHECK: vector.store %{{.+}}, %[[K]][{{.+}}] {alignment = 16 : i64} : memref<?x16x192xbf16>, vector<8xbf16>
// CHECK: vector.store %{{.+}}, %[[V]][{{.+}}] {alignment = 16 : i64} : memref<?x16x128xbf16>, vector<8xbf16>
// The rope key, 8 columns a thread, into columns 128.. of every head's key.
// CHECK: vector.load %[[KPE]]
// CHECK: vector.store %{{.+}}, %[[K]]
// CHECK: gpu.return
func.func @kv_up_proj_on_workspace_columns(%ws: memref<?x576xbf16>, %w: memref<512x16x256xbf16>,
    %k: memref<?x16x192xbf16>, %v: memref<?x16x128xbf16>, %n: index) {
  %kvc = memref.subview %ws[0, 0] [%n, 512] [1, 1] : memref<?x576xbf16> to memref<?x512xbf16, strided<[576, 1]>>
  %kpe = memref.subview %ws[0, 512] [%n, 64] [1, 1] : memref<?x576xbf16> to memref<?x64xbf16, strided<[576, 1], offset: 512>>
  mla.kv_up_proj ins(%kvc, %kpe, %w : memref<?x512xbf16, strided<[576, 1]>>, memref<?x64xbf16, strided<[576, 1], offset: 512>>, memref<512x16x256xbf16>)
      outs(%k, %v : memref<?x16x192xbf16>, memref<?x16x128xbf16>)
      {num_heads = 16 : i64, kv_lora_rank = 512 : i64, qk_nope_head_dim = 128 : i64, rope_dim = 64 : i64, v_head_dim = 128 : i64}
  return
}

// -----

// 64 key and 64 value columns: not whole 128-column tiles, so 64-column
// tiles (grid z = 2), each a warp 32 columns wide.
// CHECK-LABEL: func.func @kv_up_proj_64_column_tiles(
// CHECK: gpu.launch_func @mla_kernels::@kv_up_proj_mma_0 blocks in (%{{.+}}, %c3, %c2) {{.+}} dynamic_shared_memory_size %c38912_i32
// CHECK: nvgpu.ldmatrix {{.+}} : memref<32x72xf16, #gpu.address_space<workgroup>>
func.func @kv_up_proj_64_column_tiles(%kvc: memref<?x96xf16>, %kpe: memref<?x32xf16>, %w: memref<96x3x128xf16>,
    %k: memref<?x3x96xf16>, %v: memref<?x3x64xf16>) {
  mla.kv_up_proj ins(%kvc, %kpe, %w : memref<?x96xf16>, memref<?x32xf16>, memref<96x3x128xf16>)
      outs(%k, %v : memref<?x3x96xf16>, memref<?x3x64xf16>)
      {num_heads = 3 : i64, kv_lora_rank = 96 : i64, qk_nope_head_dim = 64 : i64, rope_dim = 32 : i64, v_head_dim = 64 : i64}
  return
}

// -----

// The decode query: q_absorb with rope_dim, 4 column tiles of 128 latent
// columns, q_pe copied by the first tile's blocks.
// CHECK-LABEL: func.func @decode_query(
// CHECK: gpu.launch_func @mla_kernels::@q_absorb_mma_0 blocks in (%{{.+}}, %c128, %c4)
// CHECK: gpu.func @q_absorb_mma_0(
// CHECK: scf.for %{{.+}} = %{{.+}} to %c4{{(_[0-9]+)?}} step %{{.+}} iter_args(
func.func @decode_query(%q: memref<?x128x192xbf16>, %wuk: memref<128x128x512xbf16>, %dq: memref<?x128x576xbf16>) {
  mla.q_absorb ins(%q, %wuk : memref<?x128x192xbf16>, memref<128x128x512xbf16>)
      outs(%dq : memref<?x128x576xbf16>)
      {num_heads = 128 : i64, qk_nope_head_dim = 128 : i64, kv_lora_rank = 512 : i64, rope_dim = 64 : i64}
  return
}

// -----

// f32 operands and a depth of 40 (not whole 32-deep slices) keep the
// CUDA-core kernel.
// CHECK-LABEL: func.func @fallbacks(
// CHECK: gpu.launch_func @mla_kernels::@v_up_proj_0
// CHECK: gpu.launch_func @mla_kernels::@v_up_proj_1
// CHECK-NOT: nvvm.mma.sync
func.func @fallbacks(%o: memref<?x4x512xf32>, %w: memref<4x512x128xf32>, %out: memref<?x4x128xf32>,
    %o2: memref<?x4x40xbf16>, %w2: memref<4x40x128xbf16>, %out2: memref<?x4x128xbf16>) {
  mla.v_up_proj ins(%o, %w : memref<?x4x512xf32>, memref<4x512x128xf32>)
      outs(%out : memref<?x4x128xf32>)
      {num_heads = 4 : i64, kv_lora_rank = 512 : i64, v_head_dim = 128 : i64}
  mla.v_up_proj ins(%o2, %w2 : memref<?x4x40xbf16>, memref<4x40x128xbf16>)
      outs(%out2 : memref<?x4x128xbf16>)
      {num_heads = 4 : i64, kv_lora_rank = 40 : i64, v_head_dim = 128 : i64}
  return
}
