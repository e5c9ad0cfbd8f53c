//===- Tensors.cpp - Element types and tensors of the C API ---------------===//

#include "CApi.h"

#include <cstring>

using namespace mla;
using namespace mla::runtime;
using namespace mla::capi;

//===----------------------------------------------------------------------===//
// Element types and tensors
//===----------------------------------------------------------------------===//

extern "C" mla_status_t mla_dtype_size(mla_dtype_t dtype, size_t *bytes) {
  return guarded("mla_dtype_size", [&](const char *fn) {
    MLA_REQUIRE(bytes);
    std::optional<DType> t = toDType(dtype);
    if (!t)
      return fail(MLA_ERROR_INVALID_ARGUMENT, fn, badDType("'dtype'", dtype));
    *bytes = byteWidth(*t);
    return succeed();
  });
}

extern "C" mla_status_t mla_dtype_name(mla_dtype_t dtype, const char **name) {
  return guarded("mla_dtype_name", [&](const char *fn) {
    MLA_REQUIRE(name);
    std::optional<DType> t = toDType(dtype);
    if (!t)
      return fail(MLA_ERROR_INVALID_ARGUMENT, fn, badDType("'dtype'", dtype));
    // The names are string literals, so their data is NUL-terminated.
    *name = mla::name(*t).data();
    return succeed();
  });
}

extern "C" mla_status_t mla_tensor_contiguous(void *data, mla_dtype_t dtype,
                                              int32_t rank,
                                              const int64_t *shape,
                                              mla_tensor_t *tensor) {
  return guarded("mla_tensor_contiguous", [&](const char *fn) {
    MLA_REQUIRE(tensor);
    if (!toDType(dtype))
      return fail(MLA_ERROR_INVALID_ARGUMENT, fn, badDType("'dtype'", dtype));
    if (rank < 0 || rank > MLA_MAX_RANK)
      return fail(MLA_ERROR_INVALID_ARGUMENT, fn,
                  "rank " + str(rank) + " is outside 0 to " +
                      str(MLA_MAX_RANK));
    if (rank > 0)
      MLA_REQUIRE(shape);
    for (int32_t d = 0; d < rank; ++d)
      if (shape[d] < 0)
        return fail(MLA_ERROR_INVALID_ARGUMENT, fn,
                    "shape[" + str(d) + "] is negative (" + str(shape[d]) +
                        ")");
    mla_tensor_t result;
    std::memset(&result, 0, sizeof(result));
    result.data = data;
    result.dtype = dtype;
    result.rank = rank;
    int64_t stride = 1;
    for (int32_t d = rank; d-- > 0;) {
      result.shape[d] = shape[d];
      result.strides[d] = stride;
      stride *= shape[d];
    }
    *tensor = result;
    return succeed();
  });
}

extern "C" mla_status_t mla_tensor_span_bytes(const mla_tensor_t *tensor,
                                              size_t *bytes) {
  return guarded("mla_tensor_span_bytes", [&](const char *fn) {
    MLA_REQUIRE(tensor);
    MLA_REQUIRE(bytes);
    BufferView view;
    if (mla_status_t s = toView(fn, "'tensor'", *tensor, view))
      return s;
    uint64_t last = 0;
    for (size_t d = 0; d < view.shape.size(); ++d) {
      if (view.shape[d] == 0) {
        *bytes = 0;
        return succeed();
      }
      if (view.strides[d] < 0)
        return fail(MLA_ERROR_INVALID_ARGUMENT, fn,
                    "'tensor' has a negative stride in dimension " +
                        str(static_cast<int64_t>(d)));
      last += uint64_t(view.shape[d] - 1) * uint64_t(view.strides[d]);
    }
    *bytes = size_t((last + 1) * byteWidth(view.dtype));
    return succeed();
  });
}
