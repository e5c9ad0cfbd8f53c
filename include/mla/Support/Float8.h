//===- Float8.h - Host conversions for the FP8 cache formats ----*- C++ -*-===//
//
// Bit-exact conversions between float and the KV cache's 8-bit formats, as
// the kernels perform them: e4m3 (f8E4M3FN: bias 7, no infinities, NaN
// 0x7f / 0xff, largest 448) and e5m2 (f8E5M2: bias 15, IEEE-like, largest
// finite 57344). Encoding rounds to nearest even and saturates to the
// largest finite value (infinities included; NaN stays NaN), as vLLM's
// scaled FP8 conversion does. Used by the host side: references, inputs,
// result checks.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_SUPPORT_FLOAT8_H
#define MLA_SUPPORT_FLOAT8_H

#include "mla/Support/Float16.h"

#include <cmath>
#include <cstdint>

namespace mla {

/// The layout of one FP8 format.
struct Fp8Format {
  int mantissaBits;    ///< 3 (e4m3) or 2 (e5m2)
  int bias;            ///< 7 or 15
  uint8_t largestCode; ///< the largest finite magnitude: 0x7e or 0x7b
  uint8_t nanCode;     ///< 0x7f for both
};

inline constexpr Fp8Format kFp8E4M3{3, 7, 0x7e, 0x7f};
inline constexpr Fp8Format kFp8E5M2{2, 15, 0x7b, 0x7f};

inline float fp8ToFloat(uint8_t code, const Fp8Format &f) {
  float sign = code & 0x80 ? -1.0f : 1.0f;
  int exponent = (code & 0x7f) >> f.mantissaBits;
  int mantissa = code & ((1 << f.mantissaBits) - 1);
  int exponentMax = (1 << (7 - f.mantissaBits)) - 1;
  if (f.mantissaBits == 3 && exponent == exponentMax && mantissa == 7)
    return NAN;
  if (f.mantissaBits == 2 && exponent == exponentMax)
    return mantissa ? NAN : sign * INFINITY;
  if (exponent == 0) // subnormal: mantissa x 2^(1 - bias - mantissaBits)
    return sign * std::ldexp(float(mantissa), 1 - f.bias - f.mantissaBits);
  return sign * std::ldexp(1.0f + float(mantissa) / float(1 << f.mantissaBits),
                           exponent - f.bias);
}

inline uint8_t floatToFp8(float value, const Fp8Format &f) {
  uint32_t bits = floatBits(value);
  uint8_t sign = (bits >> 24) & 0x80;
  uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) // NaN
    return sign | f.nanCode;
  float largest = fp8ToFloat(f.largestCode, f);
  if (bitsToFloat(magnitude) >= largest) // saturate, infinities included
    return sign | f.largestCode;
  int shift = 23 - f.mantissaBits;
  float smallestNormal = std::ldexp(1.0f, 1 - f.bias);
  if (bitsToFloat(magnitude) < smallestNormal) {
    // Subnormal: the value in units of the smallest subnormal, rounded to
    // nearest even (exact in float: a small integer plus a fraction).
    float units = std::ldexp(bitsToFloat(magnitude), f.bias - 1 + f.mantissaBits);
    float whole = std::nearbyint(units); // the default mode: ties to even
    return sign | uint8_t(whole);        // 1 << mantissaBits is the smallest normal
  }
  // Normal: round the mantissa to nearest even, then rebias the exponent
  // (a carry out of the mantissa moves to the next exponent, as it should).
  uint32_t rounded = magnitude + ((1u << (shift - 1)) - 1) + ((magnitude >> shift) & 1u);
  uint32_t code = (rounded >> shift) - (uint32_t(127 - f.bias) << f.mantissaBits);
  if (code > f.largestCode)
    code = f.largestCode;
  return sign | uint8_t(code);
}

} // namespace mla

#endif // MLA_SUPPORT_FLOAT8_H
