//===- CudaDevice.cpp - Devices, memory, modules and launches -------------===//

#include "mla/Runtime/CudaDevice.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Twine.h"

#include <cstdlib>
#include <cstring>
#include <utility>

namespace mla::cuda {

//===----------------------------------------------------------------------===//
// Device
//===----------------------------------------------------------------------===//

llvm::Expected<int> deviceCount() {
  llvm::Expected<Driver &> driver = Driver::get();
  if (!driver) {
    // cuInit reports a machine with a driver but no GPU as an error; here
    // that is the answer 0.
    llvm::Error rest = llvm::handleErrors(
        driver.takeError(),
        [&](std::unique_ptr<CudaError> error) -> llvm::Error {
          if (error->result() != CUDA_ERROR_NO_DEVICE)
            return llvm::Error(std::move(error));
          return llvm::Error::success();
        });
    if (rest)
      return std::move(rest);
    return 0;
  }
  int count = 0;
  if (llvm::Error err =
          driver->check(driver->fn.cuDeviceGetCount(&count), "cuDeviceGetCount"))
    return std::move(err);
  return count;
}

llvm::Expected<std::unique_ptr<Device>> Device::open(int ordinal) {
  llvm::Expected<Driver &> driver = Driver::get();
  if (!driver)
    return driver.takeError();
  llvm::Expected<int> count = deviceCount();
  if (!count)
    return count.takeError();
  if (ordinal < 0 || ordinal >= *count)
    return llvm::createStringError("no CUDA device " + llvm::Twine(ordinal) +
                                   " (the driver sees " + llvm::Twine(*count) +
                                   ")");

  std::unique_ptr<Device> device(new Device());
  device->cudaDriver = &*driver;
  device->deviceOrdinal = ordinal;
  const Driver::Symbols &fn = driver->fn;
  if (llvm::Error err =
          driver->check(fn.cuDeviceGet(&device->device, ordinal), "cuDeviceGet"))
    return std::move(err);
  CUcontext context = nullptr;
  if (llvm::Error err = driver->check(
          fn.cuDevicePrimaryCtxRetain(&context, device->device),
          "cuDevicePrimaryCtxRetain"))
    return std::move(err);
  // From here the destructor releases the context on every error path.
  device->primaryContext = context;
  if (llvm::Error err = device->makeCurrent())
    return std::move(err);

  char name[256] = {};
  if (llvm::Error err = driver->check(
          fn.cuDeviceGetName(name, sizeof(name) - 1, device->device),
          "cuDeviceGetName"))
    return std::move(err);
  device->deviceName = name;
  if (llvm::Error err =
          driver->check(fn.cuDeviceTotalMem(&device->totalMemory, device->device),
                        "cuDeviceTotalMem"))
    return std::move(err);

  struct Query {
    CUdevice_attribute attribute;
    int *value;
  };
  const Query required[] = {
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
       &device->computeCapability.major},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
       &device->computeCapability.minor},
      {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &device->multiprocessors},
      {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &device->threadsPerBlock},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
       &device->sharedPerBlockOptin},
      {CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, &device->l2Bytes},
  };
  for (const Query &query : required) {
    llvm::Expected<int> value = device->attribute(query.attribute);
    if (!value)
      return value.takeError();
    *query.value = *value;
  }
  const Query optional[] = {
      {CU_DEVICE_ATTRIBUTE_CLOCK_RATE, &device->clockKHz},
      {CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, &device->memoryClockKHz},
      {CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, &device->memoryBusBits},
  };
  for (const Query &query : optional) {
    llvm::Expected<int> value = device->attribute(query.attribute);
    if (value)
      *query.value = *value;
    else
      llvm::consumeError(value.takeError());
  }
  device->createScratchPool();
  return std::move(device);
}

