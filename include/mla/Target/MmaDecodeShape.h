//===- MmaDecodeShape.h - The tensor-core decode kernel's shape -*- C++ -*-===//
//
// What the tensor-core (mma-sync) decode split kernel is made of, in one
// place for the three parts that depend on it: the kernel itself
// (lib/Conversion/MLAToGPU/MmaSync/GpuDecodeMma.cpp), the decode schedule (how many
// of its blocks an SM holds), and the MLA layer (which schedule its decode
// needs). Plain C++, no MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TARGET_MMADECODESHAPE_H
#define MLA_TARGET_MMADECODESHAPE_H

#include "mla/Target/DecodeOperandTypes.h"
#include "mla/Target/SharedRegions.h"

#include <cstdint>

namespace mla::mma_decode {

/// Query rows (head, token) of one block: one m16 mma tile.
inline constexpr int64_t kTileRows = 16;
/// KV tokens of one shared-memory tile: 16 per warp.
inline constexpr int64_t kTileTokens = 64;
/// Warps of a block (128 threads).
inline constexpr int64_t kWarps = 4;
/// Elements of padding after each shared-memory row (16 bytes), so that
/// ldmatrix rows fall in different banks.
inline constexpr int64_t kRowPad = 8;

/// Whether the kernel takes these dims: the latent width splits into four
/// warps' 16-column mma tiles, and the rope part into 16-column k-steps.
inline bool takesDims(int64_t kvLoraRank, int64_t ropeDim) {
  return kvLoraRank > 0 && kvLoraRank % 64 == 0 && ropeDim >= 0 &&
         ropeDim % 16 == 0;
}

/// Where everything lives in a block's dynamic shared memory (bytes): the
/// query tile, the KV tile, the probability tile (all of the 2-byte
/// element type, rows padded), then each warp's row maxima and row sums.
struct SharedLayout {
  int64_t rowStride, pStride; ///< elements
  /// `codes`: where an FP8 cache's codes land, one byte an element, in the
  /// KV tile's second half (the kernel dequantizes them in place).
  int64_t q, kv, codes, p, max, sum, bytes;

  SharedLayout(int64_t qkDim, int64_t elementBytes) {
    rowStride = qkDim + kRowPad;
    pStride = kTileTokens + kRowPad;
    SharedRegions r;
    q = r.tiles(1, kTileRows, rowStride, elementBytes);
    kv = r.tiles(1, kTileTokens, rowStride, elementBytes);
    codes = kv + SharedRegions::tileBytes(kTileTokens, rowStride, 1);
    p = r.tiles(1, kTileRows, pStride, elementBytes);
    max = r.bytes(kWarps * kTileRows * 4);
    sum = r.bytes(kWarps * kTileRows * 4);
    bytes = r.total();
  }
};

/// The one rule for "the decode runs the tensor-core split kernel", used by
/// the lowering and by the MLA layer's schedule: q and the cache both bf16
/// or both f16, or q bf16/f16 over an FP8 cache, dims it takes, and its
/// shared memory within the chip's per-block limit. (The lowering also
/// needs row-major operands, which the layer's buffers always are.)
inline bool runsOn(DecodeOperandTypes types, int64_t kvLoraRank,
                   int64_t ropeDim, int64_t maxSharedBytesPerBlock) {
  return types != DecodeOperandTypes::Other &&
         takesDims(kvLoraRank, ropeDim) &&
         SharedLayout(kvLoraRank + ropeDim, 2).bytes <= maxSharedBytesPerBlock;
}

} // namespace mla::mma_decode

#endif // MLA_TARGET_MMADECODESHAPE_H
