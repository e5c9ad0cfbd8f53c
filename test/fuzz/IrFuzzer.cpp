//===- IrFuzzer.cpp - Fuzz target: parse, verify, print, parse again ------===//
//
// Input: MLIR text. Whatever it is, parsing and verifying must end in a
// module or a diagnostic, never a crash. A module that verifies must print
// in both forms (custom and generic) to text that parses again and prints
// the same: the dialect's assembly formats and verifiers agree.
//
//===----------------------------------------------------------------------===//

#include "FuzzInput.h"

#include "mlir/IR/OperationSupport.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

using namespace mla::fuzz;

namespace {

std::string print(mlir::ModuleOp module, bool generic) {
  std::string text;
  llvm::raw_string_ostream stream(text);
  mlir::OpPrintingFlags flags;
  if (generic)
    flags.printGenericOpForm();
  module->print(stream, flags);
  return text;
}

void checkRoundTrip(mlir::MLIRContext &context, mlir::ModuleOp module,
                    bool generic) {
  const char *form = generic ? "generic" : "custom";
  std::string printed = print(module, generic);
  mlir::OwningOpRef<mlir::ModuleOp> again = parseModule(context, printed);
  if (!again)
    fuzzDefect(std::string("a verified module printed in ") + form +
               " form does not parse again:\n" + printed);
  if (print(*again, generic) != printed)
    fuzzDefect(std::string("a verified module printed in ") + form +
               " form prints differently after parsing again:\n" + printed);
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) { return 0; }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto context = makeQuietContext();
  mlir::OwningOpRef<mlir::ModuleOp> module =
      parseModule(*context, asText(data, size));
  if (!module)
    return 0;
  checkRoundTrip(*context, *module, /*generic=*/false);
  checkRoundTrip(*context, *module, /*generic=*/true);
  return 0;
}
