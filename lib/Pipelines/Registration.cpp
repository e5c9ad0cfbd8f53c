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
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"

using namespace mlir;

namespace mla {

void registerMLADialects(DialectRegistry &registry) {
  registry.insert<MLADialect, affine::AffineDialect, arith::ArithDialect,
                  cf::ControlFlowDialect, func::FuncDialect,
                  LLVM::LLVMDialect, math::MathDialect, memref::MemRefDialect,
                  scf::SCFDialect, ub::UBDialect, vector::VectorDialect>();
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
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

void registerMLAPassesAndPipelines() {
  registerMLAPasses();
  PassPipelineRegistration<CpuPipelineCLOptions>(
      "mla-lower-to-cpu",
      "lower mla ops to the LLVM dialect for the host CPU (the JIT's pipeline)",
      [](OpPassManager &pm, const CpuPipelineCLOptions &cl) {
        buildCpuLoweringPipeline(pm, {cl.vectorWidth, cl.keyBlock});
      });
}

} // namespace mla
