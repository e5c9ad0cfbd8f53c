//===- ServingStep.h - DeepSeek-shaped MLA serving steps --------*- C++ -*-===//
//
// What a serving engine does with one MLA attention layer, driven through
// the runtime's host API (Runtime + MlaLayer) on whatever device the runtime
// has: the layer is created (backend selection, kernels compiled or loaded
// from the cache), then a few steps run over a paged latent cache with
// random weights. The first steps are mixed batches of decodes and new
// prefills with cached context; every request decodes one more token at
// each step after its first, so contexts grow. Each step's outputs, decode LSE and cache writes are
// checked against the float64 reference.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TOOLS_SUPPORT_SERVINGSTEP_H
#define MLA_TOOLS_SUPPORT_SERVINGSTEP_H

#include "StepShape.h"
#include "mla/Runtime/MlaLayer.h"
#include "mla/Runtime/Runtime.h"
#include "mla/Support/MlaDims.h"

#include "llvm/Support/Error.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace mla {

/// The layer and requests (StepShape), and the steps that run them.
struct ServingStepConfig : StepShape {
  /// Steps to run: the mixed steps, then decode steps.
  int64_t steps = 2;
  /// Steps that admit the prefill requests above (new ones each step; the
  /// earlier ones go on as decodes): 1 to `steps`. The first pays the
  /// kernels' first launches; later ones show a serving loop's warm step.
  int64_t mixedSteps = 1;
  /// Repeats of the last step whose host side is timed (plan + forward,
  /// launches queued, nothing waited for; then planDecodeStep + replay of
  /// the step captured as a CUDA graph), when that step has no prefills
  /// and the device is a GPU; 0 times nothing.
  int64_t hostTimingRepeats = 0;
};

struct StepReport {
  /// MlaStepPlan::str().
  std::string plan;
  /// Host time to validate and plan the batch.
  double planMicroseconds = 0;
  std::vector<runtime::PhaseTiming> phases;
  /// Of each phase's time, the host's own (its launch calls and whatever
  /// they do the first time: allocations, loads), as MlaLayer::hostTimings
  /// records it; after "checks and metadata upload", in phase order.
  std::vector<runtime::PhaseTiming> hostParts;
  /// Relative L2 errors of the outputs, max |dLSE| of the decode LSE, and
  /// new cache entries that differ from the tokens' latent rows.
  double prefillError = 0, decodeError = 0, decodeLseError = 0;
  int64_t cacheMismatches = 0;
  bool passed = false;
};

/// The host side of a decode step, repeated: what a serving engine pays
/// on the CPU per step (validate and plan the batch, then queue the
/// layer's kernels), apart from the GPU's time.
struct HostStepTiming {
  int64_t repeats = 0;
  /// Medians over the repeats, and the 90th percentile of their sum.
  double planMedianUs = 0, forwardMedianUs = 0, stepMedianUs = 0, stepP90Us = 0;
  /// Where forward's host time goes (MlaLayer::hostTimings), medians.
  struct Part {
    std::string name;
    double medianUs = 0;
    /// Of it, the median time inside the driver's kernel launches.
    double driverLaunchMedianUs = 0;
  };
  std::vector<Part> forwardParts;
  /// The same step replayed as a CUDA graph captured at its shape
  /// (MlaLayer::captureDecodeStep, the split limit the checked step's
  /// largest split count): the capture's time, then medians of
  /// planDecodeStep and replay over as many repeats, and the p90 of their
  /// sum. The replays' outputs are checked against the float64 reference,
  /// and bit for bit against forward of the same plan. Absent where the
  /// backend cannot be captured.
  struct GraphReplay {
    double captureMs = 0;
    double planMedianUs = 0, replayMedianUs = 0, stepMedianUs = 0,
           stepP90Us = 0;
    double decodeError = 0, decodeLseError = 0;
    bool matchesForward = false;
  };
  std::optional<GraphReplay> graph;
  /// The repeated steps left out and lse bit for bit as the checked step.
  bool reproduced = false;
};

struct ServingStepReport {
  Selection selection;
  /// The layer's prefill backend.
  Selection prefillSelection;
  /// Creating the layer: selection plus every kernel compiled or loaded.
  double layerSetupMs = 0;
  /// From the same start until the kernels ran their best code (the
  /// driver's module loads that replace its quicker linked code).
  double kernelsUpgradedMs = 0;
  std::vector<CompileEvent> compiles;
  std::vector<StepReport> steps;
  /// Set when the config asked for it and the last step qualified.
  std::optional<HostStepTiming> hostTiming;
  double tolerance = 0;
  bool passed = false;
};

/// Runs the steps on `runtime`'s device. `progress` receives a line before
/// each long piece of work.
llvm::Expected<ServingStepReport>
runServingSteps(const ServingStepConfig &config, runtime::Runtime &runtime,
                const std::function<void(const std::string &)> &progress);

} // namespace mla

#endif // MLA_TOOLS_SUPPORT_SERVINGSTEP_H
