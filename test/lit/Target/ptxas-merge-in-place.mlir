// The wgmma decode split kernel given arrival counters (split_arrivals)
// merges a request's few splits itself. After the block's partial rows are
// written (bulk copies or stores), every thread waits for its bulk copies
// to complete, orders the async proxy's global writes before its own
// accesses and fences at device scope; one thread counts the arrival with
// a global atomic; the last block fences again before it reads the other
// splits' partials. ptxas must accept the kernel with no stack frame, no
// spills and no wgmma serialization.
// REQUIRES: ptxas
//
// RUN: env -u CUDA_HOME -u CUDA_PATH -u CUDA_ROOT mla-opt %s --mla-select-gpu-target="chip=sm_90a strategy=wgmma" --mla-lower-to-gpu=chip=sm_90a --mla-print-ptx=output=%t.ptx -o /dev/null
// RUN: FileCheck %s < %t.ptx
// RUN: %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=RESOURCES --implicit-check-not="bytes stack frame" --implicit-check-not=error --implicit-check-not="Performance Loss"

// CHECK: {{^}}.visible .entry decode_attention_split_wgmma_0(
// CHECK: cp.async.bulk.wait_group.read {{[ \t]*}}0;
// CHECK: cp.async.bulk.wait_group {{[ \t]*}}0;
// CHECK-NEXT: fence.proxy.async.global;
// CHECK-NEXT: membar.gl;
// CHECK: bar.sync {{[ \t]*}}7, 256;
// CHECK: atom.global.add.u32 {{.+}}, 1;
// CHECK: bar.sync {{[ \t]*}}7, 256;
// CHECK: membar.gl;
// The merge: 16-byte loads of the partials, coherent ones (not ld.global.nc:
// other blocks wrote them during this launch).
// CHECK-NOT: ld.global.nc
// CHECK: ld.global.v4.b32
// CHECK: {{^}}.visible .entry decode_attention_split_1(

// Four kernels (the wgmma split, its generic fallback, both combines).
// RESOURCES-COUNT-4: {{^}}    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads{{$}}

func.func @decode_merged_in_place(%q: memref<?x?x16x576xbf16>, %cache: memref<?x64x576xbf16>,
                                  %bt: memref<?x?xi32>, %lens: memref<?xi32>,
                                  %ns: memref<?xi32>, %so: memref<?x?x16x?x512xf32>, %sl: memref<?x?x16x?xf32>,
                                  %arr: memref<?x?x16xi32>,
                                  %o: memref<?x?x16x512xbf16>, %lse: memref<?x16x?xf32>) {
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<?x?x16x576xbf16>, memref<?x64x576xbf16>, memref<?x?xi32>, memref<?xi32>)
      splits(%ns, %so, %sl : memref<?xi32>, memref<?x?x16x?x512xf32>, memref<?x?x16x?xf32>)
      arrivals(%arr : memref<?x?x16xi32>)
      outs(%o, %lse : memref<?x?x16x512xbf16>, memref<?x16x?xf32>)
      {num_heads = 16 : i64, kv_lora_rank = 512 : i64, rope_dim = 64 : i64, block_size = 64 : i64,
       cache_dtype = bf16, softmax_scale = 0.0722 : f32}
  return
}
