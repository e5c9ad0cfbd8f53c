//===- MlaDims.h - The MLA dimensions of a model ----------------*- C++ -*-===//
//
// Plain data, no MLIR: the one description of a layer's MLA dims that the
// runtime (MlaLayerConfig, backend selection), the C API and the kernel
// builders share.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_SUPPORT_MLADIMS_H
#define MLA_SUPPORT_MLADIMS_H

#include <cstdint>

namespace mla {

/// The MLA dimensions of a model (DeepSeek-V2/V3/R1 defaults) and the
/// head count one device sees.
struct MlaDims {
  int64_t numHeads = 128;
  int64_t kvLoraRank = 512;    ///< Lkv
  int64_t qkNopeHeadDim = 128; ///< P
  int64_t ropeDim = 64;        ///< R
  int64_t vHeadDim = 128;      ///< V

  int64_t qkHeadDim() const { return qkNopeHeadDim + ropeDim; }
  int64_t cacheEntry() const { return kvLoraRank + ropeDim; }

  friend bool operator==(const MlaDims &a, const MlaDims &b) {
    return a.numHeads == b.numHeads && a.kvLoraRank == b.kvLoraRank &&
           a.qkNopeHeadDim == b.qkNopeHeadDim && a.ropeDim == b.ropeDim &&
           a.vHeadDim == b.vHeadDim;
  }
  friend bool operator!=(const MlaDims &a, const MlaDims &b) {
    return !(a == b);
  }
};

/// The most partial states mla.merge_attn_states_n merges (its kernels
/// unroll them): the verifier's bound, and so the largest decode context
/// parallel group a layer takes.
inline constexpr int64_t kMaxMergedStates = 64;

} // namespace mla

#endif // MLA_SUPPORT_MLADIMS_H
