//===- SerializeKernelModules.cpp - The mla-serialize-kernel-modules pass -===//

#include "mla/Target/KernelLoading.h"
#include "mla/Transforms/Passes.h"

#include "mlir/Dialect/GPU/IR/CompilationInterfaces.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Threading.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/OptBisect.h"

namespace mla {
#define GEN_PASS_DEF_SERIALIZEKERNELMODULES
#include "mla/Transforms/Passes.h.inc"
} // namespace mla

using namespace mlir;

namespace mla {
namespace {

/// Declines NVPTX's straight-line strength reduction, which the backend
/// runs at every optimization level above 0 and which no option turns off
/// for one compile. On the kernels' long unrolled blocks it is half of the
/// code generation (0.12 of 0.22 s in llc for the wgmma decode split
/// kernel). ptxas strength-reduces the same address arithmetic itself:
/// without the pass every kernel runs as fast, and the wgmma prefill up to
/// 5% faster (measured on an H100, docs/benchmarks.md).
struct SkipStraightLineStrengthReduction : llvm::OptPassGate {
  bool isEnabled() const override { return true; }
  bool shouldRunPass(llvm::StringRef pass, llvm::StringRef) const override {
    return pass != "slsr";
  }
};

/// Installs the gate on the LLVM context of each module the target
/// translates (a context per module, so other LLVM users are untouched).
void gateKernelPasses(llvm::Module &module) {
  static SkipStraightLineStrengthReduction gate; // stateless
  module.getContext().setOptPassGate(gate);
}

/// One module's objects, one per target, or empty after a failure (which
/// the target has reported on the module). Each object goes to `observer`
/// (when set) as soon as it exists.
SmallVector<Attribute> serialize(gpu::GPUModuleOp module,
                                 const gpu::TargetOptions &options,
                                 const SerializedKernelObserver &observer) {
  SmallVector<Attribute> objects;
  for (Attribute attr : module.getTargetsAttr()) {
    auto target = dyn_cast<gpu::TargetAttrInterface>(attr);
    if (!target) {
      module.emitError() << "target " << attr << " cannot serialize a module";
      return {};
    }
    std::optional<SmallVector<char, 0>> code =
        target.serializeToObject(module, options);
    if (!code) {
      module.emitError() << "serializing the module for " << attr << " failed";
      return {};
    }
    if (module->hasAttr(kLoadAtFirstLaunchAttr))
      code->insert(code->begin(), kLoadAtFirstLaunchLine.begin(),
                   kLoadAtFirstLaunchLine.end());
    Attribute object = target.createObject(module, *code, options);
    if (!object) {
      module.emitError() << "no object for " << attr;
      return {};
    }
    if (observer)
      observer(module.getName(), llvm::StringRef(code->data(), code->size()));
    objects.push_back(object);
  }
  return objects;
}

struct SerializeKernelModules
    : public impl::SerializeKernelModulesBase<SerializeKernelModules> {
  SerializeKernelModules() = default;
  explicit SerializeKernelModules(SerializedKernelObserver observer)
      : observer(std::move(observer)) {}

  void runOnOperation() override {
    ModuleOp top = getOperation();
    SmallVector<gpu::GPUModuleOp> modules(top.getOps<gpu::GPUModuleOp>());
    for (gpu::GPUModuleOp module : modules)
      if (!module.getTargetsAttr() || module.getTargetsAttr().empty()) {
        module.emitError() << "the module has no target to serialize for";
        return signalPassFailure();
      }

    // Serialization reads its module and builds LLVM IR in a context of its
    // own, so modules serialize independently; only the replacement below
    // edits the parent.
    gpu::TargetOptions options(/*toolkitPath=*/{}, /*librariesToLink=*/{},
                               /*cmdOptions=*/{}, /*elfSection=*/{},
                               gpu::CompilationTarget::Assembly,
                               /*getSymbolTableCallback=*/{},
                               /*initialLlvmIRCallback=*/gateKernelPasses);
    SmallVector<SmallVector<Attribute>> objects(modules.size());
    if (failed(failableParallelForEachN(
            &getContext(), 0, modules.size(), [&](size_t i) {
              objects[i] = serialize(modules[i], options, observer);
              return success(!objects[i].empty());
            })))
      return signalPassFailure();

    for (auto [module, moduleObjects] : llvm::zip(modules, objects)) {
      OpBuilder b(module);
      gpu::BinaryOp::create(b, module.getLoc(), module.getName(),
                            module.getOffloadingHandlerAttr(),
                            b.getArrayAttr(moduleObjects));
      module->erase();
    }
  }

  SerializedKernelObserver observer;
};

} // namespace

std::unique_ptr<Pass>
createSerializeKernelModules(SerializedKernelObserver observer) {
  return std::make_unique<SerializeKernelModules>(std::move(observer));
}
} // namespace mla
