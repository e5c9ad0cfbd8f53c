//===- SharedRegions.h - A kernel block's shared memory as regions -*- C++ -*-===//
//
// How the tensor-core kernels describe their dynamic shared memory:
// regions laid one after another from offset 0 (tiles of padded rows, ring
// stages, row statistics, barriers), and space a later phase lays over
// them from offset 0 (the results staged at the end of a block). The
// layouts of MmaDecodeShape.h, WgmmaDecodeShape.h, WgmmaPrefillShape.h,
// the mma.sync prefill and the mma.sync products are lists of these (the
// wgmma products' few offsets are still their own). Plain C++, no MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TARGET_SHAREDREGIONS_H
#define MLA_TARGET_SHAREDREGIONS_H

#include <algorithm>
#include <cstdint>

namespace mla {

class SharedRegions {
public:
  /// A region of `bytes`; returns its byte offset.
  int64_t bytes(int64_t bytes) {
    int64_t at = end;
    end += bytes;
    return at;
  }
  /// `count` tiles one after another, each `rows` rows of `rowElements`
  /// elements (padding included) of `elementBytes`; returns the first's
  /// offset (the next is tileBytes(...) later).
  int64_t tiles(int64_t count, int64_t rows, int64_t rowElements,
                int64_t elementBytes) {
    return bytes(count * tileBytes(rows, rowElements, elementBytes));
  }
  static int64_t tileBytes(int64_t rows, int64_t rowElements,
                           int64_t elementBytes) {
    return rows * rowElements * elementBytes;
  }
  /// A later phase uses the first `bytes` bytes again, over the regions.
  void overlay(int64_t bytes) { overlaid = std::max(overlaid, bytes); }
  /// The block's dynamic shared memory: the regions or the overlay,
  /// whichever reaches further, plus `slack` (for aligning the start).
  int64_t total(int64_t slack = 0) const {
    return std::max(end, overlaid) + slack;
  }

private:
  int64_t end = 0, overlaid = 0;
};

} // namespace mla

#endif // MLA_TARGET_SHAREDREGIONS_H
