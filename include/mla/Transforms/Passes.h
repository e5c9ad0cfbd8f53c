//===- Passes.h - Passes of the mla compiler --------------------*- C++ -*-===//

#ifndef MLA_TRANSFORMS_PASSES_H
#define MLA_TRANSFORMS_PASSES_H

#include "mla/Transforms/SerializedKernelObserver.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"

namespace mla {

#define GEN_PASS_DECL
#include "mla/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "mla/Transforms/Passes.h.inc"

/// mla-serialize-kernel-modules, reporting each object to `observer` (the
/// runtime hands the PTX to the driver while the rest compiles).
std::unique_ptr<mlir::Pass>
createSerializeKernelModules(SerializedKernelObserver observer);

} // namespace mla

#endif // MLA_TRANSFORMS_PASSES_H
