//===- LowerFuzzer.cpp - Fuzz target: every pipeline to its object --------===//
//
// Input: MLIR text. A module that parses and verifies goes the way the
// runtime compiles a kernel module (CompiledModule.cpp: prepare the entry,
// lower, emit the host object), without the cache and without running:
// the CPU pipeline to a native object, or the GPU pipeline (its kernels
// through LLVM's NVPTX backend to PTX) for sm_80 with the mma.sync
// strategy or sm_90a with wgmma, then its launch code to an object. Which
// one is a hash of the input, so a corpus covers all three. Every step may
// refuse the module with an error; none may crash, and a module that
// lowers must give a non-empty object (and PTX for each GPU kernel).
//
//===----------------------------------------------------------------------===//

#include "FuzzInput.h"

#include "mla/Runtime/CompiledModule.h"
#include "mla/Runtime/CpuKernel.h"
#include "mla/Runtime/EntryPoint.h"
#include "mla/Runtime/GpuKernel.h"
#include "mla/Target/GpuTarget.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "llvm/ADT/Hashing.h"
#include "llvm/Support/TargetSelect.h"

#include <string>
#include <vector>

using namespace mla;
using namespace mla::fuzz;

namespace {

/// The recipe an input is lowered with.
CompileRecipe recipeFor(llvm::StringRef input, std::vector<std::string> &ptx) {
  SerializedKernelObserver keepPtx = [&ptx](llvm::StringRef, llvm::StringRef
                                                                 text) {
    ptx.push_back(text.str());
  };
  switch (llvm::hash_value(input) % 3) {
  case 0:
    return cpuCompileRecipe();
  case 1: {
    GpuTarget target = cantFail(GpuTarget::parse("sm_80"));
    target.strategy = KernelStrategy::TensorCore;
    return gpuCompileRecipe(target, keepPtx);
  }
  default: {
    GpuTarget target = cantFail(GpuTarget::parse("sm_90a"));
    target.strategy = KernelStrategy::Warpgroup;
    return gpuCompileRecipe(target, keepPtx);
  }
  }
}

/// The first function of the module, as the runtime names its entry.
std::string entryOf(mlir::ModuleOp module) {
  for (auto function : module.getOps<mlir::func::FuncOp>())
    if (!function.isExternal())
      return function.getSymName().str();
  return "";
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef input = asText(data, size);
  auto context = makeQuietContext();
  mlir::registerBuiltinDialectTranslation(*context);
  mlir::registerLLVMDialectTranslation(*context);
  mlir::registerGPUDialectTranslation(*context);
  mlir::OwningOpRef<mlir::ModuleOp> module = parseModule(*context, input);
  if (!module)
    return 0;
  std::string entry = entryOf(*module);
  if (entry.empty())
    return 0;
  std::vector<std::string> ptx;
  CompileRecipe recipe = recipeFor(input, ptx);
  auto prepared = EntryPoint::verifyAndPrepare(*module, entry);
  if (!prepared) {
    llvm::consumeError(prepared.takeError());
    return 0;
  }
  if (llvm::Error error =
          EntryPoint::lower(*module, recipe.buildPipeline, recipe.failureMessage)) {
    llvm::consumeError(std::move(error));
    return 0;
  }
  for (const std::string &text : ptx)
    if (text.find(".entry") == std::string::npos)
      fuzzDefect("a kernel module serialized to PTX without an entry:\n" + text);
  auto object = emitHostObject(*module, entry, recipe.optLevel, recipe.hostCode);
  if (!object) {
    llvm::consumeError(object.takeError());
    return 0;
  }
  if (object->empty())
    fuzzDefect("a module lowered to an empty object");
  return 0;
}
