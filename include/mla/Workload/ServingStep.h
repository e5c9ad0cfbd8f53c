//===- ServingStep.h - A synthetic DeepSeek-shaped MLA step -----*- C++ -*-===//
//
// One serving step of an MLA attention layer with random weights, on the
// host CPU or a GPU: a mixed
// batch of decode requests over a paged latent cache and prefill requests
// with cached context. The step writes the new tokens into the cache,
// runs the chunked prefill and the absorbed decode, and checks both against
// the float64 reference (the prefill computed without chunking, the decode
// in float64 from the unrounded absorbed query).
//
//===----------------------------------------------------------------------===//

#ifndef MLA_WORKLOAD_SERVINGSTEP_H
#define MLA_WORKLOAD_SERVINGSTEP_H

#include "mla/Builders/KernelBuilders.h"
#include "mla/Runtime/CudaDevice.h"

#include "llvm/Support/Error.h"

#include <functional>
#include <string>
#include <vector>

namespace mla {

struct ServingStepConfig {
  MlaDims dims = {16, 512, 128, 64, 128};
  DType activation = DType::BF16;
  DType cache = DType::BF16;
  int64_t blockSize = 64;
  /// Tokens already cached for each decode request (each adds one token).
  std::vector<int32_t> decodeContexts = {1500, 700, 64, 2100};
  /// Cached context and new tokens of each prefill request.
  std::vector<int32_t> prefillContexts = {900, 0};
  std::vector<int32_t> prefillNewTokens = {96, 40};
  /// Rows of the context-gather workspace; 0 sizes it as vLLM does,
  /// clamped so a chunk holds at least one page per request.
  int64_t workspaceTokens = 0;
  uint32_t seed = 1;
};

struct PhaseReport {
  std::string name;
  std::string detail;
  double compileMs = 0; ///< JIT compile of the phase's kernels
  double runMs = 0;     ///< execution on the caller's buffers
};

struct ServingStepReport {
  std::vector<PhaseReport> phases;
  int64_t contextChunks = 0, workspaceTokens = 0;
  double prefillError = 0, prefillLseError = 0, decodeError = 0;
  double tolerance = 0;
  bool passed = false;
};

/// Runs the step's kernels on `device`, or on the host CPU when null, with
/// host-side data (copied to the device and back around each kernel).
/// `progress` receives a line before each long piece of work.
llvm::Expected<ServingStepReport>
runServingStep(const ServingStepConfig &config, const cuda::Device *device,
               const std::function<void(const std::string &)> &progress);

} // namespace mla

#endif // MLA_WORKLOAD_SERVINGSTEP_H