void Device::createScratchPool() {
  CUmemPoolProps properties;
  properties.locationId = device;
  CUmemoryPool created = nullptr;
  if (cudaDriver->fn.cuMemPoolCreate(&created, &properties) != CUDA_SUCCESS)
    return; // no memory pools here: calls use the default pool
  std::uint64_t keepEverything = ~std::uint64_t(0);
  if (cudaDriver->fn.cuMemPoolSetAttribute(created,
                                           CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                                           &keepEverything) != CUDA_SUCCESS) {
    (void)cudaDriver->fn.cuMemPoolDestroy(created);
    return;
  }
  pool = created;
  reserveScratchMemory();
}

void Device::reserveScratchMemory() const {
  // The first allocations from a fresh pool map its memory, several
  // milliseconds on the first step that has prefills; memory allocated and
  // freed here stays in the pool (release threshold: everything).
  const char *text = std::getenv("MLA_SCRATCH_POOL_RESERVE_MB");
  if (!text || !pool)
    return;
  char *end = nullptr;
  unsigned long long megabytes = std::strtoull(text, &end, 10);
  if (end == text || *end != '\0' || megabytes == 0)
    return;
  if (llvm::Error error = makeCurrent()) {
    llvm::consumeError(std::move(error));
    return;
  }
  CUdeviceptr pointer = 0;
  if (cudaDriver->fn.cuMemAllocFromPoolAsync(&pointer, megabytes << 20, pool,
                                             nullptr) != CUDA_SUCCESS)
    return;
  (void)cudaDriver->fn.cuMemFreeAsync(pointer, nullptr);
  (void)cudaDriver->fn.cuStreamSynchronize(nullptr);
}

void Device::releaseScratchMemory() const {
  if (pool)
    (void)cudaDriver->fn.cuMemPoolTrimTo(pool, 0);
}

Device::~Device() {
  // Release errors have no one to go to. A pool with allocations still
  // outstanding is released by the driver once they are freed.
  if (pool)
    (void)cudaDriver->fn.cuMemPoolDestroy(pool);
  if (primaryContext)
    (void)cudaDriver->fn.cuDevicePrimaryCtxRelease(device);
}

llvm::Error Device::makeCurrent() const {
  return cudaDriver->check(cudaDriver->fn.cuCtxSetCurrent(primaryContext),
                           "cuCtxSetCurrent");
}

llvm::Expected<int> Device::attribute(CUdevice_attribute attribute) const {
  int value = 0;
  if (llvm::Error err = cudaDriver->check(
          cudaDriver->fn.cuDeviceGetAttribute(&value, attribute, device),
          "cuDeviceGetAttribute(" + std::to_string(attribute) + ")"))
    return std::move(err);
  return value;
}

//===----------------------------------------------------------------------===//
// DeviceBuffer
//===----------------------------------------------------------------------===//

llvm::Expected<DeviceBuffer> DeviceBuffer::allocate(size_t bytes) {
  llvm::Expected<Driver &> driver = Driver::get();
  if (!driver)
    return driver.takeError();
  if (bytes == 0)
    return DeviceBuffer(&*driver, 0, 0);
  CUdeviceptr pointer = 0;
  if (llvm::Error err =
          driver->check(driver->fn.cuMemAlloc(&pointer, bytes),
                        "cuMemAlloc of " + std::to_string(bytes) + " bytes"))
    return std::move(err);
  return DeviceBuffer(&*driver, pointer, bytes);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer &&other) noexcept
    : cudaDriver(other.cudaDriver), pointer(std::exchange(other.pointer, 0)),
      bytes(std::exchange(other.bytes, 0)) {}

