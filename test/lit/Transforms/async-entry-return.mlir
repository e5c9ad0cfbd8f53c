// mla-async-entry-return drops the host waits a host function ends with
// (its work stays queued on the caller's stream), including those in the
// branches of an scf.if nothing after reads on the host, and keeps every
// other wait: asynchronous joins, synchronous waits a host read depends
// on, and waits in loop bodies.
// RUN: mla-opt %s --mla-async-entry-return | FileCheck %s

// CHECK-LABEL: func.func @final_wait_dropped
// CHECK: gpu.dealloc async
// CHECK-NOT: gpu.wait
// CHECK: return
func.func @final_wait_dropped(%n: index) {
  %t0 = gpu.wait async
  %m, %t1 = gpu.alloc async [%t0] (%n) : memref<?xf32>
  %t2 = gpu.dealloc async [%t1] %m : memref<?xf32>
  gpu.wait [%t2]
  return
}

// A wait followed by a host read of device data is kept.
// CHECK-LABEL: func.func @wait_before_host_read
// CHECK: gpu.memcpy async
// CHECK-NEXT: gpu.wait [
// CHECK-NEXT: memref.load
func.func @wait_before_host_read(%d: memref<4xi32>, %h: memref<4xi32>) -> i32 {
  %c0 = arith.constant 0 : index
  %t0 = gpu.wait async
  %t1 = gpu.memcpy async [%t0] %h, %d : memref<4xi32>, memref<4xi32>
  gpu.wait [%t1]
  %v = memref.load %h[%c0] : memref<4xi32>
  return %v : i32
}

// An asynchronous wait (a join of tokens) right before the return is kept.
// CHECK-LABEL: func.func @async_join_kept
// CHECK: gpu.wait async
// CHECK: return
func.func @async_join_kept() -> !gpu.async.token {
  %t0 = gpu.wait async
  %t1 = gpu.wait async [%t0]
  return %t1 : !gpu.async.token
}

// Waits between launches, with no host read anywhere after them, all go.
// CHECK-LABEL: func.func @waits_between_launches_dropped
// CHECK-NOT: gpu.wait [
// CHECK: return
func.func @waits_between_launches_dropped(%n: index) {
  %t0 = gpu.wait async
  %m, %t1 = gpu.alloc async [%t0] (%n) : memref<?xf32>
  gpu.wait [%t1]
  %t2 = gpu.wait async
  %t3 = gpu.dealloc async [%t2] %m : memref<?xf32>
  gpu.wait [%t3]
  return
}

// A host read nested in a later loop keeps the wait before it.
// CHECK-LABEL: func.func @host_read_in_loop
// CHECK: gpu.wait [
// CHECK: scf.for
func.func @host_read_in_loop(%d: memref<4xi32>, %h: memref<4xi32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %t0 = gpu.wait async
  %t1 = gpu.memcpy async [%t0] %h, %d : memref<4xi32>, memref<4xi32>
  gpu.wait [%t1]
  scf.for %i = %c0 to %c4 step %c1 {
    %v = memref.load %h[%i] : memref<4xi32>
    memref.store %v, %h[%c0] : memref<4xi32>
  }
  return
}

// A launch chosen on the host: the waits in both branches of the scf.if
// go when nothing after the scf.if reads on the host.
// CHECK-LABEL: func.func @waits_in_branches_dropped
// CHECK: scf.if
// CHECK-NOT: gpu.wait [
// CHECK: return
func.func @waits_in_branches_dropped(%c: i1, %n: index) {
  scf.if %c {
    %t0 = gpu.wait async
    %m, %t1 = gpu.alloc async [%t0] (%n) : memref<?xf32>
    gpu.wait [%t1]
  } else {
    %t0 = gpu.wait async
    %m, %t1 = gpu.alloc async [%t0] (%n) : memref<?xf32>
    gpu.wait [%t1]
  }
  return
}

// A host read after the scf.if keeps the waits in its branches.
// CHECK-LABEL: func.func @waits_in_branches_before_host_read
// CHECK: scf.if
// CHECK: gpu.wait [
// CHECK: } else {
// CHECK: gpu.wait [
// CHECK: memref.load
func.func @waits_in_branches_before_host_read(%c: i1, %d: memref<4xi32>,
                                              %h: memref<4xi32>) -> i32 {
  %c0 = arith.constant 0 : index
  scf.if %c {
    %t0 = gpu.wait async
    %t1 = gpu.memcpy async [%t0] %h, %d : memref<4xi32>, memref<4xi32>
    gpu.wait [%t1]
  } else {
    %t0 = gpu.wait async
    %t1 = gpu.memcpy async [%t0] %h, %d : memref<4xi32>, memref<4xi32>
    gpu.wait [%t1]
  }
  %v = memref.load %h[%c0] : memref<4xi32>
  return %v : i32
}

// A wait in a loop body stays: the body's earlier ops run again after it.
// CHECK-LABEL: func.func @wait_in_loop_kept
// CHECK: scf.for
// CHECK: gpu.wait [
func.func @wait_in_loop_kept(%d: memref<4xi32>, %h: memref<4xi32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.for %i = %c0 to %c4 step %c1 {
    %v = memref.load %h[%i] : memref<4xi32>
    memref.store %v, %h[%c0] : memref<4xi32>
    %t0 = gpu.wait async
    %t1 = gpu.memcpy async [%t0] %h, %d : memref<4xi32>, memref<4xi32>
    gpu.wait [%t1]
  }
  return
}
