//===- TensorMaps.h - TMA descriptors for JIT host code ---------*- C++ -*-===//
//
// Hopper kernels copy tiles of the paged KV cache with TMA
// (cp.async.bulk.tensor), which reads a tensor map: a 128-byte descriptor
// of the tensor that only the driver can encode, on the host. The host code
// lowered from MLIR asks mlaTiledTensorMap for one before a launch and
// passes the device address it returns to the kernel as an ordinary i64
// argument.
//
// Encoding a map and copying it to the device costs driver calls and a
// synchronization, and the host code asks on every launch, so the maps are
// kept: one per context and shape, written once into device memory and
// never freed (a captured CUDA graph holds their addresses in its kernel
// parameters and may be replayed at any time).
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_GPU_TENSORMAPS_H
#define MLA_RUNTIME_GPU_TENSORMAPS_H

#include "mla/Runtime/CudaDriver.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>

namespace mla::gpu {

/// A 2-D tensor of 16-bit elements in global memory and the box a TMA copy
/// moves: `rows` rows of `columns` elements, `rowStrideBytes` apart,
/// starting at device address `base`; boxes of `boxRows` x `boxColumns`.
struct TiledTensorMapShape {
  std::int64_t base = 0;
  std::int64_t rows = 0;
  std::int64_t columns = 0;
  std::int64_t rowStrideBytes = 0;
  std::int64_t boxRows = 0;
  std::int64_t boxColumns = 0;
};

/// Empty when the driver can encode `shape` as a tiled map with 128-byte
/// swizzling; else what is wrong with it, in words. The driver's own
/// refusal says only CUDA_ERROR_INVALID_VALUE.
std::string checkTiledTensorMap(const TiledTensorMapShape &shape);

/// Encodes `shape` on the host (bf16 elements, 128-byte swizzle, 256-byte
/// L2 promotion, zeros outside the tensor) into `map`. `shape` must pass
/// checkTiledTensorMap.
cuda::CUresult encodeTiledTensorMap(const cuda::Driver &driver,
                                    const TiledTensorMapShape &shape,
                                    cuda::CUtensorMap &map);

/// The device address of `shape`'s map in the current context: from the
/// cache, else encoded, written to device memory and kept. Thread-safe,
/// and safe while the calling thread captures a CUDA graph (nothing it does
/// is captured). Errors name the shape and what is wrong with it, or the
/// driver call that failed.
llvm::Expected<cuda::CUdeviceptr>
deviceTiledTensorMap(const cuda::Driver &driver,
                     const TiledTensorMapShape &shape);

} // namespace mla::gpu

extern "C" {
/// For the host code: deviceTiledTensorMap on the active GpuCall's driver.
/// A failure is recorded on the call, which skips its later launches and
/// reports it; the result is then 0. Also 0, doing nothing, when there is
/// no active call or it has already failed.
std::int64_t mlaTiledTensorMap(std::int64_t base, std::int64_t rows,
                               std::int64_t columns,
                               std::int64_t rowStrideBytes,
                               std::int64_t boxRows, std::int64_t boxColumns);
}

#endif // MLA_RUNTIME_GPU_TENSORMAPS_H
