// convert-mla-to-loops: every primitive op becomes scf loops over its
// memrefs with vector inner loops (16 f32 lanes by default), f32 scratch in
// stack buffers at function entry, and no mla op left.
// RUN: mla-opt %s -split-input-file --convert-mla-to-loops | FileCheck %s
// Eight lanes: every vector is vector<8x...>, the tail is unchanged.
// RUN: mla-opt %s -split-input-file --convert-mla-to-loops=vector-width=8 | FileCheck %s --check-prefix=W8
// RUN: mla-opt %s -split-input-file --convert-mla-to-loops=vector-width=8 | FileCheck %s --check-prefix=W8-NO16
// A smaller key block shrinks the score buffer and the online-softmax step.
// RUN: mla-opt %s -split-input-file --convert-mla-to-loops=key-block=4 | FileCheck %s --check-prefix=KB4
// Options must be positive.
// RUN: not mla-opt %s -split-input-file --convert-mla-to-loops=vector-width=0 2>&1 | FileCheck %s --check-prefix=BADWIDTH

// W8-NO16-NOT: vector<16x

// BADWIDTH: error: convert-mla-to-loops: vector-width and key-block must be positive, got
// BADWIDTH-NOT: vector.load
// BADWIDTH-NOT: Stack dump

// Causal prefill, bf16: blocked online softmax per (sequence, query, head).
// CHECK-LABEL: func.func @prefill(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: memref<?x2x32xbf16>, %[[K:[a-z0-9]+]]: memref<?x2x32xbf16>, %[[V:[a-z0-9]+]]: memref<?x2x16xbf16>,
// CHECK-SAME: %[[CQ:[a-z0-9]+]]: memref<?xi32>, %[[CK:[a-z0-9]+]]: memref<?xi32>, %[[O:[a-z0-9]+]]: memref<?x2x16xbf16>, %[[LSE:[a-z0-9]+]]: memref<2x?xf32>)
// Scratch at entry, before any loop: the f32 accumulator (v_head_dim) and one key block of scores.
// CHECK-NOT: scf.for
// CHECK-DAG: %[[ACC:.+]] = memref.alloca() : memref<16xf32>
// CHECK-DAG: %[[SCORES:.+]] = memref.alloca() : memref<32xf32>
// CHECK: scf.for %[[SEQ:[a-z0-9]+]] = %{{.+}} to %{{.+}} step
// CHECK: memref.load %[[CQ]][%[[SEQ]]] : memref<?xi32>
// CHECK: memref.load %[[CK]][%[[SEQ]]] : memref<?xi32>
// CHECK: scf.for %[[I:[a-z0-9]+]] = %{{.+}} to %{{.+}} step
// Causal: the visible key count is clamped to [0, keys].
// CHECK: %[[TOKEN:.+]] = arith.addi %{{.+}}, %[[I]] : index
// CHECK: arith.maxsi
// CHECK: %[[VISIBLE:.+]] = arith.minsi
// CHECK: scf.for %[[H:[a-z0-9]+]] = %{{.+}} to %c2{{(_[0-9]+)?}} step
// CHECK: vector.store %{{.+}}, %[[ACC]][%{{.+}}] : memref<16xf32>, vector<16xf32>
// CHECK: %[[SCALE:.+]] = arith.constant 1.250000e-01 : f32
// Key blocks of 32 carry the running (max, sum).
// CHECK: scf.for %[[KB:[a-z0-9]+]] = %{{.+}} to %[[VISIBLE]] step %c32{{(_[0-9]+)?}} iter_args(%[[MAX:[a-z0-9]+]] = %{{.+}}, %[[SUM:[a-z0-9]+]] = %{{.+}}) -> (f32, f32) {
// Scores: q . k in vectors of 16, reduced, scaled, stored, block max.
// CHECK: scf.for %{{.+}} iter_args(%[[BMAX:[a-z0-9]+]] = %{{.+}}) -> (f32) {
// CHECK: scf.for %{{.+}} = %c0{{(_[0-9]+)?}} to %c32{{(_[0-9]+)?}} step %c16{{(_[0-9]+)?}} iter_args(%{{.+}}) -> (vector<16xf32>) {
// CHECK: vector.load %[[Q]][%[[TOKEN]], %[[H]], %{{.+}}] : memref<?x2x32xbf16>, vector<16xbf16>
// CHECK: arith.extf %{{.+}} : vector<16xbf16> to vector<16xf32>
// CHECK: vector.load %[[K]][%{{.+}}, %[[H]], %{{.+}}] : memref<?x2x32xbf16>, vector<16xbf16>
// CHECK: vector.fma %{{.+}}, %{{.+}}, %{{.+}} : vector<16xf32>
// CHECK: vector.reduction <add>, %{{.+}} : vector<16xf32> into f32
// CHECK: %[[S:.+]] = arith.mulf %{{.+}}, %[[SCALE]] : f32
// CHECK: memref.store %[[S]], %[[SCORES]][%{{.+}}] : memref<32xf32>
// CHECK: arith.maximumf %[[BMAX]], %[[S]] : f32
// New running max; the accumulator is rescaled by exp(old - new).
// CHECK: %[[NEWMAX:.+]] = arith.maximumf %[[MAX]], %{{.+}} : f32
// CHECK: %[[DIFF:.+]] = arith.subf %[[MAX]], %[[NEWMAX]] : f32
// CHECK: %[[ALPHA:.+]] = math.exp %[[DIFF]] : f32
// CHECK: arith.mulf %[[SUM]], %[[ALPHA]] : f32
// CHECK: arith.mulf %{{.+}}, %{{.+}} : vector<16xf32>
// p = exp(s - max), acc += p * v.
// CHECK: memref.load %[[SCORES]][%{{.+}}] : memref<32xf32>
// CHECK: arith.subf %{{.+}}, %[[NEWMAX]] : f32
// CHECK: math.exp
// CHECK: vector.load %[[V]][%{{.+}}, %[[H]], %{{.+}}] : memref<?x2x16xbf16>, vector<16xbf16>
// CHECK: vector.fma %{{.+}}, %{{.+}}, %{{.+}} : vector<16xf32>
// CHECK: vector.store %{{.+}}, %[[ACC]][%{{.+}}] : memref<16xf32>, vector<16xf32>
// CHECK: scf.yield %[[NEWMAX]], %{{.+}} : f32, f32
// Normalize (guarding an empty row: sum exactly 0; a NaN sum is not empty),
// store out in bf16 and lse = max + log(sum).
// CHECK: arith.cmpf une
// CHECK: arith.divf
// CHECK: math.log
// CHECK: arith.truncf %{{.+}} : vector<16xf32> to vector<16xbf16>
// CHECK: vector.store %{{.+}}, %[[O]][%[[TOKEN]], %[[H]], %{{.+}}] : memref<?x2x16xbf16>, vector<16xbf16>
// CHECK: memref.store %{{.+}}, %[[LSE]][%[[H]], %[[TOKEN]]] : memref<2x?xf32>
// CHECK-NOT: mla.
// CHECK-NOT: memref.alloca
// CHECK: return

