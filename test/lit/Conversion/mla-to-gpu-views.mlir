// Strided views whose rows are contiguous and start whole 16-byte vectors
// apart take the kernels' 16-byte paths: here the chunked prefill's
// gather into the leading rows of its workspace (a subview), with a bf16
// cache and f16 activations, so each vector goes through f32 (bf16 to f16
// is neither an extension nor a truncation). The run-time alignment check
// adds the view's offset to its base.
//
// RUN: mla-opt %s --mla-select-gpu-target=chip=sm_80 --convert-mla-to-gpu | FileCheck %s

// CHECK-LABEL: gpu.func @gather_cache_0(
// CHECK-SAME: %[[WS:[^:]+]]: memref<?x576xf16, strided<[576, 1]>>)
// CHECK: %{{.+}}, %[[OFF:[^,]+]], %{{.+}}:2, %{{.+}}:2 = memref.extract_strided_metadata %[[WS]]
// CHECK: arith.muli %[[OFF]], %c2
// CHECK: %[[V:.+]] = vector.load %{{.+}} : memref<?x64x576xbf16>, vector<8xbf16>
// CHECK: %[[F32:.+]] = arith.extf %[[V]] : vector<8xbf16> to vector<8xf32>
// CHECK-NEXT: %[[F16:.+]] = arith.truncf %[[F32]] : vector<8xf32> to vector<8xf16>
// CHECK-NEXT: vector.store %[[F16]], %[[WS]]
func.func @gather_into_workspace_rows(%cache: memref<?x64x576xbf16>, %bt: memref<?x?xi32>,
    %cu: memref<?xi32>, %starts: memref<?xi32>, %ws: memref<?x576xf16>, %rows: index) {
  %view = memref.subview %ws[0, 0] [%rows, 576] [1, 1] : memref<?x576xf16> to memref<?x576xf16, strided<[576, 1]>>
  mla.gather_cache ins(%cache, %bt, %cu, %starts : memref<?x64x576xbf16>, memref<?x?xi32>, memref<?xi32>, memref<?xi32>)
      outs(%view : memref<?x576xf16, strided<[576, 1]>>) {block_size = 64 : i64}
  return
}
