//===- HostTensor.h - An owned host buffer of one dtype ---------*- C++ -*-===//
//
// Host-side storage for tools and tests: random inputs rounded to the
// buffer's dtype, NaN poisoning, and conversion to and from double so that
// results can be compared with the float64 reference.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TOOLS_SUPPORT_HOSTTENSOR_H
#define MLA_TOOLS_SUPPORT_HOSTTENSOR_H

#include "mla/Runtime/BufferView.h"

#include <cstdint>
#include <random>
#include <vector>

namespace mla {

class HostTensor {
public:
  HostTensor(DType dtype, std::vector<int64_t> shape);

  static HostTensor i32(std::vector<int64_t> shape,
                        const std::vector<int32_t> &values);
  static HostTensor i64(std::vector<int64_t> shape,
                        const std::vector<int64_t> &values);

  /// Uniform values in [lo, hi), rounded to the dtype.
  void fillRandom(std::mt19937 &rng, double lo = -1.0, double hi = 1.0);
  /// NaN for floats, a large sentinel for integers: unwritten elements
  /// show up in any comparison.
  void poison();
  std::vector<double> toDouble() const;
  /// Stores `values` rounded to the dtype (sizes must match).
  void fromDouble(const std::vector<double> &values);
  std::vector<int32_t> toI32() const;
  std::vector<int64_t> toI64() const;

  BufferView view() {
    return BufferView::contiguous(bytes.data(), dtype, shape);
  }
  DType elementType() const { return dtype; }
  int64_t numElements() const;
  size_t sizeInBytes() const { return bytes.size(); }
  const std::vector<int64_t> &dims() const { return shape; }

private:
  /// A tensor of `dtype` holding `values` (as many as its shape has).
  template <typename T>
  static HostTensor fromValues(DType dtype, std::vector<int64_t> shape,
                               const std::vector<T> &values);

  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

} // namespace mla

#endif // MLA_TOOLS_SUPPORT_HOSTTENSOR_H
