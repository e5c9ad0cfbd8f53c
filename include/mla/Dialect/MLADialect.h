//===- MLADialect.h - The mla dialect ---------------------------*- C++ -*-===//
//
// Declares the `mla` dialect and its operations.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_DIALECT_MLADIALECT_H
#define MLA_DIALECT_MLADIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "mla/Dialect/MLAOpsDialect.h.inc"

#define GET_OP_CLASSES
#include "mla/Dialect/MLAOps.h.inc"

#endif // MLA_DIALECT_MLADIALECT_H
