//===- SelectGpuTarget.cpp - The mla-select-gpu-target pass ---------------===//

#include "mla/Target/GpuTarget.h"
#include "mla/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"

#include <optional>

namespace mla {
#define GEN_PASS_DEF_SELECTGPUTARGET
#include "mla/Transforms/Passes.h.inc"
} // namespace mla

using namespace mlir;

namespace mla {
namespace {

struct SelectGpuTarget : public impl::SelectGpuTargetBase<SelectGpuTarget> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fail = [&](llvm::Error error) {
      emitError(module.getLoc())
          << "mla-select-gpu-target: " << llvm::toString(std::move(error));
      signalPassFailure();
    };
    // Records `target` on the module, unless its strategy cannot run on
    // its chip (wgmma off sm_90a).
    auto record = [&](const GpuTarget &target) {
      if (llvm::Error error = target.checkStrategy())
        return fail(std::move(error));
      module->setAttr(kTargetAttrName, target.toAttr(&getContext()));
    };
    std::optional<KernelStrategy> chosen;
    if (!strategy.empty()) {
      auto parsed = parseStrategy(strategy);
      if (!parsed)
        return fail(parsed.takeError());
      chosen = *parsed;
    }
    auto existing = GpuTarget::fromAttr(module->getAttr(kTargetAttrName));
    if (chip.empty()) {
      // Keep a target chosen earlier, but make sure it is a valid one.
      if (!existing) {
        emitError(module.getLoc()) << llvm::toString(existing.takeError())
                                   << " (or pass chip=sm_XX)";
        return signalPassFailure();
      }
      if (chosen && *chosen != existing->strategy) {
        existing->strategy = *chosen;
        record(*existing);
      }
      return;
    }
    auto target = GpuTarget::parse(chip);
    if (!target) {
      llvm::consumeError(existing.takeError());
      return fail(target.takeError());
    }
    // The strategy: the option's, else the module's (a new chip for the
    // same kernels), else generic.
    if (existing)
      target->strategy = existing->strategy;
    else
      llvm::consumeError(existing.takeError());
    if (chosen)
      target->strategy = *chosen;
    record(*target);
  }
};

} // namespace
} // namespace mla
