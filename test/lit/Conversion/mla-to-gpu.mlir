// convert-mla-to-gpu: every primitive op becomes generic kernels (gpu.func,
// 128 threads per block) in the module's gpu.module @mla_kernels, targeted
// at the chip recorded by mla-select-gpu-target, and the op is replaced by
// their launches, unguarded: the runtime's launch skips an empty grid.
//
// RUN: split-file %s %t --leading-lines
// One function per primitive op.
// RUN: mla-opt %t/kernels.mlir -split-input-file --mla-select-gpu-target=chip=sm_90a --convert-mla-to-gpu | FileCheck %s
// exp and log in kernels are the hardware's ex2/lg2 (no libdevice): no math.exp or math.log anywhere.
// RUN: mla-opt %t/kernels.mlir -split-input-file --mla-select-gpu-target=chip=sm_90a --convert-mla-to-gpu | FileCheck %s --check-prefix=NATIVE
// The expanded chunked prefill: scratch on the device, host reads of the chunk plan from a host copy.
// RUN: mla-opt %t/chunked.mlir --mla-expand-chunked-prefill --mla-select-gpu-target=chip=sm_90a --convert-mla-to-gpu | FileCheck %s --check-prefix=CHUNKED
// Errors: no (or an invalid) target, an unexpanded composite.
// RUN: not mla-opt %t/no-target.mlir -split-input-file --convert-mla-to-gpu 2>&1 | FileCheck %s --check-prefix=NOTARGET
// RUN: not mla-opt %t/chunked.mlir --mla-select-gpu-target=chip=sm_90a --convert-mla-to-gpu 2>&1 | FileCheck %s --check-prefix=COMPOSITE

// NATIVE-NOT: {{math\.(exp|log)}}
// NATIVE-NOT: __nv_

//--- kernels.mlir

// Prefill: one warp per (token, head) row, four rows per block.
// CHECK: module attributes {gpu.container_module, mla.target = {chip = "sm_90a", ptx_features = "+ptx80", strategy = "generic"}} {
// CHECK-LABEL: func.func @prefill(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: memref<?x16x192xbf16>, %[[K:[a-z0-9]+]]: memref<?x16x192xbf16>, %[[V:[a-z0-9]+]]: memref<?x16x128xbf16>,
// CHECK-SAME: %[[CQ:[a-z0-9]+]]: memref<?xi32>, %[[CK:[a-z0-9]+]]: memref<?xi32>, %[[O:[a-z0-9]+]]: memref<?x16x128xbf16>, %[[LSE:[a-z0-9]+]]: memref<16x?xf32>)
// CHECK-NOT: {{^ *mla\.}}
// Grid: ceil(tokens / 4) x heads x 1.
// CHECK: %[[T:.+]] = memref.dim %[[Q]], %c0 : memref<?x16x192xbf16>
// CHECK: %[[GX:.+]] = arith.ceildivsi %[[T]], %c4 : index
// CHECK: gpu.launch_func @mla_kernels::@prefill_attention_0 blocks in (%[[GX]], %c16, %c1) threads in (%c128, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}})
// CHECK-SAME: args(%[[Q]] : memref<?x16x192xbf16>, %[[K]] : memref<?x16x192xbf16>, %[[V]] : memref<?x16x128xbf16>, %[[CQ]] : memref<?xi32>, %[[CK]] : memref<?xi32>, %[[O]] : memref<?x16x128xbf16>, %[[LSE]] : memref<16x?xf32>)
// CHECK-NEXT: return
// CHECK: gpu.module @mla_kernels [#nvvm.target<O = 1, chip = "sm_90a", features = "+ptx80">] {
// CHECK-NEXT: gpu.func @prefill_attention_0(%{{.+}}: memref<?x16x192xbf16>, %{{.+}}: memref<?x16x192xbf16>, %{{.+}}: memref<?x16x128xbf16>, %{{.+}}: memref<?xi32>, %{{.+}}: memref<?xi32>, %{{.+}}: memref<?x16x128xbf16>, %[[KLSE:.+]]: memref<16x?xf32>)
// CHECK-SAME: kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
// Row: token = 4 * block_id.x + warp, head = block_id.y.
// CHECK: %[[TID:.+]] = gpu.thread_id x
// CHECK: %[[WARP:.+]] = arith.divui %[[TID]], %c32 : index
// CHECK: %[[BX:.+]] = gpu.block_id x
// CHECK: %[[ROW0:.+]] = arith.muli %[[BX]], %c4 : index
// CHECK: %[[TOKEN:.+]] = arith.addi %[[ROW0]], %[[WARP]] : index
// CHECK: %[[HEAD:.+]] = gpu.block_id y
// Online softmax over the keys: max, sum and the lane's 4 of the 128 output columns.
// CHECK: scf.for %{{.+}} iter_args({{.+}}) -> (f32, f32, f32, f32, f32, f32) {
// q . k: the lanes' partial dot products summed by xor shuffles.
// CHECK: %[[WIDTH:.+]] = arith.constant 32 : i32
// CHECK: gpu.shuffle xor %{{.+}}, %c16_i32, %[[WIDTH]] : f32
// CHECK: gpu.shuffle xor %{{.+}}, %c8_i32, %[[WIDTH]] : f32
// CHECK: gpu.shuffle xor %{{.+}}, %c4_i32, %[[WIDTH]] : f32
// CHECK: gpu.shuffle xor %{{.+}}, %c2_i32, %[[WIDTH]] : f32
// CHECK: gpu.shuffle xor %{{.+}}, %c1_i32, %[[WIDTH]] : f32
// exp(x) = ex2(x log2(e)), for the rescale and the probability.
// CHECK: %[[LOG2E:.+]] = arith.constant 1.44269502 : f32
// CHECK: %[[X:.+]] = arith.mulf %{{.+}}, %[[LOG2E]] : f32
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"(%[[X]]) : (f32) -> f32
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// CHECK: scf.yield
// lse = max + lg2(sum) ln(2), written by lane 0.
// CHECK: %[[LN2:.+]] = arith.constant 0.693147182 : f32
// CHECK: %[[LG:.+]] = llvm.call_intrinsic "llvm.nvvm.lg2.approx.ftz.f"(%{{.+}}) : (f32) -> f32
// CHECK: arith.mulf %[[LG]], %[[LN2]] : f32
// CHECK: memref.store %{{.+}}, %[[KLSE]][%[[HEAD]], %[[TOKEN]]] : memref<16x?xf32>
// CHECK: gpu.return
func.func @prefill(%q: memref<?x16x192xbf16>, %k: memref<?x16x192xbf16>,
                   %v: memref<?x16x128xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>,
                   %o: memref<?x16x128xbf16>, %lse: memref<16x?xf32>) {
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<?x16x192xbf16>, memref<?x16x192xbf16>, memref<?x16x128xbf16>, memref<?xi32>, memref<?xi32>)
      outs(%o, %lse : memref<?x16x128xbf16>, memref<16x?xf32>)
      {num_heads = 16 : i64, qk_head_dim = 192 : i64, v_head_dim = 128 : i64, softmax_scale = 0.0722 : f32, causal}
  return
}

// -----

