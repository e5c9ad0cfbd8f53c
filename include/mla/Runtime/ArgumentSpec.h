//===- ArgumentSpec.h - What a kernel argument must look like ---*- C++ -*-===//
//
// A compiled entry's signature, one ArgumentSpec per argument
// (Kernel::signature, EntryPoint::arguments): plain data, no MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_ARGUMENTSPEC_H
#define MLA_RUNTIME_ARGUMENTSPEC_H

#include "mla/Support/DType.h"

#include <cstdint>
#include <vector>

namespace mla {

/// What one entry argument must look like.
struct ArgumentSpec {
  DType dtype;
  /// Static sizes, or -1 where the size is dynamic.
  std::vector<int64_t> shape;
  /// Static strides in elements, -1 where dynamic, -2 for "row-major
  /// contiguous" (identity layouts).
  std::vector<int64_t> strides;
};

} // namespace mla

#endif // MLA_RUNTIME_ARGUMENTSPEC_H
