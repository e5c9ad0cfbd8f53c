//===- mla-opt.cpp - Inspect and transform mla IR -------------------------===//
//
// mlir-opt with the mla dialect, its passes and pipelines, and the upstream
// dialects the pipelines produce. Any stage can be printed with
// --mlir-print-ir-after-all or by running passes one at a time.
//
//===----------------------------------------------------------------------===//

#include "mla/Pipelines/Pipelines.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::registerTransformsPasses();
  mla::registerMLAPassesAndPipelines();
  mlir::DialectRegistry registry;
  mla::registerMLADialects(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "mla optimizer driver\n", registry));
}
