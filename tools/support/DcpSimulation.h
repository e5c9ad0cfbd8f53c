//===- DcpSimulation.h - A DCP group's decode step in one process -*- C++ -*-===//
//
// Decode context parallelism simulated on one device: W layers, one per
// rank of a group, each with a cache of its own holding only the rank's
// share of every request's tokens (token i on rank (i / I) mod W), run the
// same step, decodes and prefills. A rank's prefills read their context
// chunks through the group's all-gather, which the simulation performs by
// asking every rank's layer for its rows of the chunk (MlaLayer::
// gatherDcpContextChunk); the decodes' partial rows are gathered as an
// engine's all-gather would, and every rank merges them (MlaLayer::
// mergeDcpPartials). Decode and prefill rows are checked against a layer
// without DCP over the whole cache, and both against the float64
// reference.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TOOLS_SUPPORT_DCPSIMULATION_H
#define MLA_TOOLS_SUPPORT_DCPSIMULATION_H

#include "StepShape.h"
#include "mla/Runtime/MlaLayer.h"
#include "mla/Runtime/Runtime.h"

#include "llvm/Support/Error.h"

#include <functional>
#include <string>
#include <vector>

namespace mla {

/// One step of the layer and requests (StepShape; the decodes first, then
/// the prefills) over a group of `worldSize` ranks.
struct DcpSimulationConfig : StepShape {
  int64_t worldSize = 2;
  /// Tokens a rank holds in a row (vLLM's cp_kv_cache_interleave_size).
  int64_t interleave = 1;
};

struct DcpSimulationReport {
  Selection selection;
  /// Tokens each rank holds after the step, over all requests.
  std::vector<int64_t> rankTokens;
  /// Relative L2 error of the output rows and max |dLSE| against the
  /// float64 reference: the layer without DCP, the merge of every head,
  /// and the ranks' own heads put together (absent when the heads do not
  /// divide among the ranks).
  double singleError = 0, singleLseError = 0;
  double mergedError = 0, mergedLseError = 0;
  std::optional<double> rankHeadsError;
  /// Relative L2 difference of the merged rows from the layer without DCP.
  double mergedVsSingle = 0;
  /// Prefill rows (every rank computes all of them): relative L2 error of
  /// the layer without DCP and of the worst rank against the float64
  /// reference, and the worst rank's difference from the layer without
  /// DCP. All 0 without prefills.
  double singlePrefillError = 0, rankPrefillError = 0,
         rankPrefillVsSingle = 0;
  /// Context chunks each rank's prefills read through the all-gather.
  int64_t contextChunks = 0;
  /// Cache rows that differ from what the step should leave: each new
  /// token written by its owner only, every other row untouched.
  int64_t cacheMismatches = 0;
  /// Phase times: the decode attention without DCP, on each rank, and the
  /// merge of every head on rank 0.
  double singleAttentionMs = 0, mergeMs = 0;
  std::vector<double> rankAttentionMs;
  double tolerance = 0;
  bool passed = false;
};

llvm::Expected<DcpSimulationReport>
runDcpSimulation(const DcpSimulationConfig &config, runtime::Runtime &runtime,
                 const std::function<void(const std::string &)> &progress);

} // namespace mla

#endif // MLA_TOOLS_SUPPORT_DCPSIMULATION_H
