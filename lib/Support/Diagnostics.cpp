//===- Diagnostics.cpp - MLIR diagnostics as llvm::Error ------------------===//

#include "mla/Support/Diagnostics.h"

#include "mlir/IR/Location.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"

namespace mla {

DiagnosticCollector::DiagnosticCollector(mlir::MLIRContext *context)
    : context(context) {
  handler = context->getDiagEngine().registerHandler(
      [this](mlir::Diagnostic &diag) {
        llvm::raw_string_ostream os(messages);
        if (!messages.empty())
          os << "\n";
        os << diag.getLocation() << ": " << diag;
        for (mlir::Diagnostic &note : diag.getNotes())
          os << "\n  note: " << note;
        return mlir::success();
      });
}

DiagnosticCollector::~DiagnosticCollector() {
  context->getDiagEngine().eraseHandler(handler);
}

llvm::Error DiagnosticCollector::takeError(llvm::StringRef what) {
  std::string text = what.str();
  if (!messages.empty())
    text += ":\n" + messages;
  messages.clear();
  return makeError(text);
}

llvm::Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

char ArgumentError::ID = 0;

ArgumentError::ArgumentError(const llvm::Twine &message)
    : ErrorInfo(message, llvm::inconvertibleErrorCode()) {}

llvm::Error makeArgumentError(const llvm::Twine &message) {
  return llvm::make_error<ArgumentError>(message);
}

} // namespace mla
