// convert-mla-to-gpu with strategy wgmma (sm_90a): a bf16/f16
// mla.prefill_attention with head dims in whole 64-column blocks gets the
// wgmma prefill kernel: 128-row tiles of a sequence's queries, two
// consumer warpgroups of 64 rows sharing each 128-key tile and a producer
// warpgroup that copies (384 threads). Thread 0 initializes the mbarriers
// (the K ring's two stages' "landed", counting the producer's 128
// threads, and "read", counting the 256 consumers; the V ring's; then
// Q's). The consumers raise their registers to 232 and wait on mbarriers,
// never at a block barrier. In iteration t, tile t's scores (12 wgmma
// m64n128k16, qk 192, the first with the accumulator zeroed), then tile
// t - 1's P V (8 register-A wgmma m64n128k16: llvm.inline_asm, P in four
// 32-bit registers a k-step, accumulators tied; V read N-major, trans-b
// 1; for tile 0 an empty commit group) are issued; the scores are waited
// for (wait 1: P V still in flight) and tile t's K released; the softmax
// runs under the P V, with P kept in registers (no shared P tile, no
// barrier); then P V is waited for and
// tile t - 1's V released. The last tile's P V follows the loop. The
// producer lowers its registers to 40 and copies Q, then each tile's K and
// V (64 rows at a time; with one V stage, qk 256, K runs a tile ahead),
// each announced on its ring's mbarrier, a stage refilled once its
// previous tile was released. Grid: the heads of a
// group in x, ceil(T / 128) + B row tiles in y, the head groups in z.
// 214088 bytes of shared memory: Q 49152, two K stages of 49152, two V
// stages of 32768, 72 of mbarriers, 1024 of alignment slack. Head dims the
// kernel does not take keep the mma-sync kernel. Where q, k or v is not
// 16-byte aligned, the host launches the generic kernel.
//
// RUN: mla-opt %s -split-input-file --mla-select-gpu-target="chip=sm_90a strategy=wgmma" --convert-mla-to-gpu --canonicalize | FileCheck %s

