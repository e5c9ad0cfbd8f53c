//===- HostObjectEmitter.cpp - LLVM-dialect modules to host object code ---===//

#include "mla/Runtime/JitObject.h"
#include "mla/Support/Diagnostics.h"

#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Support/BLAKE3.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"

#include <algorithm>

namespace mla {

std::string packedEntrySymbol(llvm::StringRef entry) {
  return ("__mla_packed_" + entry).str();
}

/// The host's target machine builder: the exact CPU and its features
/// (Native) or the triple's baseline CPU (Portable); code that JITLink can
/// place anywhere (PIC, small code model).
static llvm::Expected<llvm::orc::JITTargetMachineBuilder>
hostMachine(HostCode code) {
  auto builder = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!builder)
    return builder.takeError();
  if (code == HostCode::Portable) {
    builder->setCPU("");
    builder->getFeatures() = llvm::SubtargetFeatures();
  }
  builder->setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  builder->setRelocationModel(llvm::Reloc::PIC_);
  builder->setCodeModel(llvm::CodeModel::Small);
  return builder;
}

static std::string describeHostMachine(HostCode code) {
  auto builder = hostMachine(code);
  if (!builder) {
    llvm::consumeError(builder.takeError());
    return "unknown-host";
  }
  if (code == HostCode::Portable)
    return builder->getTargetTriple().str() + "-portable";
  std::string features = builder->getFeatures().getString();
  llvm::BLAKE3Result<8> hash =
      llvm::BLAKE3::hash<8>(llvm::arrayRefFromStringRef(features));
  return builder->getTargetTriple().str() + "-" + builder->getCPU() + "-" +
         llvm::toHex(hash, /*LowerCase=*/true);
}

const std::string &hostTargetDescription(HostCode code) {
  static const std::string native = describeHostMachine(HostCode::Native);
  static const std::string portable = describeHostMachine(HostCode::Portable);
  return code == HostCode::Native ? native : portable;
}

/// Replaces the `arrayName` list (llvm.global_ctors or llvm.global_dtors) by
/// a function `functionName` calling its entries by priority (constructors
/// ascending, destructors descending, as a loader would run them).
static void gatherStructors(llvm::Module &module, llvm::StringRef arrayName,
                            llvm::StringRef functionName, bool descending) {
  llvm::LLVMContext &ctx = module.getContext();
  std::vector<std::pair<uint64_t, llvm::Function *>> entries;
  if (llvm::GlobalVariable *list = module.getNamedGlobal(arrayName)) {
    if (auto *array = llvm::dyn_cast<llvm::ConstantArray>(
            list->getInitializer())) {
      for (llvm::Use &use : array->operands()) {
        auto *entry = llvm::dyn_cast<llvm::ConstantStruct>(use.get());
        if (!entry)
          continue;
        auto *priority = llvm::dyn_cast<llvm::ConstantInt>(entry->getOperand(0));
        auto *function = llvm::dyn_cast<llvm::Function>(entry->getOperand(1));
        if (priority && function)
          entries.emplace_back(priority->getZExtValue(), function);
      }
    }
    list->eraseFromParent();
  }
  std::stable_sort(entries.begin(), entries.end(),
                   [&](const auto &a, const auto &b) {
                     return descending ? a.first > b.first : a.first < b.first;
                   });
  auto *type = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), false);
  auto *gathered = llvm::Function::Create(
      type, llvm::GlobalValue::ExternalLinkage, functionName, module);
  llvm::IRBuilder<> builder(llvm::BasicBlock::Create(ctx, "entry", gathered));
  for (auto &[priority, function] : entries)
    builder.CreateCall(function);
  builder.CreateRetVoid();
}

/// Adds void packed(void **args) calling `target`, argument i loaded from
/// the pointer in args[i].
static void addPackedWrapper(llvm::Module &module, llvm::Function &target,
                             llvm::StringRef name) {
  llvm::LLVMContext &ctx = module.getContext();
  auto *pointer = llvm::PointerType::get(ctx, 0);
  auto *type =
      llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {pointer}, false);
  auto *packed = llvm::Function::Create(
      type, llvm::GlobalValue::ExternalLinkage, name, module);
  llvm::IRBuilder<> builder(llvm::BasicBlock::Create(ctx, "entry", packed));
  llvm::SmallVector<llvm::Value *> args;
  for (llvm::Argument &arg : target.args()) {
    llvm::Value *slot =
        builder.CreateConstGEP1_64(pointer, packed->getArg(0), arg.getArgNo());
    llvm::Value *storage = builder.CreateLoad(pointer, slot);
    args.push_back(builder.CreateLoad(arg.getType(), storage));
  }
  builder.CreateCall(&target, args);
  builder.CreateRetVoid();
}

llvm::Expected<std::string> emitHostObject(mlir::ModuleOp module,
                                           llvm::StringRef entry,
                                           unsigned optLevel, HostCode code) {
  auto machineBuilder = hostMachine(code);
  if (!machineBuilder)
    return machineBuilder.takeError();
  auto machine = machineBuilder->createTargetMachine();
  if (!machine)
    return machine.takeError();

  llvm::LLVMContext ctx;
  std::unique_ptr<llvm::Module> llvmModule =
      mlir::translateModuleToLLVMIR(module, ctx, "mla_kernel");
  if (!llvmModule)
    return makeError("translating the lowered module to LLVM IR failed");
  llvmModule->setDataLayout((*machine)->createDataLayout());
  llvmModule->setTargetTriple((*machine)->getTargetTriple());

  std::string ciface = ("_mlir_ciface_" + entry).str();
  llvm::Function *target = llvmModule->getFunction(ciface);
  if (!target || target->isDeclaration())
    return makeError("the lowered module defines no '" + ciface + "'");
  addPackedWrapper(*llvmModule, *target, packedEntrySymbol(entry));
  gatherStructors(*llvmModule, "llvm.global_ctors", kModuleInitSymbol,
                  /*descending=*/false);
  gatherStructors(*llvmModule, "llvm.global_dtors", kModuleFiniSymbol,
                  /*descending=*/true);

  std::string broken;
  llvm::raw_string_ostream brokenStream(broken);
  if (llvm::verifyModule(*llvmModule, &brokenStream))
    return makeError("the host LLVM IR is not valid: " + broken);
  auto optimize = mlir::makeOptimizingTransformer(optLevel, /*sizeLevel=*/0,
                                                  machine->get());
  if (llvm::Error error = optimize(llvmModule.get()))
    return error;

  llvm::SmallVector<char, 0> object;
  llvm::raw_svector_ostream stream(object);
  llvm::legacy::PassManager codegen;
  if ((*machine)->addPassesToEmitFile(codegen, stream, nullptr,
                                      llvm::CodeGenFileType::ObjectFile))
    return makeError("the host target cannot emit object files");
  codegen.run(*llvmModule);
  return std::string(object.begin(), object.end());
}

} // namespace mla
