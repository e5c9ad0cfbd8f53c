// convert-mla-to-gpu with strategy wgmma (sm_90a): a bf16/f16
// mla.decode_attention with 16 or more heads gets the wgmma split kernel:
// 64-row tiles of a request's (query, head) rows, two warpgroups (256
// threads) sharing each 64-token KV tile in 128-byte-swizzled dynamic
// shared memory; in the seesaw schedule each warpgroup scores its own tile
// of a pair with 36 wgmma m64n64k16 and 4 wgmma m64n256k16 add each tile's
// P V into its 256 output columns, V read N-major (B layout row). Launched on grid
// (ceil(Sq * N / 64), B, S) with 231424 bytes: Q, two KV stages (3 x 73728),
// P 8192, row maxima and sums 1024, 1024 of alignment slack. Fewer heads
// keep the mma-sync kernel, other dtypes the generic one. A request of
// one split writes out and lse directly, the others their partials; the
// rows leave through shared memory, copied out by the whole block. The
// first case's pages of 32 tokens give it the cp.async copies; 128 heads
// over pages of 64 get their KV tiles by tensor copies (the second case).
//
// RUN: mla-opt %s -split-input-file --mla-select-gpu-target="chip=sm_90a strategy=wgmma" --convert-mla-to-gpu --canonicalize | FileCheck %s

