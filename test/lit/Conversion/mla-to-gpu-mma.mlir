// convert-mla-to-gpu with strategy mma-sync: a bf16/f16 mla.decode_attention
// gets the tensor-core split kernel (16-row tiles of a request's (query,
// head) rows, four warps sharing each 64-token KV tile through dynamic
// shared memory, m16n8k16 nvvm.mma.sync with ldmatrix operands), launched on
// grid (ceil(Sq * N / 16), B, S) with 96256 bytes of dynamic shared memory;
// the combine kernel is the generic one. Other dtypes keep the generic split
// kernel.
//
// RUN: mla-opt %s -split-input-file --mla-select-gpu-target="chip=sm_80 strategy=mma-sync" --convert-mla-to-gpu | FileCheck %s
// Grids of static shapes, folded.
// RUN: mla-opt %s -split-input-file --mla-select-gpu-target="chip=sm_80 strategy=mma-sync" --convert-mla-to-gpu --canonicalize | FileCheck %s --check-prefix=GRID
// The generic strategy (the default) never emits tensor-core code.
// RUN: mla-opt %s -split-input-file --mla-select-gpu-target=chip=sm_80 --convert-mla-to-gpu | FileCheck %s --check-prefix=GENERIC
// The strategy stays when a later mla-select-gpu-target (the pipeline's)
// changes the chip, and can be set on an existing target.
// RUN: mla-opt %s -split-input-file --mla-select-gpu-target="chip=sm_80 strategy=mma-sync" --mla-select-gpu-target=chip=sm_90a | FileCheck %s --check-prefix=KEEP
// RUN: mla-opt %s -split-input-file --mla-select-gpu-target=chip=sm_86 --mla-select-gpu-target=strategy=mma-sync | FileCheck %s --check-prefix=SET
// RUN: not mla-opt %s -split-input-file --mla-select-gpu-target="chip=sm_80 strategy=wmma" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not mla-opt %s -split-input-file --mla-select-gpu-target="chip=sm_90 strategy=wgmma" 2>&1 | FileCheck %s --check-prefix=NOT-90A
// RUN: not mla-opt %s -split-input-file --mla-select-gpu-target="chip=sm_90a strategy=wgmma" --mla-select-gpu-target=chip=sm_89 2>&1 | FileCheck %s --check-prefix=NOT-90A

// GENERIC-NOT: nvvm.mma.sync
// GENERIC-NOT: _mma_
// KEEP-COUNT-6: mla.target = {chip = "sm_90a", ptx_features = "+ptx80", strategy = "mma-sync"}
// SET-COUNT-6: mla.target = {chip = "sm_86", ptx_features = "+ptx71", strategy = "mma-sync"}
// BAD: error: mla-select-gpu-target: unknown kernel strategy 'wmma' (supported: generic, mma-sync, wgmma)
// NOT-90A: error: mla-select-gpu-target: kernel strategy 'wgmma' needs chip sm_90a, not sm_{{89|90}}

