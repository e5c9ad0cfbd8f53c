//===- HostTensor.cpp - An owned host buffer of one dtype -----------------===//

#include "HostTensor.h"

#include "mla/Support/Float8.h"
#include "mla/Support/Float16.h"

#include "llvm/Support/ErrorHandling.h"

#include <cstring>
#include <limits>
#include <string>

namespace mla {

/// Sizes disagreeing here is a bug in the calling tool, not bad user input.
static void checkSize(size_t given, int64_t expected) {
  if (static_cast<int64_t>(given) != expected)
    llvm::report_fatal_error(("HostTensor: " + std::to_string(given) +
                              " values for " + std::to_string(expected) +
                              " elements")
                                 .c_str());
}

HostTensor::HostTensor(DType dtype, std::vector<int64_t> shape)
    : dtype(dtype), shape(std::move(shape)) {
  bytes.resize(static_cast<size_t>(numElements()) * byteWidth(dtype));
}

int64_t HostTensor::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

template <typename T>
HostTensor HostTensor::fromValues(DType dtype, std::vector<int64_t> shape,
                                  const std::vector<T> &values) {
  HostTensor t(dtype, std::move(shape));
  checkSize(values.size(), t.numElements());
  // An empty tensor's vectors may hold no storage: no copy (memcpy must
  // not see their null pointers).
  if (!t.bytes.empty())
    std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

HostTensor HostTensor::i32(std::vector<int64_t> shape,
                           const std::vector<int32_t> &values) {
  return fromValues(DType::I32, std::move(shape), values);
}

HostTensor HostTensor::i64(std::vector<int64_t> shape,
                           const std::vector<int64_t> &values) {
  return fromValues(DType::I64, std::move(shape), values);
}

void HostTensor::fillRandom(std::mt19937 &gen, double lo, double hi) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> values(numElements());
  for (double &v : values)
    v = dist(gen);
  fromDouble(values);
}

void HostTensor::poison() {
  if (isFloat(dtype)) {
    fromDouble(std::vector<double>(numElements(),
                                   std::numeric_limits<double>::quiet_NaN()));
    return;
  }
  std::memset(bytes.data(), 0x7b, bytes.size());
}

std::vector<double> HostTensor::toDouble() const {
  std::vector<double> out(numElements());
  for (int64_t i = 0; i < numElements(); ++i) {
    const uint8_t *p = bytes.data() + i * byteWidth(dtype);
    switch (dtype) {
    case DType::F32: {
      float f;
      std::memcpy(&f, p, 4);
      out[i] = f;
      break;
    }
    case DType::F16:
    case DType::BF16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      out[i] = dtype == DType::F16 ? f16ToFloat(h) : bf16ToFloat(h);
      break;
    }
    case DType::I32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      out[i] = v;
      break;
    }
    case DType::I64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      out[i] = static_cast<double>(v);
      break;
    }
    case DType::FP8E4M3:
    case DType::FP8E5M2:
      out[i] = fp8ToFloat(*p, dtype == DType::FP8E4M3 ? kFp8E4M3 : kFp8E5M2);
      break;
    }
  }
  return out;
}

void HostTensor::fromDouble(const std::vector<double> &values) {
  checkSize(values.size(), numElements());
  for (int64_t i = 0; i < numElements(); ++i) {
    uint8_t *p = bytes.data() + i * byteWidth(dtype);
    float f = static_cast<float>(values[i]);
    switch (dtype) {
    case DType::F32:
      std::memcpy(p, &f, 4);
      break;
    case DType::F16:
    case DType::BF16: {
      uint16_t h = dtype == DType::F16 ? floatToF16(f) : floatToBF16(f);
      std::memcpy(p, &h, 2);
      break;
    }
    case DType::I32: {
      int32_t v = static_cast<int32_t>(values[i]);
      std::memcpy(p, &v, 4);
      break;
    }
    case DType::I64: {
      int64_t v = static_cast<int64_t>(values[i]);
      std::memcpy(p, &v, 8);
      break;
    }
    case DType::FP8E4M3:
    case DType::FP8E5M2:
      *p = floatToFp8(f, dtype == DType::FP8E4M3 ? kFp8E4M3 : kFp8E5M2);
      break;
    }
  }
}

std::vector<int32_t> HostTensor::toI32() const {
  std::vector<int32_t> out(numElements());
  if (!bytes.empty())
    std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

std::vector<int64_t> HostTensor::toI64() const {
  std::vector<int64_t> out(numElements());
  if (!bytes.empty())
    std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

} // namespace mla