// Decode: the keys are split in chunks of 256; a block handles one chunk of
// one query row for four heads (a warp each) and writes normalized partials
// to device scratch, which a second kernel combines.
// CHECK: module attributes {gpu.container_module, mla.target = {chip = "sm_90a", ptx_features = "+ptx80", strategy = "generic"}} {
// CHECK-LABEL: func.func @decode(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: memref<?x?x16x576xbf16>, %[[CACHE:[a-z0-9]+]]: memref<?x64x576xbf16>,
// CHECK-SAME: %[[BT:[a-z0-9]+]]: memref<?x?xi32>, %[[LENS:[a-z0-9]+]]: memref<?xi32>,
// CHECK-SAME: %[[O:[a-z0-9]+]]: memref<?x?x16x512xbf16>, %[[LSE:[a-z0-9]+]]: memref<?x16x?xf32>)
// CHECK-NOT: {{^ *mla\.}}
// CHECK: %[[B:.+]] = memref.dim %[[Q]], %c0 : memref<?x?x16x576xbf16>
// CHECK: %[[SQ:.+]] = memref.dim %[[Q]], %c1 : memref<?x?x16x576xbf16>
// Splits: ceil(block table width * 64 / 256).
// CHECK: %[[PAGES:.+]] = memref.dim %[[BT]], %c1{{(_[0-9]+)?}} : memref<?x?xi32>
// CHECK: %[[CAP:.+]] = arith.muli %[[PAGES]], %c64 : index
// CHECK: %[[SPLITS:.+]] = arith.ceildivsi %[[CAP]], %c256 : index
// CHECK: %[[PART:.+]] = gpu.alloc (%[[B]], %[[SQ]], %[[SPLITS]]) : memref<?x?x16x?x512xf32>
// CHECK: %[[PART_LSE:.+]] = gpu.alloc (%[[B]], %[[SQ]], %[[SPLITS]]) : memref<?x?x16x?xf32>
// CHECK: %[[ROWS:.+]] = arith.muli %{{.+}}, %{{.+}} : index
// CHECK: gpu.launch_func @mla_kernels::@decode_attention_split_0 blocks in (%[[ROWS]], %c4, %[[SPLITS]]) threads in (%c128{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}})
// CHECK-SAME: args(%[[Q]] : memref<?x?x16x576xbf16>, %[[CACHE]] : memref<?x64x576xbf16>, %[[BT]] : memref<?x?xi32>, %[[LENS]] : memref<?xi32>, %[[PART]] : memref<?x?x16x?x512xf32>, %[[PART_LSE]] : memref<?x?x16x?xf32>, %[[O]] : memref<?x?x16x512xbf16>, %[[LSE]] : memref<?x16x?xf32>)
// The combine kernel, by the workspace's split count S: up to 4, the
// narrow one (a warp per (row, head): grid rows x 4, 128 threads); else
// one block of 256 threads per (row, head, 128-column chunk), 4160 bytes of
// shared memory (each of the 8 warps' max, weight sum and 128 column sums).
// CHECK: %[[ROWS2:.+]] = arith.muli %{{.+}}, %{{.+}} : index
// CHECK: %[[S2:.+]] = memref.dim %[[PART_LSE]], %c3 : memref<?x?x16x?xf32>
// CHECK: %[[FEW:.+]] = arith.cmpi slt, %[[S2]], %c5 : index
// CHECK: scf.if %[[FEW]] {
// CHECK: gpu.launch_func @mla_kernels::@decode_attention_combine_narrow_1 blocks in (%[[ROWS2]], %c4{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) threads in (%c128{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}})
// CHECK-SAME: args(%[[PART]] : memref<?x?x16x?x512xf32>, %[[PART_LSE]] : memref<?x?x16x?xf32>, %[[O]] : memref<?x?x16x512xbf16>, %[[LSE]] : memref<?x16x?xf32>)
// CHECK-NEXT: } else {
// CHECK: gpu.launch_func @mla_kernels::@decode_attention_combine_2 blocks in (%[[ROWS2]], %c16, %c4{{(_[0-9]+)?}}) threads in (%c256{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) dynamic_shared_memory_size %c4160_i32
// CHECK-SAME: args(%[[PART]] : memref<?x?x16x?x512xf32>, %[[PART_LSE]] : memref<?x?x16x?xf32>, %[[O]] : memref<?x?x16x512xbf16>, %[[LSE]] : memref<?x16x?xf32>)
// CHECK-NEXT: }
// CHECK-NEXT: gpu.dealloc %[[PART]] : memref<?x?x16x?x512xf32>
// CHECK-NEXT: gpu.dealloc %[[PART_LSE]] : memref<?x?x16x?xf32>
// CHECK-NEXT: return
// CHECK: gpu.module @mla_kernels [#nvvm.target<O = 1, chip = "sm_90a", features = "+ptx80">] {
// The split kernel: head = 4 * block_id.y + warp (guarded), split = block_id.z.
// CHECK-NEXT: gpu.func @decode_attention_split_0(%{{.+}}: memref<?x?x16x576xbf16>, %{{.+}}: memref<?x64x576xbf16>, %{{.+}}: memref<?x?xi32>, %{{.+}}: memref<?xi32>, %[[KPART:.+]]: memref<?x?x16x?x512xf32>, %[[KPART_LSE:.+]]: memref<?x?x16x?xf32>, %[[KFOUT:.+]]: memref<?x?x16x512xbf16>, %[[KFLSE:.+]]: memref<?x16x?xf32>)
// CHECK-SAME: kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
// CHECK: %[[BY:.+]] = gpu.block_id y
// CHECK: %[[H0:.+]] = arith.muli %[[BY]], %c4 : index
// CHECK: %[[H:.+]] = arith.addi %[[H0]], %{{.+}} : index
// CHECK: %[[SPLIT:.+]] = gpu.block_id z
// CHECK: %[[HEAD_OK:.+]] = arith.cmpi slt, %[[H]], %c16 : index
// The request's splits: here all S (the grid has one for each).
// CHECK: %[[S1:.+]] = memref.dim %[[KPART_LSE]], %c3 : memref<?x?x16x?xf32>
// CHECK: scf.if %[[HEAD_OK]] {
// CHECK: %[[FIRST:.+]] = arith.muli %[[SPLIT]], %c256 : index
// Max, sum and 16 of the 512 latent columns per lane.
// CHECK: scf.for %{{.+}} = %[[FIRST]] to %{{.+}} step %{{.+}} iter_args({{.+}}) -> (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32) {
// CHECK-COUNT-5: gpu.shuffle xor
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// CHECK: scf.yield
// A request of one split (here: S is 1) writes out and lse; others their
// partials.
// CHECK: %[[SINGLE:.+]] = arith.cmpi eq, %[[S1]], %c1{{(_[0-9]+)?}} : index
// CHECK: scf.if %[[SINGLE]] {
// CHECK: llvm.call_intrinsic "llvm.nvvm.lg2.approx.ftz.f"
// CHECK: memref.store %{{.+}}, %[[KFOUT]][%{{.+}}, %{{.+}}, %[[H]], %{{.+}}] : memref<?x?x16x512xbf16>
// CHECK: memref.store %{{.+}}, %[[KFLSE]][%{{.+}}, %[[H]], %{{.+}}] : memref<?x16x?xf32>
// CHECK: } else {
// CHECK: llvm.call_intrinsic "llvm.nvvm.lg2.approx.ftz.f"
// CHECK: memref.store %{{.+}}, %[[KPART]][%{{.+}}, %{{.+}}, %[[H]], %[[SPLIT]], %{{.+}}] : memref<?x?x16x?x512xf32>
// CHECK: memref.store %{{.+}}, %[[KPART_LSE]][%{{.+}}, %{{.+}}, %[[H]], %[[SPLIT]]] : memref<?x?x16x?xf32>
// CHECK: gpu.return
// The narrow combine: requests of one split skipped; the 4 splits
// unrolled, their LSEs, then 4 x 4 16-byte loads of partials (4 column
// groups x 4 splits) before any store; no barrier.
// CHECK: gpu.func @decode_attention_combine_narrow_1(%{{.+}}: memref<?x?x16x?x512xf32>, %[[NCSL:.+]]: memref<?x?x16x?xf32>, %[[NOUT:.+]]: memref<?x?x16x512xbf16>, %[[NLSE:.+]]: memref<?x16x?xf32>)
// CHECK-SAME: kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
// CHECK: %[[NH_OK:.+]] = arith.cmpi slt, %{{.+}}, %c16 : index
// CHECK: scf.if %[[NH_OK]] {
// CHECK: %[[NMERGES:.+]] = arith.cmpi ne, %{{.+}}, %c1{{(_[0-9]+)?}} : index
// CHECK: scf.if %[[NMERGES]] {
// CHECK-COUNT-4: memref.load %[[NCSL]]
// CHECK-NOT: gpu.barrier
// CHECK-COUNT-16: vector.load %{{.+}} {alignment = 16 : i64} : memref<?x?x16x?x512xf32>, vector<4xf32>
// CHECK-NOT: vector.load
// CHECK: memref.store %{{.+}}, %[[NOUT]]
// CHECK: memref.store %{{.+}}, %[[NLSE]]
// CHECK: } else {
// CHECK: gpu.return
// The wide combine: requests of one split skipped; each warp takes every
// eighth split, eight per step, and loads every split's LSE and a 16-byte
// vector of 4 columns a lane before any barrier, merging them online
// against its own running max (max, weight sum and 4 column sums carried);
// the warps' states meet once in shared memory: their maxes, a barrier,
// their rescaled sums, a barrier, the column totals. (The second copy, for
// misaligned partials, loads element by element.)
// CHECK: gpu.func @decode_attention_combine_2(%{{.+}}: memref<?x?x16x?x512xf32>, %[[KCSL:.+]]: memref<?x?x16x?xf32>, %[[KOUT:.+]]: memref<?x?x16x512xbf16>, %[[KLSE:.+]]: memref<?x16x?xf32>)
// CHECK-SAME: kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
// CHECK: %[[CN1:.+]] = memref.dim %[[KCSL]], %c3 : memref<?x?x16x?xf32>
// CHECK: gpu.dynamic_shared_memory
// CHECK: %[[MERGES:.+]] = arith.cmpi ne, %[[CN1]], %c1{{(_[0-9]+)?}} : index
// CHECK: scf.if %[[MERGES]] {
// CHECK-NOT: gpu.barrier
// CHECK: scf.for %{{.+}} = %{{.+}} to %{{.+}} step %c64{{(_[0-9]+)?}} iter_args({{.+}}) -> (f32, f32, f32, f32, f32, f32) {
// CHECK-COUNT-8: vector.load %{{.+}} {alignment = 16 : i64} : memref<?x?x16x?x512xf32>, vector<4xf32>
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// CHECK: scf.yield
// CHECK: memref.store %{{.+}}, %{{.+}}[%{{.+}}] : memref<8xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK: memref.store %{{.+}}, %{{.+}}[%{{.+}}, %{{.+}}] : memref<8x128xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK: llvm.call_intrinsic "llvm.nvvm.lg2.approx.ftz.f"
// CHECK: memref.store %{{.+}}, %[[KOUT]][{{.+}}] : memref<?x?x16x512xbf16>
// CHECK: memref.store %{{.+}}, %[[KLSE]][{{.+}}] : memref<?x16x?xf32>
// CHECK: } else {
// CHECK: gpu.return
func.func @decode(%q: memref<?x?x16x576xbf16>, %cache: memref<?x64x576xbf16>,
                  %bt: memref<?x?xi32>, %lens: memref<?xi32>,
                  %o: memref<?x?x16x512xbf16>, %lse: memref<?x16x?xf32>) {
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<?x?x16x576xbf16>, memref<?x64x576xbf16>, memref<?x?xi32>, memref<?xi32>)
      outs(%o, %lse : memref<?x?x16x512xbf16>, memref<?x16x?xf32>)
      {num_heads = 16 : i64, kv_lora_rank = 512 : i64, rope_dim = 64 : i64, block_size = 64 : i64,
       cache_dtype = bf16, softmax_scale = 0.0722 : f32, causal}
  return
}

