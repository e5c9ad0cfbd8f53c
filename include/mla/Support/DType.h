//===- DType.h - Element types of buffers crossing the host API -*- C++ -*-===//

#ifndef MLA_SUPPORT_DTYPE_H
#define MLA_SUPPORT_DTYPE_H

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace mla {

enum class DType : uint8_t { F32, F16, BF16, I32, I64 };

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
  }
  return "?";
}

inline std::optional<DType> parseDType(std::string_view s) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64})
    if (name(t) == s)
      return t;
  return std::nullopt;
}

constexpr bool isFloat(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

} // namespace mla

#endif // MLA_SUPPORT_DTYPE_H
