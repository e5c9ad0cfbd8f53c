// The GPU kernels of the ops that touch an FP8 cache: the cache write and
// the gather (generic kernels), and the decode: the generic split kernel
// (sm_80, default strategy), the mma.sync one (sm_80 and sm_90a, strategy
// mma-sync) and on sm_90a with the wgmma strategy the wgmma one. The
// wgmma kernel copies each tile's codes in with 8-byte cp.async and
// dequantizes them into q's type in shared memory (bf16 over e4m3 at 128
// heads: byte permutes and one two-wide multiply a pair). The mma.sync
// kernel copies them with 16-byte cp.async.cg, converts each lane's
// operands in registers and
// multiplies in f16: on sm_90a with cvt.rn.f16x2.e4m3x2 / .e5m2x2, on sm_80
// with byte permutes and, for e4m3, a two-wide multiply (none for e5m2,
// f16's high byte); with the wgmma strategy the 16-head FP8 decode is the
// mma.sync kernel (wgmma_decode::kMinHeadsFp8), which asks for two blocks
// an SM (.minnctapersm 2, lifting ptxas's register cap). ptxas assembles
// them for sm_80 and sm_90a with no stack frame, no spills and no local
// memory.
// REQUIRES: ptxas
// RUN: env -u CUDA_HOME -u CUDA_PATH -u CUDA_ROOT mla-opt %s --mla-lower-to-gpu=chip=sm_80 --mla-print-ptx=output=%t.sm_80.ptx -o /dev/null
// RUN: FileCheck %s --check-prefixes=CHECK,SM80 --implicit-check-not=.local < %t.sm_80.ptx
// RUN: %ptxas -arch=sm_80 -v %t.sm_80.ptx -o %t.sm_80.cubin 2>&1 | FileCheck %s --check-prefix=RESOURCES --implicit-check-not=error
// RUN: env -u CUDA_HOME -u CUDA_PATH -u CUDA_ROOT mla-opt %s --mla-select-gpu-target="chip=sm_90a strategy=wgmma" --mla-lower-to-gpu=chip=sm_90a --mla-print-ptx=output=%t.sm_90a.ptx -o /dev/null
// RUN: FileCheck %s --check-prefixes=CHECK,SM90A --implicit-check-not=.local < %t.sm_90a.ptx
// RUN: %ptxas -arch=sm_90a -v %t.sm_90a.ptx -o %t.sm_90a.cubin 2>&1 | FileCheck %s --check-prefix=RESOURCES --implicit-check-not=error
// RUN: env -u CUDA_HOME -u CUDA_PATH -u CUDA_ROOT mla-opt %s --mla-select-gpu-target="chip=sm_80 strategy=mma-sync" --mla-lower-to-gpu=chip=sm_80 --mla-print-ptx=output=%t.mma80.ptx -o /dev/null
// RUN: FileCheck %s --check-prefixes=CHECK,MMA,MMA80 --implicit-check-not=.local < %t.mma80.ptx
// RUN: %ptxas -arch=sm_80 -v %t.mma80.ptx -o %t.mma80.cubin 2>&1 | FileCheck %s --check-prefix=RESOURCES --implicit-check-not=error
// RUN: env -u CUDA_HOME -u CUDA_PATH -u CUDA_ROOT mla-opt %s --mla-select-gpu-target="chip=sm_90a strategy=mma-sync" --mla-lower-to-gpu=chip=sm_90a --mla-print-ptx=output=%t.mma90.ptx -o /dev/null
// RUN: FileCheck %s --check-prefixes=CHECK,MMA,MMA90 --implicit-check-not=.local < %t.mma90.ptx
// RUN: %ptxas -arch=sm_90a -v %t.mma90.ptx -o %t.mma90.cubin 2>&1 | FileCheck %s --check-prefix=RESOURCES --implicit-check-not=error

