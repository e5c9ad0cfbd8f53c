//===- TestSupport.cpp - Host tensors and kernels for numerics tests ------===//

#include "TestSupport.h"

#include "MlaReference.h"
#include "mla/Builders/KernelBuilders.h"
#include "mla/Runtime/GpuKernel.h"
#include "mla/Support/Float16.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace mla::test {

namespace {

class CpuTestKernel : public TestKernel {
public:
  explicit CpuTestKernel(std::unique_ptr<CpuKernel> kernel)
      : kernel(std::move(kernel)) {}
  llvm::Error run(const std::vector<BufferView> &args) override {
    return kernel->run(args);
  }

private:
  std::unique_ptr<CpuKernel> kernel;
};

class GpuTestKernel : public TestKernel {
public:
  explicit GpuTestKernel(std::unique_ptr<GpuKernel> kernel)
      : kernel(std::move(kernel)) {}

  llvm::Error run(const std::vector<BufferView> &args) override {
    std::vector<cuda::DeviceBuffer> buffers;
    std::vector<BufferView> deviceArgs;
    for (const BufferView &arg : args) {
      size_t bytes = arg.numElements() * byteWidth(arg.dtype);
      auto buffer = cuda::DeviceBuffer::allocate(bytes);
      if (!buffer)
        return buffer.takeError();
      if (bytes)
        if (llvm::Error e = buffer->copyFromHost(arg.data, bytes))
          return e;
      BufferView view = arg;
      view.data = reinterpret_cast<void *>(buffer->ptr());
      deviceArgs.push_back(view);
      buffers.push_back(std::move(*buffer));
    }
    if (llvm::Error e = kernel->run(deviceArgs))
      return e;
    for (size_t i = 0; i < args.size(); ++i)
      if (buffers[i].size())
        if (llvm::Error e = buffers[i].copyToHost(args[i].data, buffers[i].size()))
          return e;
    return llvm::Error::success();
  }

private:
  std::unique_ptr<GpuKernel> kernel;
};

/// The suite's GPU, opened once.
cuda::Device *testDevice() {
  static std::unique_ptr<cuda::Device> device = [] {
    auto opened = cuda::Device::open(0);
    if (!opened) {
      std::printf("[ gpu      ] %s\n",
                  llvm::toString(opened.takeError()).c_str());
      return std::unique_ptr<cuda::Device>();
    }
    return std::move(*opened);
  }();
  return device.get();
}

/// With MLA_TEST_DEVICE=gpu and no usable GPU, every test is skipped.
class GpuEnvironment : public ::testing::Environment {
public:
  void SetUp() override {
    if (testingOnGpu() && !testDevice())
      GTEST_SKIP() << "MLA_TEST_DEVICE=gpu but no CUDA device is available";
  }
};
const auto *const gpuEnvironment =
    ::testing::AddGlobalTestEnvironment(new GpuEnvironment);

} // namespace

bool testingOnGpu() {
  const char *device = std::getenv("MLA_TEST_DEVICE");
  return device && std::string(device) == "gpu";
}

std::unique_ptr<TestKernel>
compileKernel(mlir::OwningOpRef<mlir::ModuleOp> module) {
  if (testingOnGpu()) {
    cuda::Device *device = testDevice();
    if (!device) {
      ADD_FAILURE() << "no CUDA device";
      return nullptr;
    }
    auto kernel = GpuKernel::compile(std::move(module), kKernelEntry, *device);
    if (!kernel) {
      ADD_FAILURE() << llvm::toString(kernel.takeError());
      return nullptr;
    }
    return std::make_unique<GpuTestKernel>(std::move(*kernel));
  }
  auto kernel = CpuKernel::compile(std::move(module), kKernelEntry);
  if (!kernel) {
    ADD_FAILURE() << llvm::toString(kernel.takeError());
    return nullptr;
  }
  return std::make_unique<CpuTestKernel>(std::move(*kernel));
}

void runKernel(TestKernel &kernel, std::vector<BufferView> args) {
  if (llvm::Error error = kernel.run(args))
    FAIL() << llvm::toString(std::move(error));
}

mlir::MLIRContext &testContext() {
  static mlir::MLIRContext *context = [] {
    auto *ctx = new mlir::MLIRContext(mlir::MLIRContext::Threading::DISABLED);
    loadKernelDialects(*ctx);
    return ctx;
  }();
  return *context;
}

std::mt19937 &rng() {
  static std::mt19937 generator = [] {
    unsigned seed = std::random_device{}();
    if (const char *fixed = std::getenv("MLA_TEST_SEED"))
      seed = static_cast<unsigned>(std::strtoul(fixed, nullptr, 10));
    std::printf("[ seed     ] MLA_TEST_SEED=%u\n", seed);
    return std::mt19937(seed);
  }();
  return generator;
}

double tolerance(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return 2e-5;
  case DType::F16:
    return 2e-3;
  case DType::BF16:
    return 1.2e-2;
  default:
    return 0.0;
  }
}

void expectClose(const std::vector<double> &got,
                 const std::vector<double> &want, double tol,
                 const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double err = ref::relativeL2Error(got, want);
  EXPECT_LE(err, tol) << what << ": relative L2 error " << err;
}

void expectLseClose(const std::vector<double> &got,
                    const std::vector<double> &want, double absTol,
                    const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  std::string why;
  EXPECT_TRUE(ref::lseMatches(got, want, absTol, &why)) << what << ": " << why;
}

std::vector<int32_t> prefixSums(const std::vector<int32_t> &lengths) {
  std::vector<int32_t> offsets{0};
  for (int32_t l : lengths)
    offsets.push_back(offsets.back() + l);
  return offsets;
}

} // namespace mla::test
