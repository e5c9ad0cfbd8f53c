//===- CudaDriverTest.cpp - The CUDA driver layer, with or without a GPU --===//
//
// CudaDriver.*: a missing or broken driver is an error that says so, never
// an abort; these run everywhere. CudaDevice.*: memory, PTX modules and
// launches on device 0; skipped (with the reason) where there is no driver
// or no device.
//
//===----------------------------------------------------------------------===//

#include "mla/Runtime/CudaDevice.h"
#include "mla/Runtime/CudaDriver.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

using namespace mla::cuda;

namespace {

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

std::string errorText(llvm::Error error) {
  return error ? llvm::toString(std::move(error)) : "";
}

template <typename T> std::string errorText(llvm::Expected<T> &value) {
  return value ? "" : llvm::toString(value.takeError());
}

//===----------------------------------------------------------------------===//
// Without a device
//===----------------------------------------------------------------------===//

TEST(CudaDriver, MissingDriverIsAnErrorAndStaysOne) {
  llvm::Expected<Driver &> first = Driver::get();
  if (first)
    GTEST_SKIP() << "a CUDA driver is loaded (" << first->libraryPath()
                 << ", version " << first->version() << ")";
  std::string message = errorText(first);
  // Where a driver exists but finds no GPU, cuInit's error comes instead.
  if (std::getenv("MLA_CUDA_DRIVER_PATH") == nullptr &&
      !contains(message, "cuInit failed")) {
    EXPECT_EQ(message.rfind("no CUDA driver: libcuda.so.1 could not be "
                            "loaded (",
                            0),
              0u)
        << message;
  }

  // The outcome is kept: the same error again, no second attempt, no crash.
  llvm::Expected<Driver &> second = Driver::get();
  ASSERT_FALSE(second);
  EXPECT_EQ(errorText(second), message);
}

TEST(CudaDriver, DeviceCountWithoutDriverIsAnError) {
  llvm::Expected<Driver &> driver = Driver::get();
  llvm::Expected<int> count = deviceCount();
  if (driver) {
    ASSERT_TRUE(bool(count)) << errorText(count);
    EXPECT_GE(*count, 0);
    return;
  }
  std::string driverError = errorText(driver);
  if (contains(driverError, "CUDA_ERROR_NO_DEVICE")) {
    // A driver without a GPU: zero devices is an answer, not an error.
    ASSERT_TRUE(bool(count)) << errorText(count);
    EXPECT_EQ(*count, 0);
    return;
  }
  ASSERT_FALSE(count);
  EXPECT_EQ(errorText(count), driverError);
}

TEST(CudaDriver, OpenWithoutDriverIsAnError) {
  if (Driver::get())
    GTEST_SKIP() << "a CUDA driver is loaded";
  llvm::Expected<std::unique_ptr<Device>> device = Device::open(0);
  ASSERT_FALSE(device);
  EXPECT_FALSE(errorText(device).empty());
  llvm::Expected<DeviceBuffer> buffer = DeviceBuffer::allocate(64);
  ASSERT_FALSE(buffer);
  llvm::Expected<Module> module = Module::loadPtx(".version 7.0");
  ASSERT_FALSE(module);
  llvm::consumeError(buffer.takeError());
  llvm::consumeError(module.takeError());
}

TEST(CudaDriver, NonexistentLibraryIsReported) {
  llvm::Expected<std::unique_ptr<Driver>> driver =
      Driver::load("/nonexistent/libcuda.so.1");
  ASSERT_FALSE(driver);
  std::string message = errorText(driver);
  EXPECT_TRUE(contains(message, "no CUDA driver: /nonexistent/libcuda.so.1 "
                                "could not be loaded ("))
      << message;
  // The loader's own reason follows.
  EXPECT_TRUE(contains(message, "No such file")) << message;
}

TEST(CudaDriver, LibraryWithoutDriverSymbolsIsReported) {
  // Any shared library that is not a CUDA driver; zlib is everywhere.
  llvm::Expected<std::unique_ptr<Driver>> driver = Driver::load("libz.so.1");
  ASSERT_FALSE(driver);
  std::string message = errorText(driver);
  EXPECT_EQ(message, "CUDA driver has no symbol cuInit (in libz.so.1)");
}

// Driver::get() reads MLA_CUDA_DRIVER_PATH once per process, so the check
// runs in a fresh process (a death test re-executing this binary).
TEST(CudaDriver, EnvironmentOverrideNamesTheLibrary) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("MLA_CUDA_DRIVER_PATH", "libz.so.1", 1);
        llvm::Expected<Driver &> driver = Driver::get();
        std::string message =
            driver ? "loaded" : llvm::toString(driver.takeError());
        fprintf(stderr, "%s\n", message.c_str());
        std::exit(contains(message, "has no symbol cuInit") ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "CUDA driver has no symbol cuInit");
}

