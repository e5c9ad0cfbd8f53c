//===- CudaDriver.h - The CUDA driver, loaded at run time -------*- C++ -*-===//
//
// The CUDA driver (libcuda) is opened with dlopen on first use instead of
// being linked, so that the project builds and runs where no CUDA is
// installed: there, asking for the driver returns an error that says so, and
// callers (tests, tools) report it or skip.
//
// No CUDA header is needed either. The handful of types and constants used
// are declared here, with the values cuda.h gives them; the driver's ABI has
// kept them stable since CUDA 4.
//
// The library opened is libcuda.so.1 (the name the driver package installs),
// then libcuda.so. The environment variable MLA_CUDA_DRIVER_PATH, when set,
// names the only library tried instead: a driver in an unusual place, or a
// stand-in for testing how a missing or broken driver is reported.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_CUDADRIVER_H
#define MLA_RUNTIME_CUDADRIVER_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace mla::cuda {

//===----------------------------------------------------------------------===//
// Driver API types and constants (values as in cuda.h)
//===----------------------------------------------------------------------===//

using CUresult = int;
using CUdevice = int;
/// Device addresses are 64-bit in every API the runtime loads (the _v2
/// entry points).
using CUdeviceptr = std::uint64_t;

struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
struct CUevent_st;
struct CUgraph_st;
struct CUgraphExec_st;
struct CUmemPoolHandle_st;
using CUcontext = CUctx_st *;
using CUmodule = CUmod_st *;
using CUfunction = CUfunc_st *;
using CUstream = CUstream_st *;
using CUevent = CUevent_st *;
using CUgraph = CUgraph_st *;
using CUgraphExec = CUgraphExec_st *;
using CUmemoryPool = CUmemPoolHandle_st *;
struct CUlinkState_st;
using CUlinkState = CUlinkState_st *;

/// cuMemPoolCreate's properties (CUmemPoolProps). Only the leading fields
/// are set; the driver's struct is 88 bytes in every CUDA 11.2+ header,
/// and the rest of this one (zeros, as the driver requires of its
/// reserved bytes) covers it with room to spare.
struct CUmemPoolProps {
  int allocType = 1;    ///< CU_MEM_ALLOCATION_TYPE_PINNED
  int handleTypes = 0;  ///< CU_MEM_HANDLE_TYPE_NONE
  int locationType = 1; ///< CU_MEM_LOCATION_TYPE_DEVICE
  int locationId = 0;   ///< the device ordinal
  unsigned char rest[240] = {};
};
/// CUmemPool_attribute: bytes a pool keeps when the stream, event or
/// context it serves is synchronized (a cuuint64_t).
constexpr int CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4;

/// cuStreamBeginCapture modes: RELAXED lets other threads make calls that
/// are unsafe during capture (allocations), which the runtime never makes
/// from captured work.
enum CUstreamCaptureStatus : int {
  CU_STREAM_CAPTURE_STATUS_NONE = 0,
  CU_STREAM_CAPTURE_STATUS_ACTIVE = 1,
  CU_STREAM_CAPTURE_STATUS_INVALIDATED = 2,
};

enum CUstreamCaptureMode : int {
  CU_STREAM_CAPTURE_MODE_GLOBAL = 0,
  CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1,
  CU_STREAM_CAPTURE_MODE_RELAXED = 2,
};

/// A TMA descriptor (tensor map), opaque to the host: what
/// cuTensorMapEncodeTiled writes and cp.async.bulk.tensor reads. The
/// driver and the hardware both want it at a 64-byte-aligned address.
struct alignas(64) CUtensorMap {
  std::uint64_t opaque[16];
};
static_assert(sizeof(CUtensorMap) == 128, "the driver's CUtensorMap size");

/// Element type of a tensor map (TMA only moves bytes: BFLOAT16 serves f16
/// tensors as well).
enum CUtensorMapDataType : int {
  CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 = 9,
};
enum CUtensorMapInterleave : int {
  CU_TENSOR_MAP_INTERLEAVE_NONE = 0,
};
/// How a box is laid out in shared memory: 16-byte chunks permuted within
/// each 128-byte row, so that the rows of an mma operand tile fall in
/// different banks.
enum CUtensorMapSwizzle : int {
  CU_TENSOR_MAP_SWIZZLE_128B = 3,
};
/// The granularity at which L2 fetches a box's lines from memory.
enum CUtensorMapL2promotion : int {
  CU_TENSOR_MAP_L2_PROMOTION_L2_256B = 3,
};
/// NONE fills elements outside the tensor with zeros.
enum CUtensorMapFloatOOBfill : int {
  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0,
};

constexpr CUresult CUDA_SUCCESS = 0;
constexpr CUresult CUDA_ERROR_INVALID_VALUE = 1;
constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;
constexpr CUresult CUDA_ERROR_NOT_INITIALIZED = 3;
constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
constexpr CUresult CUDA_ERROR_INVALID_DEVICE = 101;
constexpr CUresult CUDA_ERROR_INVALID_PTX = 218;
constexpr CUresult CUDA_ERROR_NOT_FOUND = 500;

