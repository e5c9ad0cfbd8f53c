//===- SplitKernelModules.cpp - The mla-split-kernel-modules pass ---------===//

#include "mla/Target/KernelLoading.h"
#include "mla/Transforms/Passes.h"

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