// 16 heads, bf16, dynamic Sq: the whole kernel.
// CHECK: module attributes {gpu.container_module, mla.target = {chip = "sm_80", ptx_features = "+ptx70", strategy = "mma-sync"}} {
// CHECK-LABEL: func.func @decode_bf16_16_heads(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: memref<?x?x16x576xbf16>, %[[C:[a-z0-9]+]]: memref<?x64x576xbf16>, %[[BT:[a-z0-9]+]]: memref<?x?xi32>, %[[L:[a-z0-9]+]]: memref<?xi32>,
// Default schedule: 256 tokens a split at 16 heads, partials allocated.
// CHECK: %[[S:.+]] = arith.ceildivsi %{{.+}}, %c256 : index
// CHECK: %[[PO:.+]] = gpu.alloc (%{{.+}}, %{{.+}}, %[[S]]) : memref<?x?x16x?x512xf32>
// CHECK: %[[PL:.+]] = gpu.alloc (%{{.+}}, %{{.+}}, %[[S]]) : memref<?x?x16x?xf32>
// Grid (ceil(Sq * 16 / 16), B, S), 128 threads, 96256 bytes: Q 16 x 584,
// KV 64 x 584, P 16 x 72 (bf16), 2 x 64 f32.
// CHECK: %[[B:.+]] = memref.dim %[[Q]], %c0{{.*}} : memref<?x?x16x576xbf16>
// CHECK: %[[SQ:.+]] = memref.dim %[[Q]], %c1{{.*}} : memref<?x?x16x576xbf16>
// CHECK: %[[ROWS:.+]] = arith.muli %[[SQ]], %c16{{.*}} : index
// CHECK: %[[TILES:.+]] = arith.ceildivsi %[[ROWS]], %c16{{.*}} : index
// CHECK: %[[SMEM:.+]] = arith.constant 96256 : i32
// CHECK: gpu.launch_func @mla_kernels::@decode_attention_split_mma_0 blocks in (%[[TILES]], %[[B]], %[[S]]) threads in (%c128{{.*}}, %c1{{.*}}, %c1{{.*}}) dynamic_shared_memory_size %[[SMEM]]
// CHECK-SAME: args(%[[Q]] : memref<?x?x16x576xbf16>, %[[C]] : memref<?x64x576xbf16>, %[[BT]] : memref<?x?xi32>, %[[L]] : memref<?xi32>, %[[PO]] : memref<?x?x16x?x512xf32>, %[[PL]] : memref<?x?x16x?xf32>, %{{.+}} : memref<?x?x16x512xbf16>, %{{.+}} : memref<?x16x?xf32>)
// CHECK: gpu.launch_func @mla_kernels::@decode_attention_combine_narrow_1 blocks in
// CHECK-SAME: args(%[[PO]] : memref<?x?x16x?x512xf32>, %[[PL]] : memref<?x?x16x?xf32>,
// CHECK: gpu.func @decode_attention_split_mma_0(
// CHECK-SAME: kernel attributes {known_block_size = array<i32: 128, 1, 1>}
// 16-byte copies when q and the cache are 16-byte aligned, else elements.
// CHECK: memref.extract_aligned_pointer_as_index %{{.+}} : memref<?x?x16x576xbf16> -> index
// CHECK: memref.extract_aligned_pointer_as_index %{{.+}} : memref<?x64x576xbf16> -> index
// Shared memory: one dynamic buffer, viewed as the tiles.
// CHECK: %[[RAW:.+]] = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
// CHECK: %[[MAX:.+]] = memref.view %[[RAW]][%c95744][] : {{.*}} to memref<64xf32, #gpu.address_space<workgroup>>
// CHECK: %[[SUM:.+]] = memref.view %[[RAW]][%c96000{{(_[0-9]+)?}}][] : {{.*}} to memref<64xf32, #gpu.address_space<workgroup>>
// Scores scaled by softmax_scale * log2(e) = 0.0722 * 1.4427, made once
// before the tiles (DecodeSplitBlock::scoresScale).
// CHECK: arith.constant 0.10416{{[0-9]*}} : f32
// CHECK: %[[QS:.+]] = memref.view %[[RAW]][%{{.+}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<16x584xbf16, #gpu.address_space<workgroup>>
// CHECK: %[[KV:.+]] = memref.view %[[RAW]][%c18688][] : {{.*}} to memref<64x584xbf16, #gpu.address_space<workgroup>>
// CHECK: %[[PS:.+]] = memref.view %[[RAW]][%c93440][] : {{.*}} to memref<16x72xbf16, #gpu.address_space<workgroup>>
// The Q tile: warp w copies rows 4w .. 4w + 3, a row per 8 lanes, 9
// 16-byte vectors a lane (whole 128-byte lines per instruction).
// CHECK: scf.if %{{.+}} {
// CHECK-COUNT-9: nvgpu.device_async_copy %{{.+}}, %[[QS]][{{.+}}], 8, %{{.+}} {bypassL1} : memref<?x?x16x576xbf16> to memref<16x584xbf16, #gpu.address_space<workgroup>>
// CHECK-NEXT: } else {
// Misaligned: element by element.
// CHECK: scf.for %{{.+}} = %{{.+}} to %c72{{(_[0-9]+)?}} step %c8
// The KV tiles, 64 tokens at a time; the state: max and sum of two rows, 64 O accumulators.
// CHECK: scf.for %{{.+}} = %{{.+}} to %{{.+}} step %c64{{.*}} iter_args({{.+}}) -> (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32) {
// Warp w copies its 16 tokens, four rows (page lookups) a lane, 36 vectors.
// CHECK-COUNT-4: memref.load %{{.+}}[%{{.+}}, %{{.+}}] : memref<?x?xi32>
// CHECK: scf.if %{{.+}} {
// CHECK-COUNT-36: nvgpu.device_async_copy %{{.+}}, %[[KV]][{{.+}}], 8, %{{.+}} {bypassL1} : memref<?x64x576xbf16> to memref<64x584xbf16, #gpu.address_space<workgroup>>
// CHECK-NEXT: } else {
// CHECK: nvgpu.device_async_create_group
// CHECK-NEXT: nvgpu.device_async_wait %{{.+}} {numGroups = 0 : i32}
// CHECK-NEXT: gpu.barrier
// S = Q K^T: 18 pairs of k16 steps in two accumulator sets, two n8 tiles of
// the warp's 16 tokens each.
// CHECK: scf.for %{{.+}} = %c0{{.*}} to %c576 step %c32{{.*}} iter_args({{.+}}) -> (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32) {
// CHECK: nvgpu.ldmatrix %[[QS]][{{.+}}] {numTiles = 4 : i32, transpose = false} : memref<16x584xbf16, #gpu.address_space<workgroup>> -> vector<4x2xbf16>
// CHECK: nvgpu.ldmatrix %[[KV]][{{.+}}] {numTiles = 4 : i32, transpose = false} : memref<64x584xbf16, #gpu.address_space<workgroup>> -> vector<4x2xbf16>
// CHECK: llvm.bitcast %{{.+}} : vector<2xbf16> to i32
// CHECK: nvvm.mma.sync A[{{.+}}] B[{{.+}}] C[{{.+}}] {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>, shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (i32, i32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
// CHECK-COUNT-3: nvvm.mma.sync
// CHECK: scf.yield
// CHECK-COUNT-8: arith.addf
// Row maxima: quad shuffles, then across warps through shared memory.
// CHECK: gpu.shuffle xor %{{.+}}, %c1_i32
// CHECK: gpu.shuffle xor %{{.+}}, %c2_i32
// CHECK: memref.store %{{.+}}, %[[MAX]][%{{.+}}] : memref<64xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK: memref.load %[[MAX]]
// exp2 in hardware (no libdevice): the rescale and P.
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// P to shared memory as bf16 pairs.
// CHECK: vector.store %{{.+}}, %[[PS]][%{{.+}}, %{{.+}}] {alignment = 4 : i64} : memref<16x72xbf16, #gpu.address_space<workgroup>>, vector<2xbf16>
// CHECK: gpu.barrier
// O += P V: A from P, B from the KV tile transposed.
// CHECK: nvgpu.ldmatrix %[[PS]][{{.+}}] {numTiles = 4 : i32, transpose = false} : memref<16x72xbf16, #gpu.address_space<workgroup>> -> vector<4x2xbf16>
// CHECK: nvgpu.ldmatrix %[[KV]][{{.+}}] {numTiles = 4 : i32, transpose = true} : memref<64x584xbf16, #gpu.address_space<workgroup>> -> vector<4x2xbf16>
// CHECK: nvvm.mma.sync
// CHECK: gpu.barrier
// CHECK-NEXT: scf.yield
// The row sums across warps; O / l staged once as f32 rows (stride 520)
// in the tiles; then the real rows: for a request of one split lse and
// out, out copied from the staging by the block in 8-column pieces (1024
// pieces, 128 at a time), 16-byte stores where aligned, else element
// stores; for the others the partials likewise.
// CHECK: memref.store %{{.+}}, %[[SUM]]
// CHECK: gpu.barrier
// CHECK: memref.load %[[SUM]]
// CHECK: llvm.call_intrinsic "llvm.nvvm.lg2.approx.ftz.f"
// CHECK: vector.store %{{.+}} : memref<16x520xf32, #gpu.address_space<workgroup>>, vector<2xf32>
// CHECK: gpu.barrier
// CHECK: scf.if %{{.+}} {
// CHECK: memref.store %{{.+}}, %{{.+}}[%{{.+}}, %{{.+}}, %{{.+}}] : memref<?x16x?xf32>
// CHECK: scf.for %{{.+}} = %{{.+}} to %c1024 step %c128{{.*}} {
// CHECK: vector.load %{{.+}} : memref<16x520xf32, #gpu.address_space<workgroup>>, vector<8xf32>
// CHECK: vector.store %{{.+}} : memref<?x?x16x512xbf16>, vector<8xbf16>
// CHECK-NEXT: } else {
// CHECK-COUNT-8: memref.store %{{.+}} : memref<?x?x16x512xbf16>
// CHECK: } else {
// CHECK: memref.store %{{.+}}, %{{.+}}[%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}] : memref<?x?x16x?xf32>
// CHECK: scf.for %{{.+}} = %{{.+}} to %c1024 step %c128{{.*}} {
// CHECK: vector.store %{{.+}} : memref<?x?x16x?x512xf32>, vector<8xf32>
// CHECK-NEXT: } else {
// CHECK-COUNT-8: memref.store %{{.+}} : memref<?x?x16x?x512xf32>
// CHECK: gpu.func @decode_attention_combine_narrow_1(
func.func @decode_bf16_16_heads(%q: memref<?x?x16x576xbf16>, %cache: memref<?x64x576xbf16>,
                                %bt: memref<?x?xi32>, %lens: memref<?xi32>,
                                %o: memref<?x?x16x512xbf16>, %lse: memref<?x16x?xf32>) {
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<?x?x16x576xbf16>, memref<?x64x576xbf16>, memref<?x?xi32>, memref<?xi32>)
      outs(%o, %lse : memref<?x?x16x512xbf16>, memref<?x16x?xf32>)
      {num_heads = 16 : i64, kv_lora_rank = 512 : i64, rope_dim = 64 : i64, block_size = 64 : i64,
       cache_dtype = bf16, softmax_scale = 0.0722 : f32, causal}
  return
}