// W8-LABEL: func.func @prefill(
// W8: memref.alloca() : memref<16xf32>
// W8: scf.for %{{.+}} = %c0{{(_[0-9]+)?}} to %c32{{(_[0-9]+)?}} step %c8{{(_[0-9]+)?}} iter_args(%{{.+}}) -> (vector<8xf32>) {
// W8: vector.load %{{.+}} : memref<?x2x32xbf16>, vector<8xbf16>
// W8: vector.fma %{{.+}}, %{{.+}}, %{{.+}} : vector<8xf32>
// W8: vector.reduction <add>, %{{.+}} : vector<8xf32> into f32
// W8: vector.store %{{.+}} : memref<?x2x16xbf16>, vector<8xbf16>

// KB4-LABEL: func.func @prefill(
// KB4-DAG: memref.alloca() : memref<16xf32>
// KB4-DAG: %[[SCORES:.+]] = memref.alloca() : memref<4xf32>
// KB4: scf.for %{{.+}} = %{{.+}} to %{{.+}} step %c4{{(_[0-9]+)?}} iter_args(%{{.+}}, %{{.+}}) -> (f32, f32) {
// KB4: memref.store %{{.+}}, %[[SCORES]][%{{.+}}] : memref<4xf32>
// KB4-NOT: memref<32xf32>
// KB4: return
func.func @prefill(%q: memref<?x2x32xbf16>, %k: memref<?x2x32xbf16>, %v: memref<?x2x16xbf16>,
                   %cq: memref<?xi32>, %ck: memref<?xi32>, %o: memref<?x2x16xbf16>, %lse: memref<2x?xf32>) {
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<?x2x32xbf16>, memref<?x2x32xbf16>, memref<?x2x16xbf16>, memref<?xi32>, memref<?xi32>)
      outs(%o, %lse : memref<?x2x16xbf16>, memref<2x?xf32>)
      {num_heads = 2 : i64, qk_head_dim = 32 : i64, v_head_dim = 16 : i64, softmax_scale = 0.125 : f32, causal}
  return
}

// -----

