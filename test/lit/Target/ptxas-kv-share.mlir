// The decode of a decode-context-parallel rank (kv_share: its cache holds
// every W-th run of I tokens): every decode strategy compiles it, and ptxas
// assembles each with no stack frame, no spills and no local memory.
// REQUIRES: ptxas
// RUN: env -u CUDA_HOME -u CUDA_PATH -u CUDA_ROOT mla-opt %s --mla-lower-to-gpu=chip=sm_80 --mla-print-ptx=output=%t.generic.ptx -o /dev/null
// RUN: FileCheck %s --check-prefix=GENERIC --implicit-check-not=.local < %t.generic.ptx
// RUN: %ptxas -arch=sm_80 -v %t.generic.ptx -o %t.generic.cubin 2>&1 | FileCheck %s --check-prefix=RESOURCES --implicit-check-not=error
// RUN: env -u CUDA_HOME -u CUDA_PATH -u CUDA_ROOT mla-opt %s --mla-select-gpu-target="chip=sm_80 strategy=mma-sync" --mla-lower-to-gpu=chip=sm_80 --mla-print-ptx=output=%t.mma.ptx -o /dev/null
// RUN: FileCheck %s --check-prefix=MMA --implicit-check-not=.local < %t.mma.ptx
// RUN: %ptxas -arch=sm_80 -v %t.mma.ptx -o %t.mma.cubin 2>&1 | FileCheck %s --check-prefix=RESOURCES --implicit-check-not=error
// RUN: env -u CUDA_HOME -u CUDA_PATH -u CUDA_ROOT mla-opt %s --mla-select-gpu-target="chip=sm_90a strategy=wgmma" --mla-lower-to-gpu=chip=sm_90a --mla-print-ptx=output=%t.wgmma.ptx -o /dev/null
// RUN: FileCheck %s --check-prefix=WGMMA --implicit-check-not=.local < %t.wgmma.ptx
// RUN: %ptxas -arch=sm_90a -v %t.wgmma.ptx -o %t.wgmma.cubin 2>&1 | FileCheck %s --check-prefix=RESOURCES --implicit-check-not=error --implicit-check-not="Performance Loss"
//
// On the CPU the held tokens are counted from seq_lens: (n / (W I)) I +
// min(n mod (W I), I) with W I = 32 and I = 16, for the keys and again for
// each query's causal prefix.
// RUN: mla-opt %s --convert-mla-to-loops | FileCheck %s --check-prefix=LOOPS

// GENERIC: .entry decode_attention_split_0(
// MMA: .entry decode_attention_split_mma_0(
// WGMMA: .entry decode_attention_split_wgmma_tma_0(
// RESOURCES-NOT: {{[1-9][0-9]* bytes (stack frame|spill)}}
// RESOURCES: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// RESOURCES-NOT: {{[1-9][0-9]* bytes (stack frame|spill)}}

// LOOPS-LABEL: func.func @rank_decode
// The request's held keys...
// LOOPS: %[[CYCLE:.+]] = arith.constant 32 : index
// LOOPS: %[[LEN:.+]] = arith.constant 16 : index
// LOOPS: arith.divui %{{.+}}, %[[CYCLE]] : index
// LOOPS: arith.remui %{{.+}}, %[[CYCLE]] : index
// LOOPS: arith.muli %{{.+}}, %[[LEN]] : index
// ...then, in the loop over the queries, those of each query's prefix.
// LOOPS: scf.for
// LOOPS: %[[CYCLE2:.+]] = arith.constant 32 : index
// LOOPS: %[[LEN2:.+]] = arith.constant 16 : index
// LOOPS: arith.divui %{{.+}}, %[[CYCLE2]] : index
// LOOPS: arith.remui %{{.+}}, %[[CYCLE2]] : index
// LOOPS: arith.muli %{{.+}}, %[[LEN2]] : index
func.func @rank_decode(%q: memref<?x?x128x576xbf16>, %cache: memref<?x64x576xbf16>,
                       %bt: memref<?x?xi32>, %lens: memref<?xi32>,
                       %ns: memref<?xi32>, %so: memref<?x?x128x?x512xf32>, %sl: memref<?x?x128x?xf32>,
                       %o: memref<?x?x128x512xbf16>, %lse: memref<?x128x?xf32>) {
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<?x?x128x576xbf16>, memref<?x64x576xbf16>, memref<?x?xi32>, memref<?xi32>)
      splits(%ns, %so, %sl : memref<?xi32>, memref<?x?x128x?x512xf32>, memref<?x?x128x?xf32>)
      outs(%o, %lse : memref<?x?x128x512xbf16>, memref<?x128x?xf32>)
      {num_heads = 128 : i64, kv_lora_rank = 512 : i64, rope_dim = 64 : i64, block_size = 64 : i64,
       cache_dtype = bf16, softmax_scale = 0.0722 : f32, causal, kv_share = array<i64: 2, 16>}
  return
}
