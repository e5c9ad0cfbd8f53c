// mla-lower-to-gpu takes a module of mla ops to PTX for the chosen chip,
// embedded as a gpu.binary per kernel, and host functions in the LLVM dialect whose
// only non-llvm ops are the gpu.launch_func of the kernels.
// RUN: mla-opt %s --mla-lower-to-gpu=chip=sm_80 | FileCheck %s
// Nothing but llvm ops, gpu.binary and gpu.launch_func in the output.
// RUN: mla-opt %s --mla-lower-to-gpu=chip=sm_80 | FileCheck %s --check-prefix=ONLY-LLVM
// The PTX follows the chip: another chip, another target and ISA version.
// RUN: mla-opt %s --mla-lower-to-gpu=chip=sm_90a | FileCheck %s --check-prefix=SM90A
//
// An unknown chip is reported, naming it, with a non-zero exit and nothing
// lowered.
// RUN: not mla-opt %s --mla-lower-to-gpu=chip=sm_75 2>&1 | FileCheck %s --check-prefix=BADCHIP

// BADCHIP: error: mla-select-gpu-target: unknown chip 'sm_75' (supported: sm_80, sm_86, sm_89, sm_90, sm_90a)
// BADCHIP-NOT: gpu.binary
// BADCHIP-NOT: llvm.func
// BADCHIP-NOT: Stack dump

// Any op outside the llvm dialect other than gpu.launch_func and gpu.binary,
// in custom or generic form.
// ONLY-LLVM-NOT: {{(^ *|= )"?(mla|scf|memref|vector|arith|math|cf|func|affine|ub|index|nvvm)\.}}
// ONLY-LLVM-NOT: {{(^ *|= )"?gpu\.(alloc|dealloc|memcpy|wait|module|func|return|thread_id|block_id|block_dim|grid_dim|shuffle)}}

