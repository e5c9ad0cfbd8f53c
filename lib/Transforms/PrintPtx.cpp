//===- PrintPtx.cpp - The mla-print-ptx pass ------------------------------===//

#include "mla/Transforms/Passes.h"

#include "mlir/Dialect/GPU/IR/CompilationInterfaces.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/ToolOutputFile.h"

namespace mla {
#define GEN_PASS_DEF_PRINTPTX
#include "mla/Transforms/Passes.h.inc"
} // namespace mla

using namespace mlir;

namespace mla {
namespace {

/// Starts each module's PTX; one file holds a module per kernel, and ptxas
/// takes one module at a time (test/lit/ptxas-modules.py splits at it).
constexpr llvm::StringLiteral kModuleMarker = "// mla-print-ptx: module @";

struct PrintPtx : public impl::PrintPtxBase<PrintPtx> {
  using Base::Base;

  void runOnOperation() override {
    std::string error;
    auto file = openOutputFile(output, &error);
    if (!file) {
      getOperation().emitError() << "mla-print-ptx: " << error;
      return signalPassFailure();
    }
    int objects = 0;
    getOperation().walk([&](gpu::BinaryOp binary) {
      for (Attribute attr : binary.getObjects()) {
        auto object = dyn_cast<gpu::ObjectAttr>(attr);
        if (!object || object.getFormat() != gpu::CompilationTarget::Assembly)
          continue;
        file->os() << kModuleMarker << binary.getName() << "\n"
                   << object.getObject().getValue();
        ++objects;
      }
    });
    if (objects == 0) {
      getOperation().emitError()
          << "mla-print-ptx: no PTX found; lower with the GPU pipeline first";
      return signalPassFailure();
    }
    file->keep();
  }
};

} // namespace
} // namespace mla