// Head dims of 20 are not a multiple of the width: 16 lanes, then a scalar
// tail over columns [16, 20) (math.fma on f32 scalars).
// CHECK-LABEL: func.func @prefill_tail(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: memref<?x2x20xf32>, %[[K:[a-z0-9]+]]: memref<?x2x20xf32>, %[[V:[a-z0-9]+]]: memref<?x2x20xf32>
// CHECK-DAG: %[[ACC:.+]] = memref.alloca() : memref<20xf32>
// CHECK-DAG: memref.alloca() : memref<32xf32>
// Zero fill: vector part, then scalar tail.
// CHECK: scf.for %{{.+}} = %c0{{(_[0-9]+)?}} to %c16{{(_[0-9]+)?}} step %c16{{(_[0-9]+)?}} {
// CHECK: vector.store %{{.+}}, %[[ACC]][%{{.+}}] : memref<20xf32>, vector<16xf32>
// CHECK: scf.for %[[J:.+]] = %c16{{(_[0-9]+)?}} to %c20{{(_[0-9]+)?}} step %c1{{(_[0-9]+)?}} {
// CHECK-NEXT: memref.store %{{.+}}, %[[ACC]][%[[J]]] : memref<20xf32>
// Dot product: vector part reduced, then the tail continues the sum.
// CHECK: %[[VSUM:.+]] = scf.for %{{.+}} = %c0{{(_[0-9]+)?}} to %c16{{(_[0-9]+)?}} step %c16{{(_[0-9]+)?}} iter_args(%{{.+}}) -> (vector<16xf32>) {
// CHECK: %[[PART:.+]] = vector.reduction <add>, %[[VSUM]] : vector<16xf32> into f32
// CHECK: scf.for %[[C:[a-z0-9]+]] = %c16{{(_[0-9]+)?}} to %c20{{(_[0-9]+)?}} step %c1{{(_[0-9]+)?}} iter_args(%[[PARTIAL:[a-z0-9]+]] = %[[PART]]) -> (f32) {
// CHECK-NEXT: %[[QS:.+]] = memref.load %[[Q]][%{{.+}}, %{{.+}}, %[[C]]] : memref<?x2x20xf32>
// CHECK-NEXT: %[[KS:.+]] = memref.load %[[K]][%{{.+}}, %{{.+}}, %[[C]]] : memref<?x2x20xf32>
// CHECK-NEXT: %[[FMA:.+]] = math.fma %[[QS]], %[[KS]], %[[PARTIAL]] : f32
// CHECK-NEXT: scf.yield %[[FMA]] : f32
// acc += p * v: scalar tail with math.fma into the accumulator.
// CHECK: vector.load %[[V]]{{.*}} : memref<?x2x20xf32>, vector<16xf32>
// CHECK: scf.for %[[C2:[a-z0-9]+]] = %c16{{(_[0-9]+)?}} to %c20{{(_[0-9]+)?}} step %c1{{(_[0-9]+)?}} {
// CHECK-NEXT: %[[A:.+]] = memref.load %[[ACC]][%[[C2]]] : memref<20xf32>
// CHECK-NEXT: %[[VS:.+]] = memref.load %[[V]][%{{.+}}, %{{.+}}, %[[C2]]] : memref<?x2x20xf32>
// CHECK-NEXT: %[[UPD:.+]] = math.fma %{{.+}}, %[[VS]], %[[A]] : f32
// CHECK-NEXT: memref.store %[[UPD]], %[[ACC]][%[[C2]]] : memref<20xf32>
// CHECK-NOT: mla.
// CHECK: return

// KB4-LABEL: func.func @prefill_tail(

// Eight lanes: two full vectors, the same [16, 20) tail.
// W8-LABEL: func.func @prefill_tail(
// W8: scf.for %{{.+}} = %c0{{(_[0-9]+)?}} to %c16{{(_[0-9]+)?}} step %c8{{(_[0-9]+)?}} iter_args(%{{.+}}) -> (vector<8xf32>) {
// W8: vector.reduction <add>, %{{.+}} : vector<8xf32> into f32
// W8: scf.for %{{.+}} = %c16{{(_[0-9]+)?}} to %c20{{(_[0-9]+)?}} step %c1{{(_[0-9]+)?}} iter_args(%{{.+}}) -> (f32) {
// W8: math.fma
func.func @prefill_tail(%q: memref<?x2x20xf32>, %k: memref<?x2x20xf32>, %v: memref<?x2x20xf32>,
                        %cq: memref<?xi32>, %ck: memref<?xi32>, %o: memref<?x2x20xf32>, %lse: memref<2x?xf32>) {
  mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<?x2x20xf32>, memref<?x2x20xf32>, memref<?x2x20xf32>, memref<?xi32>, memref<?xi32>)
      outs(%o, %lse : memref<?x2x20xf32>, memref<2x?xf32>)
      {num_heads = 2 : i64, qk_head_dim = 20 : i64, v_head_dim = 20 : i64, softmax_scale = 0.125 : f32}
  return
}

// -----