enum CUdevice_attribute : int {
  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8,
  CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10,
  CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13,
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE = 36,
  CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH = 37,
  CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
};

enum CUfunction_attribute : int {
  CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
  CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
  CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3,
  CU_FUNC_ATTRIBUTE_NUM_REGS = 4,
  CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
};

enum CUjit_option : int {
  CU_JIT_INFO_LOG_BUFFER = 3,
  CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
  CU_JIT_ERROR_LOG_BUFFER = 5,
  CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
  CU_JIT_OPTIMIZATION_LEVEL = 7,
  CU_JIT_LOG_VERBOSE = 12,
};

/// What cuLinkAddData is given.
enum CUjitInputType : int {
  CU_JIT_INPUT_PTX = 1,
};

/// Flags of cuEventCreate.
constexpr unsigned CU_EVENT_DEFAULT = 0x0;
constexpr unsigned CU_EVENT_DISABLE_TIMING = 0x2;
/// Flag of cuStreamCreate: no implicit synchronization with stream 0.
constexpr unsigned CU_STREAM_NON_BLOCKING = 0x1;

//===----------------------------------------------------------------------===//
// Driver
//===----------------------------------------------------------------------===//

/// An open CUDA driver: its entry points and the translation of its status
/// codes into llvm::Error. Call the driver through `fn`, e.g.
///
///   Driver &driver = *driverOrError;
///   if (llvm::Error err = driver.check(
///           driver.fn.cuMemGetInfo(&free, &total), "cuMemGetInfo"))
///     return err;
///
/// The library stays loaded until the process exits: device memory,
/// modules and contexts made through it may be released by destructors that
/// run at any time, up to static destruction.
class Driver {
public:
  /// One function pointer per entry point of CudaSymbols.def, named like the
  /// API function (cuMemAlloc, not cuMemAlloc_v2). All are non-null in a
  /// loaded driver.
  struct Symbols {
#define MLA_CUDA_SYMBOL(name, symbol, params) CUresult (*name) params = nullptr;
#include "mla/Runtime/CudaSymbols.def"
  };

  /// The process's driver, loaded and initialized (cuInit) by the first
  /// call; thread-safe. The outcome is kept: once loading failed, every
  /// call returns the same error without trying again. Errors:
  ///   "no CUDA driver: libcuda.so.1 could not be loaded (<dlerror text>)"
  ///   "CUDA driver has no symbol <name> (in <library>)"
  ///   "cuInit failed: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is
  ///    detected)", a CudaError with result() == CUDA_ERROR_NO_DEVICE.
  static llvm::Expected<Driver &> get();

  /// Opens `libraryPath` (a file path or a name for the dynamic loader),
  /// resolves every entry point and calls cuInit, without caching anything.
  /// get() uses this; it is public so that tests can load a given library.
  /// Like every Driver, the result leaves the library loaded when destroyed.
  static llvm::Expected<std::unique_ptr<Driver>>
  load(llvm::StringRef libraryPath);

  /// Success when `result` is CUDA_SUCCESS, else a CudaError
  /// "<call> failed: <error name> (<error description>)".
  llvm::Error check(CUresult result, llvm::StringRef call) const;

  /// "<error name> (<error description>)" of a driver status, e.g.
  /// "CUDA_ERROR_INVALID_PTX (a PTX JIT compilation failed)".
  std::string describe(CUresult result) const;

  /// The CUDA version the driver supports, e.g. 12040 for 12.4.
  int version() const { return driverVersion; }
  /// The library the entry points came from, as it was asked for.
  const std::string &libraryPath() const { return path; }

  /// The entry points: driver.fn.cuLaunchKernel(...).
  Symbols fn;

private:
  Driver() = default;
  /// Resolves the entry points of an opened library and calls cuInit.
  static llvm::Expected<std::unique_ptr<Driver>>
  initialize(void *handle, llvm::StringRef libraryPath);
  /// The library get() loads (see the file comment).
  static llvm::Expected<std::unique_ptr<Driver>> loadDefault();

  std::string path;
  int driverVersion = 0;
};

/// A failed driver call: the call's name, the status the driver returned,
/// and a message that holds both in words, optionally followed by details
/// (a JIT log). Callers that react to particular statuses (no device, out of
/// memory) match on this with llvm::handleErrors.
class CudaError : public llvm::ErrorInfo<CudaError> {
public:
  static char ID;

  CudaError(CUresult result, std::string message)
      : code(result), message(std::move(message)) {}

  CUresult result() const { return code; }
  const std::string &getMessage() const { return message; }

  void log(llvm::raw_ostream &os) const override;
  std::error_code convertToErrorCode() const override;

private:
  CUresult code;
  std::string message;
};

} // namespace mla::cuda

#endif // MLA_RUNTIME_CUDADRIVER_H
