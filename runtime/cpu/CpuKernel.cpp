//===- CpuKernel.cpp - mla modules JIT-compiled for the host CPU ----------===//

#include "mla/Runtime/CpuKernel.h"

#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "llvm/Support/TargetSelect.h"

#include <mutex>

using namespace mlir;

namespace mla {

void initializeNativeTarget() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
}

CompileRecipe cpuCompileRecipe(const CpuPipelineOptions &options) {
  CompileRecipe recipe;
  recipe.target = hostTargetDescription();
  recipe.options = "cpu vector-width=" + std::to_string(options.vectorWidth) +
                   " key-block=" + std::to_string(options.keyBlock) + " O3";
  recipe.buildPipeline = [options](OpPassManager &pm) {
    buildCpuLoweringPipeline(pm, options);
  };
  recipe.optLevel = 3;
  recipe.failureMessage = "lowering to the LLVM dialect failed";
  return recipe;
}

CpuKernel::~CpuKernel() {
  if (compiled.object)
    compiled.object->finalize();
}

llvm::Expected<std::unique_ptr<CpuKernel>>
CpuKernel::compile(OwningOpRef<ModuleOp> module, llvm::StringRef entry,
                   const CpuPipelineOptions &options,
                   runtime::KernelCache *cache) {
  initializeNativeTarget();
  MLIRContext *context = module->getContext();
  registerBuiltinDialectTranslation(*context);
  registerLLVMDialectTranslation(*context);
  auto compiled = compileModule(std::move(module), entry,
                                cpuCompileRecipe(options), cache);
  if (!compiled)
    return compiled.takeError();
  std::unique_ptr<CpuKernel> kernel(new CpuKernel());
  kernel->compiled = std::move(*compiled);
  if (llvm::Error error = kernel->compiled.object->initialize())
    return std::move(error);
  return kernel;
}

llvm::Error CpuKernel::run(const std::vector<BufferView> &args) const {
  return compiled.entry.invoke(compiled.packed, args);
}

} // namespace mla
