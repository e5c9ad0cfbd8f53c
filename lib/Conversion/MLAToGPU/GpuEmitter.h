//===- GpuEmitter.h - Building blocks of the generic GPU kernels -*- C++ -*-===//
//
// Device-side helpers for kernels written as gpu.func bodies: thread and
// block indices, block-strided loops, warp reductions through shuffles.
// The generic strategy maps one warp to one attention row (head, query)
// and spreads a row's head dim across the 32 lanes; element c of a row
// belongs to lane c % 32, so every warp-wide load is coalesced.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_LIB_CONVERSION_MLATOGPU_GPUEMITTER_H
#define MLA_LIB_CONVERSION_MLATOGPU_GPUEMITTER_H

#include "../Common/LoopBuilder.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace mla::gpu {

inline constexpr int64_t kWarpSize = 32;

class GpuEmitter : public LoopBuilder {
public:
  using LoopBuilder::LoopBuilder;

  mlir::Value threadId(mlir::gpu::Dimension d = mlir::gpu::Dimension::x);
  mlir::Value blockId(mlir::gpu::Dimension d);
  mlir::Value blockDim(mlir::gpu::Dimension d = mlir::gpu::Dimension::x);
  mlir::Value gridDim(mlir::gpu::Dimension d);
  mlir::Value laneId();
  mlir::Value warpId();

  /// for (i = lb + threadIdx.x; i < ub; i += blockDim.x) body(i)
  void blockStridedLoop(mlir::Value lb, mlir::Value ub,
                        const std::function<void(mlir::Value)> &body);

  /// The sum (or max) of `value` over the 32 lanes of a warp, in every lane.
  mlir::Value warpSum(mlir::Value value);
  mlir::Value warpMax(mlir::Value value);

  /// Columns of a row a lane owns: lane + 32 k for k in [0, count).
  static int64_t columnsPerLane(int64_t length) {
    return (length + kWarpSize - 1) / kWarpSize;
  }
  /// Column `lane + 32 k` and whether it is inside a row of `length`.
  std::pair<mlir::Value, mlir::Value> laneColumn(mlir::Value lane, int64_t k,
                                                 int64_t length);
  /// memref[prefix..., column] as f32, or 0 where `inside` is false (the
  /// column is clamped so the load stays in bounds).
  mlir::Value loadColumn(mlir::Value memref, mlir::ValueRange prefix,
                         mlir::Value column, mlir::Value inside,
                         int64_t length, int64_t firstColumn = 0);
  /// memref[prefix..., firstColumn + column] = value where `inside`.
  void storeColumn(mlir::Value value, mlir::Value memref,
                   mlir::ValueRange prefix, mlir::Value column,
                   mlir::Value inside, int64_t firstColumn = 0);

private:
  mlir::Value warpReduce(mlir::Value value, bool max);
};

} // namespace mla::gpu

#endif // MLA_LIB_CONVERSION_MLATOGPU_GPUEMITTER_H