// CHECK: .entry concat_and_cache_0(
// CHECK: .entry gather_cache_1(
// SM80: .entry decode_attention_split_2(
// MMA: .entry decode_attention_split_mma_fp8_2(
// MMA-DAG: .minnctapersm 2
// MMA-DAG: cp.async.cg.shared.global [{{.*}}], [{{.*}}], 16,
// MMA-DAG: prmt.b32
// MMA80-DAG: mul.rn.f16x2
// MMA90-DAG: cvt.rn.f16x2.e4m3x2
// MMA-DAG: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// MMA: .entry decode_attention_split_mma_fp8_5(
// MMA90-DAG: cvt.rn.f16x2.e5m2x2
// MMA-DAG: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// MMA80-NOT: mul.rn.f16x2
// MMA80: .entry decode_attention_combine_narrow_6(
// SM90A: .entry decode_attention_split_wgmma_fp8_2(
// SM90A-DAG: .maxntid 384, 1, 1
// SM90A-DAG: setmaxnreg.inc.sync.aligned.u32 224
// SM90A-DAG: setmaxnreg.dec.sync.aligned.u32 64
// SM90A-DAG: ld.global.v4.b32
// SM90A-DAG: prmt.b32
// SM90A-DAG: mul.rn.bf16x2
// SM90A-DAG: fence.proxy.async.shared::cta
// SM90A-DAG: mbarrier.arrive.shared.b64
// SM90A-DAG: bar.sync 5, 256
// SM90A-DAG: bar.sync 9, 256
// SM90A-DAG: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
// SM90A-DAG: wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16
// SM80: .entry decode_attention_split_5(
// SM90A: .entry decode_attention_split_mma_fp8_6(
// SM90A-NOT: mul.rn.bf16x2
// SM90A-NOT: mul.rn.f16x2
// SM90A-DAG: cvt.rn.f16x2.e5m2x2
// SM90A-DAG: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// RESOURCES-NOT: {{[1-9][0-9]* bytes (stack frame|spill)}}
// RESOURCES: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// RESOURCES-NOT: {{[1-9][0-9]* bytes (stack frame|spill)}}

func.func @write(%kvc: memref<?x512xbf16>, %kpe: memref<?x64xbf16>, %slots: memref<?xi64>,
                 %scale: memref<1xf32>, %cache: memref<?x64x576xf8E4M3FN>) {
  mla.concat_and_cache ins(%kvc, %kpe, %slots : memref<?x512xbf16>, memref<?x64xbf16>, memref<?xi64>)
      scale(%scale : memref<1xf32>)
      outs(%cache : memref<?x64x576xf8E4M3FN>)
      {kv_lora_rank = 512 : i64, rope_dim = 64 : i64, block_size = 64 : i64, cache_dtype = f8E4M3FN}
  return
}

func.func @read(%cache: memref<?x64x576xf8E5M2>, %bt: memref<?x?xi32>, %cu: memref<?xi32>,
                %st: memref<?xi32>, %scale: memref<1xf32>, %ws: memref<?x576xbf16>) {
  mla.gather_cache ins(%cache, %bt, %cu, %st : memref<?x64x576xf8E5M2>, memref<?x?xi32>, memref<?xi32>, memref<?xi32>)
      scale(%scale : memref<1xf32>)
      outs(%ws : memref<?x576xbf16>) {block_size = 64 : i64}
  return
}

func.func @decode(%q: memref<?x?x128x576xbf16>, %cache: memref<?x64x576xf8E4M3FN>,
                  %bt: memref<?x?xi32>, %lens: memref<?xi32>, %scale: memref<1xf32>,
                  %ns: memref<?xi32>, %so: memref<?x?x128x?x512xf32>, %sl: memref<?x?x128x?xf32>,
                  %o: memref<?x?x128x512xbf16>, %lse: memref<?x128x?xf32>) {
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<?x?x128x576xbf16>, memref<?x64x576xf8E4M3FN>, memref<?x?xi32>, memref<?xi32>)
      scale(%scale : memref<1xf32>)
      splits(%ns, %so, %sl : memref<?xi32>, memref<?x?x128x?x512xf32>, memref<?x?x128x?xf32>)
      outs(%o, %lse : memref<?x?x128x512xbf16>, memref<?x128x?xf32>)
      {num_heads = 128 : i64, kv_lora_rank = 512 : i64, rope_dim = 64 : i64, block_size = 64 : i64,
       cache_dtype = f8E4M3FN, softmax_scale = 0.0722 : f32, causal}
  return
}

func.func @decode_f16(%q: memref<?x?x16x576xf16>, %cache: memref<?x32x576xf8E5M2>,
                      %bt: memref<?x?xi32>, %lens: memref<?xi32>, %scale: memref<1xf32>,
                      %o: memref<?x?x16x512xf16>, %lse: memref<?x16x?xf32>) {
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<?x?x16x576xf16>, memref<?x32x576xf8E5M2>, memref<?x?xi32>, memref<?xi32>)
      scale(%scale : memref<1xf32>)
      outs(%o, %lse : memref<?x?x16x512xf16>, memref<?x16x?xf32>)
      {num_heads = 16 : i64, kv_lora_rank = 512 : i64, rope_dim = 64 : i64, block_size = 32 : i64,
       cache_dtype = f8E5M2, softmax_scale = 0.0722 : f32, causal}
  return
}