// -----

// 128 heads, Sq 1: 8 tiles of 16 rows; 2048 tokens a split (1 for 10 pages),
// so the host launches the narrow combine (32 blocks of 4 heads a row).
// GRID-LABEL: func.func @decode_bf16_128_heads_sq1(
// GRID: gpu.launch_func @mla_kernels::@decode_attention_split_mma_0 blocks in (%c8, %c3, %c1) threads in (%c128, %c1, %c1) dynamic_shared_memory_size %c96256_i32
// GRID: gpu.launch_func @mla_kernels::@decode_attention_combine_narrow_1 blocks in (%c3, %c32, %c1)
// CHECK-LABEL: func.func @decode_bf16_128_heads_sq1(
// CHECK: gpu.func @decode_attention_split_mma_0(
// CHECK: nvvm.mma.sync
func.func @decode_bf16_128_heads_sq1(%q: memref<3x1x128x576xbf16>, %cache: memref<40x64x576xbf16>,
                                     %bt: memref<3x10xi32>, %lens: memref<3xi32>,
                                     %o: memref<3x1x128x512xbf16>, %lse: memref<3x128x1xf32>) {
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<3x1x128x576xbf16>, memref<40x64x576xbf16>, memref<3x10xi32>, memref<3xi32>)
      outs(%o, %lse : memref<3x1x128x512xbf16>, memref<3x128x1xf32>)
      {num_heads = 128 : i64, kv_lora_rank = 512 : i64, rope_dim = 64 : i64, block_size = 64 : i64,
       cache_dtype = bf16, softmax_scale = 0.0722 : f32}
  return
}

