//===- BufferView.h - A caller's buffer as kernels see it -------*- C++ -*-===//

#ifndef MLA_RUNTIME_BUFFERVIEW_H
#define MLA_RUNTIME_BUFFERVIEW_H

#include "mla/Support/DType.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mla {

/// A strided view of caller-owned memory: element type, shape and strides
/// in elements (row-major contiguous when built with `contiguous`). Views
/// never own their memory.
struct BufferView {
  void *data = nullptr;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;

  static BufferView contiguous(void *data, DType dtype,
                               std::vector<int64_t> shape) {
    std::vector<int64_t> strides(shape.size(), 1);
    for (size_t i = shape.size(); i-- > 1;)
      strides[i - 1] = strides[i] * shape[i];
    return BufferView{data, dtype, std::move(shape), std::move(strides)};
  }

  int64_t rank() const { return static_cast<int64_t>(shape.size()); }

  int64_t numElements() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }

  /// Rows [first, first + count) of a contiguous view along its first
  /// dimension, the other dimensions whole.
  BufferView rows(int64_t first, int64_t count) const {
    std::vector<int64_t> sliced = shape;
    int64_t rowElements = sliced[0] ? numElements() / sliced[0] : 0;
    sliced[0] = count;
    return contiguous(static_cast<char *>(data) +
                          first * rowElements * int64_t(byteWidth(dtype)),
                      dtype, std::move(sliced));
  }

  /// "bf16[4, 16, 576]" for messages.
  std::string describe() const {
    std::string s(name(dtype));
    s += "[";
    for (size_t i = 0; i < shape.size(); ++i)
      s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
  }
};

} // namespace mla

#endif // MLA_RUNTIME_BUFFERVIEW_H
