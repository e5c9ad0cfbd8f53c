// Every mla op (the functions of Dialect/ops.mlir, chunked_prefill included)
// through mla-lower-to-gpu for each supported chip; the PTX must assemble
// with the CUDA toolkit's ptxas for that chip, use no local memory, and on
// sm_90a ptxas must report no stack frame and no spills for any kernel.
// REQUIRES: ptxas
//
// Kernels need no libdevice (fma, exp and log use NVVM intrinsics), so no
// CUDA toolkit is needed to compile them: the runs below hide any toolkit
// from the compiler, and no __nv_ function may appear in the PTX.
// RUN: env -u CUDA_HOME -u CUDA_PATH -u CUDA_ROOT mla-opt %s --mla-lower-to-gpu=chip=sm_80 --mla-print-ptx=output=%t.sm_80.ptx -o /dev/null
// RUN: %ptxas -arch=sm_80 %t.sm_80.ptx -o %t.sm_80.cubin
// RUN: FileCheck %s --check-prefixes=PTX,SM80 --implicit-check-not=.entry --implicit-check-not=__nv_ --implicit-check-not=.local < %t.sm_80.ptx
// RUN: env -u CUDA_HOME -u CUDA_PATH -u CUDA_ROOT mla-opt %s --mla-lower-to-gpu=chip=sm_86 --mla-print-ptx=output=%t.sm_86.ptx -o /dev/null
// RUN: %ptxas -arch=sm_86 %t.sm_86.ptx -o %t.sm_86.cubin
// RUN: FileCheck %s --check-prefixes=PTX,SM86 --implicit-check-not=.entry --implicit-check-not=__nv_ --implicit-check-not=.local < %t.sm_86.ptx
// RUN: env -u CUDA_HOME -u CUDA_PATH -u CUDA_ROOT mla-opt %s --mla-lower-to-gpu=chip=sm_89 --mla-print-ptx=output=%t.sm_89.ptx -o /dev/null
// RUN: %ptxas -arch=sm_89 %t.sm_89.ptx -o %t.sm_89.cubin
// RUN: FileCheck %s --check-prefixes=PTX,SM89 --implicit-check-not=.entry --implicit-check-not=__nv_ --implicit-check-not=.local < %t.sm_89.ptx
// RUN: env -u CUDA_HOME -u CUDA_PATH -u CUDA_ROOT mla-opt %s --mla-lower-to-gpu=chip=sm_90 --mla-print-ptx=output=%t.sm_90.ptx -o /dev/null
// RUN: %ptxas -arch=sm_90 %t.sm_90.ptx -o %t.sm_90.cubin
// RUN: FileCheck %s --check-prefixes=PTX,SM90 --implicit-check-not=.entry --implicit-check-not=__nv_ --implicit-check-not=.local < %t.sm_90.ptx
// RUN: env -u CUDA_HOME -u CUDA_PATH -u CUDA_ROOT mla-opt %s --mla-lower-to-gpu=chip=sm_90a --mla-print-ptx=output=%t.sm_90a.ptx -o /dev/null
// RUN: %ptxas -arch=sm_90a %t.sm_90a.ptx -o %t.sm_90a.cubin
// RUN: FileCheck %s --check-prefixes=PTX,SM90A --implicit-check-not=.entry --implicit-check-not=__nv_ --implicit-check-not=.local < %t.sm_90a.ptx
//
// Register use of every kernel: twenty-seven "Function properties" blocks, each
// with a zero stack frame and no spills; any other stack-frame line (a
// nonzero one) fails.
// RUN: %ptxas -arch=sm_90a -v %t.sm_90a.ptx -o %t.sm_90a.v.cubin 2>&1 | FileCheck %s --check-prefix=RESOURCES --implicit-check-not="bytes stack frame" --implicit-check-not=error
//
// The mma-sync strategy: the two bf16 decodes (@decode, @decode_scheduled)
// get the tensor-core split kernel, the bf16 prefills (@prefill, the
// chunked prefill's new-token and context attentions, the latter on
// strided views of scratch buffers) the tensor-core prefill kernel
// (mma.sync, ldmatrix, cp.async, dynamic shared memory), and the bf16
// up-projections (the chunked prefill's on column ranges of the workspace
// rows) the tensor-core product kernel; the f32 ones and every other op
// keep their generic kernels. On sm_80 and sm_90a ptxas must accept them with no stack
// frame and no spills.
// RUN: env -u CUDA_HOME -u CUDA_PATH -u CUDA_ROOT mla-opt %s --mla-select-gpu-target="chip=sm_80 strategy=mma-sync" --mla-lower-to-gpu=chip=sm_80 --mla-print-ptx=output=%t.mma.sm_80.ptx -o /dev/null
// RUN: FileCheck %s --check-prefixes=MMA,SM80 --implicit-check-not=.entry --implicit-check-not=__nv_ --implicit-check-not=.local < %t.mma.sm_80.ptx
// RUN: %ptxas -arch=sm_80 -v %t.mma.sm_80.ptx -o %t.mma.sm_80.cubin 2>&1 | FileCheck %s --check-prefix=RESOURCES --implicit-check-not="bytes stack frame" --implicit-check-not=error
// RUN: env -u CUDA_HOME -u CUDA_PATH -u CUDA_ROOT mla-opt %s --mla-select-gpu-target="chip=sm_90a strategy=mma-sync" --mla-lower-to-gpu=chip=sm_90a --mla-print-ptx=output=%t.mma.sm_90a.ptx -o /dev/null
// RUN: FileCheck %s --check-prefixes=MMA,SM90A --implicit-check-not=.entry --implicit-check-not=__nv_ --implicit-check-not=.local < %t.mma.sm_90a.ptx
// RUN: %ptxas -arch=sm_90a -v %t.mma.sm_90a.ptx -o %t.mma.sm_90a.cubin 2>&1 | FileCheck %s --check-prefix=RESOURCES --implicit-check-not="bytes stack frame" --implicit-check-not=error
//
// The wgmma strategy (sm_90a): the bf16 and f16 decodes of 16 and 128
// heads get the wgmma split kernel, everything else is as with mma-sync. ptxas must accept it
// with no stack frame, no spills and no "Potential Performance Loss"
// (wgmma serialized because other instructions touch its accumulators).
// RUN: env -u CUDA_HOME -u CUDA_PATH -u CUDA_ROOT mla-opt %s --mla-select-gpu-target="chip=sm_90a strategy=wgmma" --mla-lower-to-gpu=chip=sm_90a --mla-print-ptx=output=%t.wgmma.ptx -o /dev/null
// RUN: FileCheck %s --check-prefix=WGMMA --implicit-check-not=.entry --implicit-check-not=__nv_ --implicit-check-not=.local < %t.wgmma.ptx
// RUN: %ptxas -arch=sm_90a -v %t.wgmma.ptx -o %t.wgmma.cubin 2>&1 | FileCheck %s --check-prefix=RESOURCES-WGMMA --implicit-check-not="bytes stack frame" --implicit-check-not=error --implicit-check-not="Performance Loss"

