//===- TensorMaps.cpp - TMA descriptors for JIT host code -----------------===//

#include "TensorMaps.h"
#include "LaunchShims.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <mutex>
#include <tuple>

using namespace mla::cuda;

namespace mla::gpu {

namespace {

constexpr std::int64_t kElementBytes = 2;
/// The driver's limits: dimensions up to 2^32 elements, strides multiples
/// of 16 bytes below 2^40, boxes up to 256 elements a side.
constexpr std::int64_t kMaxDim = std::int64_t(1) << 32;
constexpr std::int64_t kMaxStride = std::int64_t(1) << 40;
constexpr std::int64_t kMaxBox = 256;
constexpr std::int64_t kGlobalAlignment = 16;
/// A box's rows may not exceed the span the 128-byte swizzle permutes.
constexpr std::int64_t kSwizzleBytes = 128;
/// Maps per device allocation: one cuMemAlloc serves this many shapes.
/// cuMemAlloc's 256-byte alignment and the maps' 128-byte size keep every
/// map 128-byte aligned, above the 64 bytes TMA needs.
constexpr std::int64_t kMapsPerSlab = 64;

std::string hex(std::int64_t value) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::format_hex(static_cast<std::uint64_t>(value), 0);
  return text;
}

/// The shape in words, to lead its errors.
std::string describe(const TiledTensorMapShape &s) {
  return "TMA tensor map of " + std::to_string(s.rows) + " x " +
         std::to_string(s.columns) + " 16-bit elements at " + hex(s.base) +
         " (row stride " + std::to_string(s.rowStrideBytes) + " bytes, box " +
         std::to_string(s.boxRows) + " x " + std::to_string(s.boxColumns) + ")";
}

llvm::Error shapeError(const TiledTensorMapShape &shape, llvm::Error cause) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 describe(shape) + ": " +
                                     llvm::toString(std::move(cause)));
}

/// (context id, base, rows, columns, row stride, box rows, box columns).
using Key = std::tuple<unsigned long long, std::int64_t, std::int64_t,
                       std::int64_t, std::int64_t, std::int64_t, std::int64_t>;

/// What one context's maps are written with and into.
struct ContextMaps {
  /// A stream of the cache's own that nobody captures: the copies go
  /// there, never into a graph the caller is capturing.
  CUstream copyStream = nullptr;
  /// The slab being filled and the maps already in it (full: the next map
  /// allocates another).
  CUdeviceptr slab = 0;
  std::int64_t slabUsed = kMapsPerSlab;
};

/// Every map written so far, by shape. Device memory is never freed: a
/// captured CUDA graph may hold a map's address in its kernel parameters
/// and be replayed at any time, and there is no telling when the last one
/// is gone. This costs 128 bytes per distinct shape (a paged KV cache
/// gives one per cache buffer and box), plus the slab's unused rest. The
/// contexts are keyed by id rather than handle, since a handle may come
/// back for a new context whose memory holds none of the old maps.
struct Cache {
  std::mutex mutex;
  std::map<Key, CUdeviceptr> maps;
  std::map<unsigned long long, ContextMaps> contexts;
};

Cache &cache() {
  // Never destroyed: host code may still ask during static destruction.
  static Cache *instance = new Cache();
  return *instance;
}

/// Copies `map` into the next free slot of `context`'s slab and returns the
/// slot's address once the copy is complete. The calling thread must be in
/// relaxed capture mode: it may be capturing, and the allocation, the
/// copy from pageable memory and the synchronization are all calls a
/// capture otherwise forbids.
llvm::Expected<CUdeviceptr> writeMap(const Driver &driver, ContextMaps &context,
                                     const CUtensorMap &map) {
  const Driver::Symbols &fn = driver.fn;
  if (!context.copyStream) {
    CUstream stream = nullptr;
    // Non-blocking: no implicit ordering with the legacy default stream,
    // which may be part of the caller's capture.
    if (llvm::Error error =
            driver.check(fn.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING),
                         "cuStreamCreate"))
      return std::move(error);
    context.copyStream = stream;
  }
  if (context.slabUsed == kMapsPerSlab) {
    CUdeviceptr slab = 0;
    if (llvm::Error error = driver.check(
            fn.cuMemAlloc(&slab, kMapsPerSlab * sizeof(CUtensorMap)),
            "cuMemAlloc"))
      return std::move(error);
    context.slab = slab;
    context.slabUsed = 0;
  }
  CUdeviceptr address = context.slab + context.slabUsed * sizeof(CUtensorMap);
  if (llvm::Error error =
          driver.check(fn.cuMemcpyHtoDAsync(address, &map, sizeof(CUtensorMap),
                                            context.copyStream),
                       "cuMemcpyHtoDAsync"))
    return std::move(error);
  // Complete before any kernel the caller launches (or captures) next can
  // read it.
  if (llvm::Error error = driver.check(
          fn.cuStreamSynchronize(context.copyStream), "cuStreamSynchronize"))
    return std::move(error);
  ++context.slabUsed;
  return address;
}

} // namespace

