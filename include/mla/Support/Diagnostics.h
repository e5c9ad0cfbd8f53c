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

} // namespace mla

#endif // MLA_SUPPORT_DIAGNOSTICS_H
