// convert-mla-to-gpu with a tensor-core strategy: bf16/f16 up-projections
// get the tensor-core product kernel (64-token x 128-column tiles of one
// head, four warps, a four-stage cp.async ring of 32-deep slices, ldmatrix
// and m16n8k16 nvvm.mma.sync), launched on grid (ceil(T / 64), N,
// width / 128) with 55296 bytes of dynamic shared memory. Strided views
// with contiguous rows (the chunked prefill's column ranges of the
// workspace rows) qualify, their offset part of the alignment check. f32
// and dims the kernel does not tile keep the CUDA-core kernel.
//
// With wgmma, kv_up_proj (a product of prefill size) gets the wgmma
// product kernel instead where its columns are whole 128-column tiles:
// 128-token tiles, two warpgroups, a three-stage ring of 64-deep slices
// in the swizzled layout, four m64n128k16 wgmma a slice, 99328 bytes of
// dynamic shared memory. The decode-sized products keep the mma.sync one.
//
// RUN: mla-opt %s -split-input-file --mla-select-gpu-target="chip=sm_80 strategy=mma-sync" --convert-mla-to-gpu | FileCheck %s --check-prefixes=CHECK,MMA
// RUN: mla-opt %s -split-input-file --mla-select-gpu-target="chip=sm_90a strategy=wgmma" --convert-mla-to-gpu | FileCheck %s --check-prefixes=CHECK,WG
// The generic strategy keeps the CUDA-core kernel everywhere.
// RUN: mla-opt %s -split-input-file --mla-select-gpu-target=chip=sm_80 --convert-mla-to-gpu | FileCheck %s --check-prefix=GENERIC

// GENERIC-NOT: _mma_
// GENERIC-NOT: nvvm.mma.sync

// kv_up_proj on column ranges of the workspace rows (576 wide): key and
// value columns are one 128-column tile each.
// CHECK-LABEL: func.func @kv_up_proj_on_workspace_columns(
// MMA: gpu.launch_func @mla_kernels::@kv_up_proj_mma_0 blocks in (%{{.+}}, %c16, %c2) threads in (%c128, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) dynamic_shared_memory_size %c55296_i32
// MMA: gpu.func @kv_up_proj_mma_0(%[[X:.+]]: memref<?x512xbf16, strided<[576, 1]>>, %[[KPE:.+]]: memref<?x64xbf16, strided<[576, 1], offset: 512>>, %[[W:.+]]: memref<512x16x256xbf16>, %[[K:.+]]: memref<?x16x192xbf16>, %[[V:.+]]: memref<?x16x128xbf16>)
// The alignment check adds the view's offset.
// MMA: %{{.+}}, %[[XOFF:.+]], %{{.+}}:2, %{{.+}}:2 = memref.extract_strided_metadata %[[X]]
// MMA: arith.muli %[[XOFF]], %c2
// The ring's first three slices, a group each.
// MMA: scf.for
// MMA: nvgpu.device_async_copy %[[X]]
// MMA: nvgpu.device_async_copy %[[W]]
// MMA: nvgpu.device_async_create_group
// The slices: wait for the oldest, refill the stage three ahead, then two
// k16 steps of 2 x 8 mma (64 accumulators a lane).
// MMA: scf.for %{{.+}} = %{{.+}} to %c16{{(_[0-9]+)?}} step %{{.+}} iter_args({{.+}}) -> (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32) {
// MMA-NEXT: nvvm.cp.async.wait.group 2
// MMA-NEXT: gpu.barrier
// MMA: nvgpu.device_async_copy %[[X]]
// MMA: nvgpu.device_async_create_group
// MMA: nvgpu.ldmatrix {{.+}} {numTiles = 4 : i32, transpose = false} : memref<64x40xbf16, #gpu.address_space<workgroup>>
// MMA: nvgpu.ldmatrix {{.+}} {numTiles = 4 : i32, transpose = true} : memref<32x136xbf16, #gpu.address_space<workgroup>>
// MMA-COUNT-4: nvvm.mma.sync
// MMA: scf.yield
// MMA: nvvm.cp.async.wait.group 0
// Results staged in shared memory, then the key tile to k, the value tile
// to v, in 16-byte pieces.
// MMA: vector.store %{{.+}} : memref<64x136xbf16, #gpu.address_space<workgroup>>, vector<2xbf16>
// MMA: gpu.barrier
// MMA: vector.store %{{.+}}, %[[K]][{{.+}}] {alignment = 16 : i64} : memref<?x16x192xbf16>, vector<8xbf16>
// MMA: vector.store %{{.+}}, %[[V]][{{.+}}] {alignment = 16 : i64} : memref<?x16x128xbf16>, vector<8xbf16>
// The rope key, 8 columns a thread, into columns 128.. of every head's key.
// MMA: vector.load %[[KPE]]
// MMA: vector.store %{{.+}}, %[[K]]
// MMA: gpu.return
// WG: gpu.launch_func @mla_kernels::@kv_up_proj_wgmma_0 blocks in (%{{.+}}, %c16, %c2) threads in (%c256, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) dynamic_shared_memory_size %c99328_i32
// WG: gpu.func @kv_up_proj_wgmma_0(%[[WX:.+]]: memref<?x512xbf16, strided<[576, 1]>>, %[[WKPE:.+]]: memref<?x64xbf16, strided<[576, 1], offset: 512>>, %[[WW:.+]]: memref<512x16x256xbf16>, %[[WK:.+]]: memref<?x16x192xbf16>, %[[WV:.+]]: memref<?x16x128xbf16>)
// WG: scf.for %{{.+}} = %{{.+}} to %c8{{(_[0-9]+)?}} step %{{.+}} iter_args(
// WG-NEXT: nvvm.cp.async.wait.group 1
// WG-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// WG-NEXT: gpu.barrier
// WG: nvgpu.device_async_copy %[[WX]]
// WG: nvgpu.device_async_copy %[[WW]]
// WG: nvvm.wgmma.fence.aligned
// WG-COUNT-4: nvvm.wgmma.mma_async {{.+}} <m = 64, n = 128, k = 16>
// WG-NEXT: nvvm.wgmma.commit.group.sync.aligned
// WG-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// WG: vector.store %{{.+}}, %[[WK]][{{.+}}] {alignment = 16 : i64} : memref<?x16x192xbf16>, vector<8xbf16>
// WG: vector.store %{{.+}}, %[[WV]][{{.+}}] {alignment = 16 : i64} : memref<?x16x128xbf16>, vector<8xbf16>
// WG: vector.load %[[WKPE]]
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
