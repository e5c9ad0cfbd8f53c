//===- DType.h - Element types of buffers crossing the host API -*- C++ -*-===//

#ifndef MLA_SUPPORT_DTYPE_H
#define MLA_SUPPORT_DTYPE_H

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace mla {

/// FP8E4M3 and FP8E5M2 are the KV cache's 8-bit formats (MLIR's
/// f8E4M3FN and f8E5M2, vLLM's "fp8_e4m3" and "fp8_e5m2"), stored as
/// value / scale with a per-layer float scale.
enum class DType : uint8_t { F32, F16, BF16, I32, I64, FP8E4M3, FP8E5M2 };

constexpr size_t byteWidth(DType t) {
  switch (t) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::I64:
    return 8;
  case DType::FP8E4M3:
  case DType::FP8E5M2:
    return 1;
  }
  return 0;
}

constexpr std::string_view name(DType t) {
  switch (t) {
  case DType::F32:
    return "f32";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::I32:
    return "i32";
  case DType::I64:
    return "i64";
  case DType::FP8E4M3:
    return "fp8_e4m3";
  case DType::FP8E5M2:
    return "fp8_e5m2";
  }
  return "?";
}

inline std::optional<DType> parseDType(std::string_view s) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64,
                  DType::FP8E4M3, DType::FP8E5M2})
    if (name(t) == s)
      return t;
  return std::nullopt;
}

/// The activation formats (every float but FP8).
constexpr bool isFloat(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

constexpr bool isFp8(DType t) {
  return t == DType::FP8E4M3 || t == DType::FP8E5M2;
}

/// What a KV cache may hold: an activation format or FP8.
constexpr bool isCacheFormat(DType t) { return isFloat(t) || isFp8(t); }

} // namespace mla

#endif // MLA_SUPPORT_DTYPE_H
