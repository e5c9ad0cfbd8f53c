//===- TestSupport.cpp - Host tensors and kernels for numerics tests ------===//

#include "TestSupport.h"

#include "llvm/Support/FileSystem.h"

#include "MlaReference.h"
#include "mla/Builders/KernelBuilders.h"
#include "mla/Runtime/HostBufferKernel.h"
#include "mla/Support/Float16.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace mla::test {

namespace {

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

const cuda::Device *testGpu() {
  return testingOnGpu() ? testDevice() : nullptr;
}

std::unique_ptr<HostBufferKernel>
compileKernel(mlir::OwningOpRef<mlir::ModuleOp> module,
              std::optional<KernelStrategy> strategy) {
  const cuda::Device *device = testGpu();
  if (testingOnGpu() && !device) {
    ADD_FAILURE() << "no CUDA device";
    return nullptr;
  }
  std::optional<GpuTarget> target;
  if (device && strategy) {
    auto chosen = GpuTarget::forCapability(device->capability().major,
                                           device->capability().minor);
    if (!chosen) {
      ADD_FAILURE() << llvm::toString(chosen.takeError());
      return nullptr;
    }
    target = *chosen;
    target->strategy = *strategy;
  }
  auto kernel = HostBufferKernel::compile(std::move(module), kKernelEntry,
                                          device, target);
  if (!kernel) {
    ADD_FAILURE() << llvm::toString(kernel.takeError());
    return nullptr;
  }
  return std::move(*kernel);
}

void runKernel(HostBufferKernel &kernel, std::vector<BufferView> args) {
  if (llvm::Error error = kernel.run(args))
    FAIL() << llvm::toString(std::move(error));
}

mlir::MLIRContext &testContext() {
  static mlir::MLIRContext *context = [] {
    // Threaded, as the runtime's context: kernels are lowered and
    // serialized in parallel, as in production.
    auto *ctx = new mlir::MLIRContext(mlir::MLIRContext::Threading::ENABLED);
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

TemporaryDirectory::TemporaryDirectory(const char *prefix) {
  llvm::SmallString<128> created;
  std::error_code error = llvm::sys::fs::createUniqueDirectory(prefix, created);
  EXPECT_FALSE(error) << "creating a temporary directory: " << error.message();
  directory = std::string(created);
}

TemporaryDirectory::~TemporaryDirectory() {
  if (!directory.empty())
    llvm::sys::fs::remove_directories(directory);
}

static void setOrUnset(const std::string &variable, const char *value) {
  if (value)
    ::setenv(variable.c_str(), value, /*overwrite=*/1);
  else
    ::unsetenv(variable.c_str());
}

ScopedEnv::ScopedEnv(const char *variable, const char *value)
    : variable(variable) {
  if (const char *old = std::getenv(variable))
    previous = old;
  setOrUnset(this->variable, value);
}

ScopedEnv::~ScopedEnv() {
  setOrUnset(variable, previous ? previous->c_str() : nullptr);
}

} // namespace mla::test
