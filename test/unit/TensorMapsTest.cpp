//===- TensorMapsTest.cpp - TMA descriptors of the JIT host code ----------===//
//
// checkTiledTensorMap (runtime/gpu/TensorMaps.h) turns the driver's bare
// CUDA_ERROR_INVALID_VALUE into words; its rules are checked everywhere.
// mlaTiledTensorMap's cache, device copies and error reporting need the
// driver and an sm_90 device, and are skipped (with the reason) elsewhere.
//
//===----------------------------------------------------------------------===//

#include "TensorMaps.h"
#include "LaunchShims.h"

#include "mla/Runtime/CudaDevice.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

using namespace mla::cuda;
using mla::gpu::checkTiledTensorMap;
using mla::gpu::GpuCall;
using mla::gpu::TiledTensorMapShape;

namespace {

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

std::string errorText(llvm::Error error) {
  return error ? llvm::toString(std::move(error)) : "";
}

constexpr std::int64_t kTwoTo32 = std::int64_t(1) << 32;
constexpr std::int64_t kTwoTo40 = std::int64_t(1) << 40;

/// A paged KV cache's entries: 576 bf16 values a row, tiles of 64 x 64.
TiledTensorMapShape valid() { return {0x10000, 256, 576, 1152, 64, 64}; }

//===----------------------------------------------------------------------===//
// Without a device
//===----------------------------------------------------------------------===//

TEST(TiledTensorMapCheck, AcceptsValidShapes) {
  EXPECT_EQ(checkTiledTensorMap(valid()), "");
  // At the limits: the box as large as the tensor, 128 bytes wide.
  EXPECT_EQ(checkTiledTensorMap({0x10, 64, 64, 128, 64, 64}), "");
  // The smallest box: one row of 16 bytes.
  EXPECT_EQ(checkTiledTensorMap({0x10, 1, 8, 16, 1, 8}), "");
  // The largest tensor and stride.
  EXPECT_EQ(checkTiledTensorMap({0x10, kTwoTo32, 8, kTwoTo40 - 16, 256, 8}),
            "");
  EXPECT_EQ(checkTiledTensorMap({0x10, 1, kTwoTo32, kTwoTo32 * 2, 1, 64}), "");
}

/// The problem `checkTiledTensorMap` finds in `valid()` changed by `edit`.
template <typename Edit> std::string problemWith(Edit edit) {
  TiledTensorMapShape shape = valid();
  edit(shape);
  return checkTiledTensorMap(shape);
}

TEST(TiledTensorMapCheck, BaseMustBeANonNullMultipleOf16) {
  EXPECT_EQ(problemWith([](auto &s) { s.base = 0; }),
            "the base address is null");
  EXPECT_EQ(problemWith([](auto &s) { s.base = 0x10008; }),
            "the base address 0x10008 is not 16-byte aligned");
  EXPECT_EQ(problemWith([](auto &s) { s.base = 0x10001; }),
            "the base address 0x10001 is not 16-byte aligned");
}

TEST(TiledTensorMapCheck, DimensionsMustBeIn1To2To32) {
  EXPECT_EQ(problemWith([](auto &s) { s.rows = 0; }),
            "rows (0) not in [1, 2^32]");
  EXPECT_EQ(problemWith([](auto &s) { s.rows = -64; }),
            "rows (-64) not in [1, 2^32]");
  EXPECT_EQ(problemWith([](auto &s) { s.rows = kTwoTo32 + 1; }),
            "rows (4294967297) not in [1, 2^32]");
  EXPECT_EQ(problemWith([](auto &s) { s.columns = 0; }),
            "columns (0) not in [1, 2^32]");
  EXPECT_EQ(problemWith([](auto &s) { s.columns = kTwoTo32 + 1; }),
            "columns (4294967297) not in [1, 2^32]");
}

TEST(TiledTensorMapCheck, RowStrideMustBeAMultipleOf16CoveringARow) {
  EXPECT_EQ(problemWith([](auto &s) { s.rowStrideBytes = 1160; }),
            "the row stride (1160 bytes) is not a multiple of 16 bytes");
  EXPECT_EQ(problemWith([](auto &s) { s.rowStrideBytes = 1136; }),
            "the row stride (1136 bytes) is smaller than a row (576 columns "
            "of 2 bytes)");
  EXPECT_EQ(problemWith([](auto &s) { s.rowStrideBytes = 0; }),
            "the row stride (0 bytes) is smaller than a row (576 columns of 2 "
            "bytes)");
  EXPECT_EQ(problemWith([](auto &s) { s.rowStrideBytes = -1152; }),
            "the row stride (-1152 bytes) is smaller than a row (576 columns "
            "of 2 bytes)");
  EXPECT_EQ(problemWith([](auto &s) { s.rowStrideBytes = kTwoTo40; }),
            "the row stride (1099511627776 bytes) is not below 2^40 bytes");
}

TEST(TiledTensorMapCheck, BoxSidesMustBeIn1To256) {
  EXPECT_EQ(problemWith([](auto &s) { s.boxRows = 0; }),
            "box rows (0) not in [1, 256]");
  EXPECT_EQ(problemWith([](auto &s) { s.boxRows = 257; }),
            "box rows (257) not in [1, 256]");
  EXPECT_EQ(problemWith([](auto &s) { s.boxColumns = 0; }),
            "box columns (0) not in [1, 256]");
  EXPECT_EQ(problemWith([](auto &s) { s.boxColumns = 257; }),
            "box columns (257) not in [1, 256]");
}

TEST(TiledTensorMapCheck, BoxRowsMustFitTheSwizzleIn16ByteSteps) {
  EXPECT_EQ(problemWith([](auto &s) { s.boxColumns = 72; }),
            "box columns (72, 144 bytes) exceed the 128-byte swizzle span");
  EXPECT_EQ(problemWith([](auto &s) { s.boxColumns = 256; }),
            "box columns (256, 512 bytes) exceed the 128-byte swizzle span");
  EXPECT_EQ(problemWith([](auto &s) { s.boxColumns = 4; }),
            "box columns (4, 8 bytes) are not a multiple of 16 bytes");
  EXPECT_EQ(problemWith([](auto &s) { s.boxColumns = 60; }),
            "box columns (60, 120 bytes) are not a multiple of 16 bytes");
}

TEST(TiledTensorMapCheck, BoxMustFitInTheTensor) {
  EXPECT_EQ(problemWith([](auto &s) { s.rows = 32; }),
            "the box (64 x 64) is larger than the tensor (32 x 576)");
  EXPECT_EQ(problemWith([](auto &s) {
              s.columns = 32;
              s.rowStrideBytes = 64;
            }),
            "the box (64 x 64) is larger than the tensor (256 x 32)");
}

TEST(TiledTensorMapShim, OutsideAGpuCallIsZero) {
  // No driver is touched: there is none to record a failure with.
  ASSERT_EQ(GpuCall::active(), nullptr);
  EXPECT_EQ(mlaTiledTensorMap(0x10000, 256, 576, 1152, 64, 64), 0);
}

//===----------------------------------------------------------------------===//
// On an sm_90 device
//===----------------------------------------------------------------------===//

/// Opens device 0, or skips the test saying why it cannot.
class TiledTensorMapOnGpu : public ::testing::Test {
protected:
  void SetUp() override {
    llvm::Expected<int> count = deviceCount();
    if (!count)
      GTEST_SKIP() << errorText(count.takeError());
    if (*count == 0)
      GTEST_SKIP() << "the CUDA driver sees no device";
    llvm::Expected<std::unique_ptr<Device>> opened = Device::open(0);
    ASSERT_TRUE(bool(opened)) << errorText(opened.takeError());
    device = std::move(*opened);
    if (device->capability().major < 9)
      GTEST_SKIP() << "tensor maps need sm_90 or later";
    llvm::Expected<DeviceBuffer> allocated =
        DeviceBuffer::allocate(kRows * kStride);
    ASSERT_TRUE(bool(allocated)) << errorText(allocated.takeError());
    buffer = std::move(*allocated);
  }

