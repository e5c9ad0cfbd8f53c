//===- Ceilings.cpp - Device ceilings measured in the same run ------------===//

#include "Ceilings.h"

#include "llvm/Support/Error.h"

#include "mla/Support/Float16.h"

#include <algorithm>
#include <random>
#include <dlfcn.h>
#include <vector>

namespace mla::bench {

namespace {
llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}
} // namespace

llvm::Expected<double>
timeOnDevice(const cuda::Stream &stream,
             const std::function<llvm::Error()> &work, int warmup, int repeats,
             const std::function<llvm::Error()> &beforeEach) {
  for (int i = 0; i < warmup; ++i)
    if (llvm::Error e = work())
      return std::move(e);
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    auto start = cuda::Event::create(), stop = cuda::Event::create();
    if (!start)
      return start.takeError();
    if (!stop)
      return stop.takeError();
    if (beforeEach)
      if (llvm::Error e = beforeEach())
        return std::move(e);
    if (llvm::Error e = start->record(stream))
      return std::move(e);
    if (llvm::Error e = work())
      return std::move(e);
    if (llvm::Error e = stop->record(stream))
      return std::move(e);
    if (llvm::Error e = stop->synchronize())
      return std::move(e);
    auto ms = cuda::Event::elapsedMs(*start, *stop);
    if (!ms)
      return ms.takeError();
    times.push_back(*ms);
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2,
                   times.end());
  return times[times.size() / 2];
}

llvm::Expected<double> measureCopyBandwidth(const cuda::Stream &stream,
                                            size_t bytes) {
  auto driver = cuda::Driver::get();
  if (!driver)
    return driver.takeError();
  auto src = cuda::DeviceBuffer::allocate(bytes);
  if (!src)
    return src.takeError();
  auto dst = cuda::DeviceBuffer::allocate(bytes);
  if (!dst)
    return dst.takeError();
  if (llvm::Error e = src->fill(0x3c))
    return std::move(e);
  auto ms = timeOnDevice(stream, [&]() -> llvm::Error {
    return driver->check(driver->fn.cuMemcpyAsync(dst->ptr(), src->ptr(),
                                                  bytes, stream.handle()),
                         "cuMemcpyAsync");
  });
  if (!ms)
    return ms.takeError();
  return 2.0 * double(bytes) / (*ms * 1e-3);
}

namespace {
// The few cuBLAS entry points and constants used (values from cublas_api.h
// and library_types.h), so no CUDA headers are needed to build.
using cublasHandle = void *;
using CreateFn = int (*)(cublasHandle *);
using DestroyFn = int (*)(cublasHandle);
using SetStreamFn = int (*)(cublasHandle, cuda::CUstream);
using GemmExFn = int (*)(cublasHandle, int, int, int, int, int, const void *,
                         const void *, int, int, const void *, int, int,
                         const void *, void *, int, int, int, int);
constexpr int kOpN = 0;
constexpr int kBf16 = 14;      // CUDA_R_16BF
constexpr int kCompute32F = 68; // CUBLAS_COMPUTE_32F
constexpr int kGemmDefault = -1;
} // namespace

llvm::Expected<double> measureBf16MatmulRate(const cuda::Stream &stream,
                                             int n) {
  void *library = nullptr;
  for (const char *name :
       {"libcublas.so.13", "libcublas.so.12", "libcublas.so",
        "/usr/local/cuda/lib64/libcublas.so"})
    if ((library = dlopen(name, RTLD_NOW | RTLD_LOCAL)))
      break;
  if (!library)
    return error("cuBLAS is not available (libcublas.so.13/12 not found)");
  auto create = reinterpret_cast<CreateFn>(dlsym(library, "cublasCreate_v2"));
  auto destroy =
      reinterpret_cast<DestroyFn>(dlsym(library, "cublasDestroy_v2"));
  auto setStream =
      reinterpret_cast<SetStreamFn>(dlsym(library, "cublasSetStream_v2"));
  auto gemm = reinterpret_cast<GemmExFn>(dlsym(library, "cublasGemmEx"));
  if (!create || !destroy || !setStream || !gemm)
    return error("cuBLAS lacks cublasCreate_v2/cublasGemmEx");
  cublasHandle handle = nullptr;
  if (int status = create(&handle))
    return error("cublasCreate_v2 failed with status " + llvm::Twine(status));
  setStream(handle, stream.handle());

  // Random bf16 inputs in [-1, 1): zeros would take a faster path.
  size_t elements = size_t(n) * n, bytes = elements * 2;
  std::vector<uint16_t> host(elements);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (uint16_t &v : host)
    v = floatToBF16(dist(rng));
  std::vector<cuda::DeviceBuffer> buffers;
  for (int i = 0; i < 3; ++i) {
    auto buffer = cuda::DeviceBuffer::allocate(bytes);
    if (!buffer) {
      destroy(handle);
      return buffer.takeError();
    }
    if (i < 2)
      if (llvm::Error e = buffer->copyFromHost(host.data(), bytes)) {
        destroy(handle);
        return std::move(e);
      }
    buffers.push_back(std::move(*buffer));
  }
  auto *a = &buffers[0], *b = &buffers[1], *c = &buffers[2];
  float alpha = 1.0f, beta = 0.0f;
  auto ms = timeOnDevice(stream, [&]() -> llvm::Error {
    int status = gemm(handle, kOpN, kOpN, n, n, n, &alpha,
                      reinterpret_cast<void *>(a->ptr()), kBf16, n,
                      reinterpret_cast<void *>(b->ptr()), kBf16, n, &beta,
                      reinterpret_cast<void *>(c->ptr()), kBf16, n,
                      kCompute32F, kGemmDefault);
    return status ? error("cublasGemmEx failed with status " +
                          llvm::Twine(status))
                  : llvm::Error::success();
  });
  destroy(handle);
  if (!ms)
    return ms.takeError();
  return 2.0 * double(n) * n * n / (*ms * 1e-3);
}

} // namespace mla::bench
