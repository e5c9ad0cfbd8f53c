//===- Registration.cpp - Dialects, passes and pipelines of mla -----------===//

#include "mla/Dialect/MLADialect.h"
#include "mla/Pipelines/Pipelines.h"
#include "mla/Transforms/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/UB/IR/UBOps.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/GPUCommon/GPUToLLVM.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVM.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVM.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Index/IR/IndexDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"

using namespace mlir;

namespace mla {

void registerMLADialects(DialectRegistry &registry) {
  registry.insert<MLADialect, affine::AffineDialect, arith::ArithDialect,
                  cf::ControlFlowDialect, func::FuncDialect,
                  LLVM::LLVMDialect, math::MathDialect, memref::MemRefDialect,
                  scf::SCFDialect, ub::UBDialect, vector::VectorDialect,
                  gpu::GPUDialect, index::IndexDialect, NVVM::NVVMDialect>();
  // The GPU pipeline's convert-to-llvm steps find each dialect's lowering
  // through these interfaces; without them values stay as
  // unrealized_conversion_cast.
  arith::registerConvertArithToLLVMInterface(registry);
  cf::registerConvertControlFlowToLLVMInterface(registry);
  registerConvertFuncToLLVMInterface(registry);
  gpu::registerConvertGpuToLLVMInterface(registry);
  NVVM::registerConvertGpuToNVVMInterface(registry);
  index::registerConvertIndexToLLVMInterface(registry);
  registerConvertMathToLLVMInterface(registry);
  registerConvertMemRefToLLVMInterface(registry);
  registerConvertNVVMToLLVMInterface(registry);
  ub::registerConvertUBToLLVMInterface(registry);
  vector::registerConvertVectorToLLVMInterface(registry);
  // Serializing gpu.modules to PTX (LLVM would crash without it) and
  // translating the host module with its embedded binaries.
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
  gpu::registerOffloadingLLVMTranslationInterfaceExternalModels(registry);
}

namespace {
struct CpuPipelineCLOptions
    : public PassPipelineOptions<CpuPipelineCLOptions> {
  Option<int64_t> vectorWidth{*this, "vector-width",
                              llvm::cl::desc("f32 lanes per vector op"),
                              llvm::cl::init(16)};
  Option<int64_t> keyBlock{*this, "key-block",
                           llvm::cl::desc("keys per online-softmax step"),
                           llvm::cl::init(32)};
};
} // namespace

namespace {
struct GpuPipelineCLOptions
    : public PassPipelineOptions<GpuPipelineCLOptions> {
  Option<std::string> chip{*this, "chip",
                           llvm::cl::desc("sm_80, sm_86, sm_89, sm_90 or sm_90a"),
                           llvm::cl::init("sm_90a")};
};
} // namespace

void registerMLAPassesAndPipelines() {
  registerMLAPasses();
  PassPipelineRegistration<GpuPipelineCLOptions>(
      "mla-lower-to-gpu",
      "lower mla ops to PTX kernels for a chip and host code launching them",
      [](OpPassManager &pm, const GpuPipelineCLOptions &cl) {
        auto target = GpuTarget::parse(cl.chip);
        if (!target) {
          // The target pass reports the unknown chip and fails the run.
          llvm::consumeError(target.takeError());
          pm.addPass(createSelectGpuTarget(SelectGpuTargetOptions{cl.chip}));
          return;
        }
        buildGpuLoweringPipeline(pm, *target);
      });
  PassPipelineRegistration<CpuPipelineCLOptions>(
      "mla-lower-to-cpu",
      "lower mla ops to the LLVM dialect for the host CPU (the JIT's pipeline)",
      [](OpPassManager &pm, const CpuPipelineCLOptions &cl) {
        buildCpuLoweringPipeline(pm, {cl.vectorWidth, cl.keyBlock});
      });
}

} // namespace mla
