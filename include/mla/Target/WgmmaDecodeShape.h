//===- WgmmaDecodeShape.h - The Hopper decode kernel's shape ----*- C++ -*-===//
//
// What the wgmma (sm_90a) decode split kernel is made of, for the three
// parts that depend on it: the kernel (lib/Conversion/MLAToGPU/
// Wgmma/GpuDecodeWgmma.cpp), the decode schedule (one block an SM) and the MLA
// layer (which schedule its decode needs). Plain C++, no MLIR.
//
// Every operand tile lives in shared memory in wgmma's 128-byte-swizzled
// layout (mla/Target/WgmmaSwizzle.h).
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TARGET_WGMMADECODESHAPE_H
#define MLA_TARGET_WGMMADECODESHAPE_H

#include "mla/Target/SharedRegions.h"
#include "mla/Target/WgmmaSwizzle.h"

#include <cstdint>

namespace mla::wgmma_decode {

/// Query rows (head, token) of one block: one m64 wgmma tile.
inline constexpr int64_t kTileRows = 64;
/// KV tokens of one shared-memory tile.
inline constexpr int64_t kTileTokens = 64;
/// Warpgroups of a block (256 threads). Each owns half of the output
/// columns and scores every other KV tile (the seesaw schedule) or, with
/// one KV stage, half of each tile's tokens.
inline constexpr int64_t kWarpgroups = 2;
inline constexpr int64_t kThreads = kWarpgroups * 128;
using wgmma::kAtomBytes;
using wgmma::kAtomColumns;
using wgmma::kRowBytes;
/// Fewest heads for which the kernel is used instead of the 16-row
/// mma.sync one. Measured on an H100, it is faster from 16 heads on
/// although three quarters of a single-query 64-row tile are then padding:
/// the decode is bound by reading the cache, which its two KV stages keep
/// streaming, and one block reads a request's tile for all its rows. Fewer
/// heads were not measured and keep the mma.sync kernel. (The rule is on
/// heads, which the op fixes, not on Sq * N, known only at run time.)
inline constexpr int64_t kMinHeads = 16;

/// Whether the kernel takes these dims: the latent width splits into two
/// warpgroups' output halves of at most 256 columns (one wgmma N) in whole
/// column blocks, and the rope part into whole column blocks.
inline bool takesDims(int64_t kvLoraRank, int64_t ropeDim) {
  return kvLoraRank > 0 && kvLoraRank % (kWarpgroups * kAtomColumns) == 0 &&
         kvLoraRank <= kWarpgroups * 256 && ropeDim >= 0 &&
         ropeDim % kAtomColumns == 0;
}

/// Where everything lives in a block's dynamic shared memory (bytes from
/// the first 1024-byte boundary, which the kernel finds at run time; the
/// allocation has that much slack): the Q tile, `stages` KV tiles, the P
/// tile (the seesaw schedule keeps the row values it exchanges there), then
/// the warpgroups' row maxima and row sums (f32).
struct SharedLayout {
  int64_t stages;
  int64_t q, kv, kvStage, p, max, sum, bytes;

  SharedLayout(int64_t qkDim, int64_t stageCount) : stages(stageCount) {
    const int64_t elementBytes = 2;
    SharedRegions r;
    q = r.tiles(1, kTileRows, qkDim, elementBytes);
    kvStage = SharedRegions::tileBytes(kTileTokens, qkDim, elementBytes);
    kv = r.tiles(stages, kTileTokens, qkDim, elementBytes);
    p = r.tiles(1, kTileRows, kTileTokens, elementBytes);
    max = r.bytes(kWarpgroups * kTileRows * 4);
    sum = r.bytes(kWarpgroups * kTileRows * 4);
    bytes = r.total(kAtomBytes);
  }
};

/// KV stages that fit `maxSharedBytesPerBlock`: two (copy the next tile
/// while scoring this one) where they fit, else one, else zero.
inline int64_t stagesFor(int64_t qkDim, int64_t maxSharedBytesPerBlock) {
  for (int64_t stages : {2, 1})
    if (SharedLayout(qkDim, stages).bytes <= maxSharedBytesPerBlock)
      return stages;
  return 0;
}

/// The one rule for "the decode runs the wgmma split kernel", used by the
/// lowering and the MLA layer's schedule (given the wgmma strategy): q and
/// the cache both bf16 or both f16, at least kMinHeads heads, dims it
/// takes, and shared memory for at least one KV stage. (The lowering also
/// needs row-major operands, which the layer's buffers always are.)
inline bool runsOn(bool sameTwoByteTypes, int64_t numHeads,
                   int64_t kvLoraRank, int64_t ropeDim,
                   int64_t maxSharedBytesPerBlock) {
  return sameTwoByteTypes && numHeads >= kMinHeads &&
         takesDims(kvLoraRank, ropeDim) &&
         stagesFor(kvLoraRank + ropeDim, maxSharedBytesPerBlock) > 0;
}

} // namespace mla::wgmma_decode

#endif // MLA_TARGET_WGMMADECODESHAPE_H