// The only libdevice function is fmaf, declared extern and called.

// SM80: {{^}}.version 7.0{{$}}
// SM80-NEXT: {{^}}.target sm_80{{$}}
// SM86: {{^}}.version 7.1{{$}}
// SM86-NEXT: {{^}}.target sm_86{{$}}
// SM89: {{^}}.version 7.8{{$}}
// SM89-NEXT: {{^}}.target sm_89{{$}}
// SM90: {{^}}.version 7.8{{$}}
// SM90-NEXT: {{^}}.target sm_90{{$}}
// SM90A: {{^}}.version 8.0{{$}}
// SM90A-NEXT: {{^}}.target sm_90a{{$}}

// One entry per kernel, in the order the ops appear (a decode has two
// combine kernels, the host launching one by its split count); nothing
// else is an entry.
// PTX: {{^}}.visible .entry prefill_attention_0(
// PTX: {{^}}.visible .entry prefill_attention_1(
// PTX: {{^}}.visible .entry decode_attention_split_2(
// PTX: {{^}}.visible .entry decode_attention_combine_narrow_3(
// PTX: {{^}}.visible .entry decode_attention_combine_4(
// PTX: {{^}}.visible .entry decode_attention_split_5(
// PTX: {{^}}.visible .entry decode_attention_combine_narrow_6(
// PTX: {{^}}.visible .entry decode_attention_combine_7(
// PTX: {{^}}.visible .entry decode_attention_split_8(
// PTX: {{^}}.visible .entry decode_attention_combine_narrow_9(
// PTX: {{^}}.visible .entry decode_attention_combine_10(
// PTX: {{^}}.visible .entry decode_attention_split_11(
// PTX: {{^}}.visible .entry decode_attention_combine_narrow_12(
// PTX: {{^}}.visible .entry decode_attention_combine_13(
// PTX: {{^}}.visible .entry merge_attn_states_14(
// PTX: {{^}}.visible .entry merge_attn_states_15(
// PTX: {{^}}.visible .entry gather_cache_16(
// PTX: {{^}}.visible .entry concat_and_cache_17(
// PTX: {{^}}.visible .entry kv_up_proj_18(
// PTX: {{^}}.visible .entry q_absorb_19(
// PTX: {{^}}.visible .entry v_up_proj_20(
// PTX: {{^}}.visible .entry q_absorb_21(
// PTX: {{^}}.visible .entry kv_up_proj_22(
// PTX: {{^}}.visible .entry prefill_attention_23(
// PTX: {{^}}.visible .entry gather_cache_24(
// PTX: {{^}}.visible .entry kv_up_proj_25(
// PTX: {{^}}.visible .entry prefill_attention_26(

