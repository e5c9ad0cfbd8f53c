//===- WgmmaEmitter.h - Warpgroup tensor-core building blocks (sm_90a) ----===//
//
// What the `wgmma` strategy's kernels are made of, on top of MmaEmitter's
// copies, exponentials and quad reductions: the 128-byte-swizzled shared
// layout wgmma reads (see mla/Target/WgmmaDecodeShape.h), the 64-bit matrix
// descriptors naming an operand tile in it, and wgmma.mma_async with its
// fences, commit and wait.
//
// Descriptor (PTX ISA, "Matrix Descriptor Format"): bits 0-13 the start
// address / 16, 16-29 the leading byte offset / 16, 32-45 the stride byte
// offset / 16, 62-63 the swizzle mode (1: 128 bytes). For a K-major operand
// in 128-byte swizzle (A, or B stored N x K) the stride offset is the
// distance between 8-row atoms (1024 bytes) and the leading offset is
// unused; for an MN-major B (stored K x N) the leading offset is the
// distance between 64-column blocks along N and the stride offset the
// distance between 8-row atoms along K. A k16 step advances the start
// address by 32 bytes inside a K-major atom, by two atoms (2048 bytes)
// along an MN-major one.
//
// Accumulator layout of m64nNk16 (f32): thread t of the warpgroup (warp
// w = t / 32, lane = 4 g + q) holds d[4 j + 2 i + c] at row 16 w + g + 8 i,
// column 8 j + 2 q + c: the m16n8 mma.sync fragment, per warp and n8 tile.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_LIB_CONVERSION_MLATOGPU_WGMMAEMITTER_H
#define MLA_LIB_CONVERSION_MLATOGPU_WGMMAEMITTER_H

#include "Emitters/MmaEmitter.h"

namespace mla::gpu {

class WgmmaEmitter : public MmaEmitter {
public:
  using MmaEmitter::MmaEmitter;

  /// A thread of a block of warpgroups: its warp and lane, its warpgroup
  /// and warp in it, and its quad (lane / 4) and place in the quad (lane %
  /// 4), which name its accumulator rows and columns.
  struct WarpgroupThread {
    mlir::Value tid, warp, lane, group, groupWarp, laneGroup, quad;
  };
  WarpgroupThread warpgroupThread();

  /// The shared-window address of a shared memref's first byte (index).
  mlir::Value sharedAddress(mlir::Value sharedMemref);
  /// Where the block's dynamic shared memory `raw` reaches its first
  /// 1024-byte boundary, from which the kernels lay out their swizzled
  /// tiles (swizzle atoms are addressed by absolute address bits; the
  /// allocations have 1024 bytes of slack): the byte offset into `raw` and
  /// the shared address.
  struct AlignedShared {
    mlir::Value offset, address;
  };
  AlignedShared alignedShared(mlir::Value raw);

  /// Element offset of (row, col) in a swizzled tile of `rows` rows.
  mlir::Value swizzled(mlir::Value row, mlir::Value col, int64_t rows);

  /// The descriptor (i64) of an operand starting at shared byte address
  /// `address` (1024-byte aligned atoms; see the file comment).
  mlir::Value descriptor(mlir::Value address, int64_t leadingBytes,
                         int64_t strideBytes);
  /// `descriptor` moved by `bytes` (a multiple of 16; no carry out of the
  /// address field, shared memory being below 256 KiB).
  mlir::Value advance(mlir::Value descriptor, int64_t bytes);

  /// An accumulator struct of `n` f32 with no values, for a first wgmma
  /// that does not read it (accumulate = false): no zeroing moves.
  mlir::Value unsetAccumulator(int64_t n);
  /// `n` f32 accumulators as the wgmma's register struct, and back.
  mlir::Value toAccumulator(llvm::ArrayRef<mlir::Value> values);
  llvm::SmallVector<mlir::Value> fromAccumulator(mlir::Value acc, int64_t n);

  /// D (64 x n, f32) = A (64 x 16) B (16 x n) + (accumulate ? D : 0), A
  /// K-major, B K-major or (`transposeB`) N-major, both through
  /// descriptors. Returns the new accumulator struct.
  mlir::Value mma(mlir::Value acc, mlir::Value descA, mlir::Value descB,
                  int64_t n, bool accumulate, bool transposeB);

  /// acc += A B: A (64 x `depth`) K-major, B (`depth` x n) N-major, both
  /// in 128-byte swizzle (k16 steps 32 bytes into A's atoms, two atoms
  /// along B), as one fenced and committed group of `depth` / 16 wgmma
  /// (attention's P V, an up-projection's slice). Returns the accumulator
  /// struct; the caller waits for it.
  mlir::Value issueProductNMajorB(mlir::Value acc, mlir::Value descA,
                                  mlir::Value descB, int64_t depth, int64_t n);

