//===- SelectGpuTarget.cpp - The mla-select-gpu-target pass ---------------===//

#include "mla/Target/GpuTarget.h"
#include "mla/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"

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
    if (chip.empty()) {
      // Keep a target chosen earlier, but make sure it is a valid one.
      if (auto target = GpuTarget::fromAttr(module->getAttr(kTargetAttrName));
          !target) {
        emitError(module.getLoc()) << llvm::toString(target.takeError())
                           << " (or pass chip=sm_XX)";
        return signalPassFailure();
      }
      return;
    }
    auto target = GpuTarget::parse(chip);
    if (!target) {
      emitError(module.getLoc()) << "mla-select-gpu-target: "
                         << llvm::toString(target.takeError());
      return signalPassFailure();
    }
    module->setAttr(kTargetAttrName, target->toAttr(&getContext()));
  }
};

} // namespace
} // namespace mla