// CHECK-LABEL: func.func @prefill_192_128(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: memref<?x16x192xbf16>
// CHECK-SAME: %[[CQ:[a-z0-9]+]]: memref<?xi32>
// CHECK: %[[SMEM:.+]] = arith.constant 214088 : i32
// The host checks that q, k and v are 16-byte aligned; if not, the
// generic kernel runs instead (the wgmma kernel has no element-by-element
// copies).
// CHECK: scf.if %{{.+}} {
// CHECK: %[[T:.+]] = memref.dim %[[Q]], %c0
// CHECK: %[[TILES:.+]] = arith.ceildivsi %[[T]], %c128
// CHECK: %[[ROWTILES:.+]] = arith.addi %[[TILES]],
// Heads a group: the largest divisor of 16 whose K and V (640 bytes a
// key) fit 32 MiB together; the grid is (heads a group, row tiles, groups).
// CHECK: %[[TKV:.+]] = memref.dim %{{.+}}, %c0 : memref<?x16x192xbf16>
// CHECK: arith.muli %[[TKV]], %c640
// CHECK: %[[FIT:.+]] = arith.divui %c33554432,
// CHECK: arith.cmpi slt, %[[FIT]], %c2
// CHECK: %[[G:.+]] = arith.select %{{.+}}, %{{.+}}, %c16 : index
// CHECK: %[[GROUPS:.+]] = arith.divui %c16, %[[G]]
// CHECK: gpu.launch_func @mla_kernels::@prefill_attention_wgmma_0 blocks in (%[[G]], %[[ROWTILES]], %[[GROUPS]]) threads in (%c384, %c1, %c1) dynamic_shared_memory_size %[[SMEM]]
// CHECK-NEXT: } else {
// CHECK: gpu.launch_func @mla_kernels::@prefill_attention_1 blocks in (%{{.+}}, %c16, %c1) threads in (%c128, %c1, %c1) args
// CHECK: gpu.func @prefill_attention_wgmma_0(
// CHECK-SAME: known_block_size = array<i32: 384, 1, 1>
// CHECK-NOT: mla.load_at_first_launch
// No element-by-element copies: no scalar loads of q, k or v.
// CHECK-NOT: memref.load %{{.+}} : memref<?x16x{{(192|128)}}xbf16>
// CHECK: nvvm.mbarrier.init %{{.+}}, %c128_i32
// CHECK: nvvm.mbarrier.init %{{.+}}, %c256_i32
// CHECK: nvvm.mbarrier.init %{{.+}}, %c128_i32
// CHECK: nvvm.mbarrier.init %{{.+}}, %c256_i32
// CHECK: nvvm.mbarrier.init %{{.+}}, %c128_i32
// CHECK: nvvm.mbarrier.init %{{.+}}, %c256_i32
// CHECK: nvvm.mbarrier.init %{{.+}}, %c128_i32
// CHECK: nvvm.mbarrier.init %{{.+}}, %c256_i32
// CHECK: nvvm.mbarrier.init %{{.+}}, %c128_i32
// CHECK: gpu.barrier
// The consumers: Q landed, then the loop over the tiles.
// CHECK: nvvm.setmaxregister  increase 232
// CHECK-NOT: gpu.barrier
// CHECK: nvvm.mbarrier.try_wait.parity %{{.+}}, %c0_i32
// Tile t's K landed, its scores issued; then tile t - 1's V landed and its
// P V issued with P in registers (for tile 0, an empty group).
// CHECK: scf.for
// CHECK-NOT: gpu.barrier
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK: nvvm.wgmma.fence.aligned
// CHECK: nvvm.wgmma.mma_async {{.+}} <m = 64, n = 128, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK-COUNT-11: nvvm.wgmma.mma_async {{.+}} <m = 64, n = 128, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK-NEXT: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NOT: nvvm.wgmma.wait
// CHECK: scf.if
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK-NEXT: nvvm.fence.proxy
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-8: llvm.inline_asm has_side_effects asm_dialect = att "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {$0, {{.+}}, $63}, {$128, $129, $130, $131}, $132, 1, 1, 1, 1;", "{{(=f,)+}}0,{{.+}},63,r,r,r,r,l" {{.+}} : (f32{{(, f32)+}}, i32, i32, i32, i32, i64) -> !llvm.struct<(f32{{(, f32)+}})>
// CHECK-NEXT: nvvm.wgmma.commit.group.sync.aligned
// CHECK: } else {
// CHECK-NEXT: nvvm.wgmma.commit.group.sync.aligned
// The scores waited for (P V in flight), tile t's K released; the
// softmax, with no barrier, no shared P tile and no copies; P V waited
// for, tile t - 1's V released.
// CHECK: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK: nvvm.mbarrier.arrive
// CHECK-NOT: nvvm.barrier
// CHECK-NOT: vector.store
// CHECK-NOT: nvgpu.device_async_copy
// CHECK: llvm.nvvm.ex2.approx.ftz.f32
// CHECK-NOT: nvvm.barrier
// CHECK-NOT: vector.store
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-NOT: nvvm.wgmma.mma_async
// CHECK: nvvm.mbarrier.arrive
// After the loop, the last tile's P V.
// CHECK: scf.yield
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK-COUNT-8: llvm.inline_asm has_side_effects asm_dialect = att "wgmma.mma_async.sync.aligned.m64n128k16
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// The results: lse element by element; out staged as bf16 rows (stride
// 136) in the K and V rings, then copied out by every consumer thread,
// 8-column pieces of the real rows in turn (2048 pieces, 256 at a time):
// 16-byte stores where out is aligned, else element stores. The
// consumers' barrier is named barrier 3 of 256 threads.
// CHECK: memref.store %{{.+}} : memref<16x?xf32>
// CHECK: nvvm.barrier id = %c3_i32 number_of_threads = %c256_i32
// CHECK: vector.store %{{.+}} : memref<128x136xbf16, #gpu.address_space<workgroup>>, vector<2xbf16>
// CHECK: nvvm.barrier id = %c3_i32 number_of_threads = %c256_i32
// CHECK: scf.for %{{.+}} = %thread_id_x to %c2048 step %c256 {
// CHECK: vector.load %{{.+}} : memref<128x136xbf16, #gpu.address_space<workgroup>>, vector<8xbf16>
// CHECK: vector.store %{{.+}} : memref<?x16x128xbf16>, vector<8xbf16>
// CHECK-NEXT: } else {
// CHECK-COUNT-8: memref.store %{{.+}} : memref<?x16x128xbf16>
// CHECK-NOT: nvvm.cp.async.bulk
// The producer: Q, then each tile's K and V, each after its ring stage's
// release (from the third tile on), copied 64 rows at a time (a loop) and
// announced by cp.async.mbarrier.arrive; its copies land before it leaves.
// CHECK: nvvm.setmaxregister  decrease 40
// CHECK: nvgpu.device_async_copy
// CHECK: nvvm.cp.async.mbarrier.arrive %{{.+}} {noinc = true}
// CHECK: scf.for
// CHECK: scf.if
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK-NEXT: }
// CHECK: scf.for %{{.+}} = %c0 to %c128 step %c64
// CHECK: nvgpu.device_async_copy
// CHECK: nvvm.cp.async.mbarrier.arrive %{{.+}} {noinc = true}
// CHECK: scf.if
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK-NEXT: }
// CHECK: scf.for %{{.+}} = %c0 to %c128 step %c64
// CHECK: nvgpu.device_async_copy
// CHECK: nvvm.cp.async.mbarrier.arrive %{{.+}} {noinc = true}
// CHECK: nvgpu.device_async_create_group
// CHECK-NEXT: nvgpu.device_async_wait %{{.+}} {numGroups = 0 : i32}
// CHECK-NOT: nvvm.wgmma
// CHECK: gpu.return
// The generic kernel runs only where an operand is misaligned: the runtime
// compiles it at its first launch.
// CHECK: gpu.func @prefill_attention_1(
// CHECK-SAME: mla.load_at_first_launch
func.func @prefill_192_128(%q: memref<?x16x192xbf16>, %k: memref<?x16x192xbf16>,
                           %v: memref<?x16x128xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>,
                           %o: memref<?x16x128xbf16>, %lse: memref<16x?xf32>) {
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<?x16x192xbf16>, memref<?x16x192xbf16>, memref<?x16x128xbf16>, memref<?xi32>, memref<?xi32>)
      outs(%o, %lse : memref<?x16x128xbf16>, memref<16x?xf32>)
      {num_heads = 16 : i64, qk_head_dim = 192 : i64, v_head_dim = 128 : i64,
       softmax_scale = 0.0722 : f32, causal}
  return
}