  /// D (64 x n, f32) = A (64 x 16) B (16 x n) + (accumulate ? D : 0) with
  /// A in four 32-bit registers of the thread (InlinePtx.h has their
  /// layout) and B through its descriptor, K-major or (`transposeB`)
  /// N-major. Returns the new accumulator struct.
  mlir::Value mmaRegisterA(mlir::Value acc, llvm::ArrayRef<mlir::Value> a,
                           mlir::Value descB, int64_t n, bool accumulate,
                           bool transposeB);
  /// acc += A B with A (64 x `depth`) in registers, four per k16 step
  /// (`a`, from `packRegister`), and B (`depth` x n) N-major in
  /// 128-byte swizzle: attention's P V with P never leaving the registers,
  /// as one fenced and committed group. The caller waits for it.
  mlir::Value issueProductRegisterA(mlir::Value acc,
                                    llvm::ArrayRef<mlir::Value> a,
                                    mlir::Value descB, int64_t depth,
                                    int64_t n);
  /// Two f32 accumulators of a warpgroup's tile rounded to the element
  /// type as one 32-bit A register of a product over its columns: values
  /// 2 r and 2 r + 1 of the accumulator order make register r. (The
  /// accumulator layout of columns 16 s .. 16 s + 15 is exactly the A
  /// layout of k16 step s, so no value moves between lanes.)
  mlir::Value packRegister(mlir::Value lo, mlir::Value hi);

private:
  /// One fenced and committed group of `depth` / 16 k16 steps over an
  /// N-major B in 128-byte swizzle (a step moves two 8-row atoms along
  /// it): `step(acc, k, descB of step k)` issues step k's wgmma.
  mlir::Value issueNMajorSteps(
      mlir::Value acc, mlir::Value descB, int64_t depth,
      llvm::function_ref<mlir::Value(mlir::Value acc, int64_t k,
                                     mlir::Value descB)>
          step);

public:
  /// wgmma.fence: orders earlier register and shared-memory accesses
  /// before the wgmma that follow.
  void fence();
  /// Commits the wgmma issued so far as a group.
  void commit();
  /// Waits until at most `pending` committed groups are in flight.
  void wait(int64_t pending);
  /// bar.sync of warpgroup `group`'s 128 threads alone (named barrier
  /// 1 + group; barrier 0 is the block's).
  void warpgroupBarrier(mlir::Value group);
  /// Named barrier `id` (1-15) of `threads` threads: bar.sync (`wait`) or
  /// bar.arrive, which signals without waiting (a producer's half of a
  /// handoff whose consumer syncs). Both order the thread's earlier memory
  /// accesses before the barrier's completion.
  void namedBarrier(int64_t id, int64_t threads, bool wait);
  /// fence.proxy.async on shared memory: makes the generic proxy's writes
  /// (stores, cp.async) visible to wgmma's reads.
  void sharedProxyFence();

  /// mbarriers at shared address `address` (index, 8-byte aligned):
  /// initialize with `count` expected arrivals (phase 0); arrive once this
  /// thread's earlier cp.async copies have landed (counted among the
  /// expected arrivals, the thread does not wait); wait until the phase of
  /// parity `parity` (i32, 0 or 1) has completed, which makes the copies
  /// tracked by it visible to this thread.
  void initBarrier(mlir::Value address, int64_t count);
  void arriveWhenCopiesLand(mlir::Value address);
  void waitBarrierPhase(mlir::Value address, mlir::Value parity);
  /// Arrives once at the mbarrier at `address` (this thread's share of a
  /// phase's expected arrivals), without waiting.
  void arrive(mlir::Value address);
  /// The phase parity (i32) of the `use`-th use (index, from 0) of a
  /// barrier that completes one phase each use.
  mlir::Value phaseParity(mlir::Value use);

  /// setmaxnreg: the warpgroup's registers a thread raised (`increase`) or
  /// lowered to `count` (a multiple of 8 in [24, 256]), so that a
  /// producer warpgroup that needs few hands its share to the others.
  /// Every thread of the warpgroup executes it.
  void setMaxRegisters(int64_t count, bool increase);

  /// Arrives at the mbarrier at `address` (this block's), announcing
  /// `bytes` more bytes of tensor copies for its current phase.
  void arriveExpectingBytes(mlir::Value address, int64_t bytes);
  /// A tensor copy (TMA): the box of the 2-D tensor map `tensorMap`
  /// (generic pointer to a CUtensorMap in global memory) at (`column`,
  /// `row`) (i32) to shared address `destination`, its bytes counted by the
  /// mbarrier at `barrier`.
  void copyBox(mlir::Value destination, mlir::Value tensorMap,
               mlir::Value column, mlir::Value row, mlir::Value barrier);
};

} // namespace mla::gpu

#endif // MLA_LIB_CONVERSION_MLATOGPU_WGMMAEMITTER_H