std::string checkTiledTensorMap(const TiledTensorMapShape &s) {
  auto count = [](std::int64_t value) { return std::to_string(value); };
  if (s.base == 0)
    return "the base address is null";
  if (static_cast<std::uint64_t>(s.base) % kGlobalAlignment != 0)
    return "the base address " + hex(s.base) + " is not 16-byte aligned";
  if (s.rows < 1 || s.rows > kMaxDim)
    return "rows (" + count(s.rows) + ") not in [1, 2^32]";
  if (s.columns < 1 || s.columns > kMaxDim)
    return "columns (" + count(s.columns) + ") not in [1, 2^32]";
  if (s.rowStrideBytes % kGlobalAlignment != 0)
    return "the row stride (" + count(s.rowStrideBytes) +
           " bytes) is not a multiple of 16 bytes";
  if (s.rowStrideBytes < s.columns * kElementBytes)
    return "the row stride (" + count(s.rowStrideBytes) +
           " bytes) is smaller than a row (" + count(s.columns) +
           " columns of 2 bytes)";
  if (s.rowStrideBytes >= kMaxStride)
    return "the row stride (" + count(s.rowStrideBytes) +
           " bytes) is not below 2^40 bytes";
  if (s.boxRows < 1 || s.boxRows > kMaxBox)
    return "box rows (" + count(s.boxRows) + ") not in [1, 256]";
  if (s.boxColumns < 1 || s.boxColumns > kMaxBox)
    return "box columns (" + count(s.boxColumns) + ") not in [1, 256]";
  if (s.boxColumns * kElementBytes > kSwizzleBytes)
    return "box columns (" + count(s.boxColumns) + ", " +
           count(s.boxColumns * kElementBytes) +
           " bytes) exceed the 128-byte swizzle span";
  // The driver's rule for boxes without interleaving.
  if (s.boxColumns * kElementBytes % 16 != 0)
    return "box columns (" + count(s.boxColumns) + ", " +
           count(s.boxColumns * kElementBytes) +
           " bytes) are not a multiple of 16 bytes";
  if (s.boxRows > s.rows || s.boxColumns > s.columns)
    return "the box (" + count(s.boxRows) + " x " + count(s.boxColumns) +
           ") is larger than the tensor (" + count(s.rows) + " x " +
           count(s.columns) + ")";
  return "";
}

CUresult encodeTiledTensorMap(const Driver &driver,
                              const TiledTensorMapShape &shape,
                              CUtensorMap &map) {
  // Innermost dimension first.
  const std::uint64_t dims[2] = {static_cast<std::uint64_t>(shape.columns),
                                 static_cast<std::uint64_t>(shape.rows)};
  const std::uint64_t strides[1] = {
      static_cast<std::uint64_t>(shape.rowStrideBytes)};
  const std::uint32_t box[2] = {static_cast<std::uint32_t>(shape.boxColumns),
                                static_cast<std::uint32_t>(shape.boxRows)};
  const std::uint32_t elementStrides[2] = {1, 1};
  return driver.fn.cuTensorMapEncodeTiled(
      &map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2,
      reinterpret_cast<void *>(static_cast<std::uintptr_t>(shape.base)), dims,
      strides, box, elementStrides, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

llvm::Expected<CUdeviceptr>
deviceTiledTensorMap(const Driver &driver, const TiledTensorMapShape &shape) {
  std::string problem = checkTiledTensorMap(shape);
  if (!problem.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   describe(shape) + ": " + problem);
  // The one driver call of a hit: a thread-local read in the driver.
  unsigned long long context = 0;
  if (llvm::Error error =
          driver.check(driver.fn.cuCtxGetId(nullptr, &context), "cuCtxGetId"))
    return shapeError(shape, std::move(error));
  Key key{context,         shape.base,           shape.rows,
          shape.columns,   shape.rowStrideBytes, shape.boxRows,
          shape.boxColumns};

  Cache &maps = cache();
  // Held through a miss too: misses are rare (one per shape and context),
  // and a second thread missing on the same shape waits and then hits.
  std::lock_guard<std::mutex> lock(maps.mutex);
  auto found = maps.maps.find(key);
  if (found != maps.maps.end())
    return found->second;

  CUtensorMap map{};
  if (llvm::Error error = driver.check(encodeTiledTensorMap(driver, shape, map),
                                       "cuTensorMapEncodeTiled"))
    return shapeError(shape, std::move(error));

  // The caller may be capturing a graph, which would forbid this thread
  // the allocation and synchronous copy below.
  CUdeviceptr written = 0;
  if (llvm::Error error = inRelaxedCaptureMode(driver, [&]() -> llvm::Error {
        llvm::Expected<CUdeviceptr> at =
            writeMap(driver, maps.contexts[context], map);
        if (!at)
          return at.takeError();
        written = *at;
        return llvm::Error::success();
      })) {
    // A map written before the mode could be restored stays usable.
    if (written)
      maps.maps.emplace(key, written);
    return shapeError(shape, std::move(error));
  }
  maps.maps.emplace(key, written);
  return written;
}

} // namespace mla::gpu

extern "C" std::int64_t mlaTiledTensorMap(std::int64_t base, std::int64_t rows,
                                          std::int64_t columns,
                                          std::int64_t rowStrideBytes,
                                          std::int64_t boxRows,
                                          std::int64_t boxColumns) {
  using namespace mla::gpu;
  // As every shim: nothing once the call has failed (its launches are
  // skipped and it reports the first failure).
  GpuCall *call = GpuCall::active();
  if (!call || !call->error.empty())
    return 0;
  llvm::Expected<CUdeviceptr> address = deviceTiledTensorMap(
      call->driver, {base, rows, columns, rowStrideBytes, boxRows, boxColumns});
  if (!address) {
    call->error = llvm::toString(address.takeError());
    return 0;
  }
  return static_cast<std::int64_t>(*address);
}
