//===- WgmmaPrefillShape.h - The Hopper prefill kernel's shape --*- C++ -*-===//
//
// What the wgmma (sm_90a) prefill kernel (lib/Conversion/MLAToGPU/
// Wgmma/GpuPrefillWgmma.cpp) is made of, and which head dims it takes, for the
// kernel and for the tests that run it. Plain C++, no MLIR. Tiles live in
// shared memory in wgmma's swizzled layout (mla/Target/WgmmaSwizzle.h).
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TARGET_WGMMAPREFILLSHAPE_H
#define MLA_TARGET_WGMMAPREFILLSHAPE_H

#include "mla/Target/SharedRegions.h"
#include "mla/Target/WgmmaSwizzle.h"

#include <cstdint>

namespace mla::wgmma_prefill {

/// Query rows of a warpgroup (one m64 tile), the warpgroups that compute
/// (the consumers), their threads and the rows of a block.
inline constexpr int64_t kGroupRows = 64;
inline constexpr int64_t kWarpgroups = 2;
inline constexpr int64_t kThreads = kWarpgroups * 128;
inline constexpr int64_t kBlockRows = kWarpgroups * kGroupRows;
/// A third warpgroup only copies (the producer): Q and the key tiles,
/// announced on mbarriers (see SharedLayout).
inline constexpr int64_t kProducerThreads = 128;
/// Threads of the kernel's block: the consumers, then the producer.
inline constexpr int64_t kKernelThreads = kThreads + kProducerThreads;
/// Registers a thread after setmaxnreg: the consumers hold O, the scores
/// in flight and the softmax; the producer computes copy addresses. At
/// launch each thread has 64 Ki / 384 rounded down to 8 (168); the split
/// must not exceed that total: 2 x 128 x 232 + 128 x 40 = 64512.
inline constexpr int64_t kConsumerRegisters = 232, kProducerRegisters = 40;
static_assert(kThreads * kConsumerRegisters +
                      kProducerThreads * kProducerRegisters <=
                  kKernelThreads * 168,
              "setmaxnreg moves registers, it does not add them");
/// Keys of one shared tile: the N of the scores' wgmma, the K of PV's.
inline constexpr int64_t kTileKeys = 64;
/// The largest head dims: O is 64 x Dv f32 in a warpgroup's registers
/// (Dv / 2 a thread), and Dqk / 16 k-steps are unrolled.
inline constexpr int64_t kMaxVDim = 128, kMaxQkDim = 256;

/// Where everything lives in a block's shared memory (bytes from the
/// first 1024-byte boundary; the allocation has that much slack): Q as two
/// 64-row tiles, `stages` stages of a K then a V tile (P stays in
/// registers), then the producer's mbarriers: each stage's "landed" one, each
/// stage's "read" one, and Q's (8 bytes each).
struct SharedLayout {
  int64_t stages;
  int64_t q, kv, vOffset, stage, barriers, bytes;

  SharedLayout(int64_t qkDim, int64_t vDim, int64_t stageCount)
      : stages(stageCount) {
    const int64_t elementBytes = 2;
    // A stage: K, then V.
    SharedRegions inStage;
    inStage.tiles(1, kTileKeys, qkDim, elementBytes);
    vOffset = inStage.tiles(1, kTileKeys, vDim, elementBytes);
    stage = inStage.total();
    SharedRegions r;
    q = r.tiles(1, kBlockRows, qkDim, elementBytes);
    kv = r.bytes(stages * stage);
    barriers = r.bytes((2 * stages + 1) * 8);
    bytes = r.total(wgmma::kAtomBytes);
  }
};

/// Stages of the key-tile ring that fit `maxSharedBytesPerBlock`: while
/// tile t's V and tile t + 1's K are in use, stages - 2 tiles are in
/// flight. Four where they fit (two in flight), else three, else zero.
inline int64_t stagesFor(int64_t qkDim, int64_t vDim,
                         int64_t maxSharedBytesPerBlock) {
  for (int64_t stages : {4, 3})
    if (SharedLayout(qkDim, vDim, stages).bytes <= maxSharedBytesPerBlock)
      return stages;
  return 0;
}

/// Whether the kernel takes these head dims: whole column blocks, within
/// the register budget, and a layout that fits `maxSharedBytesPerBlock`
/// (on sm_90a every such pair does: qk 192 / v 128 with four stages). It
/// also needs bf16 or f16 operands of one type, row-major.
inline bool takesDims(int64_t qkDim, int64_t vDim,
                      int64_t maxSharedBytesPerBlock) {
  return qkDim > 0 && vDim > 0 && qkDim % wgmma::kAtomColumns == 0 &&
         vDim % wgmma::kAtomColumns == 0 && qkDim <= kMaxQkDim &&
         vDim <= kMaxVDim &&
         stagesFor(qkDim, vDim, maxSharedBytesPerBlock) > 0;
}

} // namespace mla::wgmma_prefill

#endif // MLA_TARGET_WGMMAPREFILLSHAPE_H
