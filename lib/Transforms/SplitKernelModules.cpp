//===- SplitKernelModules.cpp - The mla-split-kernel-modules pass ---------===//

#include "mla/Target/KernelLoading.h"
#include "mla/Transforms/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"

namespace mla {
#define GEN_PASS_DEF_SPLITKERNELMODULES
#include "mla/Transforms/Passes.h.inc"
} // namespace mla

using namespace mlir;

namespace mla {
namespace {

/// Targets `module` at PTX ISA `version` (times ten) where its NVVM
/// targets ask for an older one ("+ptxNN" in their features).
void raisePtxVersion(gpu::GPUModuleOp module, int64_t version) {
  ArrayAttr targets = module.getTargetsAttr();
  if (!targets)
    return;
  SmallVector<Attribute> raised;
  for (Attribute attr : targets) {
    auto nvvm = dyn_cast<NVVM::NVVMTargetAttr>(attr);
    int64_t current = 0;
    if (!nvvm || !nvvm.getFeatures().starts_with("+ptx") ||
        nvvm.getFeatures().drop_front(4).getAsInteger(10, current) ||
        current >= version) {
      raised.push_back(attr);
      continue;
    }
    raised.push_back(NVVM::NVVMTargetAttr::get(
        module.getContext(), nvvm.getO(), nvvm.getTriple(), nvvm.getChip(),
        "+ptx" + std::to_string(version), nvvm.getFlags(), nvvm.getLink()));
  }
  module.setTargetsAttr(ArrayAttr::get(module.getContext(), raised));
}

struct SplitKernelModules
    : public impl::SplitKernelModulesBase<SplitKernelModules> {
  void runOnOperation() override {
    ModuleOp top = getOperation();
    SymbolTable symbols(top);
    // (old module, kernel) -> the kernel's own module.
    llvm::DenseMap<std::pair<StringAttr, StringAttr>, StringAttr> moved;

    for (auto shared :
         llvm::make_early_inc_range(top.getOps<gpu::GPUModuleOp>())) {
      SmallVector<gpu::GPUFuncOp> kernels;
      for (auto func : shared.getOps<gpu::GPUFuncOp>())
        if (func.isKernel())
          kernels.push_back(func);
      if (kernels.empty())
        continue;
      for (gpu::GPUFuncOp kernel : kernels) {
        OpBuilder b(shared);
        auto own = cast<gpu::GPUModuleOp>(b.cloneWithoutRegions(*shared));
        own.getBodyRegion().emplaceBlock();
        own.setSymName(kernel.getName());
        symbols.insert(own); // renamed if the kernel's name is taken
        OpBuilder body = OpBuilder::atBlockEnd(own.getBody());
        for (Operation &op : *shared.getBody())
          if (!llvm::is_contained(kernels, &op))
            body.clone(op);
        kernel->moveBefore(own.getBody(), own.getBody()->end());
        // The module is what is loaded: it carries the kernel's mark.
        if (kernel->hasAttr(kLoadAtFirstLaunchAttr))
          own->setAttr(kLoadAtFirstLaunchAttr, b.getUnitAttr());
        if (auto ptx = kernel->getAttrOfType<IntegerAttr>(kMinPtxVersionAttr))
          raisePtxVersion(own, ptx.getInt());
        moved[{shared.getSymNameAttr(), kernel.getNameAttr()}] =
            own.getSymNameAttr();
      }
      symbols.erase(shared);
    }

    top.walk([&](gpu::LaunchFuncOp launch) {
      SymbolRefAttr kernel = launch.getKernel();
      auto own =
          moved.find({kernel.getRootReference(), kernel.getLeafReference()});
      if (own != moved.end())
        launch.setKernelAttr(SymbolRefAttr::get(
            own->second, {FlatSymbolRefAttr::get(kernel.getLeafReference())}));
    });
  }
};

} // namespace
} // namespace mla
