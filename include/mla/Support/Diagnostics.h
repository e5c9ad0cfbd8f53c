//===- Diagnostics.h - MLIR diagnostics as llvm::Error ----------*- C++ -*-===//

#ifndef MLA_SUPPORT_DIAGNOSTICS_H
#define MLA_SUPPORT_DIAGNOSTICS_H

#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/Error.h"

#include <string>

namespace mla {

/// Collects the diagnostics emitted on a context while alive, so that a
/// failing step can return them as an llvm::Error instead of printing.
class DiagnosticCollector {
public:
  explicit DiagnosticCollector(mlir::MLIRContext *context);
  ~DiagnosticCollector();

  /// An error "<what>: <collected diagnostics>".
  llvm::Error takeError(llvm::StringRef what);

private:
  mlir::MLIRContext *context;
  mlir::DiagnosticEngine::HandlerID handler;
  std::string messages;
};

/// An llvm::Error with a formatted message.
llvm::Error makeError(const llvm::Twine &message);

/// An error in what the caller passed (a buffer of the wrong type, shape
/// or layout, a bad count), as opposed to one while compiling or running:
/// callers that report categories (the C API's status codes) test for it
/// with `error.isA<ArgumentError>()`.
class ArgumentError : public llvm::ErrorInfo<ArgumentError, llvm::StringError> {
public:
  static char ID;
  explicit ArgumentError(const llvm::Twine &message);
};

llvm::Error makeArgumentError(const llvm::Twine &message);

} // namespace mla

#endif // MLA_SUPPORT_DIAGNOSTICS_H