//===----------------------------------------------------------------------===//
// With a device
//===----------------------------------------------------------------------===//

/// out[i] = i for i < n, i = blockIdx.x * blockDim.x + threadIdx.x; and a
/// kernel that goes through dynamic shared memory at a byte offset, so that
/// more than 48 KiB of it must really be there.
const char *const kTestPtx = R"(
.version 7.0
.target sm_70
.address_size 64

.visible .entry write_index(
    .param .u64 out,
    .param .u32 n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<5>;

    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r5, 4;
    add.s64 %rd4, %rd2, %rd3;
    st.global.u32 [%rd4], %r5;
DONE:
    ret;
}

.extern .shared .align 16 .b8 dynamic_smem[];

// out[tid] = tid + 1000, through dynamic shared memory at byte `offset`.
.visible .entry shared_round_trip(
    .param .u64 out,
    .param .u32 offset)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;

    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [offset];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, dynamic_smem;
    add.u32 %r4, %r3, %r1;
    mad.lo.s32 %r5, %r2, 4, %r4;
    st.shared.u32 [%r5], %r2;
    bar.sync 0;
    ld.shared.u32 %r6, [%r5];
    add.u32 %r7, %r6, 1000;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r2, 4;
    add.s64 %rd2, %rd2, %rd3;
    st.global.u32 [%rd2], %r7;
    ret;
}
)";

/// Opens device 0, or skips the test saying why it cannot.
class CudaDevice : public ::testing::Test {
protected:
  void SetUp() override {
    llvm::Expected<int> count = deviceCount();
    if (!count)
      GTEST_SKIP() << errorText(count);
    if (*count == 0)
      GTEST_SKIP() << "the CUDA driver sees no device";
    llvm::Expected<std::unique_ptr<Device>> opened = Device::open(0);
    ASSERT_TRUE(bool(opened)) << errorText(opened);
    device = std::move(*opened);
  }

  std::unique_ptr<Device> device;
};

TEST_F(CudaDevice, ReportsItsProperties) {
  EXPECT_FALSE(device->name().empty());
  EXPECT_GE(device->capability().major, 7);
  EXPECT_GT(device->multiprocessorCount(), 0);
  EXPECT_EQ(device->maxThreadsPerBlock(), 1024);
  EXPECT_GE(device->maxSharedMemoryPerBlockOptin(),
            int(kDefaultDynamicSharedLimit));
  EXPECT_GT(device->l2CacheBytes(), 0);
  EXPECT_GT(device->totalMemoryBytes(), size_t(1) << 30);
  llvm::Expected<int> warp = device->attribute(CU_DEVICE_ATTRIBUTE_WARP_SIZE);
  ASSERT_TRUE(bool(warp)) << errorText(warp);
  EXPECT_EQ(*warp, 32);
  std::printf("device 0: %s, sm_%d%d, %d SMs, %d KiB shared opt-in, %d MiB L2, "
              "%zu MiB, driver %d\n",
              device->name().c_str(), device->capability().major,
              device->capability().minor, device->multiprocessorCount(),
              device->maxSharedMemoryPerBlockOptin() / 1024,
              device->l2CacheBytes() >> 20, device->totalMemoryBytes() >> 20,
              device->driver().version());
}