// With mma-sync, the same kernels but for the bf16 decode split kernels,
// prefills and up-projections (a four-stage ring: two groups in flight
// besides the slice waited for). The dynamic shared memory the tensor-core kernels address
// (1 byte of static shared memory standing for the dynamic region after
// it, declared in the kernel's body: each kernel is a PTX module of its
// own). The prefill asks for two blocks per SM (registers up to 255).
// MMA: {{^}}.visible .entry prefill_attention_mma_0(
// MMA: {{^}}.minnctapersm 2
// MMA: .shared .align 16 .b8 __dynamic_shmem__0;
// MMA-DAG: cp.async.cg.shared.global [{{.+}}], [{{.+}}], 16, {{.+}};
// MMA-DAG: cp.async.wait_group 1;
// MMA-DAG: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// MMA-DAG: ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16
// MMA-DAG: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// MMA: {{^}}.visible .entry prefill_attention_mma_1(
// MMA: {{^}}.visible .entry decode_attention_split_mma_2(
// MMA-DAG: cp.async.cg.shared.global [{{.+}}], [{{.+}}], 16, {{.+}};
// MMA-DAG: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// MMA-DAG: ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16
// MMA-DAG: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// MMA-DAG: ex2.approx.ftz.f32
// MMA: {{^}}.visible .entry decode_attention_combine_narrow_3(
// MMA: {{^}}.visible .entry decode_attention_combine_4(
// MMA: {{^}}.visible .entry decode_attention_split_5(
// MMA: {{^}}.visible .entry decode_attention_combine_narrow_6(
// MMA: {{^}}.visible .entry decode_attention_combine_7(
// MMA: {{^}}.visible .entry decode_attention_split_mma_8(
// MMA: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// MMA: {{^}}.visible .entry decode_attention_combine_narrow_9(
// MMA: {{^}}.visible .entry decode_attention_combine_10(
// MMA: {{^}}.visible .entry decode_attention_split_11(
// MMA: {{^}}.visible .entry decode_attention_combine_narrow_12(
// MMA: {{^}}.visible .entry decode_attention_combine_13(
// MMA: {{^}}.visible .entry merge_attn_states_14(
// MMA: {{^}}.visible .entry merge_attn_states_15(
// MMA: {{^}}.visible .entry gather_cache_16(
// MMA: {{^}}.visible .entry concat_and_cache_17(
// MMA: {{^}}.visible .entry kv_up_proj_mma_18(
// MMA: .shared .align 16 .b8 __dynamic_shmem__0;
// MMA-DAG: cp.async.cg.shared.global [{{.+}}], [{{.+}}], 16, {{.+}};
// MMA-DAG: cp.async.wait_group 2;
// MMA-DAG: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// MMA-DAG: ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16
// MMA-DAG: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// MMA-DAG: st.global.v4.b32 [{{.+}}], {{{.+}}};
// MMA: {{^}}.visible .entry q_absorb_mma_19(
// MMA: {{^}}.visible .entry v_up_proj_mma_20(
// MMA: {{^}}.visible .entry q_absorb_21(
// MMA: {{^}}.visible .entry kv_up_proj_mma_22(
// MMA: {{^}}.visible .entry prefill_attention_mma_23(
// MMA: {{^}}.visible .entry gather_cache_24(
// MMA: {{^}}.visible .entry kv_up_proj_mma_25(
// MMA: {{^}}.visible .entry prefill_attention_mma_26(

