//===- BuiltinPrefillBackends.cpp - The prefill backends and priorities ---===//
//
// The backends of a layer's chunked prefill (role Prefill), chosen apart
// from the decode backend: one per kernel strategy that lowers the prefill
// attention. Each declares what makes KernelDispatch (lib/Conversion/
// MLAToGPU/KernelDispatch.cpp) give the prefill attention its strategy's
// kernel; a shape that kernel does not take would get another strategy's
// kernel, so it is refused here and the next backend, the one whose kernel
// does run, is chosen and named. test/unit/PrefillBackendTest.cpp lowers
// the chunked prefill over a grid of shapes and checks each declaration
// against the kernels the lowering emits.
//
// What every prefill backend shares: the attention reads q and the K and V
// that kv_up_proj makes from the new tokens and from the context gathered
// out of the cache, all in the activation dtype (the gather converts the
// cache's entries, dequantizing FP8 ones), so every cache format serves
// every backend. Head
// counts: 1 to 128, the range the decode backends declare for the layer.
//
//===----------------------------------------------------------------------===//

#include "mla/Runtime/BackendRegistry.h"
#include "mla/Target/WgmmaPrefillShape.h"

namespace mla {

namespace {

const std::vector<DType> kAllFloats = {DType::F32, DType::F16, DType::BF16};
/// Every cache format: the gather converts or dequantizes the context into
/// the activation dtype before any prefill kernel reads it.
const std::vector<DType> kAllCacheFormats = {
    DType::F32, DType::F16, DType::BF16, DType::FP8E4M3, DType::FP8E5M2};

/// The fields every prefill backend sets alike.
Backend prefillBackend(const char *name, DeviceKind device) {
  Backend b;
  b.name = name;
  b.role = BackendRole::Prefill;
  b.device = device;
  b.kvCacheDTypes = kAllCacheFormats;
  b.maxHeads = 128;
  return b;
}

/// The CUDA-core prefill: a warp per (token, head) row; every dtype and
/// head dim.
Backend prefillGenericGpu() {
  Backend b = prefillBackend(kPrefillGenericGpuBackend, DeviceKind::CUDA);
  b.description = "CUDA-core prefill attention, one warp per row (any "
                  "sm_80+ chip)";
  b.kernelStrategy = KernelStrategy::Generic;
  b.minCapability = {8, 0};
  b.dtypes = kAllFloats;
  return b;
}

Backend prefillCpuJit() {
  Backend b = prefillBackend(kPrefillCpuJitBackend, DeviceKind::CPU);
  b.description = "host code JIT-compiled by LLVM; the reference path";
  b.dtypes = kAllFloats;
  return b;
}

/// The mma.sync prefill (useMmaPrefill): 128-row query tiles of one head,
/// four warps sharing 32-key K/V tiles, m16n8k16 mma.sync over bf16 or
/// f16. It takes qk and v head dims in multiples of the k-step (16), qk up
/// to 256 (its unrolled k-steps and shared memory) and v up to 128 (a
/// warp's O in registers); at those maxima a one-stage layout fits every
/// chip's shared memory (91 KiB of sm_86's 98). The chunked prefill's
/// kv_up_proj is the mma.sync product where it takes the shape; gather
/// and merges run on CUDA cores.
Backend prefillTcSm80() {
  Backend b = prefillBackend(kPrefillTcSm80Backend, DeviceKind::CUDA);
  b.description = "mma.sync tensor-core prefill attention and kv_up_proj "
                  "(bf16/f16, sm_80+); gather and merges on CUDA cores";
  b.kernelStrategy = KernelStrategy::TensorCore;
  b.minCapability = {8, 0};
  b.dtypes = {DType::BF16, DType::F16};
  b.qkHeadDim = {/*multipleOf=*/16, /*max=*/256};
  b.vHeadDim = {/*multipleOf=*/16, /*max=*/128};
  return b;
}

/// The wgmma prefill on sm_90a (useWgmmaPrefill, wgmma_prefill::takesDims):
/// two consumer warpgroups over 128-row query tiles and a producer
/// warpgroup copying 128-key tiles. It takes qk and v head dims in whole
/// 64-column blocks, qk up to 256, v up to 128; sm_90a's shared memory
/// holds a layout for every such pair. Other head dims would get the
/// mma.sync kernel, which is PREFILL_TC_SM80's. Where q, k or v is not
/// 16-byte aligned at run time, the launch takes the generic kernel (the
/// layer's own K and V are; q is the caller's). The chunked prefill's
/// kv_up_proj is a wgmma product where it takes the shape.
Backend prefillTcSm90a() {
  Backend b = prefillBackend(kPrefillTcSm90aBackend, DeviceKind::CUDA);
  b.description = "wgmma tensor-core prefill attention and kv_up_proj on "
                  "sm_90a (bf16/f16, head dims in 64-column blocks); gather "
                  "and merges on CUDA cores";
  b.kernelStrategy = KernelStrategy::Warpgroup;
  // wgmma exists only on sm_90a: code for it does not run on later chips.
  b.minCapability = {9, 0};
  b.maxCapability = DeviceCapability{9, 0};
  b.dtypes = {DType::BF16, DType::F16};
  b.qkHeadDim = {wgmma::kAtomColumns, wgmma_prefill::kMaxQkDim};
  b.vHeadDim = {wgmma::kAtomColumns, wgmma_prefill::kMaxVDim};
  return b;
}

} // namespace

std::vector<Backend> builtinPrefillBackends() {
  return {prefillGenericGpu(), prefillCpuJit(), prefillTcSm80(),
          prefillTcSm90a()};
}

std::vector<PriorityRule> builtinPrefillPriorities() {
  auto cuda = [](DeviceCapability min, std::optional<DeviceCapability> max,
                 std::vector<std::string> order) {
    return PriorityRule{DeviceKind::CUDA, min, max, std::move(order)};
  };
  return {
      cuda({9, 0}, DeviceCapability{9, 0},
           {kPrefillTcSm90aBackend, kPrefillTcSm80Backend,
            kPrefillGenericGpuBackend}),
      cuda({8, 0}, DeviceCapability{8, 9},
           {kPrefillTcSm80Backend, kPrefillGenericGpuBackend}),
      // mma.sync runs on every newer chip too (sm_100, sm_120).
      cuda({10, 0}, std::nullopt,
           {kPrefillTcSm80Backend, kPrefillGenericGpuBackend}),
      // Older chips get the generic backend so the error explains the
      // minimum.
      cuda({0, 0}, std::nullopt, {kPrefillGenericGpuBackend}),
      PriorityRule{DeviceKind::CPU, {}, std::nullopt, {kPrefillCpuJitBackend}},
  };
}

} // namespace mla