// -----

// 128 heads, Sq 2: 16 tiles; causal.
// GRID-LABEL: func.func @decode_bf16_128_heads_sq2(
// GRID: gpu.launch_func @mla_kernels::@decode_attention_split_mma_0 blocks in (%c16, %c3, %c1) threads in (%c128, %c1, %c1) dynamic_shared_memory_size %c96256_i32
// GRID: gpu.launch_func @mla_kernels::@decode_attention_combine_narrow_1 blocks in (%c6, %c32, %c1)
// CHECK-LABEL: func.func @decode_bf16_128_heads_sq2(
// CHECK: gpu.func @decode_attention_split_mma_0(
// CHECK: nvvm.mma.sync
func.func @decode_bf16_128_heads_sq2(%q: memref<3x2x128x576xbf16>, %cache: memref<40x64x576xbf16>,
                                     %bt: memref<3x10xi32>, %lens: memref<3xi32>,
                                     %o: memref<3x2x128x512xbf16>, %lse: memref<3x128x2xf32>) {
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<3x2x128x576xbf16>, memref<40x64x576xbf16>, memref<3x10xi32>, memref<3xi32>)
      outs(%o, %lse : memref<3x2x128x512xbf16>, memref<3x128x2xf32>)
      {num_heads = 128 : i64, kv_lora_rank = 512 : i64, rope_dim = 64 : i64, block_size = 64 : i64,
       cache_dtype = bf16, softmax_scale = 0.0722 : f32, causal}
  return
}

