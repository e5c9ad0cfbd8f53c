//===- FuzzInput.cpp - What the fuzz targets share ------------------------===//

#include "FuzzInput.h"

#include "mla/Pipelines/Pipelines.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

namespace mla::fuzz {

void fuzzDefect(llvm::StringRef what) {
  llvm::errs() << "fuzz defect: " << what << "\n";
  llvm::errs().flush();
  std::abort();
}

std::unique_ptr<mlir::MLIRContext> makeQuietContext() {
  mlir::DialectRegistry registry;
  registerMLADialects(registry);
  auto context = std::make_unique<mlir::MLIRContext>(
      registry, mlir::MLIRContext::Threading::DISABLED);
  context->getDiagEngine().registerHandler(
      [](mlir::Diagnostic &) { return mlir::success(); });
  return context;
}

mlir::OwningOpRef<mlir::ModuleOp> parseModule(mlir::MLIRContext &context,
                                              llvm::StringRef text) {
  // A terminated copy, as Runtime::compileSource parses: MLIR's lexer
  // reads up to a NUL after the text.
  std::string terminated = text.str();
  return mlir::parseSourceString<mlir::ModuleOp>(terminated, &context);
}

} // namespace mla::fuzz
