//===- DecodeOperandTypes.h - q and cache types a decode kernel takes -*- C++ -*-===//
//
// The element types of a decode's q and latent cache, as the tensor-core
// split kernels tell them apart: the lowering (from the op's memref types)
// and the MLA layer's schedule (from its config) classify them the same way
// and ask the kernels' runsOn rules with the result. Plain C++, no MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TARGET_DECODEOPERANDTYPES_H
#define MLA_TARGET_DECODEOPERANDTYPES_H

#include "mla/Support/DType.h"

namespace mla {

enum class DecodeOperandTypes {
  /// Anything else (f32 q, mixed two-byte types): the generic kernel only.
  Other,
  /// q and the cache both bf16 or both f16.
  SameTwoByte,
  /// q bf16 or f16 over an FP8 cache (e4m3 or e5m2), dequantized on chip
  /// into tiles of q's type.
  Fp8Cache,
};

/// The class of a decode with activations `q` over a cache of `cache`.
constexpr DecodeOperandTypes decodeOperandTypes(DType q, DType cache) {
  if (q != DType::BF16 && q != DType::F16)
    return DecodeOperandTypes::Other;
  if (cache == q)
    return DecodeOperandTypes::SameTwoByte;
  return isFp8(cache) ? DecodeOperandTypes::Fp8Cache
                      : DecodeOperandTypes::Other;
}

} // namespace mla

#endif // MLA_TARGET_DECODEOPERANDTYPES_H
