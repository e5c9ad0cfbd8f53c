// mla-async-entry-return drops the host waits a host function ends with
// (its work stays queued on the caller's stream), and keeps every other
// wait: asynchronous joins, and synchronous waits a host read depends on.
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