// -----

// Decode with a split schedule: the caller's workspaces hold the partials
// (nothing allocated or freed), the grid has one z block per workspace split
// (dim 3 of split_lse), and the kernels read each request's split count.
// CHECK: module attributes {gpu.container_module, mla.target = {chip = "sm_90a", ptx_features = "+ptx80", strategy = "generic"}} {
// CHECK-LABEL: func.func @decode_scheduled(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: memref<?x?x16x576xbf16>, %[[CACHE:[a-z0-9]+]]: memref<?x64x576xbf16>,
// CHECK-SAME: %[[BT:[a-z0-9]+]]: memref<?x?xi32>, %[[LENS:[a-z0-9]+]]: memref<?xi32>,
// CHECK-SAME: %[[NS:[a-z0-9]+]]: memref<?xi32>, %[[SO:[a-z0-9]+]]: memref<?x?x16x?x512xf32>, %[[SL:[a-z0-9]+]]: memref<?x?x16x?xf32>,
// CHECK-SAME: %[[O:[a-z0-9]+]]: memref<?x?x16x512xbf16>, %[[LSE:[a-z0-9]+]]: memref<?x16x?xf32>)
// CHECK-NOT: {{^ *mla\.}}
// CHECK-NOT: gpu.{{(de)?}}alloc
// CHECK: %[[B:.+]] = memref.dim %[[Q]], %c0 : memref<?x?x16x576xbf16>
// CHECK: %[[SQ:.+]] = memref.dim %[[Q]], %c1 : memref<?x?x16x576xbf16>
// CHECK-NOT: gpu.{{(de)?}}alloc
// CHECK: %[[SPLITS:.+]] = memref.dim %[[SL]], %c3 : memref<?x?x16x?xf32>
// CHECK-NOT: gpu.{{(de)?}}alloc
// CHECK: %[[ROWS:.+]] = arith.muli %{{.+}}, %{{.+}} : index
// CHECK-NOT: gpu.{{(de)?}}alloc
// CHECK: gpu.launch_func @mla_kernels::@decode_attention_split_0 blocks in (%[[ROWS]], %c4, %[[SPLITS]]) threads in ({{[^)]+}})
// CHECK-SAME: args(%[[Q]] : memref<?x?x16x576xbf16>, %[[CACHE]] : memref<?x64x576xbf16>, %[[BT]] : memref<?x?xi32>, %[[LENS]] : memref<?xi32>, %[[NS]] : memref<?xi32>, %[[SO]] : memref<?x?x16x?x512xf32>, %[[SL]] : memref<?x?x16x?xf32>, %[[O]] : memref<?x?x16x512xbf16>, %[[LSE]] : memref<?x16x?xf32>)
// CHECK-NOT: gpu.{{(de)?}}alloc
// CHECK: gpu.launch_func @mla_kernels::@decode_attention_combine_narrow_1 blocks in (%{{.+}}, %c4{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}})
// CHECK-SAME: args(%[[NS]] : memref<?xi32>, %[[SO]] : memref<?x?x16x?x512xf32>, %[[SL]] : memref<?x?x16x?xf32>, %[[O]] : memref<?x?x16x512xbf16>, %[[LSE]] : memref<?x16x?xf32>)
// CHECK: gpu.launch_func @mla_kernels::@decode_attention_combine_2 blocks in (%{{.+}}, %c16, %c4{{(_[0-9]+)?}})
// CHECK-SAME: args(%[[NS]] : memref<?xi32>, %[[SO]] : memref<?x?x16x?x512xf32>, %[[SL]] : memref<?x?x16x?xf32>, %[[O]] : memref<?x?x16x512xbf16>, %[[LSE]] : memref<?x16x?xf32>)
// CHECK-NOT: gpu.{{(de)?}}alloc
// CHECK: return
// The split kernel: n = clamp(num_splits[req], 1, S); splits >= n exit.
// CHECK: gpu.func @decode_attention_split_0(%{{.+}}: memref<?x?x16x576xbf16>, %{{.+}}: memref<?x64x576xbf16>, %{{.+}}: memref<?x?xi32>, %[[KLENS:.+]]: memref<?xi32>, %[[KNS:.+]]: memref<?xi32>, %[[KSO:.+]]: memref<?x?x16x?x512xf32>, %[[KSL:.+]]: memref<?x?x16x?xf32>, %{{.+}}: memref<?x?x16x512xbf16>, %{{.+}}: memref<?x16x?xf32>)
// CHECK: %[[REQ:.+]] = arith.divui %{{.+}}, %{{.+}} : index
// CHECK: %[[SPLIT:.+]] = gpu.block_id z
// CHECK: %[[HEAD_OK:.+]] = arith.cmpi slt, %{{.+}}, %c16 : index
// CHECK: %[[S:.+]] = memref.dim %[[KSL]], %c3 : memref<?x?x16x?xf32>
// CHECK: %[[NRAW:.+]] = memref.load %[[KNS]][%[[REQ]]] : memref<?xi32>
// CHECK: %[[NIDX:.+]] = arith.index_cast %[[NRAW]] : i32 to index
// CHECK: %[[NLO:.+]] = arith.maxsi %[[NIDX]], %c1{{(_[0-9]+)?}} : index
// CHECK: %[[N:.+]] = arith.minsi %[[NLO]], %[[S]] : index
// CHECK: %[[SPLIT_OK:.+]] = arith.cmpi slt, %[[SPLIT]], %[[N]] : index
// CHECK: %[[OK:.+]] = arith.andi %[[HEAD_OK]], %[[SPLIT_OK]] : i1
// CHECK: scf.if %[[OK]] {
// Blocks of 64 tokens dealt out: base = blocks / n, rem = blocks % n,
// first block = split * base + min(split, rem).
// CHECK: %[[BLOCKS:.+]] = arith.ceildivsi %{{.+}}, %c64{{(_[0-9]+)?}} : index
// CHECK: %[[BASE:.+]] = arith.divui %[[BLOCKS]], %[[N]] : index
// CHECK: %[[REM:.+]] = arith.remui %[[BLOCKS]], %[[N]] : index
// CHECK: %[[LOW:.+]] = arith.minsi %[[SPLIT]], %[[REM]] : index
// CHECK: %[[FB0:.+]] = arith.muli %[[SPLIT]], %[[BASE]] : index
// CHECK: %[[FB:.+]] = arith.addi %[[FB0]], %[[LOW]] : index
// CHECK: %[[LONGER:.+]] = arith.cmpi slt, %[[SPLIT]], %[[REM]] : index
// CHECK: %[[EXTRA:.+]] = arith.select %[[LONGER]], %c1{{(_[0-9]+)?}}, %c0{{(_[0-9]+)?}} : index
// CHECK: %[[EB0:.+]] = arith.addi %[[FB]], %[[BASE]] : index
// CHECK: %[[EB:.+]] = arith.addi %[[EB0]], %[[EXTRA]] : index
// CHECK: %[[FIRST:.+]] = arith.muli %[[FB]], %c64{{(_[0-9]+)?}} : index
// CHECK: %[[LAST:.+]] = arith.muli %[[EB]], %c64{{(_[0-9]+)?}} : index
// CHECK: scf.for %{{.+}} = %[[FIRST]] to %{{.+}} step
// One split (n = 1): out and lse; else the partials.
// CHECK: %[[SINGLE:.+]] = arith.cmpi eq, %{{.+}}, %c1{{(_[0-9]+)?}} : index
// CHECK: scf.if %[[SINGLE]] {
// CHECK: } else {
// CHECK: memref.store %{{.+}}, %[[KSO]][%[[REQ]], %{{.+}}, %{{.+}}, %[[SPLIT]], %{{.+}}] : memref<?x?x16x?x512xf32>
// CHECK: memref.store %{{.+}}, %[[KSL]][%[[REQ]], %{{.+}}, %{{.+}}, %[[SPLIT]]] : memref<?x?x16x?xf32>
// CHECK: gpu.return
// The combine kernels: the first n partials only, and nothing for n = 1.
// CHECK: gpu.func @decode_attention_combine_narrow_1(%{{.+}}: memref<?xi32>
// CHECK: gpu.func @decode_attention_combine_2(%[[CNS:.+]]: memref<?xi32>, %{{.+}}: memref<?x?x16x?x512xf32>, %[[CSL:.+]]: memref<?x?x16x?xf32>, %{{.+}}: memref<?x?x16x512xbf16>, %{{.+}}: memref<?x16x?xf32>)
// CHECK: %[[CS:.+]] = memref.dim %[[CSL]], %c3 : memref<?x?x16x?xf32>
// CHECK: %[[CRAW:.+]] = memref.load %[[CNS]][%{{.+}}] : memref<?xi32>
// CHECK: %[[CIDX:.+]] = arith.index_cast %[[CRAW]] : i32 to index
// CHECK: %[[CLO:.+]] = arith.maxsi %[[CIDX]], %c1{{(_[0-9]+)?}} : index
// CHECK: %[[CN:.+]] = arith.minsi %[[CLO]], %[[CS]] : index
// CHECK: %[[CMERGES:.+]] = arith.cmpi ne, %[[CN]], %c1{{(_[0-9]+)?}} : index
// CHECK: scf.if %[[CMERGES]] {
// Each warp steps through its splits, 8 at a time (16-byte loads, then
// element by element).
// CHECK: scf.for %{{.+}} = %{{.+}} to %[[CN]] step %c64
// CHECK: scf.for %{{.+}} = %{{.+}} to %[[CN]] step %c64
// CHECK: gpu.return
func.func @decode_scheduled(%q: memref<?x?x16x576xbf16>, %cache: memref<?x64x576xbf16>,
                            %bt: memref<?x?xi32>, %lens: memref<?xi32>,
                            %ns: memref<?xi32>, %so: memref<?x?x16x?x512xf32>, %sl: memref<?x?x16x?xf32>,
                            %o: memref<?x?x16x512xbf16>, %lse: memref<?x16x?xf32>) {
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<?x?x16x576xbf16>, memref<?x64x576xbf16>, memref<?x?xi32>, memref<?xi32>)
      splits(%ns, %so, %sl : memref<?xi32>, memref<?x?x16x?x512xf32>, memref<?x?x16x?xf32>)
      outs(%o, %lse : memref<?x?x16x512xbf16>, memref<?x16x?xf32>)
      {num_heads = 16 : i64, kv_lora_rank = 512 : i64, rope_dim = 64 : i64, block_size = 64 : i64,
       cache_dtype = bf16, softmax_scale = 0.0722 : f32, causal}
  return
}

