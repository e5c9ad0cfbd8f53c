//===- CudaDevice.h - Devices, memory, modules and launches -----*- C++ -*-===//
//
// Owning wrappers over the CUDA driver objects the runtime uses. Every
// failure comes back as an llvm::Error (a CudaError when a driver call
// failed) that names the call and the driver's reason.
//
// Contexts: a Device retains its primary context and makes it current on
// the thread that opened it. Buffers, modules, streams and events are made
// in the context current on the calling thread, so a thread other than the
// opener calls Device::makeCurrent() first. All of them must be destroyed
// before the Device: releasing the last reference to a primary context
// destroys what was made in it.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_CUDADEVICE_H
#define MLA_RUNTIME_CUDADEVICE_H

#include "mla/Runtime/CudaDriver.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

namespace mla::cuda {

/// The number of CUDA devices. A driver that finds no device answers 0; a
/// missing driver is an error.
llvm::Expected<int> deviceCount();

struct ComputeCapability {
  int major = 0;
  int minor = 0;
};

/// One GPU with its primary context retained.
class Device {
public:
  /// Retains the primary context of device `ordinal` and makes it current
  /// on the calling thread.
  static llvm::Expected<std::unique_ptr<Device>> open(int ordinal = 0);
  ~Device();
  Device(const Device &) = delete;
  Device &operator=(const Device &) = delete;

  /// Makes this device's context current on the calling thread.
  llvm::Error makeCurrent() const;

  /// Any attribute, for those without an accessor below.
  llvm::Expected<int> attribute(CUdevice_attribute attribute) const;

  int ordinal() const { return deviceOrdinal; }
  CUdevice handle() const { return device; }
  CUcontext context() const { return primaryContext; }
  Driver &driver() const { return *cudaDriver; }

  /// The attributes below are read once, when the device is opened.
  const std::string &name() const { return deviceName; }
  ComputeCapability capability() const { return computeCapability; }
  int multiprocessorCount() const { return multiprocessors; }
  int maxThreadsPerBlock() const { return threadsPerBlock; }
  /// The most shared memory one block may use once a kernel opts in
  /// (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES), static included.
  int maxSharedMemoryPerBlockOptin() const { return sharedPerBlockOptin; }
  int l2CacheBytes() const { return l2Bytes; }
  size_t totalMemoryBytes() const { return totalMemory; }
  /// Clock rates and bus width, for bandwidth and throughput estimates; 0
  /// where the driver does not report them (newer drivers deprecate the
  /// clock attributes).
  int clockRateKHz() const { return clockKHz; }
  int memoryClockRateKHz() const { return memoryClockKHz; }
  int memoryBusWidthBits() const { return memoryBusBits; }

  /// The pool the device's kernels take their scratch buffers from (the
  /// chunked prefill's keys and values; partials a decode allocates
  /// itself). It keeps what it has grown to across calls, as a serving
  /// engine's caching allocator does, where the default pool would hand it
  /// back at every synchronization and map it again on the next call. Null
  /// where the device has no memory pools (the default pool is used then).
  CUmemoryPool scratchPool() const { return pool; }
  /// Hands the scratch pool's unused memory back to the system.
  void releaseScratchMemory() const;

private:
  Device() = default;
  void createScratchPool();
  /// With MLA_SCRATCH_POOL_RESERVE_MB=N, N MiB taken into the scratch pool
  /// at once (allocated and freed), so that the first steps do not pay for
  /// growing it.
  void reserveScratchMemory() const;

  Driver *cudaDriver = nullptr;
  int deviceOrdinal = 0;
  CUdevice device = 0;
  CUcontext primaryContext = nullptr;
  CUmemoryPool pool = nullptr;
  std::string deviceName;
  ComputeCapability computeCapability;
  int multiprocessors = 0;
  int threadsPerBlock = 0;
  int sharedPerBlockOptin = 0;
  int l2Bytes = 0;
  size_t totalMemory = 0;
  int clockKHz = 0;
  int memoryClockKHz = 0;
  int memoryBusBits = 0;
};

/// Device memory, freed when the buffer goes away. Move-only.
class DeviceBuffer {
public:
  /// Allocates `bytes` in the current context. Zero bytes gives an empty
  /// buffer (ptr() == 0) without asking the driver, which refuses them.
  static llvm::Expected<DeviceBuffer> allocate(size_t bytes);

  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer &&other) noexcept;
  DeviceBuffer &operator=(DeviceBuffer &&other) noexcept;
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  ~DeviceBuffer();

  CUdeviceptr ptr() const { return pointer; }
  size_t size() const { return bytes; }

  /// Copies `count` bytes from the host into the start of the buffer; waits
  /// for the copy (and for work before it on the legacy default stream).
  llvm::Error copyFromHost(const void *source, size_t count);
  /// Copies the first `count` bytes of the buffer to the host; waits.
  llvm::Error copyToHost(void *destination, size_t count) const;
  /// Sets every byte to `value`.
  llvm::Error fill(uint8_t value);

private:
  DeviceBuffer(Driver *driver, CUdeviceptr pointer, size_t bytes)
      : cudaDriver(driver), pointer(pointer), bytes(bytes) {}
  void release();

  Driver *cudaDriver = nullptr;
  CUdeviceptr pointer = 0;
  size_t bytes = 0;
};

/// How the driver compiles PTX.
struct PtxJitOptions {
  /// ptxas optimization level 0-4; -1 keeps the driver's default (4).
  int optimizationLevel = -1;
  /// Asks for the verbose info log (registers, spills) in Module::jitLog().
  bool verboseLog = false;
};