// Causal decode over a paged bf16 cache with f32 queries: keys and values
// are cache rows found through the block table.
// CHECK-LABEL: func.func @decode(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: memref<?x?x2x80xf32>, %[[CACHE:[a-z0-9]+]]: memref<?x4x80xbf16>, %[[BT:[a-z0-9]+]]: memref<?x?xi32>,
// CHECK-SAME: %[[LENS:[a-z0-9]+]]: memref<?xi32>, %[[O:[a-z0-9]+]]: memref<?x?x2x64xf32>, %[[LSE:[a-z0-9]+]]: memref<?x2x?xf32>)
// CHECK-NOT: scf.for
// CHECK-DAG: %[[ACC:.+]] = memref.alloca() : memref<64xf32>
// CHECK-DAG: %[[SCORES:.+]] = memref.alloca() : memref<32xf32>
// Requests, queries, heads.
// CHECK: scf.for %[[REQ:[a-z0-9]+]] =
// CHECK: memref.load %[[LENS]][%[[REQ]]] : memref<?xi32>
// CHECK: scf.for %[[S:[a-z0-9]+]] =
// CHECK: scf.for %[[H:[a-z0-9]+]] = %{{.+}} to %c2{{(_[0-9]+)?}} step
// CHECK: iter_args({{.*}}) -> (f32, f32) {
// Token j: page block_table[req, j / 4], row j % 4, page id clamped to the cache.
// CHECK: %[[BLK:.+]] = arith.divui %{{.+}}, %c4{{(_[0-9]+)?}} : index
// CHECK: %[[ROW:.+]] = arith.remui %{{.+}}, %c4{{(_[0-9]+)?}} : index
// CHECK: memref.load %[[BT]][%[[REQ]], %[[BLK]]] : memref<?x?xi32>
// CHECK: arith.maxsi
// CHECK: %[[PAGE:.+]] = arith.minsi
// q . cache row over kv_lora_rank + rope_dim = 80 columns.
// CHECK: scf.for %{{.+}} = %c0{{(_[0-9]+)?}} to %c80{{(_[0-9]+)?}} step %c16{{(_[0-9]+)?}} iter_args(%{{.+}}) -> (vector<16xf32>) {
// CHECK: vector.load %[[Q]][%[[REQ]], %[[S]], %[[H]], %{{.+}}] : memref<?x?x2x80xf32>, vector<16xf32>
// CHECK: vector.load %[[CACHE]][%[[PAGE]], %[[ROW]], %{{.+}}] : memref<?x4x80xbf16>, vector<16xbf16>
// CHECK: arith.extf %{{.+}} : vector<16xbf16> to vector<16xf32>
// CHECK: vector.fma
// CHECK: vector.reduction <add>
// CHECK: memref.store %{{.+}}, %[[SCORES]]
// CHECK: arith.maximumf
// CHECK: arith.maximumf
// CHECK: math.exp
// Values: the first kv_lora_rank = 64 entries of the same cache rows.
// CHECK: math.exp
// CHECK: scf.for %{{.+}} = %c0{{(_[0-9]+)?}} to %c64{{(_[0-9]+)?}} step %c16{{(_[0-9]+)?}} {
// CHECK: vector.load %[[CACHE]][%{{.+}}, %{{.+}}, %{{.+}}] : memref<?x4x80xbf16>, vector<16xbf16>
// CHECK: vector.fma
// CHECK: vector.store %{{.+}}, %[[ACC]]
// CHECK: math.log
// CHECK: vector.store %{{.+}}, %[[O]][%[[REQ]], %[[S]], %[[H]], %{{.+}}] : memref<?x?x2x64xf32>, vector<16xf32>
// CHECK: memref.store %{{.+}}, %[[LSE]][%[[REQ]], %[[H]], %[[S]]] : memref<?x2x?xf32>
// CHECK-NOT: mla.
// CHECK-NOT: memref.alloca
// CHECK: return
func.func @decode(%q: memref<?x?x2x80xf32>, %cache: memref<?x4x80xbf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>,
                  %o: memref<?x?x2x64xf32>, %lse: memref<?x2x?xf32>) {
  mla.decode_attention ins(%q, %cache, %bt, %lens : memref<?x?x2x80xf32>, memref<?x4x80xbf16>, memref<?x?xi32>, memref<?xi32>)
      outs(%o, %lse : memref<?x?x2x64xf32>, memref<?x2x?xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 64 : i64, rope_dim = 16 : i64, block_size = 4 : i64,
       cache_dtype = bf16, softmax_scale = 0.25 : f32, causal}
  return
}

// -----

