//===- GpuTestSupport.h - Device buffers and kernels for GPU tests -*- C++
//-*-===//
//
// What the tests that run on device buffers share (GPU only: each caller
// skips when testingOnGpu() is false): device copies of host tensors at a
// chosen offset (misaligned bases), and compiling for the test GPU with a
// given kernel strategy.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TEST_UNIT_GPUTESTSUPPORT_H
#define MLA_TEST_UNIT_GPUTESTSUPPORT_H

#include "TestSupport.h"

#include "mla/Runtime/CudaDevice.h"
#include "mla/Runtime/GpuKernel.h"

#include <functional>
#include <optional>
#include <vector>

namespace mla::test {

/// A host tensor's copy in device memory, `offset` bytes past an aligned
/// allocation.
struct DeviceTensor {
  cuda::DeviceBuffer buffer;
  BufferView view;
  size_t offset = 0;

  static DeviceTensor of(HostTensor &host, size_t offset = 0);
  void copyTo(HostTensor &host) const;
};

/// Compiles `m` for the test GPU with `strategy`, for the device's own
/// chip or for `chip` (older chips' PTX runs on newer ones).
std::unique_ptr<GpuKernel> compileOnGpu(mlir::OwningOpRef<mlir::ModuleOp> m,
                                        KernelStrategy strategy,
                                        const char *chip = nullptr);

/// Whether the test GPU runs sm_90a code (the wgmma strategy).
bool testGpuRunsWgmma();

/// The strategies the test GPU runs: the generic one (when
/// `withGeneric`), mma-sync, and wgmma on sm_90a.
std::vector<KernelStrategy> gpuStrategies(bool withGeneric);

/// Runs `check` with the default (generic) strategy and, on the GPU, with
/// each tensor-core strategy the device runs (mma-sync, and wgmma on
/// sm_90a), each under a trace naming it: for ops whose kernels every
/// strategy must get right, whichever kernel it picks.
void forEachStrategy(
    const std::function<void(std::optional<KernelStrategy>)> &check);

} // namespace mla::test

#endif // MLA_TEST_UNIT_GPUTESTSUPPORT_H