// With wgmma, the bf16 prefills: two consumer warpgroups (setmaxnreg up
// to 232), scores of 128-key tiles by m64n128k16 wgmma from shared memory,
// PV by register-A m64n128k16 (P in registers, B N-major:
// ptxas-register-a.mlir); a producer warpgroup (down to 40) copies the K
// and V tiles into two-stage cp.async rings, each tile announced on an
// mbarrier the consumers wait on. The decodes' split kernels: two
// warpgroups, scores by m64n32k16 and PV by m64n256k16 (B N-major) wgmma
// from shared memory, made visible to them by fence.proxy.async; the
// results staged in shared memory and copied out in 16-byte stores.
// WGMMA: {{^}}.visible .entry prefill_attention_wgmma_0(
// WGMMA: {{^}}.maxntid 384, 1, 1
// WGMMA-DAG: setmaxnreg.inc.sync.aligned.u32 232;
// WGMMA-DAG: setmaxnreg.dec.sync.aligned.u32 40;
// WGMMA-DAG: cp.async.cg.shared.global [{{.+}}], [{{.+}}], 16, {{.+}};
// WGMMA-DAG: cp.async.mbarrier.arrive.noinc.shared.b64
// WGMMA-DAG: mbarrier.try_wait.parity.shared.b64
// WGMMA-DAG: fence.proxy.async.shared::cta;
// WGMMA-DAG: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.+}} p, 1, 1, 0, 0;
// P V with P in registers: A as four 32-bit registers, scale-d 1, trans-b 1.
// WGMMA-DAG: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{{.+}}}, {{{%r[0-9]+}}, {{%r[0-9]+}}, {{%r[0-9]+}}, {{%r[0-9]+}}}, {{%rd[0-9]+}}, 1, 1, 1, 1;
// WGMMA-DAG: wgmma.wait_group.sync.aligned 0;
// WGMMA: {{^}}.visible .entry prefill_attention_1(
// WGMMA: {{^}}.visible .entry prefill_attention_wgmma_2(
// WGMMA: {{^}}.visible .entry prefill_attention_3(
// The 128-head decode over 64-token pages loads its KV tiles by tensor
// copies (TMA), counted by mbarriers.
// WGMMA: {{^}}.visible .entry decode_attention_split_wgmma_tma_4(
// WGMMA: {{^}}.maxntid 256, 1, 1
// WGMMA-DAG: cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [{{.+}}], [{{.+}}, {{{.+}}, {{.+}}}], [{{.+}}];
// WGMMA-DAG: mbarrier.arrive.expect_tx.shared.b64
// WGMMA-DAG: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.+}} p, 1, 1, 0, 0;
// WGMMA-DAG: wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {{.+}} p, 1, 1, 0, 1;
// WGMMA: {{^}}.visible .entry decode_attention_split_5(
// WGMMA: {{^}}.visible .entry decode_attention_combine_narrow_6(
// WGMMA: {{^}}.visible .entry decode_attention_combine_7(
// WGMMA: {{^}}.visible .entry decode_attention_split_8(
// WGMMA: {{^}}.visible .entry decode_attention_combine_narrow_9(
// WGMMA: {{^}}.visible .entry decode_attention_combine_10(
// WGMMA: {{^}}.visible .entry decode_attention_split_wgmma_11(
// WGMMA: {{^}}.maxntid 256, 1, 1
// WGMMA-DAG: cp.async.cg.shared.global [{{.+}}], [{{.+}}], 16, {{.+}};
// WGMMA-DAG: fence.proxy.async.shared::cta;
// WGMMA-DAG: wgmma.fence.sync.aligned;
// WGMMA-DAG: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.+}} p, 1, 1, 0, 0;
// WGMMA-DAG: bar.arrive {{%r[0-9]+}}, {{%r[0-9]+}};
// WGMMA-DAG: wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {{.+}} p, 1, 1, 0, 1;
// WGMMA-DAG: wgmma.commit_group.sync.aligned;
// WGMMA-DAG: wgmma.wait_group.sync.aligned 0;
// WGMMA-DAG: st.global.v4.b32 [{{.+}}], {{{.+}}};
// WGMMA: {{^}}.visible .entry decode_attention_split_12(
// WGMMA: {{^}}.visible .entry decode_attention_combine_narrow_13(
// WGMMA: {{^}}.visible .entry decode_attention_combine_14(
// WGMMA: {{^}}.visible .entry decode_attention_split_15(
// WGMMA: {{^}}.visible .entry decode_attention_combine_narrow_16(
// WGMMA: {{^}}.visible .entry decode_attention_combine_17(
// WGMMA: {{^}}.visible .entry merge_attn_states_18(
// WGMMA: {{^}}.visible .entry merge_attn_states_19(
// WGMMA: {{^}}.visible .entry gather_cache_20(
// WGMMA: {{^}}.visible .entry concat_and_cache_21(
// WGMMA: {{^}}.visible .entry kv_up_proj_wgmma_22(
// WGMMA-DAG: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.+}} p, 1, 1, 0, 1;
// WGMMA-DAG: cp.async.wait_group 1;
// WGMMA: {{^}}.visible .entry q_absorb_mma_23(
// WGMMA: {{^}}.visible .entry v_up_proj_mma_24(
// WGMMA: {{^}}.visible .entry q_absorb_25(
// WGMMA: {{^}}.visible .entry kv_up_proj_wgmma_26(
// WGMMA: {{^}}.visible .entry prefill_attention_wgmma_27(
// WGMMA: {{^}}.visible .entry prefill_attention_28(
// WGMMA: {{^}}.visible .entry gather_cache_29(
// WGMMA: {{^}}.visible .entry kv_up_proj_wgmma_30(
// WGMMA: {{^}}.visible .entry prefill_attention_wgmma_31(
// WGMMA: {{^}}.visible .entry prefill_attention_32(

