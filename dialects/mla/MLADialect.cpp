//===- MLADialect.cpp - The mla dialect -----------------------------------===//

#include "mla/Dialect/MLADialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace mla;

#include "mla/Dialect/MLAOpsDialect.cpp.inc"

void MLADialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "mla/Dialect/MLAOps.cpp.inc"
      >();
}

#define GET_OP_CLASSES
#include "mla/Dialect/MLAOps.cpp.inc"
