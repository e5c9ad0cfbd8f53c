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
/// Keys of one shared tile: the N of the scores' wgmma, the K of PV's
/// (FlashAttention-3's tile for head dims up to 192).
inline constexpr int64_t kTileKeys = 128;
/// The largest head dims: O is 64 x Dv f32 in a warpgroup's registers
/// (Dv / 2 a thread), and Dqk / 16 k-steps are unrolled.
inline constexpr int64_t kMaxVDim = 128, kMaxQkDim = 256;

/// Where everything lives in a block's shared memory (bytes from the
/// first 1024-byte boundary; the allocation has that much slack): Q as two
/// 64-row tiles, a ring of `kStages` K tiles, a ring of `vStages` V tiles
/// (P stays in registers), then the producer's mbarriers: each K stage's
/// "landed" and "read" ones, each V stage's, and Q's (8 bytes each). K and
/// V have rings of their own because their tiles are done at different
/// times: a K tile once its scores are, a V tile an iteration later, once
/// its P V is.
struct SharedLayout {
  int64_t kStages, vStages;
  int64_t q, k, kStage, v, vStage, barriers, bytes;

  SharedLayout(int64_t qkDim, int64_t vDim, int64_t kStageCount,
               int64_t vStageCount)
      : kStages(kStageCount), vStages(vStageCount) {
    const int64_t elementBytes = 2;
    SharedRegions r;
    q = r.tiles(1, kBlockRows, qkDim, elementBytes);
    kStage = SharedRegions::tileBytes(kTileKeys, qkDim, elementBytes);
    k = r.tiles(kStages, kTileKeys, qkDim, elementBytes);
    vStage = SharedRegions::tileBytes(kTileKeys, vDim, elementBytes);
    v = r.tiles(vStages, kTileKeys, vDim, elementBytes);
    barriers = r.bytes((2 * kStages + 2 * vStages + 1) * 8);
    bytes = r.total(wgmma::kAtomBytes);
  }
  /// The K and V rings, one region (the results are staged there).
  int64_t ringBytes() const { return kStages * kStage + vStages * vStage; }
};

/// The rings that fit `maxSharedBytesPerBlock`: two K and two V stages
/// where they fit (a tile's copy has an iteration to land), else two K
/// stages and one V (a tile's V is copied once the previous tile's P V is
/// done, while the consumers compute that tile's scores), else none (0, 0).
struct Stages {
  int64_t k = 0, v = 0;
};
inline Stages stagesFor(int64_t qkDim, int64_t vDim,
                        int64_t maxSharedBytesPerBlock) {
  for (Stages stages : {Stages{2, 2}, Stages{2, 1}})
    if (SharedLayout(qkDim, vDim, stages.k, stages.v).bytes <=
        maxSharedBytesPerBlock)
      return stages;
  return {};
}

/// Whether the kernel takes these head dims: whole column blocks, within
/// the register budget, and a layout that fits `maxSharedBytesPerBlock`
/// (on sm_90a every such pair does: qk 192 / v 128 with two stages of
/// each, qk 256 / v 128 with one V stage). It
/// also needs bf16 or f16 operands of one type, row-major.
inline bool takesDims(int64_t qkDim, int64_t vDim,
                      int64_t maxSharedBytesPerBlock) {
  return qkDim > 0 && vDim > 0 && qkDim % wgmma::kAtomColumns == 0 &&
         vDim % wgmma::kAtomColumns == 0 && qkDim <= kMaxQkDim &&
         vDim <= kMaxVDim &&
         stagesFor(qkDim, vDim, maxSharedBytesPerBlock).k > 0;
}

} // namespace mla::wgmma_prefill

#endif // MLA_TARGET_WGMMAPREFILLSHAPE_H