// CHECK: module attributes {gpu.container_module, mla.target = {chip = "sm_90a", ptx_features = "+ptx80", strategy = "wgmma"}} {
// CHECK-LABEL: func.func @decode_128_heads(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: memref<?x?x128x576xbf16>
// CHECK: %[[SMEM:.+]] = arith.constant 231424 : i32
// Default schedule: 2048 tokens a split at 128 heads, partials allocated.
// CHECK: %[[S:.+]] = arith.ceildivsi %{{.+}}, %c2048 : index
// CHECK: gpu.alloc (%{{.+}}, %{{.+}}, %[[S]]) : memref<?x?x128x?x512xf32>
// CHECK: gpu.alloc
// q and the cache 16-byte aligned: the wgmma kernel; else the generic one.
// CHECK: memref.extract_aligned_pointer_as_index %[[Q]]
// CHECK: memref.extract_aligned_pointer_as_index
// CHECK: scf.if %{{.+}} {
// CHECK: %[[B:.+]] = memref.dim %[[Q]], %c0
// CHECK: %[[SQ:.+]] = memref.dim %[[Q]], %c1
// CHECK: %[[ROWS:.+]] = arith.muli %[[SQ]], %c128
// CHECK: %[[TILES:.+]] = arith.ceildivsi %[[ROWS]], %c64
// CHECK: gpu.launch_func @mla_kernels::@decode_attention_split_wgmma_0 blocks in (%[[TILES]], %[[B]], %[[S]]) threads in (%c256, %c1, %c1) dynamic_shared_memory_size %[[SMEM]]
// CHECK: } else {
// CHECK: gpu.launch_func @mla_kernels::@decode_attention_split_1
// CHECK: gpu.launch_func @mla_kernels::@decode_attention_combine_narrow_2
// CHECK: gpu.launch_func @mla_kernels::@decode_attention_combine_3
// CHECK: gpu.func @decode_attention_split_wgmma_0(
// CHECK-SAME: known_block_size = array<i32: 256, 1, 1>
// CHECK-NOT: mla.load_at_first_launch
// No element-by-element copies: no scalar loads of q or the cache.
// CHECK-NOT: memref.load %{{.+}} : memref<?x{{(\?x128|32)}}x576xbf16>
// The seesaw schedule: an mbarrier per part of each stage (128 arrivals
// each), a block barrier, then each warpgroup copies its part of Q and of
// tiles 0 and 1 (warpgroup 0 the first four column blocks, warpgroup 1
// the rest), arriving at the stages' part barriers (no wait, no block
// barrier before the loop); then per pair
// of tiles each warpgroup scores its own tile with 36 wgmma m64n64k16 (the
// first with the accumulator zeroed) in two groups: the first 16 once its
// stage's part 0 has landed, the other 20 once part 1 has (each wait a
// phase of the part's mbarrier, then the async-proxy fence and a new
// wgmma.fence); warpgroup 1 waits for A's max (barrier 3), each publishes
// its m, alpha and P (arrive 3 or 4), both add P_A V_A, and the next A
// tile is copied in two parts: warpgroup 0's at once (it arrives at 5),
// warpgroup 1's once warpgroup 0 is done with A (barrier 5), each thread
// arriving at its part's mbarrier when its copies land; warpgroup 0 waits
// for P_B (barrier 4), both add P_B V_B, the next B tile likewise (6). No
// wait at the end of the pair.
// CHECK-COUNT-4: nvvm.mbarrier.init %{{.+}}, %c128_i32 : !llvm.ptr<3>, i32
// CHECK: gpu.barrier
// CHECK-NEXT: scf.if
// CHECK: nvgpu.device_async_copy
// CHECK: nvvm.cp.async.mbarrier.arrive %{{.+}} {noinc = true} : !llvm.ptr<3>
// CHECK: nvvm.cp.async.mbarrier.arrive %{{.+}} {noinc = true} : !llvm.ptr<3>
// CHECK-NEXT: } else {
// CHECK: nvgpu.device_async_copy
// CHECK: nvvm.cp.async.mbarrier.arrive %{{.+}} {noinc = true} : !llvm.ptr<3>
// CHECK: nvvm.cp.async.mbarrier.arrive %{{.+}} {noinc = true} : !llvm.ptr<3>
// CHECK-NOT: gpu.barrier
// CHECK: scf.for
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NEXT: nvvm.wgmma.fence.aligned
// CHECK: nvvm.wgmma.mma_async {{.+}} <m = 64, n = 64, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK-COUNT-15: nvvm.wgmma.mma_async {{.+}} <m = 64, n = 64, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK-NEXT: nvvm.wgmma.commit.group.sync.aligned
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NEXT: nvvm.wgmma.fence.aligned
// CHECK-COUNT-20: nvvm.wgmma.mma_async {{.+}} <m = 64, n = 64, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK-NEXT: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: nvvm.barrier id = %c3_i32 number_of_threads = %c256_i32
// CHECK: nvvm.fence.proxy
// CHECK-NEXT: nvvm.barrier.arrive id = %c3_i32 number_of_threads = %c256_i32
// CHECK: nvvm.fence.proxy
// CHECK-NEXT: nvvm.barrier.arrive id = %c4_i32 number_of_threads = %c256_i32
// P_A V_A is issued; while it runs, warpgroup 1 waits for warpgroup 0's
// reads of stage A (barrier 5); then the products are waited for, each
// warpgroup passes its own barrier (128 threads: every warp's products
// done) and refills its part of the stage, and warpgroup 0 waits for P_B
// (barrier 4).
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-4: nvvm.wgmma.mma_async {{.+}} <m = 64, n = 256, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>]
// CHECK-NEXT: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NOT: nvvm.barrier
// CHECK: nvvm.barrier id = %c5_i32 number_of_threads = %c256_i32
// CHECK-NOT: nvvm.barrier
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-NOT: nvvm.barrier id
// CHECK: nvvm.barrier.arrive id = %c5_i32 number_of_threads = %c256_i32
// CHECK-NOT: nvgpu.device_async_copy
// CHECK: nvvm.barrier id = %{{[0-9]+}} number_of_threads = %c128_i32
// CHECK-NOT: nvvm.barrier
// CHECK: nvgpu.device_async_copy
// CHECK: nvvm.cp.async.mbarrier.arrive %{{.+}} {noinc = true} : !llvm.ptr<3>
// CHECK-NEXT: } else {
// CHECK-NOT: nvgpu.device_async_copy
// CHECK: nvvm.barrier id = %{{[0-9]+}} number_of_threads = %c128_i32
// CHECK-NOT: nvvm.barrier
// CHECK: nvgpu.device_async_copy
// CHECK: nvvm.cp.async.mbarrier.arrive %{{.+}} {noinc = true} : !llvm.ptr<3>
// CHECK-NOT: nvvm.wgmma
// CHECK: nvvm.barrier id = %c4_i32 number_of_threads = %c256_i32
// P_B V_B: warpgroup 1 waits for warpgroup 0's reads of stage B (barrier
// 6) while it runs.
// CHECK-NOT: nvvm.barrier
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-4: nvvm.wgmma.mma_async {{.+}} <m = 64, n = 256, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>]
// CHECK-NEXT: nvvm.wgmma.commit.group.sync.aligned
// CHECK: nvvm.barrier id = %c6_i32 number_of_threads = %c256_i32
// CHECK-NOT: nvvm.barrier
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-NOT: nvvm.barrier id
// CHECK: nvvm.barrier.arrive id = %c6_i32 number_of_threads = %c256_i32
// CHECK-NOT: nvgpu.device_async_copy
// CHECK: nvvm.barrier id = %{{[0-9]+}} number_of_threads = %c128_i32
// CHECK-NOT: nvvm.barrier
// CHECK: nvgpu.device_async_copy
// CHECK: nvvm.cp.async.mbarrier.arrive %{{.+}} {noinc = true} : !llvm.ptr<3>
// CHECK-NEXT: } else {
// CHECK-NOT: nvgpu.device_async_copy
// CHECK: nvvm.barrier id = %{{[0-9]+}} number_of_threads = %c128_i32
// CHECK-NOT: nvvm.barrier
// CHECK: nvgpu.device_async_copy
// CHECK: nvvm.cp.async.mbarrier.arrive %{{.+}} {noinc = true} : !llvm.ptr<3>
// CHECK-NOT: nvvm.mbarrier.try_wait.parity
// CHECK-NOT: nvvm.wgmma.mma_async
// The results: O / l staged once as f32 rows in shared memory (stride
// 520), then, for a request of one split, lse element by element and out
// copied from the staging by every thread, 8-column pieces of the real
// rows in turn (4096 pieces, 256 at a time): 16-byte stores where out is
// aligned, else element stores; for the others the partials likewise.
// At 128 heads every row is real: no branch around the staging.
// CHECK: memref.view {{.+}} to memref<64x520xf32, #gpu.address_space<workgroup>>
// CHECK-NEXT: arith.muli
// CHECK-NOT: scf.if
// CHECK: vector.store %{{.+}} : memref<64x520xf32, #gpu.address_space<workgroup>>, vector<2xf32>
// CHECK: nvvm.barrier id = %c7_i32 number_of_threads = %c256_i32
// CHECK-NOT: vector.store %{{.+}} : memref<64x520xf32
// CHECK: scf.if %{{.+}} {
// CHECK: memref.store %{{.+}}, %{{.+}}[%{{.+}}, %{{.+}}, %{{.+}}] : memref<?x128x?xf32>
// CHECK: scf.for %{{.+}} = %thread_id_x to %c4096 step %c256 {
// CHECK: vector.load %{{.+}} : memref<64x520xf32, #gpu.address_space<workgroup>>, vector<8xf32>
// CHECK: vector.store %{{.+}} : memref<?x?x128x512xbf16>, vector<8xbf16>
// CHECK-NEXT: } else {
// CHECK-COUNT-8: memref.store %{{.+}} : memref<?x?x128x512xbf16>
// CHECK: } else {
// CHECK: memref.store %{{.+}}, %{{.+}}[%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}] : memref<?x?x128x?xf32>
// CHECK: scf.for %{{.+}} = %thread_id_x to %c4096 step %c256 {
// CHECK: vector.load %{{.+}} : memref<64x520xf32, #gpu.address_space<workgroup>>, vector<8xf32>
// CHECK: vector.store %{{.+}} : memref<?x?x128x?x512xf32>, vector<8xf32>
// CHECK-NEXT: } else {
// CHECK-COUNT-8: memref.store %{{.+}} : memref<?x?x128x?x512xf32>
// CHECK-NOT: nvvm.cp.async.bulk
// CHECK: gpu.func @decode_attention_combine_narrow_2(
func.func @decode_128_heads(%q: memref<?x?x128x576xbf16>, %cache: memref<?x32x576xbf16>,
                            %bt: memref<?x?xi32>, %lens: memref<?xi32>,
                            %o: memref<?x?x128x512xbf16>, %lse: memref<?x128x?xf32>) {
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<?x?x128x576xbf16>, memref<?x32x576xbf16>, memref<?x?xi32>, memref<?xi32>)
      outs(%o, %lse : memref<?x?x128x512xbf16>, memref<?x128x?xf32>)
      {num_heads = 128 : i64, kv_lora_rank = 512 : i64, rope_dim = 64 : i64, block_size = 32 : i64,
       cache_dtype = bf16, softmax_scale = 0.0722 : f32, causal}
  return
}