// -----

// 16 heads, Sq 1: a single tile.
// GRID-LABEL: func.func @decode_bf16_16_heads_sq1(
// GRID: gpu.launch_func @mla_kernels::@decode_attention_split_mma_0 blocks in (%c1, %c3, %c3) threads in (%c128, %c1, %c1) dynamic_shared_memory_size %c96256_i32
// CHECK-LABEL: func.func @decode_bf16_16_heads_sq1(
// CHECK: nvvm.mma.sync
func.func @decode_bf16_16_heads_sq1(%q: memref<3x1x16x576xbf16>, %cache: memref<40x64x576xbf16>,
                                    %bt: memref<3x10xi32>, %lens: memref<3xi32>,
                                    %o: memref<3x1x16x512xbf16>, %lse: memref<3x16x1xf32>) {
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<3x1x16x576xbf16>, memref<40x64x576xbf16>, memref<3x10xi32>, memref<3xi32>)
      outs(%o, %lse : memref<3x1x16x512xbf16>, memref<3x16x1xf32>)
      {num_heads = 16 : i64, kv_lora_rank = 512 : i64, rope_dim = 64 : i64, block_size = 64 : i64,
       cache_dtype = bf16, softmax_scale = 0.0722 : f32}
  return
}

// -----

// f16 with a split plan: f16 mma operands; S from split_lse; splits past a
// request's clamped count exit.
// GRID-LABEL: func.func @decode_f16_scheduled(
// GRID-SAME: %[[SL:[a-z0-9]+]]: memref<?x2x16x?xf32>, %{{[a-z0-9]+}}: memref<?x2x16x512xf16>
// GRID: %[[S:.+]] = memref.dim %[[SL]], %c3 : memref<?x2x16x?xf32>
// GRID: %[[B:.+]] = memref.dim %arg0, %c0 : memref<?x2x16x576xf16>
// GRID: gpu.launch_func @mla_kernels::@decode_attention_split_mma_0 blocks in (%c2, %[[B]], %[[S]]) threads in (%c128, %c1, %c1) dynamic_shared_memory_size %c96256_i32
// CHECK-LABEL: func.func @decode_f16_scheduled(
// CHECK: gpu.func @decode_attention_split_mma_0(
// CHECK: %[[SPLIT:.+]] = gpu.block_id z
// CHECK: %[[N:.+]] = arith.minsi %{{.+}}, %{{.+}} : index
// CHECK: %[[ACTIVE:.+]] = arith.cmpi slt, %[[SPLIT]], %[[N]] : index
// CHECK: scf.if %[[ACTIVE]] {
// CHECK: gpu.dynamic_shared_memory
// CHECK: nvgpu.ldmatrix %{{.+}} : memref<16x584xf16, #gpu.address_space<workgroup>> -> vector<4x2xf16>
// CHECK: nvvm.mma.sync A[{{.+}}] B[{{.+}}] C[{{.+}}] {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (vector<2xf16>, vector<2xf16>, f32) -> !llvm.struct<(f32, f32, f32, f32)>
func.func @decode_f16_scheduled(%q: memref<?x2x16x576xf16>, %cache: memref<?x16x576xf16>,
                                %bt: memref<?x?xi32>, %lens: memref<?xi32>,
                                %ns: memref<?xi32>, %so: memref<?x2x16x?x512xf32>, %sl: memref<?x2x16x?xf32>,
                                %o: memref<?x2x16x512xf16>, %lse: memref<?x16x2xf32>) {
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<?x2x16x576xf16>, memref<?x16x576xf16>, memref<?x?xi32>, memref<?xi32>)
      splits(%ns, %so, %sl : memref<?xi32>, memref<?x2x16x?x512xf32>, memref<?x2x16x?xf32>)
      outs(%o, %lse : memref<?x2x16x512xf16>, memref<?x16x2xf32>)
      {num_heads = 16 : i64, kv_lora_rank = 512 : i64, rope_dim = 64 : i64, block_size = 16 : i64,
       cache_dtype = f16, softmax_scale = 0.0722 : f32, causal}
  return
}