/// Code loaded into the current context, unloaded when the Module goes
/// away. Move-only.
class Module {
public:
  /// Compiles PTX text with the driver's JIT (cuModuleLoadDataEx). A failed
  /// compilation's error carries the JIT's error log.
  static llvm::Expected<Module> loadPtx(llvm::StringRef ptx,
                                        const PtxJitOptions &options = {});
  /// Compiles PTX text with the driver's JIT linker (cuLinkAddData,
  /// cuLinkComplete) and loads the cubin it makes. Where module loads from
  /// several threads compile one at a time, links compile at once; but the
  /// linker compiles PTX as relocatable code, which some kernels pay for
  /// in registers and speed (runtime/gpu/DriverCompiles.h).
  static llvm::Expected<Module> linkPtx(llvm::StringRef ptx,
                                        const PtxJitOptions &options = {});
  /// Loads a cubin or fatbin image (cuModuleLoadData). The driver reads the
  /// image's size from its header; `image` need only live during the call.
  static llvm::Expected<Module> loadImage(const void *image);

  Module() = default;
  Module(Module &&other) noexcept;
  Module &operator=(Module &&other) noexcept;
  Module(const Module &) = delete;
  Module &operator=(const Module &) = delete;
  ~Module();

  /// The kernel `name` (its mangled name for C++ kernels). The error names
  /// it when the module has none.
  llvm::Expected<CUfunction> function(llvm::StringRef name) const;

  CUmodule handle() const { return module; }
  /// Hands the module over to the caller, who unloads it
  /// (cuModuleUnload); this object is then empty.
  CUmodule releaseHandle() { return std::exchange(module, nullptr); }
  /// The JIT's info log of a successful loadPtx or linkPtx (ptxas -v
  /// style output when PtxJitOptions::verboseLog was set), else empty.
  const std::string &jitLog() const { return infoLog; }

private:
  Module(Driver *driver, CUmodule module, std::string infoLog)
      : cudaDriver(driver), module(module), infoLog(std::move(infoLog)) {}
  void release();

  Driver *cudaDriver = nullptr;
  CUmodule module = nullptr;
  std::string infoLog;
};

/// What the compiler gave a kernel.
struct FunctionInfo {
  int registers = 0;
  /// Local (spill and stack) memory per thread.
  int localBytes = 0;
  int staticSharedBytes = 0;
  /// The largest block the kernel can be launched with, given its
  /// registers.
  int maxThreadsPerBlock = 0;
};

llvm::Expected<FunctionInfo> functionInfo(CUfunction function);

/// Grid or block extents.
struct Dim3 {
  unsigned x = 1;
  unsigned y = 1;
  unsigned z = 1;
};

/// Dynamic shared memory every kernel may use without opting in.
constexpr unsigned kDefaultDynamicSharedLimit = 48 * 1024;

/// Launches `function` on `stream` (nullptr: the legacy default stream) in
/// the current context. `params` points at one pointer per kernel parameter,
/// each to that parameter's value.
///
/// Extents are checked first (none zero, at most 1024 threads a block, the
/// per-dimension limits of every GPU since sm_30). Above 48 KiB of dynamic
/// shared memory the kernel is opted in to the amount asked for, which must
/// fit, with its static shared memory, under the device's opt-in limit.
/// Errors in the kernel itself surface at the next synchronization.
llvm::Error launch(CUfunction function, Dim3 grid, Dim3 block,
                   unsigned dynamicSharedBytes, CUstream stream,
                   void **params);

/// A stream that does not synchronize with the legacy default stream.
/// Move-only; destroying it does not wait for its work (the driver finishes
/// that, then releases the stream).
class Stream {
public:
  static llvm::Expected<Stream> create();

  Stream() = default;
  Stream(Stream &&other) noexcept;
  Stream &operator=(Stream &&other) noexcept;
  Stream(const Stream &) = delete;
  Stream &operator=(const Stream &) = delete;
  ~Stream();

  CUstream handle() const { return stream; }
  /// Waits until all work queued on the stream is done.
  llvm::Error synchronize() const;

private:
  Stream(Driver *driver, CUstream stream) : cudaDriver(driver), stream(stream) {}
  void release();

  Driver *cudaDriver = nullptr;
  CUstream stream = nullptr;
};

/// A point in a stream's work, for waiting and timing. Move-only.
class Event {
public:
  /// `flags`: CU_EVENT_DEFAULT, or CU_EVENT_DISABLE_TIMING for events only
  /// waited on.
  static llvm::Expected<Event> create(unsigned flags = CU_EVENT_DEFAULT);

  Event() = default;
  Event(Event &&other) noexcept;
  Event &operator=(Event &&other) noexcept;
  Event(const Event &) = delete;
  Event &operator=(const Event &) = delete;
  ~Event();

  CUevent handle() const { return event; }
  /// Marks the current end of `stream`'s work (nullptr: the legacy default
  /// stream).
  llvm::Error record(CUstream stream);
  llvm::Error record(const Stream &stream) { return record(stream.handle()); }
  /// Waits until the work before the last record() is done.
  llvm::Error synchronize() const;

  /// Milliseconds between two recorded, completed events (about 0.5 us
  /// resolution).
  static llvm::Expected<float> elapsedMs(const Event &start, const Event &end);

private:
  Event(Driver *driver, CUevent event) : cudaDriver(driver), event(event) {}
  void release();

  Driver *cudaDriver = nullptr;
  CUevent event = nullptr;
};

} // namespace mla::cuda

#endif // MLA_RUNTIME_CUDADEVICE_H
