//===- TestSupport.cpp - Host tensors and kernels for numerics tests ------===//

#include "TestSupport.h"

#include "MlaReference.h"
#include "mla/Builders/KernelBuilders.h"
#include "mla/Support/Float16.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace mla::test {

HostTensor::HostTensor(DType dtype, std::vector<int64_t> shape)
    : dtype(dtype), shape(std::move(shape)) {
  bytes.resize(static_cast<size_t>(numElements()) * byteWidth(dtype));
}

int64_t HostTensor::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

HostTensor HostTensor::i32(std::vector<int64_t> shape,
                           const std::vector<int32_t> &values) {
  HostTensor t(DType::I32, std::move(shape));
  EXPECT_EQ(static_cast<int64_t>(values.size()), t.numElements());
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

HostTensor HostTensor::i64(std::vector<int64_t> shape,
                           const std::vector<int64_t> &values) {
  HostTensor t(DType::I64, std::move(shape));
  EXPECT_EQ(static_cast<int64_t>(values.size()), t.numElements());
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

void HostTensor::fillRandom(std::mt19937 &gen, double lo, double hi) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> values(numElements());
  for (double &v : values)
    v = dist(gen);
  fromDouble(values);
}

void HostTensor::poison() {
  if (isFloat(dtype)) {
    fromDouble(std::vector<double>(numElements(),
                                   std::numeric_limits<double>::quiet_NaN()));
    return;
  }
  std::memset(bytes.data(), 0x7b, bytes.size());
}

std::vector<double> HostTensor::toDouble() const {
  std::vector<double> out(numElements());
  for (int64_t i = 0; i < numElements(); ++i) {
    const uint8_t *p = bytes.data() + i * byteWidth(dtype);
    switch (dtype) {
    case DType::F32: {
      float f;
      std::memcpy(&f, p, 4);
      out[i] = f;
      break;
    }
    case DType::F16:
    case DType::BF16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      out[i] = dtype == DType::F16 ? f16ToFloat(h) : bf16ToFloat(h);
      break;
    }
    case DType::I32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      out[i] = v;
      break;
    }
    case DType::I64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      out[i] = static_cast<double>(v);
      break;
    }
    }
  }
  return out;
}

void HostTensor::fromDouble(const std::vector<double> &values) {
  ASSERT_EQ(static_cast<int64_t>(values.size()), numElements());
  for (int64_t i = 0; i < numElements(); ++i) {
    uint8_t *p = bytes.data() + i * byteWidth(dtype);
    float f = static_cast<float>(values[i]);
    switch (dtype) {
    case DType::F32:
      std::memcpy(p, &f, 4);
      break;
    case DType::F16:
    case DType::BF16: {
      uint16_t h = dtype == DType::F16 ? floatToF16(f) : floatToBF16(f);
      std::memcpy(p, &h, 2);
      break;
    }
    case DType::I32: {
      int32_t v = static_cast<int32_t>(values[i]);
      std::memcpy(p, &v, 4);
      break;
    }
    case DType::I64: {
      int64_t v = static_cast<int64_t>(values[i]);
      std::memcpy(p, &v, 8);
      break;
    }
    }
  }
}

std::vector<int32_t> HostTensor::toI32() const {
  std::vector<int32_t> out(numElements());
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

std::vector<int64_t> HostTensor::toI64() const {
  std::vector<int64_t> out(numElements());
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

std::unique_ptr<CpuKernel>
compileKernel(mlir::OwningOpRef<mlir::ModuleOp> module) {
  auto kernel = CpuKernel::compile(std::move(module), kKernelEntry);
  if (!kernel) {
    ADD_FAILURE() << llvm::toString(kernel.takeError());
    return nullptr;
  }
  return std::move(*kernel);
}

void runKernel(const CpuKernel &kernel, std::vector<BufferView> args) {
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
