//===- GpuTestSupport.cpp - Device buffers and kernels for GPU tests ------===//

#include "GpuTestSupport.h"

#include "mla/Builders/KernelBuilders.h"

#include <cstring>

namespace mla::test {

DeviceTensor DeviceTensor::of(HostTensor &host, size_t offset) {
  DeviceTensor t;
  t.offset = offset;
  std::vector<uint8_t> bytes(offset + host.sizeInBytes());
  std::memcpy(bytes.data() + offset, host.view().data, host.sizeInBytes());
  auto buffer = cuda::DeviceBuffer::allocate(bytes.size());
  EXPECT_TRUE(bool(buffer)) << llvm::toString(buffer.takeError());
  if (!buffer)
    return t;
  t.buffer = std::move(*buffer);
  if (llvm::Error e = t.buffer.copyFromHost(bytes.data(), bytes.size()))
    ADD_FAILURE() << llvm::toString(std::move(e));
  t.view = host.view();
  t.view.data = reinterpret_cast<char *>(t.buffer.ptr()) + offset;
  return t;
}

void DeviceTensor::copyTo(HostTensor &host) const {
  std::vector<uint8_t> bytes(buffer.size());
  if (llvm::Error e = buffer.copyToHost(bytes.data(), bytes.size()))
    ADD_FAILURE() << llvm::toString(std::move(e));
  std::memcpy(host.view().data, bytes.data() + offset, host.sizeInBytes());
}

std::unique_ptr<GpuKernel> compileOnGpu(mlir::OwningOpRef<mlir::ModuleOp> m,
                                        KernelStrategy strategy,
                                        const char *chip) {
  const cuda::Device &device = *testGpu();
  auto target = chip ? GpuTarget::parse(chip)
                     : GpuTarget::forCapability(device.capability().major,
                                                device.capability().minor);
  if (!target) {
    ADD_FAILURE() << llvm::toString(target.takeError());
    return nullptr;
  }
  target->strategy = strategy;
  auto kernel = GpuKernel::compile(std::move(m), kKernelEntry, device, *target);
  if (!kernel) {
    ADD_FAILURE() << llvm::toString(kernel.takeError());
    return nullptr;
  }
  return std::move(*kernel);
}

bool testGpuRunsWgmma() {
  const cuda::Device *device = testGpu();
  return testingOnGpu() && device && device->capability().major == 9 &&
         device->capability().minor == 0;
}

std::vector<KernelStrategy> gpuStrategies(bool withGeneric) {
  std::vector<KernelStrategy> strategies;
  if (withGeneric)
    strategies.push_back(KernelStrategy::Generic);
  strategies.push_back(KernelStrategy::TensorCore);
  if (testGpuRunsWgmma())
    strategies.push_back(KernelStrategy::Warpgroup);
  return strategies;
}

void forEachStrategy(
    const std::function<void(std::optional<KernelStrategy>)> &check) {
  {
    SCOPED_TRACE("strategy generic");
    check(std::nullopt);
  }
  if (testingOnGpu()) {
    SCOPED_TRACE("strategy mma-sync");
    check(KernelStrategy::TensorCore);
  }
  if (testGpuRunsWgmma()) {
    SCOPED_TRACE("strategy wgmma");
    check(KernelStrategy::Warpgroup);
  }
}

} // namespace mla::test
