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

#include "mla/Target/DecodeOperandTypes.h"
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
/// The same over an FP8 cache. Measured on an H100 (benchmarks.md, "FP8
/// caches"), the mma.sync kernel, which converts its operands in registers
/// from 16-row tiles with no padding, is faster at 16 and 32 heads (64 x 4k
/// at 32 heads: 0.135 against 0.161 ms), this one at 64 (0.167 against
/// 0.246) and 128 (0.307 against 0.487: the mma.sync kernel reads each
/// tile once per 16 rows).
inline constexpr int64_t kMinHeadsFp8 = 64;

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
/// the warpgroups' row maxima and row sums (f32). Over an FP8 cache the
/// block also has `codeStages` tiles of the cache's codes (one byte an
/// element, each byte at the offset its two-byte element has in a KV tile),
/// where the next tiles land while the block dequantizes one into its
/// single KV tile, and slots for the wgmma descriptors its loop reads back
/// (kDescriptorSlots of 8 bytes).
struct SharedLayout {
  /// Q, each warpgroup's K half and V half, and P.
  static constexpr int64_t kDescriptorSlots = 6;
  int64_t stages, codeStages;
  int64_t q, kv, kvStage, codes, codeStage, p, max, sum, descriptors, bytes;

  SharedLayout(int64_t qkDim, int64_t stageCount, int64_t codeStageCount = 0)
      : stages(stageCount), codeStages(codeStageCount) {
    const int64_t elementBytes = 2;
    SharedRegions r;
    q = r.tiles(1, kTileRows, qkDim, elementBytes);
    kvStage = SharedRegions::tileBytes(kTileTokens, qkDim, elementBytes);
    kv = r.tiles(stages, kTileTokens, qkDim, elementBytes);
    codeStage = SharedRegions::tileBytes(kTileTokens, qkDim, 1);
    codes = r.tiles(codeStages, kTileTokens, qkDim, 1);
    p = r.tiles(1, kTileRows, kTileTokens, elementBytes);
    max = r.bytes(kWarpgroups * kTileRows * 4);
    sum = r.bytes(kWarpgroups * kTileRows * 4);
    descriptors = codeStages > 0 ? r.bytes(kDescriptorSlots * 8) : 0;
    bytes = r.total(kAtomBytes);
  }
};

/// The largest layout that fits `maxSharedBytesPerBlock`, `stages` 0 when
/// none does. Two-byte caches: two KV stages (copy the next tile while
/// scoring this one) where they fit, else one. FP8 caches with a rope part
/// (which the seesaw schedule keeps P in): the same two KV stages, which a
/// producer warpgroup fills with the codes it converts in registers (no
/// code stages); else one KV tile and two code stages (two tiles in flight
/// while one is dequantized and used), else one.
inline SharedLayout layoutFor(DecodeOperandTypes types, int64_t kvLoraRank,
                              int64_t ropeDim,
                              int64_t maxSharedBytesPerBlock) {
  const int64_t qkDim = kvLoraRank + ropeDim;
  const bool fp8 = types == DecodeOperandTypes::Fp8Cache;
  if (fp8 && ropeDim >= kAtomColumns) {
    SharedLayout converted(qkDim, 2);
    if (converted.bytes <= maxSharedBytesPerBlock)
      return converted;
  }
  for (int64_t more : {2, 1}) {
    SharedLayout layout = fp8 ? SharedLayout(qkDim, 1, more)
                              : SharedLayout(qkDim, more);
    if (layout.bytes <= maxSharedBytesPerBlock)
      return layout;
  }
  return SharedLayout(qkDim, 0);
}

/// The one rule for "the decode runs the wgmma split kernel", used by the
/// lowering and the MLA layer's schedule (given the wgmma strategy): q and
/// the cache both bf16 or both f16 with at least kMinHeads heads, or q
/// bf16/f16 over an FP8 cache with at least kMinHeadsFp8, dims it takes,
/// and shared memory for its tiles.
/// (The lowering also needs row-major operands, which the layer's buffers
/// always are.)
inline bool runsOn(DecodeOperandTypes types, int64_t numHeads,
                   int64_t kvLoraRank, int64_t ropeDim,
                   int64_t maxSharedBytesPerBlock) {
  const int64_t minHeads =
      types == DecodeOperandTypes::Fp8Cache ? kMinHeadsFp8 : kMinHeads;
  return types != DecodeOperandTypes::Other && numHeads >= minHeads &&
         takesDims(kvLoraRank, ropeDim) &&
         layoutFor(types, kvLoraRank, ropeDim, maxSharedBytesPerBlock).stages >
             0;
}

} // namespace mla::wgmma_decode

#endif // MLA_TARGET_WGMMADECODESHAPE_H