// RESOURCES-COUNT-27: {{^}}    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads{{$}}
// With wgmma, 33 kernels: each wgmma prefill and decode split kernel
// comes with the generic one its launch takes for misaligned operands.
// RESOURCES-WGMMA-COUNT-33: {{^}}    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads{{$}}

func.func @prefill(%q: memref<?x16x192xbf16>, %k: memref<?x16x192xbf16>,
                   %v: memref<?x16x128xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>,
                   %o: memref<?x16x128xbf16>, %lse: memref<16x?xf32>) {
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<?x16x192xbf16>, memref<?x16x192xbf16>, memref<?x16x128xbf16>, memref<?xi32>, memref<?xi32>)
      outs(%o, %lse : memref<?x16x128xbf16>, memref<16x?xf32>)
      {num_heads = 16 : i64, qk_head_dim = 192 : i64, v_head_dim = 128 : i64, softmax_scale = 0.0722 : f32, causal}
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<?x16x192xbf16>, memref<?x16x192xbf16>, memref<?x16x128xbf16>, memref<?xi32>, memref<?xi32>)
      outs(%o, %lse : memref<?x16x128xbf16>, memref<16x?xf32>)
      {num_heads = 16 : i64, qk_head_dim = 192 : i64, v_head_dim = 128 : i64, softmax_scale = 0.0722 : f32}
  return
}