// -----

// Merge: 16 lanes per (token, head) row (8 rows per block), each moving
// 16-byte vectors of the head dim when every base is 16-byte aligned (a
// uniform run-time check) and single elements otherwise; with and without
// the merged lse.
// CHECK: module attributes {gpu.container_module, mla.target = {chip = "sm_90a", ptx_features = "+ptx80", strategy = "generic"}} {
// CHECK-LABEL: func.func @merge(
// CHECK-SAME: %[[PO:[a-z0-9]+]]: memref<?x16x128xf16>, %[[PL:[a-z0-9]+]]: memref<16x?xf32>, %[[SO:[a-z0-9]+]]: memref<?x16x128xf16>, %[[SL:[a-z0-9]+]]: memref<16x?xf32>,
// CHECK-SAME: %[[O:[a-z0-9]+]]: memref<?x16x128xf16>, %[[OL:[a-z0-9]+]]: memref<16x?xf32>)
// CHECK-NOT: {{^ *mla\.}}
// CHECK: %[[T:.+]] = memref.dim %[[O]], %c0 : memref<?x16x128xf16>
// CHECK: %[[N:.+]] = memref.dim %[[O]], %c1 : memref<?x16x128xf16>
// CHECK: %[[ROWS:.+]] = arith.muli %[[T]], %[[N]] : index
// CHECK: %[[BLOCKS:.+]] = arith.ceildivsi %[[ROWS]], %c8 : index
// CHECK: gpu.launch_func @mla_kernels::@merge_attn_states_0 blocks in (%[[BLOCKS]], %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) threads in (%c128, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}})
// CHECK-SAME: args(%[[PO]] : memref<?x16x128xf16>, %[[PL]] : memref<16x?xf32>, %[[SO]] : memref<?x16x128xf16>, %[[SL]] : memref<16x?xf32>, %[[O]] : memref<?x16x128xf16>, %[[OL]] : memref<16x?xf32>)
// CHECK: gpu.launch_func @mla_kernels::@merge_attn_states_1 blocks in
// CHECK-SAME: args(%[[PO]] : memref<?x16x128xf16>, %[[PL]] : memref<16x?xf32>, %[[SO]] : memref<?x16x128xf16>, %[[SL]] : memref<16x?xf32>, %[[O]] : memref<?x16x128xf16>)
// CHECK-NEXT: return
// CHECK: gpu.module @mla_kernels [#nvvm.target<O = 1, chip = "sm_90a", features = "+ptx80">] {
// CHECK-NEXT: gpu.func @merge_attn_states_0(%[[KPO:.+]]: memref<?x16x128xf16>, %{{.+}}: memref<16x?xf32>, %{{.+}}: memref<?x16x128xf16>, %{{.+}}: memref<16x?xf32>, %[[KO:.+]]: memref<?x16x128xf16>, %[[KOL:.+]]: memref<16x?xf32>) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
// CHECK-NOT: gpu.shuffle
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// CHECK: llvm.call_intrinsic "llvm.nvvm.lg2.approx.ftz.f"
// CHECK: memref.extract_aligned_pointer_as_index %[[KPO]]
// CHECK: arith.remui %{{.+}}, %c16{{(_[0-9]+)?}} : index
// CHECK: scf.if %{{.+}} {
// CHECK: scf.if %{{.+}} {
// CHECK: scf.for %{{.+}} = %{{.+}} to %c128{{(_[0-9]+)?}} step %c128{{(_[0-9]+)?}} {
// CHECK: vector.load %[[KPO]][{{.+}}] {alignment = 16 : i64} : memref<?x16x128xf16>, vector<8xf16>
// CHECK: vector.store %{{.+}}, %[[KO]][{{.+}}] {alignment = 16 : i64} : memref<?x16x128xf16>, vector<8xf16>
// CHECK: } else {
// CHECK: scf.for %{{.+}} = %{{.+}} to %c128{{(_[0-9]+)?}} step %c16{{(_[0-9]+)?}} {
// CHECK: memref.store %{{.+}}, %[[KO]]
// CHECK: gpu.barrier
// CHECK: memref.store %{{.+}}, %[[KOL]][%{{.+}}, %{{.+}}] : memref<16x?xf32>
// CHECK: gpu.return
// CHECK: gpu.func @merge_attn_states_1({{.+}}, %{{.+}}: memref<?x16x128xf16>) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
// CHECK-NOT: gpu.barrier
// CHECK: gpu.return
func.func @merge(%po: memref<?x16x128xf16>, %pl: memref<16x?xf32>,
                 %so: memref<?x16x128xf16>, %sl: memref<16x?xf32>,
                 %o: memref<?x16x128xf16>, %ol: memref<16x?xf32>) {
  mla.merge_attn_states ins(%po, %pl, %so, %sl : memref<?x16x128xf16>, memref<16x?xf32>, memref<?x16x128xf16>, memref<16x?xf32>)
      outs(%o, %ol : memref<?x16x128xf16>, memref<16x?xf32>)
  mla.merge_attn_states ins(%po, %pl, %so, %sl : memref<?x16x128xf16>, memref<16x?xf32>, memref<?x16x128xf16>, memref<16x?xf32>)
      outs(%o : memref<?x16x128xf16>)
  return
}

