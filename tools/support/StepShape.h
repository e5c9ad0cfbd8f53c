//===- StepShape.h - The layer and batch a harness runs ---------*- C++ -*-===//
//
// What the serving-step harness (ServingStep.h) and the DCP simulation
// (DcpSimulation.h) both take: the layer's dims, dtypes and backends, and
// the batch's requests.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TOOLS_SUPPORT_STEPSHAPE_H
#define MLA_TOOLS_SUPPORT_STEPSHAPE_H

#include "mla/Support/DType.h"
#include "mla/Support/MlaDims.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mla {

struct StepShape {
  MlaDims dims = {16, 512, 128, 64, 128};
  DType activation = DType::BF16;
  DType cache = DType::BF16;
  int64_t blockSize = 64;
  /// Tokens already cached for each decode request (each adds
  /// decodeQueryLen tokens).
  std::vector<int32_t> decodeContexts = {1500, 700, 64, 2100};
  /// New tokens of every decode: 1, or 1 + speculative tokens (the layer's
  /// decode threshold; prefills must add more).
  int64_t decodeQueryLen = 1;
  /// Cached context and new tokens of each prefill request.
  std::vector<int32_t> prefillContexts = {900, 0};
  std::vector<int32_t> prefillNewTokens = {96, 40};
  /// Rows of the context-gather workspace; 0 sizes it as vLLM does. Small
  /// values make prefills read their context in several chunks.
  int64_t workspaceTokens = 0;
  /// Backends to ask for (empty: automatic selection).
  std::string backend, prefillBackend;
  uint32_t seed = 1;
};

} // namespace mla

#endif // MLA_TOOLS_SUPPORT_STEPSHAPE_H