TEST_F(CudaDevice, HasAScratchPool) {
  // Every device the runtime takes (sm_80 and later) has memory pools, so
  // the pool must exist (its properties as the driver reads them) and
  // serve stream-ordered allocations.
  ASSERT_NE(device->scratchPool(), nullptr);
  const Driver::Symbols &fn = device->driver().fn;
  CUdeviceptr pointer = 0;
  ASSERT_EQ(fn.cuMemAllocFromPoolAsync(&pointer, size_t(64) << 20,
                                       device->scratchPool(), nullptr),
            CUDA_SUCCESS);
  EXPECT_NE(pointer, CUdeviceptr(0));
  EXPECT_EQ(fn.cuMemsetD8Async(pointer, 7, size_t(64) << 20, nullptr),
            CUDA_SUCCESS);
  EXPECT_EQ(fn.cuMemFreeAsync(pointer, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(fn.cuCtxSynchronize(), CUDA_SUCCESS);
  device->releaseScratchMemory();
}

TEST_F(CudaDevice, OpeningAMissingOrdinalIsAnError) {
  llvm::Expected<int> count = deviceCount();
  ASSERT_TRUE(bool(count));
  llvm::Expected<std::unique_ptr<Device>> missing = Device::open(*count);
  ASSERT_FALSE(missing);
  EXPECT_TRUE(contains(errorText(missing), "no CUDA device"));
}

TEST_F(CudaDevice, BufferFillAndCopyRoundTrip) {
  const size_t bytes = 1 << 20;
  llvm::Expected<DeviceBuffer> buffer = DeviceBuffer::allocate(bytes);
  ASSERT_TRUE(bool(buffer)) << errorText(buffer);
  EXPECT_NE(buffer->ptr(), 0u);
  EXPECT_EQ(buffer->size(), bytes);

  std::vector<uint8_t> host(bytes, 0);
  ASSERT_EQ(errorText(buffer->fill(0xab)), "");
  ASSERT_EQ(errorText(buffer->copyToHost(host.data(), bytes)), "");
  EXPECT_EQ(std::count(host.begin(), host.end(), 0xab), long(bytes));

  std::iota(host.begin(), host.end(), 0);
  ASSERT_EQ(errorText(buffer->copyFromHost(host.data(), bytes)), "");
  std::vector<uint8_t> back(bytes, 0);
  ASSERT_EQ(errorText(buffer->copyToHost(back.data(), bytes)), "");
  EXPECT_EQ(back, host);

  // Moving hands over the allocation.
  DeviceBuffer moved = std::move(*buffer);
  EXPECT_EQ(buffer->ptr(), 0u);
  EXPECT_EQ(moved.size(), bytes);

  std::string overrun = errorText(moved.copyToHost(back.data(), bytes + 1));
  EXPECT_TRUE(contains(overrun, "overruns")) << overrun;
}

TEST_F(CudaDevice, HugeAllocationIsAnError) {
  llvm::Expected<DeviceBuffer> buffer =
      DeviceBuffer::allocate(device->totalMemoryBytes() * 4);
  ASSERT_FALSE(buffer);
  std::string message = errorText(buffer);
  EXPECT_TRUE(contains(message, "cuMemAlloc")) << message;
  EXPECT_TRUE(contains(message, "CUDA_ERROR_OUT_OF_MEMORY")) << message;
}

TEST_F(CudaDevice, LaunchesPtxOnAStreamAndTimesIt) {
  // The driver keeps compiled PTX in its own disk cache and logs nothing
  // when it serves a module from there: a global with a value unique to
  // this run makes the module new, so the JIT runs and logs.
  std::string ptx = std::string(kTestPtx) +
                    "\n.global .align 4 .u32 run_nonce = " +
                    std::to_string(std::random_device{}() & 0x7fffffff) +
                    ";\n";
  llvm::Expected<Module> module =
      Module::loadPtx(ptx, {/*optimizationLevel=*/3, /*verboseLog=*/true});
  ASSERT_TRUE(bool(module)) << errorText(module);
  EXPECT_TRUE(contains(module->jitLog(), "write_index")) << module->jitLog();
  llvm::Expected<CUfunction> kernel = module->function("write_index");
  ASSERT_TRUE(bool(kernel)) << errorText(kernel);

  llvm::Expected<FunctionInfo> info = functionInfo(*kernel);
  ASSERT_TRUE(bool(info)) << errorText(info);
  EXPECT_GT(info->registers, 0);
  EXPECT_EQ(info->staticSharedBytes, 0);
  EXPECT_GE(info->maxThreadsPerBlock, 256);

  const unsigned n = 1000;
  llvm::Expected<DeviceBuffer> out = DeviceBuffer::allocate(n * 4);
  ASSERT_TRUE(bool(out)) << errorText(out);
  ASSERT_EQ(errorText(out->fill(0xff)), "");

  llvm::Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(bool(stream)) << errorText(stream);
  llvm::Expected<Event> start = Event::create();
  llvm::Expected<Event> end = Event::create();
  ASSERT_TRUE(start && end);

  CUdeviceptr pointer = out->ptr();
  unsigned count = n;
  void *params[] = {&pointer, &count};
  ASSERT_EQ(errorText(start->record(*stream)), "");
  ASSERT_EQ(errorText(launch(*kernel, {(n + 255) / 256}, {256}, 0,
                             stream->handle(), params)),
            "");
  ASSERT_EQ(errorText(end->record(*stream)), "");
  ASSERT_EQ(errorText(stream->synchronize()), "");
  ASSERT_EQ(errorText(end->synchronize()), "");
  llvm::Expected<float> ms = Event::elapsedMs(*start, *end);
  ASSERT_TRUE(bool(ms)) << errorText(ms);
  EXPECT_GE(*ms, 0.0f);

  std::vector<uint32_t> host(n, 0);
  ASSERT_EQ(errorText(out->copyToHost(host.data(), n * 4)), "");
  for (unsigned i = 0; i < n; ++i)
    ASSERT_EQ(host[i], i) << "at " << i;
}

/// Runs kTestPtx's shared_round_trip over 96 KiB of dynamic shared memory
/// from `module` and checks what it wrote.
static void expectSharedRoundTrip(const Device &device,
                                  llvm::Expected<Module> &module) {
  ASSERT_TRUE(bool(module)) << errorText(module);
  llvm::Expected<CUfunction> kernel = module->function("shared_round_trip");
  ASSERT_TRUE(bool(kernel)) << errorText(kernel);

  const unsigned threads = 256;
  const unsigned sharedBytes = 96 * 1024;
  if (device.maxSharedMemoryPerBlockOptin() < int(sharedBytes))
    GTEST_SKIP() << "the device opts in to only "
                 << device.maxSharedMemoryPerBlockOptin() << " bytes";
  llvm::Expected<DeviceBuffer> out = DeviceBuffer::allocate(threads * 4);
  ASSERT_TRUE(bool(out)) << errorText(out);

  // The last kilobyte of the 96 KiB: past what a launch gets without
  // opting in.
  CUdeviceptr pointer = out->ptr();
  unsigned offset = sharedBytes - threads * 4;
  void *params[] = {&pointer, &offset};
  ASSERT_EQ(errorText(launch(*kernel, {1}, {threads}, sharedBytes, nullptr,
                             params)),
            "");
  std::vector<uint32_t> host(threads, 0);
  ASSERT_EQ(errorText(out->copyToHost(host.data(), threads * 4)), "");
  for (unsigned i = 0; i < threads; ++i)
    ASSERT_EQ(host[i], i + 1000) << "at " << i;
}

TEST_F(CudaDevice, LaunchesWithMoreThan48KiBOfDynamicSharedMemory) {
  llvm::Expected<Module> module = Module::loadPtx(kTestPtx);
  expectSharedRoundTrip(*device, module);
}

// The JIT linker's relocatable code runs like a module load's.
TEST_F(CudaDevice, LinkedModuleRunsLikeALoadedOne) {
  llvm::Expected<Module> module = Module::linkPtx(kTestPtx);
  expectSharedRoundTrip(*device, module);
}

static constexpr const char *kBrokenPtx = R"(
.version 7.0
.target sm_70
.address_size 64

.visible .entry broken()
{
    not_an_instruction.u32 %r1;
    ret;
}
)";

static void expectJitLogIn(llvm::Expected<Module> &module,
                           const std::string &failedCall) {
  ASSERT_FALSE(module);
  std::string message = errorText(module);
  EXPECT_TRUE(contains(message, failedCall + " failed: "
                                             "CUDA_ERROR_INVALID_PTX"))
      << message;
  EXPECT_TRUE(contains(message, "JIT log:")) << message;
  EXPECT_TRUE(contains(message, "not_an_instruction")) << message;
}

TEST_F(CudaDevice, InvalidPtxErrorCarriesTheJitLog) {
  llvm::Expected<Module> module = Module::loadPtx(kBrokenPtx);
  expectJitLogIn(module, "cuModuleLoadDataEx");
}

TEST_F(CudaDevice, InvalidPtxThroughTheLinkerCarriesTheJitLog) {
  llvm::Expected<Module> module = Module::linkPtx(kBrokenPtx);
  expectJitLogIn(module, "cuLinkAddData");
}

TEST_F(CudaDevice, MissingFunctionIsNamed) {
  llvm::Expected<Module> module = Module::loadPtx(kTestPtx);
  ASSERT_TRUE(bool(module)) << errorText(module);
  llvm::Expected<CUfunction> kernel = module->function("no_such_kernel");
  ASSERT_FALSE(kernel);
  std::string message = errorText(kernel);
  EXPECT_TRUE(contains(message, "'no_such_kernel'")) << message;
  EXPECT_TRUE(contains(message, "CUDA_ERROR_NOT_FOUND")) << message;
}

TEST_F(CudaDevice, BadLaunchesAreClearErrors) {
  llvm::Expected<Module> module = Module::loadPtx(kTestPtx);
  ASSERT_TRUE(bool(module)) << errorText(module);
  llvm::Expected<CUfunction> kernel = module->function("write_index");
  ASSERT_TRUE(bool(kernel)) << errorText(kernel);
  llvm::Expected<DeviceBuffer> out = DeviceBuffer::allocate(4096 * 4);
  ASSERT_TRUE(bool(out)) << errorText(out);
  CUdeviceptr pointer = out->ptr();
  unsigned count = 4096;
  void *params[] = {&pointer, &count};

  std::string tooManyThreads =
      errorText(launch(*kernel, {1}, {2048}, 0, nullptr, params));
  EXPECT_TRUE(contains(tooManyThreads, "2048 threads")) << tooManyThreads;
  EXPECT_TRUE(contains(tooManyThreads, "1024")) << tooManyThreads;

  std::string empty = errorText(launch(*kernel, {0}, {32}, 0, nullptr, params));
  EXPECT_TRUE(contains(empty, "empty grid")) << empty;

  unsigned tooMuchShared = device->maxSharedMemoryPerBlockOptin() + 1;
  std::string shared =
      errorText(launch(*kernel, {1}, {32}, tooMuchShared, nullptr, params));
  EXPECT_TRUE(contains(shared, "opt-in limit")) << shared;
  EXPECT_TRUE(contains(shared, std::to_string(tooMuchShared))) << shared;

  // None of them reached the device: a good launch still works.
  ASSERT_EQ(errorText(launch(*kernel, {16}, {256}, 0, nullptr, params)), "");
  std::vector<uint32_t> host(4096, 0);
  ASSERT_EQ(errorText(out->copyToHost(host.data(), host.size() * 4)), "");
  EXPECT_EQ(host[4095], 4095u);
}

TEST_F(CudaDevice, ContextCanBeMadeCurrentOnAnotherThread) {
  std::string error;
  std::thread worker([&] {
    if (llvm::Error err = device->makeCurrent()) {
      error = llvm::toString(std::move(err));
      return;
    }
    llvm::Expected<DeviceBuffer> buffer = DeviceBuffer::allocate(256);
    if (!buffer)
      error = llvm::toString(buffer.takeError());
  });
  worker.join();
  EXPECT_EQ(error, "");
}

} // namespace
