//===- RuntimeHeaders.cpp - The runtime's public API without MLIR ---------===//
//
// Compiled by the runtime-headers-without-mlir test with the project's
// include/ and LLVM's llvm/ headers only (no MLIR on the include path, no
// runtime/ folder): the headers a C++ engine embeds the runtime with, and
// the C API's, must build there.
//
//===----------------------------------------------------------------------===//

#include "mla/Runtime/MlaLayer.h"
#include "mla/Runtime/Runtime.h"
#include "mla/mla.h"

namespace {
[[maybe_unused]] mla::runtime::MlaLayerConfig config;
[[maybe_unused]] mla::MlaDims dims = config.dims;
} // namespace