DeviceBuffer &DeviceBuffer::operator=(DeviceBuffer &&other) noexcept {
  if (this != &other) {
    release();
    cudaDriver = other.cudaDriver;
    pointer = std::exchange(other.pointer, 0);
    bytes = std::exchange(other.bytes, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() { release(); }

void DeviceBuffer::release() {
  // cuMemFree fails only for a context already destroyed, which freed the
  // memory with it.
  if (pointer)
    (void)cudaDriver->fn.cuMemFree(pointer);
  pointer = 0;
  bytes = 0;
}

/// An error when `count` bytes do not fit in a buffer of `size`.
static llvm::Error checkFits(size_t count, size_t size, const char *what) {
  if (count <= size)
    return llvm::Error::success();
  return llvm::createStringError(llvm::Twine(what) + " of " +
                                 llvm::Twine(count) + " bytes overruns a " +
                                 llvm::Twine(size) + "-byte device buffer");
}

llvm::Error DeviceBuffer::copyFromHost(const void *source, size_t count) {
  if (llvm::Error err = checkFits(count, bytes, "copy from host"))
    return err;
  if (count == 0)
    return llvm::Error::success();
  return cudaDriver->check(cudaDriver->fn.cuMemcpyHtoD(pointer, source, count),
                           "cuMemcpyHtoD");
}

llvm::Error DeviceBuffer::copyToHost(void *destination, size_t count) const {
  if (llvm::Error err = checkFits(count, bytes, "copy to host"))
    return err;
  if (count == 0)
    return llvm::Error::success();
  return cudaDriver->check(
      cudaDriver->fn.cuMemcpyDtoH(destination, pointer, count), "cuMemcpyDtoH");
}

llvm::Error DeviceBuffer::fill(uint8_t value) {
  if (bytes == 0)
    return llvm::Error::success();
  return cudaDriver->check(cudaDriver->fn.cuMemsetD8(pointer, value, bytes),
                           "cuMemsetD8");
}

//===----------------------------------------------------------------------===//
// Module
//===----------------------------------------------------------------------===//

/// Room for the JIT's logs; ptxas stops writing at the end.
static constexpr size_t kJitLogBytes = 64 * 1024;

/// The text the driver wrote into a log buffer.
static std::string logText(const llvm::SmallVectorImpl<char> &buffer) {
  return std::string(buffer.data(), strnlen(buffer.data(), buffer.size()));
}

namespace {

/// The options of one JIT compile, laid out as the driver takes them: keys
/// beside pointer-sized values (integers by value, buffers by address),
/// with room for the error and info logs.
struct JitOptionList {
  explicit JitOptionList(const PtxJitOptions &options)
      : errorLog(kJitLogBytes, '\0'), infoLog(kJitLogBytes, '\0') {
    add(CU_JIT_ERROR_LOG_BUFFER, errorLog.data());
    add(CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, integer(kJitLogBytes));
    add(CU_JIT_INFO_LOG_BUFFER, infoLog.data());
    add(CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, integer(kJitLogBytes));
    if (options.optimizationLevel >= 0)
      add(CU_JIT_OPTIMIZATION_LEVEL, integer(options.optimizationLevel));
    if (options.verboseLog)
      add(CU_JIT_LOG_VERBOSE, integer(1));
  }

  static void *integer(size_t value) {
    return reinterpret_cast<void *>(static_cast<uintptr_t>(value));
  }
  void add(CUjit_option key, void *value) {
    keys.push_back(key);
    values.push_back(value);
  }
  unsigned size() const { return keys.size(); }

  /// A failed call's error, with the JIT's error log when it wrote one.
  llvm::Error failure(Driver &driver, const char *call, CUresult result) {
    std::string message =
        std::string(call) + " failed: " + driver.describe(result);
    std::string log = logText(errorLog);
    if (!log.empty())
      message += "\nJIT log:\n" + log;
    return llvm::make_error<CudaError>(result, std::move(message));
  }

  llvm::SmallVector<char, 0> errorLog;
  llvm::SmallVector<char, 0> infoLog;
  llvm::SmallVector<CUjit_option, 6> keys;
  llvm::SmallVector<void *, 6> values;
};

} // namespace

llvm::Expected<Module> Module::loadPtx(llvm::StringRef ptx,
                                       const PtxJitOptions &options) {
  llvm::Expected<Driver &> driver = Driver::get();
  if (!driver)
    return driver.takeError();

  // The driver reads PTX up to its terminating NUL.
  std::string text = ptx.str();
  JitOptionList jit(options);
  CUmodule module = nullptr;
  CUresult result = driver->fn.cuModuleLoadDataEx(
      &module, text.c_str(), jit.size(), jit.keys.data(), jit.values.data());
  if (result != CUDA_SUCCESS)
    return jit.failure(*driver, "cuModuleLoadDataEx", result);
  return Module(&*driver, module, logText(jit.infoLog));
}

llvm::Expected<Module> Module::linkPtx(llvm::StringRef ptx,
                                       const PtxJitOptions &options) {
  llvm::Expected<Driver &> driver = Driver::get();
  if (!driver)
    return driver.takeError();

  std::string text = ptx.str(); // with its NUL, which the size counts
  JitOptionList jit(options);
  CUlinkState link = nullptr;
  CUresult result = driver->fn.cuLinkCreate(jit.size(), jit.keys.data(),
                                            jit.values.data(), &link);
  if (result != CUDA_SUCCESS)
    return jit.failure(*driver, "cuLinkCreate", result);
  // The cubin belongs to the link state: load it before destroying that.
  auto destroy = llvm::make_scope_exit(
      [&] { (void)driver->fn.cuLinkDestroy(link); });
  result = driver->fn.cuLinkAddData(link, CU_JIT_INPUT_PTX, text.data(),
                                    text.size() + 1, "kernels.ptx", 0,
                                    nullptr, nullptr);
  if (result != CUDA_SUCCESS)
    return jit.failure(*driver, "cuLinkAddData", result);
  void *cubin = nullptr;
  size_t cubinBytes = 0;
  result = driver->fn.cuLinkComplete(link, &cubin, &cubinBytes);
  if (result != CUDA_SUCCESS)
    return jit.failure(*driver, "cuLinkComplete", result);
  CUmodule module = nullptr;
  if (llvm::Error err = driver->check(
          driver->fn.cuModuleLoadData(&module, cubin), "cuModuleLoadData"))
    return std::move(err);
  return Module(&*driver, module, logText(jit.infoLog));
}

llvm::Expected<Module> Module::loadImage(const void *image) {
  llvm::Expected<Driver &> driver = Driver::get();
  if (!driver)
    return driver.takeError();
  CUmodule module = nullptr;
  if (llvm::Error err = driver->check(
          driver->fn.cuModuleLoadData(&module, image), "cuModuleLoadData"))
    return std::move(err);
  return Module(&*driver, module, "");
}

Module::Module(Module &&other) noexcept
    : cudaDriver(other.cudaDriver),
      module(std::exchange(other.module, nullptr)),
      infoLog(std::move(other.infoLog)) {}

Module &Module::operator=(Module &&other) noexcept {
  if (this != &other) {
    release();
    cudaDriver = other.cudaDriver;
    module = std::exchange(other.module, nullptr);
    infoLog = std::move(other.infoLog);
  }
  return *this;
}

Module::~Module() { release(); }

void Module::release() {
  if (module)
    (void)cudaDriver->fn.cuModuleUnload(module);
  module = nullptr;
}

llvm::Expected<CUfunction> Module::function(llvm::StringRef name) const {
  if (!module)
    return llvm::createStringError("no module loaded to look up '" + name +
                                   "' in");
  CUfunction function = nullptr;
  if (llvm::Error err = cudaDriver->check(
          cudaDriver->fn.cuModuleGetFunction(&function, module,
                                             name.str().c_str()),
          "cuModuleGetFunction for '" + name.str() + "'"))
    return std::move(err);
  return function;
}

llvm::Expected<FunctionInfo> functionInfo(CUfunction function) {
  llvm::Expected<Driver &> driver = Driver::get();
  if (!driver)
    return driver.takeError();
  FunctionInfo info;
  struct Query {
    CUfunction_attribute attribute;
    int *value;
  };
  const Query queries[] = {
      {CU_FUNC_ATTRIBUTE_NUM_REGS, &info.registers},
      {CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, &info.localBytes},
      {CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, &info.staticSharedBytes},
      {CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &info.maxThreadsPerBlock},
  };
  for (const Query &query : queries)
    if (llvm::Error err = driver->check(
            driver->fn.cuFuncGetAttribute(query.value, query.attribute,
                                          function),
            "cuFuncGetAttribute(" + std::to_string(query.attribute) + ")"))
      return std::move(err);
  return info;
}

//===----------------------------------------------------------------------===//
// Launch
//===----------------------------------------------------------------------===//

static std::string extents(Dim3 d) {
  return std::to_string(d.x) + "x" + std::to_string(d.y) + "x" +
         std::to_string(d.z);
}

/// The limits of every GPU since sm_30, checked here so that a bad launch
/// names the offending extent instead of CUDA_ERROR_INVALID_VALUE.
static llvm::Error checkExtents(Dim3 grid, Dim3 block) {
  if (!grid.x || !grid.y || !grid.z || !block.x || !block.y || !block.z)
    return llvm::createStringError("launch with an empty grid (" +
                                   extents(grid) + ") or block (" +
                                   extents(block) + ")");
  uint64_t threads = uint64_t(block.x) * block.y * block.z;
  if (threads > 1024)
    return llvm::createStringError(
        "launch block of " + std::to_string(threads) + " threads (" +
        extents(block) + ") exceeds the 1024 threads a block may have");
  if (block.z > 64)
    return llvm::createStringError("launch block z extent " +
                                   std::to_string(block.z) +
                                   " exceeds the limit of 64");
  if (grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535)
    return llvm::createStringError("launch grid " + extents(grid) +
                                   " exceeds the limits (2^31-1)x65535x65535");
  return llvm::Error::success();
}

/// Opts `function` in to `dynamicSharedBytes` of dynamic shared memory on
/// the current context's device, or says why it cannot be.
static llvm::Error optInSharedMemory(Driver &driver, CUfunction function,
                                     unsigned dynamicSharedBytes) {
  const Driver::Symbols &fn = driver.fn;
  CUdevice device = 0;
  int optinLimit = 0, staticBytes = 0, current = 0;
  if (llvm::Error err = driver.check(fn.cuCtxGetDevice(&device), "cuCtxGetDevice"))
    return err;
  if (llvm::Error err = driver.check(
          fn.cuDeviceGetAttribute(
              &optinLimit, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
              device),
          "cuDeviceGetAttribute(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)"))
    return err;
  if (llvm::Error err = driver.check(
          fn.cuFuncGetAttribute(&staticBytes,
                                CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, function),
          "cuFuncGetAttribute(SHARED_SIZE_BYTES)"))
    return err;
  if (uint64_t(dynamicSharedBytes) + staticBytes > uint64_t(optinLimit))
    return llvm::createStringError(
        "launch asks for " + std::to_string(dynamicSharedBytes) +
        " bytes of dynamic shared memory (plus " + std::to_string(staticBytes) +
        " static) but the device allows at most " + std::to_string(optinLimit) +
        " bytes per block (opt-in limit)");

  // Only ever raised, so that concurrent launches of the same kernel with
  // different sizes do not take room from each other.
  if (llvm::Error err = driver.check(
          fn.cuFuncGetAttribute(&current,
                                CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                function),
          "cuFuncGetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)"))
    return err;
  if (unsigned(current) >= dynamicSharedBytes)
    return llvm::Error::success();
  return driver.check(
      fn.cuFuncSetAttribute(function,
                            CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                            int(dynamicSharedBytes)),
      "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES, " +
          std::to_string(dynamicSharedBytes) + ")");
}

llvm::Error launch(CUfunction function, Dim3 grid, Dim3 block,
                   unsigned dynamicSharedBytes, CUstream stream,
                   void **params) {
  llvm::Expected<Driver &> driver = Driver::get();
  if (!driver)
    return driver.takeError();
  if (!function)
    return llvm::createStringError("launch of a null function");
  if (llvm::Error err = checkExtents(grid, block))
    return err;
  if (dynamicSharedBytes > kDefaultDynamicSharedLimit)
    if (llvm::Error err =
            optInSharedMemory(*driver, function, dynamicSharedBytes))
      return err;
  return driver->check(
      driver->fn.cuLaunchKernel(function, grid.x, grid.y, grid.z, block.x,
                                block.y, block.z, dynamicSharedBytes, stream,
                                params, /*extra=*/nullptr),
      "cuLaunchKernel (grid " + extents(grid) + ", block " + extents(block) +
          ", " + std::to_string(dynamicSharedBytes) + " bytes dynamic shared)");
}

//===----------------------------------------------------------------------===//
// Stream and Event
//===----------------------------------------------------------------------===//

/// The error for using a default-constructed or moved-from wrapper.
static llvm::Error emptyWrapper(const char *what) {
  return llvm::createStringError(llvm::Twine("use of an empty ") + what);
}

llvm::Expected<Stream> Stream::create() {
  llvm::Expected<Driver &> driver = Driver::get();
  if (!driver)
    return driver.takeError();
  CUstream stream = nullptr;
  if (llvm::Error err = driver->check(
          driver->fn.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING),
          "cuStreamCreate"))
    return std::move(err);
  return Stream(&*driver, stream);
}

Stream::Stream(Stream &&other) noexcept
    : cudaDriver(other.cudaDriver),
      stream(std::exchange(other.stream, nullptr)) {}

Stream &Stream::operator=(Stream &&other) noexcept {
  if (this != &other) {
    release();
    cudaDriver = other.cudaDriver;
    stream = std::exchange(other.stream, nullptr);
  }
  return *this;
}

Stream::~Stream() { release(); }

void Stream::release() {
  if (stream)
    (void)cudaDriver->fn.cuStreamDestroy(stream);
  stream = nullptr;
}

llvm::Error Stream::synchronize() const {
  if (!stream)
    return emptyWrapper("Stream");
  return cudaDriver->check(cudaDriver->fn.cuStreamSynchronize(stream),
                           "cuStreamSynchronize");
}

llvm::Expected<Event> Event::create(unsigned flags) {
  llvm::Expected<Driver &> driver = Driver::get();
  if (!driver)
    return driver.takeError();
  CUevent event = nullptr;
  if (llvm::Error err = driver->check(driver->fn.cuEventCreate(&event, flags),
                                      "cuEventCreate"))
    return std::move(err);
  return Event(&*driver, event);
}

Event::Event(Event &&other) noexcept
    : cudaDriver(other.cudaDriver), event(std::exchange(other.event, nullptr)) {}

Event &Event::operator=(Event &&other) noexcept {
  if (this != &other) {
    release();
    cudaDriver = other.cudaDriver;
    event = std::exchange(other.event, nullptr);
  }
  return *this;
}

Event::~Event() { release(); }

void Event::release() {
  if (event)
    (void)cudaDriver->fn.cuEventDestroy(event);
  event = nullptr;
}

llvm::Error Event::record(CUstream stream) {
  if (!event)
    return emptyWrapper("Event");
  return cudaDriver->check(cudaDriver->fn.cuEventRecord(event, stream),
                           "cuEventRecord");
}

llvm::Error Event::synchronize() const {
  if (!event)
    return emptyWrapper("Event");
  return cudaDriver->check(cudaDriver->fn.cuEventSynchronize(event),
                           "cuEventSynchronize");
}

llvm::Expected<float> Event::elapsedMs(const Event &start, const Event &end) {
  if (!start.event || !end.event)
    return emptyWrapper("Event");
  float milliseconds = 0;
  if (llvm::Error err = start.cudaDriver->check(
          start.cudaDriver->fn.cuEventElapsedTime(&milliseconds, start.event,
                                                  end.event),
          "cuEventElapsedTime"))
    return std::move(err);
  return milliseconds;
}

} // namespace mla::cuda