  const Driver &driver() const { return device->driver(); }
  std::int64_t base() const { return static_cast<std::int64_t>(buffer.ptr()); }

  /// Checks that the 128 bytes at `address` are `shape`'s map as the
  /// driver encodes it on the host.
  void expectMapAt(std::int64_t address, const TiledTensorMapShape &shape) {
    CUtensorMap onDevice{}, expected{};
    ASSERT_EQ(driver().fn.cuMemcpyDtoH(&onDevice,
                                       static_cast<CUdeviceptr>(address),
                                       sizeof(CUtensorMap)),
              CUDA_SUCCESS);
    ASSERT_EQ(mla::gpu::encodeTiledTensorMap(driver(), shape, expected),
              CUDA_SUCCESS);
    EXPECT_EQ(std::memcmp(&onDevice, &expected, sizeof(CUtensorMap)), 0);
  }

  static constexpr std::int64_t kRows = 1024, kColumns = 576,
                                kStride = kColumns * 2;
  std::unique_ptr<Device> device;
  DeviceBuffer buffer;
};

TEST_F(TiledTensorMapOnGpu, OneMapPerShapeHeldInDeviceMemory) {
  GpuCall call(driver(), nullptr);
  TiledTensorMapShape tile{base(), kRows, kColumns, kStride, 64, 64};
  std::int64_t first =
      mlaTiledTensorMap(tile.base, tile.rows, tile.columns, tile.rowStrideBytes,
                        tile.boxRows, tile.boxColumns);
  ASSERT_NE(first, 0) << call.error;
  EXPECT_EQ(first % 64, 0);
  EXPECT_EQ(mlaTiledTensorMap(tile.base, tile.rows, tile.columns,
                              tile.rowStrideBytes, tile.boxRows,
                              tile.boxColumns),
            first);

  TiledTensorMapShape narrow = tile;
  narrow.boxRows = 16;
  narrow.boxColumns = 32;
  std::int64_t second = mlaTiledTensorMap(narrow.base, narrow.rows,
                                          narrow.columns, narrow.rowStrideBytes,
                                          narrow.boxRows, narrow.boxColumns);
  ASSERT_NE(second, 0) << call.error;
  EXPECT_EQ(second % 64, 0);
  EXPECT_NE(second, first);
  EXPECT_GE(std::abs(second - first), std::int64_t(sizeof(CUtensorMap)));

  expectMapAt(first, tile);
  expectMapAt(second, narrow);
  EXPECT_EQ(errorText(call.takeError()), "");
}

TEST_F(TiledTensorMapOnGpu, InvalidShapesFailTheCall) {
  GpuCall call(driver(), nullptr);
  EXPECT_EQ(mlaTiledTensorMap(base() + 8, kRows, kColumns, kStride, 64, 64), 0);
  // The call has failed: later requests give nothing either, and the first
  // failure is the one reported.
  EXPECT_EQ(mlaTiledTensorMap(base(), kRows, kColumns, kStride, 64, 64), 0);
  std::string error = errorText(call.takeError());
  EXPECT_TRUE(contains(error, "TMA tensor map of 1024 x 576 16-bit elements"))
      << error;
  EXPECT_TRUE(contains(error, "is not 16-byte aligned")) << error;

  EXPECT_EQ(mlaTiledTensorMap(base(), kRows, kColumns, 1000, 64, 64), 0);
  error = errorText(call.takeError());
  EXPECT_TRUE(contains(error, "the row stride (1000 bytes) is not a multiple "
                              "of 16 bytes"))
      << error;

  EXPECT_EQ(mlaTiledTensorMap(base(), kRows, kColumns, kStride, 64, 128), 0);
  error = errorText(call.takeError());
  EXPECT_TRUE(contains(error, "exceed the 128-byte swizzle span")) << error;

  // With the error taken, the call goes on.
  EXPECT_NE(mlaTiledTensorMap(base(), kRows, kColumns, kStride, 64, 64), 0);
  EXPECT_EQ(errorText(call.takeError()), "");
}

TEST_F(TiledTensorMapOnGpu, WrittenWhileTheThreadCapturesAGraph) {
  llvm::Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(bool(stream)) << errorText(stream.takeError());
  const Driver::Symbols &fn = driver().fn;
  for (CUstreamCaptureMode captureMode :
       {CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, CU_STREAM_CAPTURE_MODE_GLOBAL}) {
    SCOPED_TRACE("capture mode " + std::to_string(captureMode));
    GpuCall call(driver(), stream->handle());
    ASSERT_EQ(fn.cuStreamBeginCapture(stream->handle(), captureMode),
              CUDA_SUCCESS);
    // More new shapes than one device allocation holds, so that at least
    // one allocation happens during the capture.
    std::vector<std::pair<std::int64_t, TiledTensorMapShape>> written;
    for (std::int64_t rows = 900; rows < 900 + 65; ++rows) {
      TiledTensorMapShape shape{base(), rows, kColumns, kStride, 64, 64};
      if (captureMode == CU_STREAM_CAPTURE_MODE_GLOBAL)
        shape.boxRows = 32;
      written.emplace_back(mlaTiledTensorMap(shape.base, shape.rows,
                                             shape.columns,
                                             shape.rowStrideBytes,
                                             shape.boxRows, shape.boxColumns),
                           shape);
    }
    CUgraph graph = nullptr;
    // A forbidden call would have invalidated the capture.
    EXPECT_EQ(fn.cuStreamEndCapture(stream->handle(), &graph), CUDA_SUCCESS);
    if (graph)
      fn.cuGraphDestroy(graph);
    ASSERT_EQ(errorText(call.takeError()), "");

    // The thread is back in its own (default) capture mode.
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    ASSERT_EQ(fn.cuThreadExchangeStreamCaptureMode(&mode), CUDA_SUCCESS);
    EXPECT_EQ(mode, CU_STREAM_CAPTURE_MODE_GLOBAL);
    ASSERT_EQ(fn.cuThreadExchangeStreamCaptureMode(&mode), CUDA_SUCCESS);

    for (auto &[address, shape] : written) {
      ASSERT_NE(address, 0);
      expectMapAt(address, shape);
    }
  }
}

} // namespace
