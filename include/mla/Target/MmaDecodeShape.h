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
  int64_t q, kv, p, max, sum, bytes;

  SharedLayout(int64_t qkDim, int64_t elementBytes) {
    rowStride = qkDim + kRowPad;
    pStride = kTileTokens + kRowPad;
    SharedRegions r;
    q = r.tiles(1, kTileRows, rowStride, elementBytes);
    kv = r.tiles(1, kTileTokens, rowStride, elementBytes);
    p = r.tiles(1, kTileRows, pStride, elementBytes);
    max = r.bytes(kWarps * kTileRows * 4);
    sum = r.bytes(kWarps * kTileRows * 4);
    bytes = r.total();
  }
};

/// The FP8 kernel (GpuDecodeMmaFp8.cpp) keeps the KV tiles as codes, one
/// byte an element, in a ring of this many stages: the next tile's copy is
/// in flight while a tile is multiplied.
inline constexpr int64_t kFp8Stages = 2;

/// Whether the FP8 kernel takes these dims: its scores step through the
/// Lkv + R columns 32 at a time, and each warp's Lkv / 4 output columns
/// through 32-column groups.
inline bool fp8TakesDims(int64_t kvLoraRank, int64_t ropeDim) {
  return takesDims(kvLoraRank, ropeDim) && kvLoraRank % 128 == 0 &&
         (kvLoraRank + ropeDim) % 32 == 0;
}

/// The FP8 kernel's shared memory (bytes): the query tile as f16, the
/// code stages, the probability tile (f16), the warps' row maxima and
/// sums. The strides keep its loads free of bank conflicts: a Q row is 16
/// words past a multiple of 32 (a lane pair's 16-byte loads of rows g and
/// g + 1 fill the 32 banks), a code row 24 words past one (four rows'
/// 8-byte loads, or four lanes' 4-byte ones, each in its own 8 banks).
struct Fp8SharedLayout {
  int64_t qStride, codeStride, pStride; ///< elements (codes: bytes)
  int64_t q, codes, codeStage, p, max, sum, bytes;

  explicit Fp8SharedLayout(int64_t qkDim) {
    // qkDim is a multiple of 32: 64 bytes a row, 16 words.
    qStride = qkDim + (qkDim % 64 == 0 ? 32 : 0);
    const int64_t words = qkDim / 4;
    codeStride = qkDim + 4 * ((24 - words % 32 + 32) % 32);
    pStride = kTileTokens + kRowPad;
    SharedRegions r;
    q = r.tiles(1, kTileRows, qStride, 2);
    codeStage = SharedRegions::tileBytes(kTileTokens, codeStride, 1);
    codes = r.tiles(kFp8Stages, kTileTokens, codeStride, 1);
    p = r.tiles(1, kTileRows, pStride, 2);
    max = r.bytes(kWarps * kTileRows * 4);
    sum = r.bytes(kWarps * kTileRows * 4);
    bytes = r.total();
  }
};

/// The block's shared memory for a cache of these operand types.
inline int64_t sharedBytes(DecodeOperandTypes types, int64_t kvLoraRank,
                           int64_t ropeDim) {
  const int64_t qkDim = kvLoraRank + ropeDim;
  return types == DecodeOperandTypes::Fp8Cache ? Fp8SharedLayout(qkDim).bytes
                                               : SharedLayout(qkDim, 2).bytes;
}

/// The one rule for "the decode runs the tensor-core split kernel", used by
/// the lowering and by the MLA layer's schedule: q and the cache both bf16
/// or both f16, or q bf16/f16 over an FP8 cache, dims it takes, and its
/// shared memory within the chip's per-block limit. (The lowering also
/// needs row-major operands, which the layer's buffers always are.)
inline bool runsOn(DecodeOperandTypes types, int64_t kvLoraRank,
                   int64_t ropeDim, int64_t maxSharedBytesPerBlock) {
  if (types == DecodeOperandTypes::Other)
    return false;
  const bool dims = types == DecodeOperandTypes::Fp8Cache
                        ? fp8TakesDims(kvLoraRank, ropeDim)
                        : takesDims(kvLoraRank, ropeDim);
  return dims && sharedBytes(types, kvLoraRank, ropeDim) <= maxSharedBytesPerBlock;
}

} // namespace mla::mma_decode

#endif // MLA_TARGET_MMADECODESHAPE_H