func.func @decode(%q: memref<?x?x128x576xbf16>, %cache: memref<?x64x576xbf16>,
                  %bt: memref<?x?xi32>, %lens: memref<?xi32>,
                  %o: memref<?x?x128x512xbf16>, %lse: memref<?x128x?xf32>) {
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<?x?x128x576xbf16>, memref<?x64x576xbf16>, memref<?x?xi32>, memref<?xi32>)
      outs(%o, %lse : memref<?x?x128x512xbf16>, memref<?x128x?xf32>)
      {num_heads = 128 : i64, kv_lora_rank = 512 : i64, rope_dim = 64 : i64, block_size = 64 : i64,
       cache_dtype = bf16, softmax_scale = 0.0722 : f32, causal}
  return
}

// Mixed precision: f32 activations over an f16 cache.
func.func @decode_f16_cache(%q: memref<2x1x16x576xf32>, %cache: memref<10x16x576xf16>,
                            %bt: memref<2x5xi32>, %lens: memref<2xi32>,
                            %o: memref<2x1x16x512xf32>, %lse: memref<2x16x1xf32>) {
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x16x576xf32>, memref<10x16x576xf16>, memref<2x5xi32>, memref<2xi32>)
      outs(%o, %lse : memref<2x1x16x512xf32>, memref<2x16x1xf32>)
      {num_heads = 16 : i64, kv_lora_rank = 512 : i64, rope_dim = 64 : i64, block_size = 16 : i64,
       cache_dtype = f16, softmax_scale = 0.0722 : f32}
  return
}

// With a split-KV schedule: the caller's split counts and workspaces.
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

func.func @decode_scheduled_static(%q: memref<2x1x16x576xf32>, %cache: memref<10x16x576xf16>,
                                   %bt: memref<2x5xi32>, %lens: memref<2xi32>,
                                   %ns: memref<2xi32>, %so: memref<2x1x16x7x512xf32>, %sl: memref<2x1x16x7xf32>,
                                   %o: memref<2x1x16x512xf32>, %lse: memref<2x16x1xf32>) {
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<2x1x16x576xf32>, memref<10x16x576xf16>, memref<2x5xi32>, memref<2xi32>)
      splits(%ns, %so, %sl : memref<2xi32>, memref<2x1x16x7x512xf32>, memref<2x1x16x7xf32>)
      outs(%o, %lse : memref<2x1x16x512xf32>, memref<2x16x1xf32>)
      {num_heads = 16 : i64, kv_lora_rank = 512 : i64, rope_dim = 64 : i64, block_size = 16 : i64,
       cache_dtype = f16, softmax_scale = 0.0722 : f32}
  return
}

func.func @merge(%po: memref<?x16x128xf16>, %pl: memref<16x?xf32>,
                 %so: memref<?x16x128xf16>, %sl: memref<16x?xf32>,
                 %o: memref<?x16x128xf16>, %ol: memref<16x?xf32>) {
  mla.merge_attn_states ins(%po, %pl, %so, %sl : memref<?x16x128xf16>, memref<16x?xf32>, memref<?x16x128xf16>, memref<16x?xf32>)
      outs(%o, %ol : memref<?x16x128xf16>, memref<16x?xf32>)
  mla.merge_attn_states ins(%po, %pl, %so, %sl : memref<?x16x128xf16>, memref<16x?xf32>, memref<?x16x128xf16>, memref<16x?xf32>)
      outs(%o : memref<?x16x128xf16>)
  return
}

