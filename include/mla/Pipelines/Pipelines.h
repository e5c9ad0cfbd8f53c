//===- Pipelines.h - Pass pipelines and registration ------------*- C++ -*-===//

#ifndef MLA_PIPELINES_PIPELINES_H
#define MLA_PIPELINES_PIPELINES_H

#include "mla/Target/GpuTarget.h"
#include "mla/Transforms/SerializedKernelObserver.h"

#include "mlir/Pass/PassManager.h"

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace mla {

/// Options of the CPU pipeline (also `mla-opt --mla-lower-to-cpu=...`).
struct CpuPipelineOptions {
  int64_t vectorWidth = 16;
  int64_t keyBlock = 32;
};

/// mla ops -> loops (expanding composites first) -> LLVM dialect, ready for
/// mlir::ExecutionEngine. Anchored on the module.
void buildCpuLoweringPipeline(mlir::OpPassManager &pm,
                              const CpuPipelineOptions &options = {});

/// mla ops -> GPU kernels for `target` (PTX, embedded as gpu.binary) and
/// host code in the LLVM dialect that launches them through the runtime's
/// mgpu* entry points. Anchored on the module. Each kernel's PTX also goes
/// to `onKernelSerialized` (when set) as soon as it is ready.
void buildGpuLoweringPipeline(mlir::OpPassManager &pm, const GpuTarget &target,
                              SerializedKernelObserver onKernelSerialized = {});

/// Dialects an mla module may contain or be lowered through, with the
/// interfaces the LLVM conversions and translation need.
void registerMLADialects(mlir::DialectRegistry &registry);

/// Registers every mla pass and pipeline with the global registry (for
/// mla-opt).
void registerMLAPassesAndPipelines();

} // namespace mla

#endif // MLA_PIPELINES_PIPELINES_H