// -----

// accumulate: right after the loop each thread reads the 8 pieces of out
// it will merge into (all in flight together) and its rows' entry LSEs
// (padding rows read none); past the barrier the entry outputs' merge
// weights follow the staged rows in shared memory; past the next one lse
// gets the merged LSE and the copy, unrolled, adds the weighted entry
// pieces where their weight is not 0.
// CHECK-LABEL: func.func @prefill_accumulate(
// Not causal: the row tiles in x, the heads in y.
// CHECK: gpu.launch_func @mla_kernels::@prefill_attention_wgmma_0 blocks in (%{{.+}}, %c16, %c1) threads in (%c384, %c1, %c1)
// CHECK: gpu.func @prefill_attention_wgmma_0(
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-COUNT-8: vector.load %{{.+}} : memref<?x16x128xbf16>, vector<8xbf16>
// CHECK: memref.load %{{.+}} : memref<16x?xf32>
// CHECK: nvvm.barrier id = %c3_i32 number_of_threads = %c256_i32
// CHECK: memref.store %{{.+}} : memref<128xf32, #gpu.address_space<workgroup>>
// CHECK: vector.store %{{.+}} : memref<128x136xbf16, #gpu.address_space<workgroup>>, vector<2xbf16>
// CHECK: nvvm.barrier id = %c3_i32 number_of_threads = %c256_i32
// CHECK: memref.store %{{.+}} : memref<16x?xf32>
// CHECK-NOT: scf.for
// CHECK: memref.load %{{.+}} : memref<128xf32, #gpu.address_space<workgroup>>
// CHECK: arith.cmpf oeq
// CHECK: arith.select %{{.+}} : vector<8xf32>
// CHECK: vector.store %{{.+}} : memref<?x16x128xbf16>, vector<8xbf16>
// CHECK: gpu.return
func.func @prefill_accumulate(%q: memref<?x16x192xbf16>, %k: memref<?x16x192xbf16>,
                              %v: memref<?x16x128xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>,
                              %o: memref<?x16x128xbf16>, %lse: memref<16x?xf32>) {
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<?x16x192xbf16>, memref<?x16x192xbf16>, memref<?x16x128xbf16>, memref<?xi32>, memref<?xi32>)
      outs(%o, %lse : memref<?x16x128xbf16>, memref<16x?xf32>)
      {num_heads = 16 : i64, qk_head_dim = 192 : i64, v_head_dim = 128 : i64,
       softmax_scale = 0.0722 : f32, accumulate}
  return
}

