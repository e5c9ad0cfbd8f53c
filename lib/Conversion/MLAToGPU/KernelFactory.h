//===- KernelFactory.h - Where kernels go and how they launch ---*- C++ -*-===//
//
// Every lowering creates its kernels (gpu.func in the module's gpu.module)
// through a KernelFactory and launches them from the host function.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_LIB_CONVERSION_MLATOGPU_KERNELFACTORY_H
#define MLA_LIB_CONVERSION_MLATOGPU_KERNELFACTORY_H

#include "Emitters/GpuEmitter.h"
#include "mla/Target/GpuTarget.h"

namespace mla::gpu {

/// Threads per block of every generic kernel (four warps).
inline constexpr int64_t kBlockThreads = 128;
/// Warps of a block of kBlockThreads (the generic and mma.sync kernels;
/// the wgmma kernels run 256 or 384 threads).
inline constexpr int64_t kBlockWarps = kBlockThreads / kWarpSize;
/// Cached tokens one decode block handles before the combine kernel merges
/// the splits, per 16 heads: long contexts spread over many SMs, and with
/// many heads the splits grow so that writing the partial outputs
/// (heads x 512 f32 per split) stays small next to reading the cache.
inline constexpr int64_t kDecodeSplitTokensPer16Heads = 256;
inline int64_t decodeSplitTokens(int64_t heads) {
  return kDecodeSplitTokensPer16Heads * ((heads + 15) / 16);
}

/// Where kernels go and how they are launched.
class KernelFactory {
public:
  KernelFactory(mlir::gpu::GPUModuleOp module, const GpuTarget &target)
      : gpuModule(module), gpuTarget(target) {}

  /// A kernel named after `base` (made unique) taking `argTypes`, with
  /// `blockThreads` threads per block. `body` fills it through `e`.
  mlir::gpu::GPUFuncOp
  create(llvm::StringRef base, mlir::TypeRange argTypes,
         const std::function<void(GpuEmitter &e, mlir::ValueRange args)>
             &body,
         int64_t blockThreads = kBlockThreads);

  /// Launches `kernel` on `grid` blocks (skipped when any is zero, which
  /// CUDA rejects) of the kernel's known block size from the host
  /// builder's position, with `dynamicSharedBytes` of dynamic shared
  /// memory (the runtime opts the kernel in above 48 KiB).
  static void launch(mlir::OpBuilder &host, mlir::Location loc,
                     mlir::gpu::GPUFuncOp kernel,
                     std::array<mlir::Value, 3> grid, mlir::ValueRange args,
                     int64_t dynamicSharedBytes = 0);

  /// While alive, the kernels created are ones that run only in rare
  /// cases (the generic fallbacks of the tensor-core kernels): marked to be
  /// compiled by the driver at their first launch rather than with the
  /// others (mla/Target/KernelLoading.h).
  class RarelyLaunched {
  public:
    explicit RarelyLaunched(KernelFactory &factory)
        : factory(factory), was(factory.rarelyLaunched) {
      factory.rarelyLaunched = true;
    }
    ~RarelyLaunched() { factory.rarelyLaunched = was; }
    RarelyLaunched(const RarelyLaunched &) = delete;
    RarelyLaunched &operator=(const RarelyLaunched &) = delete;

  private:
    KernelFactory &factory;
    bool was;
  };

  mlir::gpu::GPUModuleOp module() { return gpuModule; }
  /// The module's target (`mla.target`): chip and kernel strategy.
  const GpuTarget &target() const { return gpuTarget; }

private:
  mlir::gpu::GPUModuleOp gpuModule;
  GpuTarget gpuTarget;
  unsigned counter = 0;
  bool rarelyLaunched = false;
};

} // namespace mla::gpu

#endif // MLA_LIB_CONVERSION_MLATOGPU_KERNELFACTORY_H