// -----

// Gather: one request per block along x, its rows over the blocks along y
// (a block per 16 workspace rows, at most max(32, ceil(1024 / requests)))
// and the blocks' 4 warps; a warp moves 4 rows at a time as one run of 288
// 16-byte vectors (9 full warp-wide passes: each lane's 9 loads first, then
// its 9 stores), or row by row, element by element, when a base is not
// 16-byte aligned.
// CHECK: module attributes {gpu.container_module, mla.target = {chip = "sm_90a", ptx_features = "+ptx80", strategy = "generic"}} {
// CHECK-LABEL: func.func @gather(
// CHECK-SAME: %[[CACHE:[a-z0-9]+]]: memref<?x64x576xbf16>, %[[BT:[a-z0-9]+]]: memref<?x?xi32>, %[[CU:[a-z0-9]+]]: memref<?xi32>, %[[ST:[a-z0-9]+]]: memref<?xi32>, %[[WS:[a-z0-9]+]]: memref<?x576xbf16>)
// CHECK-NOT: {{^ *mla\.}}
// CHECK: %[[REQS:.+]] = memref.dim %[[ST]], %c0 : memref<?xi32>
// CHECK: %[[SOME_REQS:.+]] = arith.maxsi %[[REQS]], %c1 : index
// CHECK: %[[SHARE:.+]] = arith.ceildivui %c1024, %[[SOME_REQS]] : index
// CHECK: %[[MOST:.+]] = arith.maxsi %[[SHARE]], %c32 : index
// CHECK: %[[ROWS:.+]] = memref.dim %[[WS]], %{{.+}} : memref<?x576xbf16>
// CHECK: %[[BY_ROWS:.+]] = arith.ceildivsi %[[ROWS]], %c16 : index
// CHECK: %[[AT_LEAST_ONE:.+]] = arith.maxsi %[[BY_ROWS]], %{{.+}} : index
// CHECK: %[[PER_REQ:.+]] = arith.minsi %[[AT_LEAST_ONE]], %[[MOST]] : index
// CHECK: gpu.launch_func @mla_kernels::@gather_cache_0 blocks in (%[[REQS]], %[[PER_REQ]], %c1{{(_[0-9]+)?}}) threads in (%c128, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}})
// CHECK-SAME: args(%[[CACHE]] : memref<?x64x576xbf16>, %[[BT]] : memref<?x?xi32>, %[[CU]] : memref<?xi32>, %[[ST]] : memref<?xi32>, %[[WS]] : memref<?x576xbf16>)
// CHECK-NEXT: return
// CHECK: gpu.module @mla_kernels [#nvvm.target<O = 1, chip = "sm_90a", features = "+ptx80">] {
// CHECK-NEXT: gpu.func @gather_cache_0(%[[KCACHE:.+]]: memref<?x64x576xbf16>, %{{.+}}: memref<?x?xi32>, %{{.+}}: memref<?xi32>, %{{.+}}: memref<?xi32>, %[[KWS:.+]]: memref<?x576xbf16>)
// CHECK-SAME: kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
// CHECK-NOT: gpu.shuffle
// Groups of 4 rows strided over the grid's y blocks times 4 warps.
// CHECK: gpu.block_id y
// CHECK: gpu.grid_dim y
// CHECK: scf.for %{{.+}} = %{{.+}} to %{{.+}} step %{{.+}} {
// CHECK: scf.if %{{.+}} {
// CHECK-NOT: scf.for
// CHECK: arith.divui %{{.+}}, %c72
// CHECK: arith.select
// CHECK: %[[FIRST:.+]] = vector.load %[[KCACHE]][%{{.+}}, %{{.+}}, %[[C:.+]]] {alignment = 16 : i64} : memref<?x64x576xbf16>, vector<8xbf16>
// CHECK-COUNT-8: vector.load %[[KCACHE]]
// CHECK-NOT: vector.load
// CHECK: vector.store %[[FIRST]], %[[KWS]][%{{.+}}, %[[C]]] {alignment = 16 : i64} : memref<?x576xbf16>, vector<8xbf16>
// CHECK-COUNT-8: vector.store %{{.+}}, %[[KWS]]
// CHECK: } else {
// CHECK: scf.for %[[C2:.+]] = %{{.+}} to %c576 step %c32{{(_[0-9]+)?}} {
// CHECK: memref.load %[[KCACHE]][%{{.+}}, %{{.+}}, %[[C2]]] : memref<?x64x576xbf16>
// CHECK: memref.store %{{.+}}, %[[KWS]][%{{.+}}, %[[C2]]] : memref<?x576xbf16>
// CHECK-NOT: gpu.shuffle
// CHECK: gpu.return
func.func @gather(%cache: memref<?x64x576xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>,
                  %starts: memref<?xi32>, %ws: memref<?x576xbf16>) {
  mla.gather_cache ins(%cache, %bt, %cu, %starts : memref<?x64x576xbf16>, memref<?x?xi32>, memref<?xi32>, memref<?xi32>)
      outs(%ws : memref<?x576xbf16>) {block_size = 64 : i64}
  return
}

