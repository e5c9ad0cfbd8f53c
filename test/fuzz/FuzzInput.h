//===- FuzzInput.h - What the fuzz targets share ----------------*- C++ -*-===//
//
// Each fuzz target is one LLVMFuzzerTestOneInput (and LLVMFuzzerInitialize)
// in a file of its own. Built with clang's libFuzzer (scripts/fuzz.sh) it is
// a coverage-guided fuzzer; built plainly, ReplayMain.cpp runs it over files
// and directories, which is how CI replays the seeds and the inputs that
// once failed (test/fuzz/regressions).
//
// A target signals a defect by aborting (fuzzDefect), so that libFuzzer
// saves the input; everything else an input may do (fail to parse, fail to
// verify, be refused by a pass with a diagnostic) is a clean rejection.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TEST_FUZZ_FUZZINPUT_H
#define MLA_TEST_FUZZ_FUZZINPUT_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstddef>
#include <cstdint>
#include <memory>

namespace mla::fuzz {

/// Prints `what` and aborts: the input shows a defect.
[[noreturn]] void fuzzDefect(llvm::StringRef what);

/// A fresh context per input (nothing interned by one input survives into
/// the next, so a failure reproduces from its input alone) with every
/// dialect mla-opt accepts, one thread, and diagnostics swallowed: bad
/// input is expected and reported through failure results.
std::unique_ptr<mlir::MLIRContext> makeQuietContext();

/// Parses (and verifies) a NUL-terminated copy of `text` as a module; null
/// when it is not valid IR.
mlir::OwningOpRef<mlir::ModuleOp> parseModule(mlir::MLIRContext &context,
                                              llvm::StringRef text);

/// The input bytes as text.
inline llvm::StringRef asText(const uint8_t *data, size_t size) {
  return llvm::StringRef(reinterpret_cast<const char *>(data), size);
}

} // namespace mla::fuzz

#endif // MLA_TEST_FUZZ_FUZZINPUT_H