// Merge of two f16 states with output_lse: max, two exps, guarded weights,
// a vector linear combination and m + log(sum).
// CHECK-LABEL: func.func @merge(
// CHECK-SAME: %[[PO:[a-z0-9]+]]: memref<?x2x16xf16>, %[[PL:[a-z0-9]+]]: memref<2x?xf32>, %[[SO:[a-z0-9]+]]: memref<?x2x16xf16>,
// CHECK-SAME: %[[SL:[a-z0-9]+]]: memref<2x?xf32>, %[[O:[a-z0-9]+]]: memref<?x2x16xf16>, %[[OL:[a-z0-9]+]]: memref<2x?xf32>)
// CHECK: scf.for %[[T:[a-z0-9]+]] =
// CHECK: scf.for %[[H:[a-z0-9]+]] =
// +inf LSEs are read as -inf.
// CHECK: %[[LP_RAW:.+]] = memref.load %[[PL]][%[[H]], %[[T]]] : memref<2x?xf32>
// CHECK: memref.load %[[SL]][%[[H]], %[[T]]] : memref<2x?xf32>
// CHECK: %[[LP_INF:.+]] = arith.cmpf oeq, %[[LP_RAW]], %{{.+}} : f32
// CHECK: %[[LP:.+]] = arith.select %[[LP_INF]], %{{.+}}, %[[LP_RAW]] : f32
// CHECK: %[[LS:.+]] = arith.select
// CHECK: %[[M:.+]] = arith.maximumf %[[LP]], %[[LS]] : f32
// CHECK: %[[EMPTY:.+]] = arith.cmpf oeq, %[[M]], %{{.+}} : f32
// CHECK: arith.subf %[[LP]], %[[M]] : f32
// CHECK: math.exp
// CHECK: arith.select %[[EMPTY]]
// CHECK: arith.subf %[[LS]], %[[M]] : f32
// CHECK: math.exp
// CHECK: %[[SUM:.+]] = arith.addf
// CHECK: arith.divf
// CHECK: math.log %[[SUM]] : f32
// CHECK: scf.for %{{.+}} = %c0{{(_[0-9]+)?}} to %c16{{(_[0-9]+)?}} step %c16{{(_[0-9]+)?}} {
// CHECK: vector.load %[[PO]][%[[T]], %[[H]], %{{.+}}] : memref<?x2x16xf16>, vector<16xf16>
// CHECK: arith.mulf %{{.+}}, %{{.+}} : vector<16xf32>
// CHECK: vector.load %[[SO]][%[[T]], %[[H]], %{{.+}}] : memref<?x2x16xf16>, vector<16xf16>
// CHECK: arith.mulf %{{.+}}, %{{.+}} : vector<16xf32>
// CHECK: arith.addf %{{.+}}, %{{.+}} : vector<16xf32>
// CHECK: arith.truncf %{{.+}} : vector<16xf32> to vector<16xf16>
// CHECK: vector.store %{{.+}}, %[[O]][%[[T]], %[[H]], %{{.+}}] : memref<?x2x16xf16>, vector<16xf16>
// CHECK: memref.store %{{.+}}, %[[OL]][%[[H]], %[[T]]] : memref<2x?xf32>
// CHECK-NOT: mla.
// CHECK-NOT: memref.alloca
// CHECK: return
func.func @merge(%po: memref<?x2x16xf16>, %pl: memref<2x?xf32>, %so: memref<?x2x16xf16>, %sl: memref<2x?xf32>,
                 %o: memref<?x2x16xf16>, %ol: memref<2x?xf32>) {
  mla.merge_attn_states ins(%po, %pl, %so, %sl : memref<?x2x16xf16>, memref<2x?xf32>, memref<?x2x16xf16>, memref<2x?xf32>)
      outs(%o, %ol : memref<?x2x16xf16>, memref<2x?xf32>)
  return
}

// -----

// Without output_lse no LSE is computed or stored.
// CHECK-LABEL: func.func @merge_no_lse(
// CHECK: arith.maximumf
// CHECK: vector.store
// CHECK-NOT: math.log
// CHECK-NOT: memref.store
// CHECK-NOT: mla.
// CHECK: return
func.func @merge_no_lse(%po: memref<?x2x16xf32>, %pl: memref<2x?xf32>, %so: memref<?x2x16xf32>, %sl: memref<2x?xf32>,
                        %o: memref<?x2x16xf32>) {
  mla.merge_attn_states ins(%po, %pl, %so, %sl : memref<?x2x16xf32>, memref<2x?xf32>, memref<?x2x16xf32>, memref<2x?xf32>)
      outs(%o : memref<?x2x16xf32>)
  return
}

// -----