// -----

// Concat: one token per warp (4 per block), skipped for padding slots and
// slots past the cache; rows in 16-byte vectors when aligned.
// CHECK: module attributes {gpu.container_module, mla.target = {chip = "sm_90a", ptx_features = "+ptx80", strategy = "generic"}} {
// CHECK-LABEL: func.func @concat(
// CHECK-SAME: %[[KVC:[a-z0-9]+]]: memref<?x512xbf16>, %[[KPE:[a-z0-9]+]]: memref<?x64xbf16>, %[[SLOTS:[a-z0-9]+]]: memref<?xi64>, %[[CACHE:[a-z0-9]+]]: memref<?x64x576xbf16>)
// CHECK-NOT: {{^ *mla\.}}
// CHECK: %[[T:.+]] = memref.dim %[[SLOTS]], %c0 : memref<?xi64>
// CHECK: %[[BLOCKS:.+]] = arith.ceildivsi %[[T]], %c4 : index
// CHECK: gpu.launch_func @mla_kernels::@concat_and_cache_0 blocks in (%[[BLOCKS]], %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) threads in (%c128, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}})
// CHECK-SAME: args(%[[KVC]] : memref<?x512xbf16>, %[[KPE]] : memref<?x64xbf16>, %[[SLOTS]] : memref<?xi64>, %[[CACHE]] : memref<?x64x576xbf16>)
// CHECK-NEXT: return
// CHECK: gpu.module @mla_kernels [#nvvm.target<O = 1, chip = "sm_90a", features = "+ptx80">] {
// CHECK-NEXT: gpu.func @concat_and_cache_0(%{{.+}}: memref<?x512xbf16>, %{{.+}}: memref<?x64xbf16>, %{{.+}}: memref<?xi64>, %[[KCACHE:.+]]: memref<?x64x576xbf16>)
// CHECK-SAME: kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
// CHECK-NOT: gpu.shuffle
// CHECK: %[[SLOT:.+]] = arith.index_cast %{{.+}} : i64 to index
// CHECK-DAG: arith.cmpi slt, %[[SLOT]], %{{.+}} : index
// CHECK-DAG: arith.cmpi sge, %[[SLOT]], %{{.+}} : index
// CHECK: scf.if
// CHECK: %[[PAGE:.+]] = arith.divui %[[SLOT]], %c64 : index
// CHECK: %[[OFF:.+]] = arith.remui %[[SLOT]], %c64 : index
// The latent part in columns [0, 512), the rope part in [512, 576).
// CHECK: scf.for %[[C:.+]] = %{{.+}} to %c512 step %c256 {
// CHECK: vector.store %{{.+}}, %[[KCACHE]][%[[PAGE]], %[[OFF]], %[[C]]] {alignment = 16 : i64}
// CHECK: } else {
// CHECK: scf.for %[[C2:.+]] = %{{.+}} to %c512 step %c32{{(_[0-9]+)?}} {
// CHECK: memref.store %{{.+}}, %[[KCACHE]][%[[PAGE]], %[[OFF]], %[[C2]]] : memref<?x64x576xbf16>
// CHECK: scf.for %[[R:.+]] = %{{.+}} to %c64{{(_[0-9]+)?}} step %c256{{(_[0-9]+)?}} {
// CHECK: %[[RC:.+]] = arith.addi %[[R]], %c512{{(_[0-9]+)?}} : index
// CHECK: vector.store %{{.+}}, %[[KCACHE]][%[[PAGE]], %[[OFF]], %[[RC]]] {alignment = 16 : i64}
// CHECK: gpu.return
func.func @concat(%kvc: memref<?x512xbf16>, %kpe: memref<?x64xbf16>, %slots: memref<?xi64>,
                  %cache: memref<?x64x576xbf16>) {
  mla.concat_and_cache ins(%kvc, %kpe, %slots : memref<?x512xbf16>, memref<?x64xbf16>, memref<?xi64>)
      outs(%cache : memref<?x64x576xbf16>)
      {kv_lora_rank = 512 : i64, rope_dim = 64 : i64, block_size = 64 : i64, cache_dtype = bf16}
  return
}

// -----

// The up-projections: a block owns 128 output columns of one head for 8
// tokens. kv_up_proj: 256 columns (128 key, 128 value) in 2 tiles.
// CHECK: module attributes {gpu.container_module, mla.target = {chip = "sm_90a", ptx_features = "+ptx80", strategy = "generic"}} {
// CHECK-LABEL: func.func @kv_up_proj(
// CHECK-SAME: %[[KVC:[a-z0-9]+]]: memref<?x512xbf16>, %[[KPE:[a-z0-9]+]]: memref<?x64xbf16>, %[[W:[a-z0-9]+]]: memref<512x16x256xbf16>,
// CHECK-SAME: %[[K:[a-z0-9]+]]: memref<?x16x192xbf16>, %[[V:[a-z0-9]+]]: memref<?x16x128xbf16>)
// CHECK-NOT: {{^ *mla\.}}
// CHECK: %[[T:.+]] = memref.dim %[[KVC]], %c0 : memref<?x512xbf16>
// CHECK: %[[TB:.+]] = arith.ceildivsi %[[T]], %c8 : index
// CHECK: gpu.launch_func @mla_kernels::@kv_up_proj_0 blocks in (%[[TB]], %c16, %c2) threads in (%c128, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}})
// CHECK-SAME: args(%[[KVC]] : memref<?x512xbf16>, %[[KPE]] : memref<?x64xbf16>, %[[W]] : memref<512x16x256xbf16>, %[[K]] : memref<?x16x192xbf16>, %[[V]] : memref<?x16x128xbf16>)
// CHECK-NEXT: return
// CHECK: gpu.module @mla_kernels [#nvvm.target<O = 1, chip = "sm_90a", features = "+ptx80">] {
// CHECK-NEXT: gpu.func @kv_up_proj_0(%{{.+}}: memref<?x512xbf16>, %{{.+}}: memref<?x64xbf16>, %{{.+}}: memref<512x16x256xbf16>, %[[KK:.+]]: memref<?x16x192xbf16>, %[[KV:.+]]: memref<?x16x128xbf16>)
// CHECK-SAME: kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
// CHECK-NOT: gpu.shuffle
// One accumulator per token over the 512 latent rows.
// CHECK: scf.for %{{.+}} = %{{.+}} to %c512 step %{{.+}} iter_args({{.+}}) -> (f32, f32, f32, f32, f32, f32, f32, f32) {
// Columns below 128 go to the key, the others to the value.
// CHECK: %[[IS_KEY:.+]] = arith.cmpi slt, %{{.+}}, %c128{{(_[0-9]+)?}} : index
// CHECK-NEXT: scf.if %[[IS_KEY]] {
// CHECK: memref.store %{{.+}}, %[[KK]][{{.+}}] : memref<?x16x192xbf16>
// CHECK: } else {
// CHECK: memref.store %{{.+}}, %[[KV]][{{.+}}] : memref<?x16x128xbf16>
// The shared rope key is copied into key columns [128, 192).
// CHECK: scf.for %[[R:.+]] = %{{.+}} to %c64 step %c128{{(_[0-9]+)?}} {
// CHECK: %[[RC:.+]] = arith.addi %[[R]], %c128{{(_[0-9]+)?}} : index
// CHECK: memref.store %{{.+}}, %[[KK]][%{{.+}}, %{{.+}}, %[[RC]]] : memref<?x16x192xbf16>
// CHECK: gpu.return
func.func @kv_up_proj(%kvc: memref<?x512xbf16>, %kpe: memref<?x64xbf16>, %w: memref<512x16x256xbf16>,
                      %k: memref<?x16x192xbf16>, %v: memref<?x16x128xbf16>) {
  mla.kv_up_proj ins(%kvc, %kpe, %w : memref<?x512xbf16>, memref<?x64xbf16>, memref<512x16x256xbf16>)
      outs(%k, %v : memref<?x16x192xbf16>, memref<?x16x128xbf16>)
      {num_heads = 16 : i64, kv_lora_rank = 512 : i64, qk_nope_head_dim = 128 : i64, rope_dim = 64 : i64, v_head_dim = 128 : i64}
  return
}