// -----

// qk 96 is not whole column blocks: the mma-sync kernel.
// CHECK-LABEL: func.func @prefill_96_64(
// CHECK: gpu.launch_func @mla_kernels::@prefill_attention_mma_0
// CHECK-NOT: nvvm.wgmma
func.func @prefill_96_64(%q: memref<?x4x96xf16>, %k: memref<?x4x96xf16>,
                         %v: memref<?x4x64xf16>, %cq: memref<?xi32>, %ck: memref<?xi32>,
                         %o: memref<?x4x64xf16>, %lse: memref<4x?xf32>) {
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<?x4x96xf16>, memref<?x4x96xf16>, memref<?x4x64xf16>, memref<?xi32>, memref<?xi32>)
      outs(%o, %lse : memref<?x4x64xf16>, memref<4x?xf32>)
      {num_heads = 4 : i64, qk_head_dim = 96 : i64, v_head_dim = 64 : i64,
       softmax_scale = 0.1 : f32}
  return
}

// -----

// qk 256 / v 128: two K stages and one V stage (230456 bytes of shared
// memory), so the producer runs K a tile ahead of V: K 0 before its loop,
// then in iteration t K t + 1 (if any) before V t.
// CHECK-LABEL: func.func @prefill_256_128(
// CHECK: arith.constant 230456 : i32
// CHECK: gpu.func @prefill_attention_wgmma_0(
// CHECK: nvvm.setmaxregister  decrease 40
// CHECK: nvvm.cp.async.mbarrier.arrive %{{.+}} {noinc = true}
// CHECK-NEXT: %{{.+}} = arith.cmpi
// CHECK-NEXT: scf.if
// CHECK-NEXT: scf.for %{{.+}} = %c0 to %c128 step %c64
// CHECK: nvgpu.device_async_copy %arg1
// CHECK: nvvm.cp.async.mbarrier.arrive %{{.+}} {noinc = true}
// CHECK: scf.for
// CHECK: scf.if
// CHECK: scf.if
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvgpu.device_async_copy %arg1
// CHECK: nvvm.cp.async.mbarrier.arrive %{{.+}} {noinc = true}
// CHECK: scf.if
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvgpu.device_async_copy %arg2
// CHECK: nvvm.cp.async.mbarrier.arrive %{{.+}} {noinc = true}
func.func @prefill_256_128(%q: memref<?x8x256xbf16>, %k: memref<?x8x256xbf16>,
                           %v: memref<?x8x128xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>,
                           %o: memref<?x8x128xbf16>, %lse: memref<8x?xf32>) {
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<?x8x256xbf16>, memref<?x8x256xbf16>, memref<?x8x128xbf16>, memref<?xi32>, memref<?xi32>)
      outs(%o, %lse : memref<?x8x128xbf16>, memref<8x?xf32>)
      {num_heads = 8 : i64, qk_head_dim = 256 : i64, v_head_dim = 128 : i64,
       softmax_scale = 0.0625 : f32, causal}
  return
}