// -----

// Not served by the tensor-core kernel: f32, and a bf16 query over an f16
// cache keep the generic split kernel (one warp per row, no shared memory;
// only the combine kernels use some).
// CHECK-LABEL: func.func @decode_f32_falls_back(
// CHECK-NOT: dynamic_shared_memory_size
// CHECK: gpu.launch_func @mla_kernels::@decode_attention_split_0 blocks in
// CHECK-NOT: dynamic_shared_memory_size
// CHECK-SAME: args(
// CHECK: gpu.launch_func @mla_kernels::@decode_attention_combine_narrow_1 blocks in
// CHECK: gpu.launch_func @mla_kernels::@decode_attention_split_3 blocks in
// CHECK-NOT: dynamic_shared_memory_size
// CHECK-SAME: args(
// CHECK-NOT: nvvm.mma.sync
// CHECK-NOT: _mma_
func.func @decode_f32_falls_back(%q: memref<2x1x16x576xf32>, %cache: memref<10x16x576xf32>,
                                 %bt: memref<2x5xi32>, %lens: memref<2xi32>,
                                 %o: memref<2x1x16x512xf32>, %lse: memref<2x16x1xf32>,
                                 %qb: memref<2x1x16x576xbf16>, %ch: memref<10x16x576xf16>,
                                 %ob: memref<2x1x16x512xbf16>) {
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x16x576xf32>, memref<10x16x576xf32>, memref<2x5xi32>, memref<2xi32>)
      outs(%o, %lse : memref<2x1x16x512xf32>, memref<2x16x1xf32>)
      {num_heads = 16 : i64, kv_lora_rank = 512 : i64, rope_dim = 64 : i64, block_size = 16 : i64,
       cache_dtype = f32, softmax_scale = 0.0722 : f32}
  mla.decode_attention ins(%qb, %ch, %bt, %lens : memref<2x1x16x576xbf16>, memref<10x16x576xf16>, memref<2x5xi32>, memref<2xi32>)
      outs(%ob, %lse : memref<2x1x16x512xbf16>, memref<2x16x1xf32>)
      {num_heads = 16 : i64, kv_lora_rank = 512 : i64, rope_dim = 64 : i64, block_size = 16 : i64,
       cache_dtype = f16, softmax_scale = 0.0722 : f32}
  return
}