// -----

// q_absorb: 512 latent columns in 4 tiles, 128 rows of depth.
// CHECK: module attributes {gpu.container_module, mla.target = {chip = "sm_90a", ptx_features = "+ptx80", strategy = "generic"}} {
// CHECK-LABEL: func.func @q_absorb(
// CHECK-SAME: %[[QN:[a-z0-9]+]]: memref<?x16x128xbf16>, %[[WUK:[a-z0-9]+]]: memref<16x128x512xbf16>, %[[QL:[a-z0-9]+]]: memref<?x16x512xbf16>)
// CHECK-NOT: {{^ *mla\.}}
// CHECK: %[[T:.+]] = memref.dim %[[QN]], %c0 : memref<?x16x128xbf16>
// CHECK: %[[TB:.+]] = arith.ceildivsi %[[T]], %c8 : index
// CHECK: gpu.launch_func @mla_kernels::@q_absorb_0 blocks in (%[[TB]], %c16, %c4) threads in (%c128, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}})
// CHECK-SAME: args(%[[QN]] : memref<?x16x128xbf16>, %[[WUK]] : memref<16x128x512xbf16>, %[[QL]] : memref<?x16x512xbf16>)
// CHECK-NEXT: return
// CHECK: gpu.module @mla_kernels [#nvvm.target<O = 1, chip = "sm_90a", features = "+ptx80">] {
// CHECK-NEXT: gpu.func @q_absorb_0(%[[KQN:.+]]: memref<?x16x128xbf16>, %[[KW:.+]]: memref<16x128x512xbf16>, %[[KQL:.+]]: memref<?x16x512xbf16>)
// CHECK-SAME: kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
// CHECK-NOT: gpu.shuffle
// Column = 128 * block_id.z + thread_id.x, clamped to 511 (tokens are on x).
// CHECK: %[[TID:.+]] = gpu.thread_id x
// CHECK: %[[BZ:.+]] = gpu.block_id z
// CHECK: %[[C0:.+]] = arith.muli %[[BZ]], %c128 : index
// CHECK: %[[COL:.+]] = arith.addi %[[C0]], %[[TID]] : index
// CHECK: %[[HEAD:.+]] = gpu.block_id y
// CHECK: %[[C:.+]] = arith.minsi %[[COL]], %c511 : index
// CHECK: scf.for %[[R:.+]] = %{{.+}} to %c128{{(_[0-9]+)?}} step %{{.+}} iter_args({{.+}}) -> (f32, f32, f32, f32, f32, f32, f32, f32) {
// CHECK: memref.load %[[KW]][%[[HEAD]], %[[R]], %[[C]]] : memref<16x128x512xbf16>
// CHECK-COUNT-8: llvm.call_intrinsic "llvm.fma.f32"
// CHECK: scf.yield
// CHECK: memref.store %{{.+}}, %[[KQL]][%{{.+}}, %[[HEAD]], %[[C]]] : memref<?x16x512xbf16>
// CHECK: gpu.return
func.func @q_absorb(%qn: memref<?x16x128xbf16>, %wuk: memref<16x128x512xbf16>, %ql: memref<?x16x512xbf16>) {
  mla.q_absorb ins(%qn, %wuk : memref<?x16x128xbf16>, memref<16x128x512xbf16>)
      outs(%ql : memref<?x16x512xbf16>)
      {num_heads = 16 : i64, qk_nope_head_dim = 128 : i64, kv_lora_rank = 512 : i64}
  return
}

// -----

// v_up_proj: 128 value columns in one tile, 512 rows of depth.
// CHECK: module attributes {gpu.container_module, mla.target = {chip = "sm_90a", ptx_features = "+ptx80", strategy = "generic"}} {
// CHECK-LABEL: func.func @v_up_proj(
// CHECK-SAME: %[[QL:[a-z0-9]+]]: memref<?x16x512xbf16>, %[[WUV:[a-z0-9]+]]: memref<16x512x128xbf16>, %[[O:[a-z0-9]+]]: memref<?x16x128xbf16>)
// CHECK-NOT: {{^ *mla\.}}
// CHECK: %[[T:.+]] = memref.dim %[[QL]], %c0 : memref<?x16x512xbf16>
// CHECK: %[[TB:.+]] = arith.ceildivsi %[[T]], %c8 : index
// CHECK: gpu.launch_func @mla_kernels::@v_up_proj_0 blocks in (%[[TB]], %c16, %c1{{(_[0-9]+)?}}) threads in (%c128, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}})
// CHECK-SAME: args(%[[QL]] : memref<?x16x512xbf16>, %[[WUV]] : memref<16x512x128xbf16>, %[[O]] : memref<?x16x128xbf16>)
// CHECK-NEXT: return
// CHECK: gpu.module @mla_kernels [#nvvm.target<O = 1, chip = "sm_90a", features = "+ptx80">] {
// CHECK-NEXT: gpu.func @v_up_proj_0(%{{.+}}: memref<?x16x512xbf16>, %{{.+}}: memref<16x512x128xbf16>, %[[KO:.+]]: memref<?x16x128xbf16>)
// CHECK-SAME: kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
// CHECK-NOT: gpu.shuffle
// CHECK: scf.for %{{.+}} = %{{.+}} to %c512 step %{{.+}} iter_args({{.+}}) -> (f32, f32, f32, f32, f32, f32, f32, f32) {
// CHECK: memref.store %{{.+}}, %[[KO]][{{.+}}] : memref<?x16x128xbf16>
// CHECK: gpu.return
func.func @v_up_proj(%ql: memref<?x16x512xbf16>, %wuv: memref<16x512x128xbf16>, %o: memref<?x16x128xbf16>) {
  mla.v_up_proj ins(%ql, %wuv : memref<?x16x512xbf16>, memref<16x512x128xbf16>)
      outs(%o : memref<?x16x128xbf16>)
      {num_heads = 16 : i64, kv_lora_rank = 512 : i64, v_head_dim = 128 : i64}
  return
}

//--- chunked.mlir

