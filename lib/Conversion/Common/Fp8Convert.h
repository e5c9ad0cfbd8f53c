//===- Fp8Convert.h - FP8 cache values to and from f32 in IR ----*- C++ -*-===//
//
// The KV cache's 8-bit formats (f8E4M3FN, f8E5M2) converted with integer
// arithmetic, the same on every target (the CPU's LLVM and every GPU chip
// have no conversion instruction in common): decoding is exact, encoding
// rounds to nearest even and saturates to the largest finite value, NaN
// staying NaN, bit for bit as include/mla/Support/Float8.h does on the
// host. Scalars and vectors alike.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_LIB_CONVERSION_COMMON_FP8CONVERT_H
#define MLA_LIB_CONVERSION_COMMON_FP8CONVERT_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"

namespace mla {

/// Whether `type` (or a vector's element type) is one of the cache's FP8
/// formats.
bool isFp8Type(mlir::Type type);

/// f32 values (scalar or vector) of FP8 values of the same shape.
mlir::Value fp8ToF32(mlir::OpBuilder &b, mlir::Location loc,
                     mlir::Value values);

/// FP8 values of type `fp8` (or vectors of it) of f32 values.
mlir::Value f32ToFp8(mlir::OpBuilder &b, mlir::Location loc,
                     mlir::Value values, mlir::Type fp8);

} // namespace mla

#endif // MLA_LIB_CONVERSION_COMMON_FP8CONVERT_H