func.func @cache_ops(%cache: memref<?x64x576xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>,
                     %starts: memref<?xi32>, %ws: memref<?x576xbf16>,
                     %kvc: memref<?x512xbf16>, %kpe: memref<?x64xbf16>, %slots: memref<?xi64>) {
  mla.gather_cache ins(%cache, %bt, %cu, %starts : memref<?x64x576xbf16>, memref<?x?xi32>, memref<?xi32>, memref<?xi32>)
      outs(%ws : memref<?x576xbf16>) {block_size = 64 : i64}
  mla.concat_and_cache ins(%kvc, %kpe, %slots : memref<?x512xbf16>, memref<?x64xbf16>, memref<?xi64>)
      outs(%cache : memref<?x64x576xbf16>)
      {kv_lora_rank = 512 : i64, rope_dim = 64 : i64, block_size = 64 : i64, cache_dtype = bf16}
  return
}

func.func @projections(%kvc: memref<?x512xbf16>, %kpe: memref<?x64xbf16>, %w: memref<512x16x256xbf16>,
                       %k: memref<?x16x192xbf16>, %v: memref<?x16x128xbf16>,
                       %qn: memref<?x16x128xbf16>, %wuk: memref<16x128x512xbf16>,
                       %ql: memref<?x16x512xbf16>, %wuv: memref<16x512x128xbf16>,
                       %o: memref<?x16x128xbf16>) {
  mla.kv_up_proj ins(%kvc, %kpe, %w : memref<?x512xbf16>, memref<?x64xbf16>, memref<512x16x256xbf16>)
      outs(%k, %v : memref<?x16x192xbf16>, memref<?x16x128xbf16>)
      {num_heads = 16 : i64, kv_lora_rank = 512 : i64, qk_nope_head_dim = 128 : i64, rope_dim = 64 : i64, v_head_dim = 128 : i64}
  mla.q_absorb ins(%qn, %wuk : memref<?x16x128xbf16>, memref<16x128x512xbf16>)
      outs(%ql : memref<?x16x512xbf16>)
      {num_heads = 16 : i64, qk_nope_head_dim = 128 : i64, kv_lora_rank = 512 : i64}
  mla.v_up_proj ins(%ql, %wuv : memref<?x16x512xbf16>, memref<16x512x128xbf16>)
      outs(%o : memref<?x16x128xbf16>)
      {num_heads = 16 : i64, kv_lora_rank = 512 : i64, v_head_dim = 128 : i64}
  return
}

// The absorbed query is written into a strided view of the decode query.
func.func @absorb_into_view(%qn: memref<?x16x128xf32>, %wuk: memref<16x128x512xf32>,
                            %ql: memref<?x16x512xf32, strided<[9216, 576, 1]>>) {
  mla.q_absorb ins(%qn, %wuk : memref<?x16x128xf32>, memref<16x128x512xf32>)
      outs(%ql : memref<?x16x512xf32, strided<[9216, 576, 1]>>)
      {num_heads = 16 : i64, qk_nope_head_dim = 128 : i64, kv_lora_rank = 512 : i64}
  return
}

func.func @chunked(%q: memref<?x16x192xbf16>, %kvc: memref<?x512xbf16>, %kpe: memref<?x64xbf16>,
                   %cq: memref<?xi32>, %cache: memref<?x64x576xbf16>, %bt: memref<?x?xi32>,
                   %ccu: memref<?x?xi32>, %cst: memref<?x?xi32>, %w: memref<512x16x256xbf16>,
                   %ws: memref<?x576xbf16>, %o: memref<?x16x128xbf16>, %lse: memref<16x?xf32>) {
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
