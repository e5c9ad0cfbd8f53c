//===- RuntimeTestSupport.cpp - Runtimes and device tensors for tests -----===//

#include "RuntimeTestSupport.h"

#include "TestSupport.h"

using namespace mla::runtime;

namespace mla::test {

std::unique_ptr<Runtime> makeTestRuntime() {
  RuntimeOptions options;
  options.device =
      testingOnGpu() ? DevicePreference::Gpu : DevicePreference::Cpu;
  options.cache.diskEnabled = false;
  auto rt = Runtime::create(options);
  EXPECT_TRUE(bool(rt)) << llvm::toString(rt.takeError());
  return rt ? std::move(*rt) : nullptr;
}

RuntimeTensor RuntimeTensor::random(Runtime &rt, DType dtype,
                                    std::vector<int64_t> shape, double range) {
  RuntimeTensor x{HostTensor(dtype, std::move(shape)), {}};
  x.host.fillRandom(rng(), -range, range);
  auto allocation = rt.allocate(x.host.sizeInBytes());
  EXPECT_TRUE(bool(allocation)) << llvm::toString(allocation.takeError());
  if (allocation)
    x.device = std::move(*allocation);
  x.upload(rt);
  return x;
}

BufferView RuntimeTensor::view() {
  return BufferView::contiguous(device.data(), host.elementType(), host.dims());
}

void RuntimeTensor::upload(Runtime &rt) {
  EXPECT_FALSE(
      bool(rt.upload(device.data(), host.view().data, host.sizeInBytes())));
}

std::vector<double> RuntimeTensor::download(Runtime &rt) const {
  HostTensor copy = host;
  EXPECT_FALSE(bool(
      rt.download(copy.view().data, device.data(), copy.sizeInBytes())));
  return copy.toDouble();
}

} // namespace mla::test