// -----

// 128 heads over pages of 64 tokens: the KV tiles come in by tensor
// copies (TMA). The host runs the kernel where q and the cache are 16-byte
// aligned and passes it the cache's tensor map (mlaTiledTensorMap: base,
// rows, 576 columns, the row stride in bytes, boxes of 64 x 64), 0 for a
// cache of no pages. (Fewer heads, or a cache view whose pages do not
// follow each other, keep the cp.async copies.)
// CHECK-LABEL: func.func @decode_128_heads_tma(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: memref<?x?x128x576xbf16>, %[[C:[a-z0-9]+]]: memref<?x64x576xbf16>
// CHECK: scf.if %{{.+}} {
// CHECK: %{{.+}}, %{{.+}}, %[[SIZES:.+]]:3, %{{.+}}:3 = memref.extract_strided_metadata %[[C]]
// CHECK: %[[ROWS:.+]] = arith.muli %[[SIZES]]#0, %c64
// CHECK: %[[MAP:.+]] = scf.if %{{.+}} -> (i64) {
// CHECK: func.call @mlaTiledTensorMap(%{{.+}}, %{{.+}}, %c576_i64, %c1152_i64, %c64_i64, %c64_i64) : (i64, i64, i64, i64, i64, i64) -> i64
// CHECK: } else {
// CHECK-NEXT: scf.yield %c0_i64 : i64
// CHECK: gpu.launch_func @mla_kernels::@decode_attention_split_wgmma_tma_0 {{.+}} args({{.+}}, %[[MAP]] : i64)
// CHECK: } else {
// CHECK: gpu.launch_func @mla_kernels::@decode_attention_split_1
// CHECK: gpu.func @decode_attention_split_wgmma_tma_0(
// CHECK-SAME: %{{.+}}: i64) kernel attributes {known_block_size = array<i32: 256, 1, 1>}
// Barriers: per part of each stage one arrival a phase (the bytes'
// announcement), then Q's (256 cp.async arrivals).
// CHECK-COUNT-4: nvvm.mbarrier.init %{{.+}}, %c1_i32 : !llvm.ptr<3>, i32
// CHECK: nvvm.mbarrier.init %{{.+}}, %c256_i32 : !llvm.ptr<3>, i32
// CHECK: gpu.barrier
// Q by cp.async on its barrier; each warpgroup's first thread announces
// its part's bytes (4 and 5 boxes of 8 KiB) for both first tiles and
// issues their boxes.
// CHECK: nvgpu.device_async_copy
// CHECK: nvvm.cp.async.mbarrier.arrive
// CHECK: nvvm.mbarrier.arrive.expect_tx %{{.+}}, %c32768_i32
// CHECK-COUNT-4: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.+}}, %{{.+}}, %{{.+}}, box[%{{.+}}, %{{.+}}] : !llvm.ptr<7>, !llvm.ptr
// CHECK: nvvm.mbarrier.arrive.expect_tx %{{.+}}, %c40960_i32
// CHECK-COUNT-5: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.+}}, %{{.+}}, %{{.+}}, box[%{{.+}}, %{{.+}}] : !llvm.ptr<7>, !llvm.ptr
// In the loop: the scores wait for Q and the parts; rows past the split's
// tokens zeroed (16-byte stores, then the async-proxy fence and the
// warpgroup's barrier); a refill announces the part's bytes and issues
// its boxes from one thread of the refilling warpgroup.
// CHECK: scf.for
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.wgmma.mma_async
// CHECK: vector.store %{{.+}} : memref<{{.+}}xbf16, #gpu.address_space<workgroup>>, vector<8xbf16>
// CHECK: nvvm.fence.proxy
// CHECK: nvvm.barrier id = %{{.+}} number_of_threads = %c128_i32
// CHECK: nvvm.mbarrier.arrive.expect_tx %{{.+}}, %c32768_i32
// CHECK-COUNT-4: nvvm.cp.async.bulk.tensor.shared.cluster.global
// No cp.async of the cache in the loop.
// CHECK-NOT: nvgpu.device_async_copy
// CHECK: } else {
// CHECK: nvvm.mbarrier.arrive.expect_tx %{{.+}}, %c40960_i32
// CHECK-COUNT-5: nvvm.cp.async.bulk.tensor.shared.cluster.global
// The generic fallback (misaligned q or cache) is compiled at its first
// launch.
// CHECK: gpu.func @decode_attention_split_1(
// CHECK-SAME: mla.load_at_first_launch
// The runtime's entry, declared for the host code.
// CHECK: func.func private @mlaTiledTensorMap(i64, i64, i64, i64, i64, i64) -> i64
func.func @decode_128_heads_tma(%q: memref<?x?x128x576xbf16>, %cache: memref<?x64x576xbf16>,
                                %bt: memref<?x?xi32>, %lens: memref<?xi32>,
                                %o: memref<?x?x128x512xbf16>, %lse: memref<?x128x?xf32>) {
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<?x?x128x576xbf16>, memref<?x64x576xbf16>, memref<?x?xi32>, memref<?xi32>)
      outs(%o, %lse : memref<?x?x128x512xbf16>, memref<?x128x?xf32>)
      {num_heads = 128 : i64, kv_lora_rank = 512 : i64, rope_dim = 64 : i64, block_size = 64 : i64,
       cache_dtype = bf16, softmax_scale = 0.0722 : f32}
  return
}