// CHECK: module attributes {gpu.container_module, mla.target = {chip = "sm_80", ptx_features = "+ptx70", strategy = "generic"}} {
// Decode: the split partials allocated on the device, the split kernel and
// one of the two combine kernels (by the split count), the partials freed.
// CHECK-LABEL: llvm.func @decode(
// CHECK: llvm.call @mgpuMemAlloc(
// CHECK: llvm.call @mgpuMemAlloc(
// CHECK: gpu.launch_func <%{{.+}} : !llvm.ptr> @decode_attention_split_0::@decode_attention_split_0 blocks in ({{.+}}) threads in ({{.+}}) : i64 args(
// CHECK: gpu.launch_func <%{{.+}} : !llvm.ptr> @decode_attention_combine_narrow_1::@decode_attention_combine_narrow_1 blocks in ({{.+}}) threads in ({{.+}}) : i64 args(
// CHECK: gpu.launch_func <%{{.+}} : !llvm.ptr> @decode_attention_combine_2::@decode_attention_combine_2 blocks in ({{.+}}) threads in ({{.+}}) : i64 dynamic_shared_memory_size %{{.+}} args(
// CHECK: llvm.call @mgpuMemFree(
// CHECK: llvm.call @mgpuMemFree(
// CHECK: llvm.return
// CHECK-NEXT: }
// CHECK-LABEL: llvm.func @merge(
// CHECK-NOT: mgpuMemAlloc
// CHECK: gpu.launch_func <%{{.+}} : !llvm.ptr> @merge_attn_states_3::@merge_attn_states_3 blocks in ({{.+}}) threads in ({{.+}}) : i64 args(
// CHECK: llvm.return
// CHECK-NEXT: }
// Decode with a split schedule: the partials are the caller's workspaces,
// nothing allocated or freed (a call can be captured in a CUDA graph).
// CHECK-LABEL: llvm.func @decode_scheduled(
// CHECK-NOT: mgpuMem{{(Alloc|Free)}}
// CHECK: gpu.launch_func <%{{.+}} : !llvm.ptr> @decode_attention_split_4::@decode_attention_split_4 blocks in ({{.+}}) threads in ({{.+}}) : i64 args(
// CHECK-NOT: mgpuMem{{(Alloc|Free)}}
// CHECK: gpu.launch_func <%{{.+}} : !llvm.ptr> @decode_attention_combine_narrow_5::@decode_attention_combine_narrow_5 blocks in ({{.+}}) threads in ({{.+}}) : i64 args(
// CHECK-NOT: mgpuMem{{(Alloc|Free)}}
// CHECK: gpu.launch_func <%{{.+}} : !llvm.ptr> @decode_attention_combine_6::@decode_attention_combine_6 blocks in ({{.+}}) threads in ({{.+}}) : i64 dynamic_shared_memory_size %{{.+}} args(
// CHECK-NOT: mgpuMem{{(Alloc|Free)}}
// CHECK: llvm.return
// CHECK-NEXT: }
// The kernels as PTX for sm_80 (PTX ISA 7.0), one entry per kernel.
// CHECK: gpu.binary @decode_attention_split_0 [#gpu.object<#nvvm.target<O = 1, chip = "sm_80", features = "+ptx70">
// CHECK-SAME: assembly = "
// CHECK-SAME: \0A.version 7.0\0A.target sm_80\0A.address_size 64\0A
// CHECK-SAME: .visible .entry decode_attention_split_0(
// CHECK-NOT: .entry
// CHECK: gpu.binary @decode_attention_combine_narrow_1 [#gpu.object<#nvvm.target<O = 1, chip = "sm_80", features = "+ptx70">
// CHECK-SAME: assembly = "
// CHECK-SAME: .visible .entry decode_attention_combine_narrow_1(
// CHECK-NOT: .entry
// CHECK: gpu.binary @decode_attention_combine_2 [#gpu.object<#nvvm.target<O = 1, chip = "sm_80", features = "+ptx70">
// CHECK-SAME: assembly = "
// CHECK-SAME: .visible .entry decode_attention_combine_2(
// CHECK-NOT: .entry
// CHECK: gpu.binary @merge_attn_states_3 [#gpu.object<#nvvm.target<O = 1, chip = "sm_80", features = "+ptx70">
// CHECK-SAME: assembly = "
// CHECK-SAME: .visible .entry merge_attn_states_3(
// CHECK-NOT: .entry
// CHECK: gpu.binary @decode_attention_split_4 [#gpu.object<#nvvm.target<O = 1, chip = "sm_80", features = "+ptx70">
// CHECK-SAME: assembly = "
// CHECK-SAME: .visible .entry decode_attention_split_4(
// CHECK-NOT: .entry
// CHECK: gpu.binary @decode_attention_combine_narrow_5 [#gpu.object<#nvvm.target<O = 1, chip = "sm_80", features = "+ptx70">
// CHECK-SAME: assembly = "
// CHECK-SAME: .visible .entry decode_attention_combine_narrow_5(
// CHECK-NOT: .entry
// CHECK: gpu.binary @decode_attention_combine_6 [#gpu.object<#nvvm.target<O = 1, chip = "sm_80", features = "+ptx70">
// CHECK-SAME: assembly = "
// CHECK-SAME: .visible .entry decode_attention_combine_6(
// CHECK-NOT: .entry
// CHECK-NOT: gpu.binary

// SM90A: gpu.binary @decode_attention_split_0 [#gpu.object<#nvvm.target<O = 1, chip = "sm_90a", features = "+ptx80">
// SM90A-SAME: \0A.version 8.0\0A.target sm_90a\0A
// SM90A-SAME: .visible .entry decode_attention_split_0(

func.func @decode(%q: memref<?x?x16x576xbf16>, %cache: memref<?x64x576xbf16>,
                  %bt: memref<?x?xi32>, %lens: memref<?xi32>,
                  %o: memref<?x?x16x512xbf16>, %lse: memref<?x16x?xf32>) {
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<?x?x16x576xbf16>, memref<?x64x576xbf16>, memref<?x?xi32>, memref<?xi32>)
      outs(%o, %lse : memref<?x?x16x512xbf16>, memref<?x16x?xf32>)
      {num_heads = 16 : i64, kv_lora_rank = 512 : i64, rope_dim = 64 : i64, block_size = 64 : i64,
       cache_dtype = bf16, softmax_scale = 0.0722 : f32, causal}
  return
}

func.func @merge(%po: memref<?x16x128xf16>, %pl: memref<16x?xf32>,
                 %so: memref<?x16x128xf16>, %sl: memref<16x?xf32>,
                 %o: memref<?x16x128xf16>, %ol: memref<16x?xf32>) {
  mla.merge_attn_states ins(%po, %pl, %so, %sl : memref<?x16x128xf16>, memref<16x?xf32>, memref<?x16x128xf16>, memref<16x?xf32>)
      outs(%o, %ol : memref<?x16x128xf16>, memref<16x?xf32>)
  return
}

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
