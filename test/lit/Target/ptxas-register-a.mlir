// wgmma with A in registers (Emitters/InlinePtx.h), in every form the
// kernels use: the wgmma prefill's P V keeps P in registers, bf16 and f16,
// N = v head dim (128 for DeepSeek's qk 192 / v 128, 64 for 64 / 64). Each
// is one llvm.inline_asm with the accumulators as outputs tied to their
// inputs, A as four 32-bit registers and B's descriptor; ptxas assembles it
// for sm_90a without serializing any wgmma ("Performance Loss"), with no
// stack frame, spills or local memory.
// REQUIRES: ptxas
// RUN: mla-opt %s --mla-select-gpu-target="chip=sm_90a strategy=wgmma" --convert-mla-to-gpu | FileCheck %s --check-prefix=IR
// RUN: env -u CUDA_HOME -u CUDA_PATH -u CUDA_ROOT mla-opt %s --mla-select-gpu-target="chip=sm_90a strategy=wgmma" --mla-lower-to-gpu=chip=sm_90a --mla-print-ptx=output=%t.ptx -o /dev/null
// RUN: FileCheck %s --implicit-check-not=.local < %t.ptx
// RUN: %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=RESOURCES --implicit-check-not=error --implicit-check-not="Performance Loss" --implicit-check-not="bytes stack frame"

// IR-LABEL: gpu.func @prefill_attention_wgmma_0(
// IR: llvm.inline_asm has_side_effects asm_dialect = att "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {$0, {{.+}}, $63}, {$128, $129, $130, $131}, $132, 1, 1, 1, 1;", "{{(=f,)+}}0,1,{{.+}},63,r,r,r,r,l"
// IR-LABEL: gpu.func @prefill_attention_wgmma_2(
// IR: llvm.inline_asm has_side_effects asm_dialect = att "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {$0, {{.+}}, $63}, {$128, $129, $130, $131}, $132, 1, 1, 1, 1;"
// IR-LABEL: gpu.func @prefill_attention_wgmma_4(
// IR: llvm.inline_asm has_side_effects asm_dialect = att "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {$0, {{.+}}, $31}, {$64, $65, $66, $67}, $68, 1, 1, 1, 1;", "{{(=f,)+}}0,1,{{.+}},31,r,r,r,r,l"
// IR-LABEL: gpu.func @prefill_attention_wgmma_6(
// IR: llvm.inline_asm has_side_effects asm_dialect = att "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {$0, {{.+}}, $31}, {$64, $65, $66, $67}, $68, 1, 1, 1, 1;"

// CHECK: .entry prefill_attention_wgmma_0(
// CHECK: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{{.+}}}, {{{%r[0-9]+}}, {{%r[0-9]+}}, {{%r[0-9]+}}, {{%r[0-9]+}}}, {{%rd[0-9]+}}, 1, 1, 1, 1;
// CHECK: .entry prefill_attention_wgmma_2(
// CHECK: wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {{{.+}}}, {{{%r[0-9]+}}, {{%r[0-9]+}}, {{%r[0-9]+}}, {{%r[0-9]+}}}, {{%rd[0-9]+}}, 1, 1, 1, 1;
// CHECK: .entry prefill_attention_wgmma_4(
// CHECK: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{{.+}}}, {{{%r[0-9]+}}, {{%r[0-9]+}}, {{%r[0-9]+}}, {{%r[0-9]+}}}, {{%rd[0-9]+}}, 1, 1, 1, 1;
// CHECK: .entry prefill_attention_wgmma_6(
// CHECK: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{{.+}}}, {{{%r[0-9]+}}, {{%r[0-9]+}}, {{%r[0-9]+}}, {{%r[0-9]+}}}, {{%rd[0-9]+}}, 1, 1, 1, 1;

// RESOURCES-COUNT-8: {{^}}    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads{{$}}

func.func @bf16_192_128(%q: memref<?x16x192xbf16>, %k: memref<?x16x192xbf16>,
                        %v: memref<?x16x128xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>,
                        %o: memref<?x16x128xbf16>, %lse: memref<16x?xf32>) {
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<?x16x192xbf16>, memref<?x16x192xbf16>, memref<?x16x128xbf16>, memref<?xi32>, memref<?xi32>)
      outs(%o, %lse : memref<?x16x128xbf16>, memref<16x?xf32>)
      {num_heads = 16 : i64, qk_head_dim = 192 : i64, v_head_dim = 128 : i64,
       softmax_scale = 0.0722 : f32, causal}
  return
}
func.func @f16_192_128(%q: memref<?x16x192xf16>, %k: memref<?x16x192xf16>,
                       %v: memref<?x16x128xf16>, %cq: memref<?xi32>, %ck: memref<?xi32>,
                       %o: memref<?x16x128xf16>, %lse: memref<16x?xf32>) {
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<?x16x192xf16>, memref<?x16x192xf16>, memref<?x16x128xf16>, memref<?xi32>, memref<?xi32>)
      outs(%o, %lse : memref<?x16x128xf16>, memref<16x?xf32>)
      {num_heads = 16 : i64, qk_head_dim = 192 : i64, v_head_dim = 128 : i64,
       softmax_scale = 0.0722 : f32}
  return
}
func.func @bf16_64_64(%q: memref<?x8x64xbf16>, %k: memref<?x8x64xbf16>,
                      %v: memref<?x8x64xbf16>, %cq: memref<?xi32>, %ck: memref<?xi32>,
                      %o: memref<?x8x64xbf16>, %lse: memref<8x?xf32>) {
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<?x8x64xbf16>, memref<?x8x64xbf16>, memref<?x8x64xbf16>, memref<?xi32>, memref<?xi32>)
      outs(%o, %lse : memref<?x8x64xbf16>, memref<8x?xf32>)
      {num_heads = 8 : i64, qk_head_dim = 64 : i64, v_head_dim = 64 : i64,
       softmax_scale = 0.125 : f32, causal}
  return
}
func.func @f16_64_64(%q: memref<?x8x64xf16>, %k: memref<?x8x64xf16>,
                     %v: memref<?x8x64xf16>, %cq: memref<?xi32>, %ck: memref<?xi32>,
                     %o: memref<?x8x64xf16>, %lse: memref<8x?xf32>) {
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<?x8x64xf16>, memref<?x8x64xf16>, memref<?x8x64xf16>, memref<?xi32>, memref<?xi32>)
      outs(%o, %lse : memref<?x8x64xf16>, memref<8x?xf32>)
      {num_heads = 8 : i64, qk_head_dim = 64 : i64, v_head_dim = 64 : i64,
       softmax_scale = 0.125 : f32}
  return
}
