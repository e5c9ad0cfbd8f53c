//===- Float16.h - Host conversions for bf16 and f16 ------------*- C++ -*-===//
//
// Bit-exact conversions between float and the 16-bit formats the kernels
// read and write, rounding to nearest even (as arith.truncf does). Used by
// the host side: random inputs, references, result checks.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_SUPPORT_FLOAT16_H
#define MLA_SUPPORT_FLOAT16_H

#include <cstdint>
#include <cstring>

namespace mla {

inline uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float bitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline uint16_t floatToBF16(float f) {
  uint32_t u = floatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) // NaN: keep it quiet and a NaN
    return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float bf16ToFloat(uint16_t h) { return bitsToFloat(uint32_t(h) << 16); }

inline uint16_t floatToF16(float f) {
  uint32_t u = floatBits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t absBits = u & 0x7fffffffu;
  if (absBits > 0x7f800000u) // NaN
    return static_cast<uint16_t>(sign | 0x7e00u);
  if (absBits >= 0x477ff000u) // rounds to >= 65520: infinity
    return static_cast<uint16_t>(sign | 0x7c00u);
  if (absBits < 0x38800000u) { // below the smallest normal: subnormal or 0
    // value * 2^24 rounded to nearest even is the subnormal's mantissa.
    float scaled = bitsToFloat(absBits) * 16777216.0f; // exact
    uint32_t m = static_cast<uint32_t>(scaled);
    float frac = scaled - static_cast<float>(m);
    if (frac > 0.5f || (frac == 0.5f && (m & 1u)))
      ++m;
    return static_cast<uint16_t>(sign | m);
  }
  // Normal: rebias the exponent, round the mantissa to 10 bits.
  uint32_t rounded = absBits + 0xfffu + ((absBits >> 13) & 1u);
  uint32_t h = (rounded >> 13) - ((127u - 15u) << 10);
  return static_cast<uint16_t>(sign | h);
}

inline float f16ToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) { // zero or subnormal
    float v = static_cast<float>(mant) / 16777216.0f;
    return sign ? -v : v;
  }
  if (exp == 31)
    return bitsToFloat(sign | 0x7f800000u | (mant << 13));
  return bitsToFloat(sign | ((exp + 127u - 15u) << 23) | (mant << 13));
}

} // namespace mla

#endif // MLA_SUPPORT_FLOAT16_H