// Gather from a bf16 cache into an f32 workspace: one row copy per token,
// converted on the way.
// CHECK-LABEL: func.func @gather(
// CHECK-SAME: %[[CACHE:[a-z0-9]+]]: memref<?x4x32xbf16>, %[[BT:[a-z0-9]+]]: memref<?x?xi32>, %[[CU:[a-z0-9]+]]: memref<?xi32>,
// CHECK-SAME: %[[ST:[a-z0-9]+]]: memref<?xi32>, %[[WS:[a-z0-9]+]]: memref<?x32xf32>)
// CHECK-NOT: memref.alloca
// CHECK: scf.for %[[REQ:[a-z0-9]+]] =
// CHECK: memref.load %[[CU]][%[[REQ]]] : memref<?xi32>
// CHECK: memref.load %[[CU]][%{{.+}}] : memref<?xi32>
// CHECK: memref.load %[[ST]][%[[REQ]]] : memref<?xi32>
// CHECK: scf.for %[[J:[a-z0-9]+]] =
// CHECK: %[[BLK:.+]] = arith.divui %{{.+}}, %c4{{(_[0-9]+)?}} : index
// CHECK: %[[ROW:.+]] = arith.remui %{{.+}}, %c4{{(_[0-9]+)?}} : index
// CHECK: memref.load %[[BT]][%[[REQ]], %[[BLK]]] : memref<?x?xi32>
// CHECK: %[[PAGE:.+]] = arith.minsi
// CHECK: %[[DST:.+]] = arith.addi %{{.+}}, %[[J]] : index
// CHECK: scf.for %[[C:[a-z0-9]+]] = %c0{{(_[0-9]+)?}} to %c32{{(_[0-9]+)?}} step %c16{{(_[0-9]+)?}} {
// CHECK-NEXT: %[[X:.+]] = vector.load %[[CACHE]][%[[PAGE]], %[[ROW]], %[[C]]] : memref<?x4x32xbf16>, vector<16xbf16>
// CHECK-NEXT: %[[Y:.+]] = arith.extf %[[X]] : vector<16xbf16> to vector<16xf32>
// CHECK-NEXT: vector.store %[[Y]], %[[WS]][%[[DST]], %[[C]]] : memref<?x32xf32>, vector<16xf32>
// CHECK-NOT: mla.
// CHECK: return
func.func @gather(%cache: memref<?x4x32xbf16>, %bt: memref<?x?xi32>, %cu: memref<?xi32>, %st: memref<?xi32>,
                  %ws: memref<?x32xf32>) {
  mla.gather_cache ins(%cache, %bt, %cu, %st : memref<?x4x32xbf16>, memref<?x?xi32>, memref<?xi32>, memref<?xi32>)
      outs(%ws : memref<?x32xf32>) {block_size = 4 : i64}
  return
}

// -----

// concat_and_cache: a slot is written only when 0 <= slot < capacity
// (scf.if), kv_c into columns [0, 32), k_pe into [32, 48), truncated to bf16.
// CHECK-LABEL: func.func @concat(
// CHECK-SAME: %[[KVC:[a-z0-9]+]]: memref<?x32xf32>, %[[KPE:[a-z0-9]+]]: memref<?x16xf32>, %[[SLOTS:[a-z0-9]+]]: memref<?xi64>,
// CHECK-SAME: %[[CACHE:[a-z0-9]+]]: memref<?x4x48xbf16>)
// CHECK: %[[NB:.+]] = memref.dim %[[CACHE]], %{{.+}} : memref<?x4x48xbf16>
// CHECK: %[[CAP:.+]] = arith.muli %[[NB]], %c4{{(_[0-9]+)?}} : index
// CHECK: scf.for %[[T:[a-z0-9]+]] =
// CHECK: %[[RAW:.+]] = memref.load %[[SLOTS]][%[[T]]] : memref<?xi64>
// CHECK: %[[SLOT:.+]] = arith.index_cast %[[RAW]] : i64 to index
// CHECK-DAG: %[[BELOW:.+]] = arith.cmpi slt, %[[SLOT]], %[[CAP]] : index
// CHECK-DAG: %[[NONNEG:.+]] = arith.cmpi sge, %[[SLOT]], %c0{{(_[0-9]+)?}} : index
// CHECK: %[[VALID:.+]] = arith.andi
// CHECK: scf.if %[[VALID]] {
// CHECK: %[[PAGE:.+]] = arith.divui %[[SLOT]], %c4{{(_[0-9]+)?}} : index
// CHECK: %[[ROW:.+]] = arith.remui %[[SLOT]], %c4{{(_[0-9]+)?}} : index
// CHECK: vector.load %[[KVC]][%[[T]], %{{.+}}] : memref<?x32xf32>, vector<16xf32>
// CHECK: arith.truncf %{{.+}} : vector<16xf32> to vector<16xbf16>
// CHECK: vector.store %{{.+}}, %[[CACHE]][%[[PAGE]], %[[ROW]], %{{.+}}] : memref<?x4x48xbf16>, vector<16xbf16>
// CHECK: vector.load %[[KPE]][%[[T]], %[[C:[a-z0-9]+]]] : memref<?x16xf32>, vector<16xf32>
// CHECK: %[[SHIFTED:.+]] = arith.addi %[[C]], %c32{{(_[0-9]+)?}} : index
// CHECK: vector.store %{{.+}}, %[[CACHE]][%[[PAGE]], %[[ROW]], %[[SHIFTED]]] : memref<?x4x48xbf16>, vector<16xbf16>
// CHECK-NOT: mla.
// CHECK: return
func.func @concat(%kvc: memref<?x32xf32>, %kpe: memref<?x16xf32>, %slots: memref<?xi64>, %cache: memref<?x4x48xbf16>) {
  mla.concat_and_cache ins(%kvc, %kpe, %slots : memref<?x32xf32>, memref<?x16xf32>, memref<?xi64>)
      outs(%cache : memref<?x4x48xbf16>)
      {kv_lora_rank = 32 : i64, rope_dim = 16 : i64, block_size = 4 : i64, cache_dtype = bf16}
  return
}