// -----

// 16 f16 heads: the wgmma kernel (rows past 16 per query are padding) with
// f16 operands.
// CHECK-LABEL: func.func @decode_16_heads_f16(
// CHECK: gpu.func @decode_attention_split_wgmma_0(
// CHECK: nvvm.wgmma.mma_async {{.+}} A[<f16>, <one>, <row>], B[<f16>, <one>, <col>]
// Only a lane's real rows are staged (three warps of each warpgroup hold
// padding only).
// CHECK: memref.view {{.+}} to memref<64x520xf32, #gpu.address_space<workgroup>>
// CHECK-NEXT: arith.muli
// CHECK-NEXT: scf.if %{{.+}} {
// CHECK: vector.store %{{.+}} : memref<64x520xf32, #gpu.address_space<workgroup>>, vector<2xf32>
func.func @decode_16_heads_f16(%q: memref<?x?x16x576xf16>, %cache: memref<?x16x576xf16>,
                               %bt: memref<?x?xi32>, %lens: memref<?xi32>,
                               %o: memref<?x?x16x512xf16>, %lse: memref<?x16x?xf32>) {
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<?x?x16x576xf16>, memref<?x16x576xf16>, memref<?x?xi32>, memref<?xi32>)
      outs(%o, %lse : memref<?x?x16x512xf16>, memref<?x16x?xf32>)
      {num_heads = 16 : i64, kv_lora_rank = 512 : i64, rope_dim = 64 : i64, block_size = 16 : i64,
       cache_dtype = f16, softmax_scale = 0.0722 : f32}
  return
}

