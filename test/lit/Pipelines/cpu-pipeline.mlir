// mla-lower-to-cpu takes a module of mla ops (the composite chunked_prefill
// included) all the way to the LLVM dialect: nothing but llvm ops is left in
// function bodies, and functions marked llvm.emit_c_interface get a
// _mlir_ciface_ wrapper.
// RUN: mla-opt %s --mla-lower-to-cpu | FileCheck %s
// Pipeline options reach convert-mla-to-loops.
// RUN: mla-opt %s --mla-lower-to-cpu="vector-width=8 key-block=16" | FileCheck %s --check-prefix=W8
// Nothing but llvm ops anywhere in the output.
// RUN: mla-opt %s --mla-lower-to-cpu | FileCheck %s --check-prefix=ONLY-LLVM
// The result translates to LLVM IR.
// RUN: mla-opt %s --mla-lower-to-cpu | mlir-translate --mlir-to-llvmir | FileCheck %s --check-prefix=LLVMIR

// Any op outside the llvm dialect, with or without a result, in custom or
// generic form (the prefix has no positive check, so it scans the whole output).
// ONLY-LLVM-NOT: {{(^ *|= )"?(mla|scf|memref|vector|arith|math|cf|func|affine|ub|index)\.}}

// CHECK-LABEL: llvm.func @decode(
// CHECK-SAME: attributes {llvm.emit_c_interface}
// Scratch buffers are stack allocations, vectors of 16 f32 lanes.
// CHECK: llvm.alloca
// bf16 cache rows are loaded as vectors and widened through integer ops.
// CHECK: llvm.load %{{.+}} : !llvm.ptr -> vector<16xbf16>
// CHECK: llvm.bitcast %{{.+}} : vector<16xbf16> to vector<16xi16>
// CHECK: llvm.intr.fmuladd(%{{.+}}, %{{.+}}, %{{.+}}) : (vector<16xf32>, vector<16xf32>, vector<16xf32>) -> vector<16xf32>
// CHECK: "llvm.intr.vector.reduce.fadd"
// CHECK: llvm.intr.exp
// CHECK: llvm.intr.log
// CHECK: llvm.return
// CHECK-NEXT: }

// The C interface wrapper unpacks memref descriptors and calls the function.
// CHECK-LABEL: llvm.func @_mlir_ciface_decode(
// CHECK-SAME: %{{.+}}: !llvm.ptr, %{{.+}}: !llvm.ptr, %{{.+}}: !llvm.ptr, %{{.+}}: !llvm.ptr, %{{.+}}: !llvm.ptr, %{{.+}}: !llvm.ptr)
// CHECK: llvm.load %{{.+}} : !llvm.ptr -> !llvm.struct<(ptr, ptr, i64, array<4 x i64>, array<4 x i64>)>
// CHECK: llvm.call @decode(
// CHECK-NEXT: llvm.return

// The expanded chunked prefill: heap scratch via malloc/free, the rest as above.
// CHECK-LABEL: llvm.func @chunked(
// CHECK-NOT: attributes {llvm.emit_c_interface}
// CHECK: llvm.call @malloc
// CHECK: llvm.intr.fmuladd
// CHECK: llvm.intr.exp
// CHECK: llvm.intr.log
// CHECK: llvm.call @free
// CHECK: llvm.return
// CHECK-NEXT: }
// No wrapper without the attribute.
// CHECK-NOT: @_mlir_ciface_chunked

// LLVMIR-LABEL: define void @decode(
// LLVMIR: call <16 x float> @llvm.fmuladd.v16f32(
// LLVMIR: call reassoc float @llvm.vector.reduce.fadd.v16f32(
// LLVMIR-LABEL: define void @_mlir_ciface_decode(ptr %0, ptr %1, ptr %2, ptr %3, ptr %4, ptr %5)
// LLVMIR: call void @decode(
// LLVMIR-LABEL: define void @chunked(
// LLVMIR: call ptr @malloc(
// LLVMIR: call void @free(

// W8-LABEL: llvm.func @decode(
// W8-NOT: vector<16x
// W8: llvm.intr.fmuladd(%{{.+}}, %{{.+}}, %{{.+}}) : (vector<8xf32>, vector<8xf32>, vector<8xf32>) -> vector<8xf32>
// W8-LABEL: llvm.func @chunked(
// W8-NOT: vector<16x
// W8: vector<8xf32>

func.func @decode(%q: memref<?x?x16x576xbf16>, %cache: memref<?x64x576xbf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>,
                  %o: memref<?x?x16x512xbf16>, %lse: memref<?x16x?xf32>) attributes {llvm.emit_c_interface} {
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<?x?x16x576xbf16>, memref<?x64x576xbf16>, memref<?x?xi32>, memref<?xi32>)
      outs(%o, %lse : memref<?x?x16x512xbf16>, memref<?x16x?xf32>)
      {num_heads = 16 : i64, kv_lora_rank = 512 : i64, rope_dim = 64 : i64, block_size = 64 : i64,
       cache_dtype = bf16, softmax_scale = 0.0722 : f32, causal}
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
