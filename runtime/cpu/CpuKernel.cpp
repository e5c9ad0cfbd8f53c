//===- CpuKernel.cpp - mla modules JIT-compiled for the host CPU ----------===//

#include "mla/Runtime/CpuKernel.h"
#include "mla/Support/Diagnostics.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
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

CpuKernel::~CpuKernel() = default;

llvm::Expected<std::unique_ptr<CpuKernel>>
CpuKernel::compile(OwningOpRef<ModuleOp> module, llvm::StringRef entry,
                   const CpuPipelineOptions &options) {
  initializeNativeTarget();
  MLIRContext *context = module->getContext();
  registerBuiltinDialectTranslation(*context);
  registerLLVMDialectTranslation(*context);
  auto entryPoint = EntryPoint::verifyAndLower(
      *module, entry,
      [&](OpPassManager &pm) { buildCpuLoweringPipeline(pm, options); },
      "lowering to the LLVM dialect failed");
  if (!entryPoint)
    return entryPoint.takeError();
  std::unique_ptr<CpuKernel> kernel(new CpuKernel());
  kernel->entryPoint = std::move(*entryPoint);

  ExecutionEngineOptions engineOptions;
  engineOptions.transformer = makeOptimizingTransformer(
      /*optLevel=*/3, /*sizeLevel=*/0, /*targetMachine=*/nullptr);
  engineOptions.jitCodeGenOptLevel = llvm::CodeGenOptLevel::Aggressive;
  auto engine = ExecutionEngine::create(*module, engineOptions);
  if (!engine)
    return makeError("JIT compilation failed: " +
                     llvm::toString(engine.takeError()));
  kernel->engine = std::move(*engine);
  return kernel;
}

llvm::Error CpuKernel::run(const std::vector<BufferView> &args) const {
  return entryPoint.invoke(*engine, args);
}

} // namespace mla