// -----

// 8 heads (not measured against the 16-row mma.sync kernel): that kernel.
// CHECK-LABEL: func.func @decode_8_heads(
// CHECK-NOT: nvvm.wgmma
// CHECK: gpu.func @decode_attention_split_mma_0(
// CHECK-NOT: nvvm.wgmma
func.func @decode_8_heads(%q: memref<?x?x8x576xbf16>, %cache: memref<?x64x576xbf16>,
                          %bt: memref<?x?xi32>, %lens: memref<?xi32>,
                          %o: memref<?x?x8x512xbf16>, %lse: memref<?x8x?xf32>) {
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<?x?x8x576xbf16>, memref<?x64x576xbf16>, memref<?x?xi32>, memref<?xi32>)
      outs(%o, %lse : memref<?x?x8x512xbf16>, memref<?x8x?xf32>)
      {num_heads = 8 : i64, kv_lora_rank = 512 : i64, rope_dim = 64 : i64, block_size = 64 : i64,
       cache_dtype = bf16, softmax_scale = 0.0722 : f32}
  return
}

// -----

// f32 activations: the generic split kernel.
// CHECK-LABEL: func.func @decode_f32(
// CHECK: gpu.func @decode_attention_split_0(
// CHECK-NOT: nvvm.wgmma
// CHECK-NOT: nvvm.mma.sync
func.func @decode_f32(%q: memref<?x?x128x576xf32>, %cache: memref<?x64x576xf32>,
                      %bt: memref<?x?xi32>, %lens: memref<?xi32>,
                      %o: memref<?x?x128x512xf32>, %lse: memref<?x128x?xf32>) {
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<?x?x128x576xf32>, memref<?x64x576xf32>, memref<?x?xi32>, memref<?xi32>)
      outs(%o, %lse : memref<?x?x128x512xf32>, memref<?x128x?xf32>)
      {num_heads = 128 : i64, kv_lora_rank = 512 : i64, rope_dim = 64 : i64, block_size = 64 : i64,
       cache_dtype = f32, softmax_scale = 0.0722 : f32}
  return
}