// -----

// kv_up_proj: heads outer, tokens inner; acc[0:P+V] = sum_l kv_c[s, l] * W[l, h, :],
// then k = [acc[0:P], k_pe], v = acc[P:P+V].
// CHECK-LABEL: func.func @kv_up(
// CHECK-SAME: %[[KVC:[a-z0-9]+]]: memref<?x8xf32>, %[[KPE:[a-z0-9]+]]: memref<?x16xf32>, %[[W:[a-z0-9]+]]: memref<8x2x48xf32>,
// CHECK-SAME: %[[K:[a-z0-9]+]]: memref<?x2x48xf32>, %[[V:[a-z0-9]+]]: memref<?x2x16xf32>)
// CHECK-NEXT: %[[ACC:.+]] = memref.alloca() : memref<48xf32>
// CHECK: scf.for %[[H:[a-z0-9]+]] = %{{.+}} to %c2{{(_[0-9]+)?}} step
// CHECK: scf.for %[[S:[a-z0-9]+]] =
// CHECK: vector.store %{{.+}}, %[[ACC]][%{{.+}}] : memref<48xf32>, vector<16xf32>
// CHECK: scf.for %[[L:[a-z0-9]+]] = %{{.+}} to %c8{{(_[0-9]+)?}} step %c1{{(_[0-9]+)?}} {
// CHECK: %[[X:.+]] = memref.load %[[KVC]][%[[S]], %[[L]]] : memref<?x8xf32>
// CHECK: scf.for %{{.+}} = %c0{{(_[0-9]+)?}} to %c48{{(_[0-9]+)?}} step %c16{{(_[0-9]+)?}} {
// CHECK: %[[XV:.+]] = vector.broadcast %[[X]] : f32 to vector<16xf32>
// CHECK: %[[WV:.+]] = vector.load %[[W]][%[[L]], %[[H]], %{{.+}}] : memref<8x2x48xf32>, vector<16xf32>
// CHECK: vector.fma %[[XV]], %[[WV]], %{{.+}} : vector<16xf32>
// CHECK: vector.store %{{.+}}, %[[K]][%[[S]], %[[H]], %{{.+}}] : memref<?x2x48xf32>, vector<16xf32>
// CHECK: vector.load %[[KPE]][%[[S]], %{{.+}}] : memref<?x16xf32>, vector<16xf32>
// CHECK: vector.store %{{.+}}, %[[K]][%[[S]], %[[H]], %{{.+}}] : memref<?x2x48xf32>, vector<16xf32>
// CHECK: vector.load %[[ACC]][%{{.+}}] : memref<48xf32>, vector<16xf32>
// CHECK: vector.store %{{.+}}, %[[V]][%[[S]], %[[H]], %{{.+}}] : memref<?x2x16xf32>, vector<16xf32>
// CHECK-NOT: mla.
// CHECK-NOT: memref.alloca
// CHECK: return
func.func @kv_up(%kvc: memref<?x8xf32>, %kpe: memref<?x16xf32>, %w: memref<8x2x48xf32>,
                 %k: memref<?x2x48xf32>, %v: memref<?x2x16xf32>) {
  mla.kv_up_proj ins(%kvc, %kpe, %w : memref<?x8xf32>, memref<?x16xf32>, memref<8x2x48xf32>)
      outs(%k, %v : memref<?x2x48xf32>, memref<?x2x16xf32>)
      {num_heads = 2 : i64, kv_lora_rank = 8 : i64, qk_nope_head_dim = 32 : i64, rope_dim = 16 : i64, v_head_dim = 16 : i64}
  return
}

// -----

