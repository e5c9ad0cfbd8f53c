//===- Fp8Dequant.h - FP8 codes to two-byte floats, four at a time -*- C++ -*-===//
//
// The tensor-core decodes read an FP8 cache as tiles of q's type (bf16 or
// f16), dequantized in shared memory once a tile. Fp8Convert's exact
// integer decoding costs a dozen instructions an element, more than the
// tile's products; here every element costs about two. A 32-bit word of
// four codes becomes two words of two-byte floats with shifts and masks
// that put each code's sign, exponent and mantissa in their places, the
// result off by a power of two (the formats' exponent biases differ), and
// one two-wide multiply by that power, which is exact: the values have at
// most four significant bits and stay in range, subnormal codes included.
// The codes whose top exponent means NaN or infinity (e4m3's 0x7f, e5m2's
// 0x7c and up) would come out finite, so a chunk holding any takes the
// exact path instead (a branch no real cache takes). The scale is not
// applied: the kernels fold it into their scores and outputs.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_LIB_CONVERSION_MLATOGPU_FP8DEQUANT_H
#define MLA_LIB_CONVERSION_MLATOGPU_FP8DEQUANT_H

#include "mlir/IR/Builders.h"

namespace mla::gpu {

/// `codes` (vector<N x f8E4M3FN or f8E5M2>, N a multiple of 4) as
/// vector<N x `element`> (bf16 or f16), exactly.
mlir::Value dequantizeFp8(mlir::OpBuilder &b, mlir::Location loc,
                          mlir::Value codes, mlir::Type element);

} // namespace mla::gpu

#endif // MLA_LIB_CONVERSION_MLATOGPU_FP8DEQUANT_H