// -----

// qk 640 (rope 128): one 80 KiB KV stage fits beside Q, so the kernel keeps
// the one-tile schedule: each tile copied after a barrier, each warpgroup
// scoring half its tokens (36 + 4 wgmma m64n32k16, the first zeroing the
// accumulator), the row maxima exchanged through the results' named
// barrier 7, no arrive-only handoffs.
// CHECK-LABEL: func.func @decode_one_stage(
// CHECK: gpu.func @decode_attention_split_wgmma_0(
// CHECK-NOT: nvvm.barrier.arrive
// CHECK: scf.for
// CHECK-NEXT: gpu.barrier
// CHECK: nvgpu.device_async_copy
// CHECK: gpu.barrier
// CHECK: nvvm.wgmma.mma_async {{.+}} <m = 64, n = 32, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK-COUNT-39: nvvm.wgmma.mma_async {{.+}} <m = 64, n = 32, k = 16>, D[<f32>, <one>]
// CHECK: nvvm.barrier id = %c7_i32 number_of_threads = %c256_i32
// CHECK: gpu.barrier
// CHECK-COUNT-4: nvvm.wgmma.mma_async {{.+}} <m = 64, n = 256, k = 16>
// CHECK-NOT: nvvm.barrier.arrive
// CHECK: gpu.func @decode_attention_split_1(
func.func @decode_one_stage(%q: memref<?x?x64x640xbf16>, %cache: memref<?x64x640xbf16>,
                            %bt: memref<?x?xi32>, %lens: memref<?xi32>,
                            %o: memref<?x?x64x512xbf16>, %lse: memref<?x64x?xf32>) {
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<?x?x64x640xbf16>, memref<?x64x640xbf16>, memref<?x?xi32>, memref<?xi32>)
      outs(%o, %lse : memref<?x?x64x512xbf16>, memref<?x64x?xf32>)
      {num_heads = 64 : i64, kv_lora_rank = 512 : i64, rope_dim = 128 : i64, block_size = 64 : i64,
       cache_dtype = bf16, softmax_scale = 0.0722 : f32}
  return
}