// q_absorb into a strided view of the decode query: per head, a [16] x [16, 32] product.
// CHECK-LABEL: func.func @q_absorb(
// CHECK-SAME: %[[QN:[a-z0-9]+]]: memref<?x2x16xf32>, %[[WUK:[a-z0-9]+]]: memref<2x16x32xf32>, %[[QL:[a-z0-9]+]]: memref<?x2x32xf32, strided<[144, 72, 1]>>)
// CHECK-NEXT: %[[ACC:.+]] = memref.alloca() : memref<32xf32>
// CHECK: scf.for %[[H:[a-z0-9]+]] = %{{.+}} to %c2{{(_[0-9]+)?}} step
// CHECK: scf.for %[[T:[a-z0-9]+]] =
// CHECK: scf.for %[[P:[a-z0-9]+]] = %{{.+}} to %c16{{(_[0-9]+)?}} step %c1{{(_[0-9]+)?}} {
// CHECK: memref.load %[[QN]][%[[T]], %[[H]], %[[P]]] : memref<?x2x16xf32>
// CHECK: vector.load %[[WUK]][%[[H]], %[[P]], %{{.+}}] : memref<2x16x32xf32>, vector<16xf32>
// CHECK: vector.fma
// CHECK: vector.store %{{.+}}, %[[QL]][%[[T]], %[[H]], %{{.+}}] : memref<?x2x32xf32, strided<[144, 72, 1]>>, vector<16xf32>
// CHECK-NOT: mla.
// CHECK: return
func.func @q_absorb(%qn: memref<?x2x16xf32>, %wuk: memref<2x16x32xf32>, %ql: memref<?x2x32xf32, strided<[144, 72, 1]>>) {
  mla.q_absorb ins(%qn, %wuk : memref<?x2x16xf32>, memref<2x16x32xf32>)
      outs(%ql : memref<?x2x32xf32, strided<[144, 72, 1]>>)
      {num_heads = 2 : i64, qk_nope_head_dim = 16 : i64, kv_lora_rank = 32 : i64}
  return
}

// -----

// v_up_proj in bf16: per head, a [32] x [32, 16] product, stored truncated.
// CHECK-LABEL: func.func @v_up_proj(
// CHECK-SAME: %[[OL:[a-z0-9]+]]: memref<?x2x32xbf16>, %[[WUV:[a-z0-9]+]]: memref<2x32x16xbf16>, %[[O:[a-z0-9]+]]: memref<?x2x16xbf16>)
// CHECK-NEXT: %[[ACC:.+]] = memref.alloca() : memref<16xf32>
// CHECK: scf.for %[[H:[a-z0-9]+]] = %{{.+}} to %c2{{(_[0-9]+)?}} step
// CHECK: scf.for %[[T:[a-z0-9]+]] =
// CHECK: scf.for %[[L:[a-z0-9]+]] = %{{.+}} to %c32{{(_[0-9]+)?}} step %c1{{(_[0-9]+)?}} {
// CHECK: %[[X:.+]] = memref.load %[[OL]][%[[T]], %[[H]], %[[L]]] : memref<?x2x32xbf16>
// CHECK: arith.extf %[[X]] : bf16 to f32
// CHECK: vector.load %[[WUV]][%[[H]], %[[L]], %{{.+}}] : memref<2x32x16xbf16>, vector<16xbf16>
// CHECK: vector.fma
// CHECK: arith.truncf %{{.+}} : vector<16xf32> to vector<16xbf16>
// CHECK: vector.store %{{.+}}, %[[O]][%[[T]], %[[H]], %{{.+}}] : memref<?x2x16xbf16>, vector<16xbf16>
// CHECK-NOT: mla.
// CHECK: return

// W8-LABEL: func.func @v_up_proj(
// W8: memref.alloca() : memref<16xf32>
// W8: vector.load %{{.+}} : memref<2x32x16xbf16>, vector<8xbf16>
// W8: vector.fma %{{.+}}, %{{.+}}, %{{.+}} : vector<8xf32>
// W8: arith.truncf %{{.+}} : vector<8xf32> to vector<8xbf16>
func.func @v_up_proj(%ol: memref<?x2x32xbf16>, %wuv: memref<2x32x16xbf16>, %o: memref<?x2x16xbf16>) {
  mla.v_up_proj ins(%ol, %wuv : memref<?x2x32xbf16>, memref<2x32x16xbf16>)
      outs(%o : memref<?x2x16xbf16>)
      {num_heads = 2 : i64, kv_lora_rank = 32 : i64, v_head_dim = 16 : i64}
  return
}

// -----

// An op inside a user loop: scratch goes to the function's entry block, so
// the stack does not grow with every iteration of the loop.
// CHECK-LABEL: func.func @in_loop(
// CHECK-NEXT: %[[ACC:.+]] = memref.alloca() : memref<16xf32>
// CHECK-NOT: memref.alloca
// CHECK: scf.for %{{.+}} = %c0 to %{{.+}} step %c1 {
// CHECK-NOT: memref.alloca
// CHECK: vector.store %{{.+}}, %[[ACC]]
// CHECK-NOT: mla.
// CHECK: return
func.func @in_loop(%ol: memref<?x2x32xbf16>, %wuv: memref<2x32x16xbf16>, %o: memref<?x2x16xbf16>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    mla.v_up_proj ins(%ol, %wuv : memref<?x2x32xbf16>, memref<2x32x16xbf16>)
        outs(%o : memref<?x2x16xbf16>)
        {num_heads = 2 : i64, kv_lora_rank = 32 : i64, v_head_dim = 16 : i64}
  }
  return
}
