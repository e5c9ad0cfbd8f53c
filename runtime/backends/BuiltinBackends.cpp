//===- BuiltinBackends.cpp - The project's backends and priorities --------===//
//
// To add a backend: an entry in builtinBackends() declaring what it
// supports, and its name in the priority lists of the devices it should be
// tried on (earlier = preferred). These are the decode backends: they
// compile every module of a layer but the chunked prefill, whose backends
// are BuiltinPrefillBackends.cpp's.
//
//===----------------------------------------------------------------------===//

#include "mla/Runtime/BackendRegistry.h"
#include "mla/Target/WgmmaDecodeShape.h"

namespace mla {

namespace {

const std::vector<DType> kAllFloats = {DType::F32, DType::F16, DType::BF16};
/// Caches the generic kernels read and write: the activation formats and
/// FP8 (quantized and dequantized element by element).
const std::vector<DType> kAllCacheFormats = {
    DType::F32, DType::F16, DType::BF16, DType::FP8E4M3, DType::FP8E5M2};

Backend genericGpu() {
  Backend b;
  b.name = kGenericGpuBackend;
  b.description = "CUDA cores, one warp per attention row (any sm_80+ chip)";
  b.device = DeviceKind::CUDA;
  b.kernelStrategy = KernelStrategy::Generic;
  b.minCapability = {8, 0};
  b.dtypes = kAllFloats;
  b.kvCacheDTypes = kAllCacheFormats;
  b.maxHeads = 128;
  // A decode step (uniform query lengths) reads its lengths, pages and
  // split counts from device buffers, takes its split workspace from the
  // caller and returns without a host wait, so it can be captured once and
  // replayed with new lengths (test/unit/CudaGraphTest.cpp). Mixed batches
  // cannot: the chunked prefill's host loop reads its chunk plan.
  b.cudaGraphs = CudaGraphSupport::UNIFORM_BATCH;
  return b;
}

Backend cpuJit() {
  Backend b;
  b.name = kCpuJitBackend;
  b.description = "host code JIT-compiled by LLVM; the reference path";
  b.device = DeviceKind::CPU;
  b.dtypes = kAllFloats;
  b.kvCacheDTypes = kAllCacheFormats;
  b.maxHeads = 128;
  return b;
}

/// mma.sync tensor cores (sm_80 and newer): the decode's split kernel and
/// the decode's up-projections have tensor-core forms (decode: 16-row
/// tiles of a request's head rows sharing each 64-token KV tile;
/// up-projections: 64-token tiles of each head's product); the other
/// phases use the generic kernels (the chunked prefill is the prefill
/// backend's: PREFILL_TC_SM80 is its mma.sync form). Head dims must be
/// multiples of 16 (the backend refuses others); a shape a tensor-core
/// kernel still does not take (mixed two-byte activation/cache dtypes, a
/// kv_lora_rank not a multiple of 64, too much shared memory for the chip)
/// is lowered to the generic kernel. FP8 caches: the decode dequantizes
/// each KV tile in shared memory into q's type.
Backend tcSm80() {
  Backend b;
  b.name = kTcSm80Backend;
  b.description = "mma.sync tensor-core decode attention and "
                  "up-projections (bf16/f16, sm_80+); other phases on CUDA "
                  "cores";
  b.device = DeviceKind::CUDA;
  b.kernelStrategy = KernelStrategy::TensorCore;
  b.minCapability = {8, 0};
  b.dtypes = {DType::BF16, DType::F16};
  b.kvCacheDTypes = {DType::BF16, DType::F16, DType::FP8E4M3,
                     DType::FP8E5M2};
  b.maxHeads = 128;
  // The mma k-step is 16 elements.
  b.dims.multipleOf = 16;
  // As GENERIC_GPU: decode steps capture; mixed batches do not.
  b.cudaGraphs = CudaGraphSupport::UNIFORM_BATCH;
  return b;
}

/// wgmma on sm_90a: the decode's split kernel takes 64-row tiles of a
/// request's head rows with two warpgroups sharing each 64-token KV tile
/// (wgmma from 128-byte-swizzled shared memory; at 128 heads the tiles
/// come in by tensor copies). The decode-sized up-projections (q_absorb,
/// v_up_proj) are TC_SM80's mma.sync kernel, the other phases the generic
/// kernels; where q or the cache is not 16-byte aligned the decode
/// launches the generic kernel. (The wgmma prefill is PREFILL_TC_SM90A's.)
/// Declared for what the decode kernel is written for: 16 or more heads
/// over DeepSeek's 512 + 64 latent cache (the lowering would otherwise
/// fall back to the mma.sync kernel, which TC_SM80 already offers). FP8
/// caches too: the decode kernel dequantizes each tile on chip into q's
/// type (the cache write and gather are the generic kernels').
Backend tcSm90a() {
  Backend b;
  b.name = kTcSm90aBackend;
  b.description = "wgmma tensor-core decode attention on sm_90a (16+ "
                  "heads), mma.sync q_absorb and v_up_proj; other phases on "
                  "CUDA cores";
  b.device = DeviceKind::CUDA;
  b.kernelStrategy = KernelStrategy::Warpgroup;
  // wgmma exists only on sm_90a: code for it does not run on later chips.
  b.minCapability = {9, 0};
  b.maxCapability = DeviceCapability{9, 0};
  b.dtypes = {DType::BF16, DType::F16};
  b.kvCacheDTypes = {DType::BF16, DType::F16, DType::FP8E4M3,
                     DType::FP8E5M2};
  b.minHeads = static_cast<int>(wgmma_decode::kMinHeads);
  b.maxHeads = 128;
  b.dims = {/*kvLoraRank=*/512, /*ropeDim=*/64, /*qkNopeHeadDim=*/0,
            /*vHeadDim=*/0, /*multipleOf=*/16};
  b.cudaGraphs = CudaGraphSupport::UNIFORM_BATCH;
  return b;
}

} // namespace

std::vector<Backend> builtinBackends() {
  return {genericGpu(), cpuJit(), tcSm80(), tcSm90a()};
}

std::vector<PriorityRule> builtinPriorities() {
  auto cuda = [](DeviceCapability min, std::optional<DeviceCapability> max,
                 std::vector<std::string> order) {
    return PriorityRule{DeviceKind::CUDA, min, max, std::move(order)};
  };
  return {
      cuda({9, 0}, DeviceCapability{9, 0},
           {kTcSm90aBackend, kTcSm80Backend, kGenericGpuBackend}),
      cuda({8, 0}, DeviceCapability{8, 9},
           {kTcSm80Backend, kGenericGpuBackend}),
      // mma.sync runs on every newer chip too.
      cuda({10, 0}, std::nullopt, {kTcSm80Backend, kGenericGpuBackend}),
      // Older chips get GENERIC_GPU so the error explains the minimum; newer
      // ones run its portable code.
      cuda({0, 0}, std::nullopt, {kGenericGpuBackend}),
      PriorityRule{DeviceKind::CPU, {}, std::nullopt, {kCpuJitBackend}},
  };
}

} // namespace mla