// The expanded chunked prefill: the scratch allocations become gpu.alloc;
// the chunk plan (a device buffer) is read on the host to size each chunk,
// so it is copied to a host buffer once at entry and the loads read it.
// CHUNKED-LABEL: func.func @chunked(
// CHUNKED-SAME: %[[Q:[a-z0-9]+]]: memref<?x16x192xbf16>, %[[KVC:[a-z0-9]+]]: memref<?x512xbf16>, %[[KPE:[a-z0-9]+]]: memref<?x64xbf16>,
// CHUNKED-SAME: %[[CQ:[a-z0-9]+]]: memref<?xi32>, %[[CACHE:[a-z0-9]+]]: memref<?x64x576xbf16>, %[[BT:[a-z0-9]+]]: memref<?x?xi32>,
// CHUNKED-SAME: %[[CCU:[a-z0-9]+]]: memref<?x?xi32>, %[[CST:[a-z0-9]+]]: memref<?x?xi32>, %[[W:[a-z0-9]+]]: memref<512x16x256xbf16>,
// CHUNKED-SAME: %[[WS:[a-z0-9]+]]: memref<?x576xbf16>, %[[O:[a-z0-9]+]]: memref<?x16x128xbf16>, %[[LSE:[a-z0-9]+]]: memref<16x?xf32>)
// The host copy of chunk_cu_seqlens, first thing in the function.
// CHUNKED-NEXT: %[[C0:.+]] = arith.constant 0 : index
// CHUNKED-NEXT: %[[ROWS:.+]] = memref.dim %[[CCU]], %[[C0]] : memref<?x?xi32>
// CHUNKED-NEXT: %[[C1:.+]] = arith.constant 1 : index
// CHUNKED-NEXT: %[[COLS:.+]] = memref.dim %[[CCU]], %[[C1]] : memref<?x?xi32>
// CHUNKED-NEXT: %[[HOST:.+]] = memref.alloc(%[[ROWS]], %[[COLS]]) : memref<?x?xi32>
// CHUNKED-NEXT: gpu.memcpy %[[HOST]], %[[CCU]] : memref<?x?xi32>, memref<?x?xi32>
// CHUNKED-NOT: memref.alloc
// New tokens: up-projected into device scratch, causal attention.
// CHUNKED: %[[K_NEW:.+]] = gpu.alloc (%{{.+}}) : memref<?x16x192xbf16>
// CHUNKED-NEXT: %[[V_NEW:.+]] = gpu.alloc (%{{.+}}) : memref<?x16x128xbf16>
// CHUNKED-NOT: memref.alloc
// CHUNKED: gpu.launch_func @mla_kernels::@kv_up_proj_0 {{.+}} args(%[[KVC]] : memref<?x512xbf16>, %[[KPE]] : memref<?x64xbf16>, %[[W]] : memref<512x16x256xbf16>, %[[K_NEW]] : memref<?x16x192xbf16>, %[[V_NEW]] : memref<?x16x128xbf16>)
// CHUNKED-NOT: memref.alloc
// CHUNKED: gpu.launch_func @mla_kernels::@prefill_attention_1 {{.+}} args(%[[Q]] : memref<?x16x192xbf16>, %[[K_NEW]] : memref<?x16x192xbf16>, %[[V_NEW]] : memref<?x16x128xbf16>, %[[CQ]] : memref<?xi32>, %[[CQ]] : memref<?xi32>, %[[O]] : memref<?x16x128xbf16>, %[[LSE]] : memref<16x?xf32>)
// CHUNKED-NOT: memref.alloc
// Context scratch, also on the device.
// CHUNKED: %[[K_CTX:.+]] = gpu.alloc (%{{.+}}) : memref<?x16x192xbf16>
// CHUNKED-NEXT: %[[V_CTX:.+]] = gpu.alloc (%{{.+}}) : memref<?x16x128xbf16>
// CHUNKED-NOT: alloc
// CHUNKED: scf.for %[[I:.+]] = %{{.+}} to %{{.+}} step %{{.+}} {
// The kernels get the device plan's rows ...
// CHUNKED: %[[CU_ROW:.+]] = memref.subview %[[CCU]][%[[I]], 0] [1, %{{.+}}] [1, 1]
// CHUNKED: %[[ST_ROW:.+]] = memref.subview %[[CST]][%[[I]], 0] [1, %{{.+}}] [1, 1]
// ... the host reads the chunk's total through the same view of its copy.
// CHUNKED-NOT: memref.load
// CHUNKED: %[[HOST_ROW:.+]] = memref.subview %[[HOST]][%[[I]], 0] [1, %{{.+}}] [1, 1] : memref<?x?xi32> to memref<?xi32, strided<[1], offset: ?>>
// CHUNKED-NEXT: memref.load %[[HOST_ROW]][%{{.+}}] : memref<?xi32, strided<[1], offset: ?>>
// CHUNKED-NOT: memref.load
// CHUNKED: gpu.launch_func @mla_kernels::@gather_cache_2 {{.+}} args(%[[CACHE]] : memref<?x64x576xbf16>, %[[BT]] : memref<?x?xi32>, %[[CU_ROW]] : {{.+}}, %[[ST_ROW]] : {{.+}}, %{{.+}} : memref<?x576xbf16, strided<[576, 1]>>)
// CHUNKED: gpu.launch_func @mla_kernels::@kv_up_proj_3
// The chunk's attention merges into out and lse itself: no merge kernel.
// CHUNKED: gpu.launch_func @mla_kernels::@prefill_attention_4 {{.+}} args(%[[Q]] : {{.+}}, %[[O]] : memref<?x16x128xbf16>, %[[LSE]] : memref<16x?xf32>)
// CHUNKED-NOT: merge_attn_states
// CHUNKED-NOT: memref.load
// The device scratch freed on the device, the host copy on the host.
// CHUNKED: gpu.dealloc %[[K_NEW]]
// CHUNKED-NEXT: gpu.dealloc %[[V_NEW]]
// CHUNKED-NEXT: gpu.dealloc %[[K_CTX]]
// CHUNKED-NEXT: gpu.dealloc %[[V_CTX]]
// CHUNKED-NEXT: memref.dealloc %[[HOST]] : memref<?x?xi32>
// CHUNKED-NEXT: return
// CHUNKED: gpu.module @mla_kernels [#nvvm.target<O = 1, chip = "sm_90a", features = "+ptx80">] {

// Without the expansion the composite is refused.
// COMPOSITE: chunked.mlir:[[@LINE+4]]:3: error: 'mla.chunked_prefill' op is a composite; run mla-expand-chunked-prefill first
// COMPOSITE-NOT: gpu.launch_func
// COMPOSITE-NOT: Stack dump
func.func @chunked(%q: memref<?x16x192xbf16>, %kvc: memref<?x512xbf16>, %kpe: memref<?x64xbf16>, %cq: memref<?xi32>, %cache: memref<?x64x576xbf16>, %bt: memref<?x?xi32>, %ccu: memref<?x?xi32>, %cst: memref<?x?xi32>, %w: memref<512x16x256xbf16>, %ws: memref<?x576xbf16>, %o: memref<?x16x128xbf16>, %lse: memref<16x?xf32>) {
  mla.chunked_prefill ins(%q, %kvc, %kpe, %cq : memref<?x16x192xbf16>, memref<?x512xbf16>, memref<?x64xbf16>, memref<?xi32>)
      cache(%cache, %bt : memref<?x64x576xbf16>, memref<?x?xi32>)
      chunks(%ccu, %cst : memref<?x?xi32>, memref<?x?xi32>)
      weights(%w : memref<512x16x256xbf16>)
      workspace(%ws : memref<?x576xbf16>)
      outs(%o, %lse : memref<?x16x128xbf16>, memref<16x?xf32>)
      {num_heads = 16 : i64, kv_lora_rank = 512 : i64, qk_nope_head_dim = 128 : i64, rope_dim = 64 : i64,
       v_head_dim = 128 : i64, block_size = 64 : i64, cache_dtype = bf16, softmax_scale = 0.0722 : f32}
  return
}

//--- no-target.mlir

// No mla.target: the pass does not guess a chip.
// NOTARGET: no-target.mlir:[[@LINE+1]]:1: error: convert-mla-to-gpu: the module has no 'mla.target' attribute: run mla-select-gpu-target first
module {
  func.func @no_target(%a: memref<4x2x6xf32>, %b: memref<2x6x8xf32>, %c: memref<4x2x8xf32>) {
    mla.q_absorb ins(%a, %b : memref<4x2x6xf32>, memref<2x6x8xf32>) outs(%c : memref<4x2x8xf32>) {num_heads = 2 : i64, qk_nope_head_dim = 6 : i64, kv_lora_rank = 8 : i64}
    return
  }
}

// -----

// A target naming a chip without generated code.
// NOTARGET: no-target.mlir:[[@LINE+3]]:1: error: convert-mla-to-gpu: unknown chip 'sm_75'
// NOTARGET-NOT: gpu.container_module
// NOTARGET-NOT: Stack dump
module attributes {mla.target = {chip = "sm_75", ptx_features = "+ptx70", strategy = "generic"}} {
  func.func @old_chip(%a: memref<4x2x6xf32>, %b: memref<2x6x8xf32>, %c: memref<4x2x8xf32>) {
    mla.q_absorb ins(%a, %b : memref<4x2x6xf32>, memref<2x6x8xf32>) outs(%c : memref<4x2x8xf32>) {num_heads = 2 : i64, qk_nope_head_dim = 6 : i64, kv_lora_rank = 8 : i64}
    return
  }
}
