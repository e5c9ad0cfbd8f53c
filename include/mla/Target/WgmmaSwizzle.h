//===- WgmmaSwizzle.h - wgmma's 128-byte-swizzled shared layout -*- C++ -*-===//
//
// Every operand tile of the wgmma (sm_90a) kernels lives in shared memory
// in wgmma's 128-byte-swizzled layout: a tile of `rows` x (64 c) elements
// of a 2-byte type is c column blocks of rows x 64 elements (128-byte
// rows), each a stack of 8-row, 1024-byte atoms in which row r's 16-byte
// chunk k sits at chunk k ^ (r % 8). Plain C++, no MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TARGET_WGMMASWIZZLE_H
#define MLA_TARGET_WGMMASWIZZLE_H

#include <cstdint>

namespace mla::wgmma {

/// Elements of a swizzle atom's row (128 bytes of a 2-byte type).
inline constexpr int64_t kAtomColumns = 64;
/// Bytes of one column block row and of one 8-row atom.
inline constexpr int64_t kRowBytes = 128, kAtomBytes = 1024;

} // namespace mla::wgmma

#endif // MLA_TARGET_WGMMASWIZZLE_H
