//===- Harness.cpp - What every mla-bench suite runs on -------------------===//

#include "Harness.h"

#include "Options.h"

#include "mla/Support/Float16.h"
#include "mla/Support/Float8.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>

namespace mla::bench {

using llvm::format;
using llvm::outs;

const cuda::Device *device = nullptr;
const cuda::Stream *stream = nullptr;

[[noreturn]] void fail(llvm::Error error, const char *what) {
  llvm::errs() << "mla-bench: " << what << ": "
               << llvm::toString(std::move(error)) << "\n";
  std::exit(1);
}

void check(llvm::Error error, const char *what) {
  if (error)
    fail(std::move(error), what);
}

DType cacheDType() {
  std::optional<DType> parsed = parseDType(cacheDTypeName);
  if (!parsed || !(*parsed == DType::BF16 || isFp8(*parsed))) {
    llvm::errs() << "mla-bench: --cache-dtype: '" << cacheDTypeName
                 << "' is not bf16, fp8_e4m3 or fp8_e5m2\n";
    std::exit(1);
  }
  return *parsed;
}

Tensor scaleTensor() {
  return hostTensor(DType::F32, {1}, std::vector<float>{kBenchKvScale});
}

/// A 16 MiB block of `dtype` values drawn from [-1, 1] (for an FP8 cache,
/// the codes of values in [-1, 1] at scale kBenchKvScale: no NaN codes).
static std::vector<uint8_t> randomBlock(DType dtype) {
  std::vector<uint8_t> b(16 << 20);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  if (isFp8(dtype)) {
    const Fp8Format &f = dtype == DType::FP8E4M3 ? kFp8E4M3 : kFp8E5M2;
    for (uint8_t &code : b)
      code = floatToFp8(dist(rng) / kBenchKvScale, f);
    return b;
  }
  for (size_t i = 0; i + 1 < b.size(); i += 2) {
    uint16_t v = floatToBF16(dist(rng));
    std::memcpy(&b[i], &v, 2);
  }
  return b;
}

Tensor randomTensor(DType dtype, std::vector<int64_t> shape) {
  int64_t count = 1;
  for (int64_t d : shape)
    count *= d;
  size_t bytes = size_t(count) * byteWidth(dtype);
  Tensor t{check(cuda::DeviceBuffer::allocate(bytes), "allocating"), {}};
  // A 16 MiB random block, repeated: random enough for timing, cheap to
  // make for multi-gigabyte caches.
  static std::vector<uint8_t> twoByte = randomBlock(DType::BF16);
  static std::vector<uint8_t> e4m3 = randomBlock(DType::FP8E4M3);
  static std::vector<uint8_t> e5m2 = randomBlock(DType::FP8E5M2);
  const std::vector<uint8_t> &block = dtype == DType::FP8E4M3   ? e4m3
                                      : dtype == DType::FP8E5M2 ? e5m2
                                                                : twoByte;
  auto &driver = device->driver();
  for (size_t offset = 0; offset < bytes; offset += block.size()) {
    size_t n = std::min(block.size(), bytes - offset);
    check(driver.check(driver.fn.cuMemcpyHtoD(t.buffer.ptr() + offset,
                                              block.data(), n),
                       "cuMemcpyHtoD"),
          "filling");
  }
  t.view = BufferView::contiguous(reinterpret_cast<void *>(t.buffer.ptr()),
                                  dtype, std::move(shape));
  return t;
}

std::unique_ptr<GpuKernel>
compile(mlir::OwningOpRef<mlir::ModuleOp> module, const char *what,
        KernelStrategy strategy) {
  GpuTarget target =
      chip.empty() ? check(GpuTarget::forCapability(device->capability().major,
                                                    device->capability().minor),
                           "target")
                   : check(GpuTarget::parse(chip), "--chip");
  target.strategy = strategy;
  auto start = std::chrono::steady_clock::now();
  auto kernel = check(GpuKernel::compile(std::move(module), kKernelEntry,
                                         *device, target),
                      what);
  double ms = std::chrono::duration<double, std::milli>(
                  std::chrono::steady_clock::now() - start)
                  .count();
  // Timed runs measure the kernels' best code, not the driver's quicker
  // linked code that stands in for it at first.
  waitForKernelUpgrades();
  double upgradedMs = std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - start)
                          .count();
  outs() << format("  compiled %s for %s in %.0f ms (%s; best code after "
                   "%.0f ms)\n",
                   what, kernel->target().chip().c_str(), ms,
                   kernel->compileEvent().describePhases().c_str(),
                   upgradedMs);
  if (std::string driver = kernel->compileEvent().describeDriverCompiles();
      !driver.empty())
    outs() << "    driver compiles: " << driver << "\n";
  return kernel;
}

std::vector<KernelStrategy> strategiesOnDevice() {
  std::vector<KernelStrategy> all{KernelStrategy::Generic,
                                  KernelStrategy::TensorCore};
  if (device->capability().major == 9 && device->capability().minor == 0)
    all.push_back(KernelStrategy::Warpgroup);
  return all;
}

DecodeAttentionSpec decodeSpec(int64_t heads, int64_t page) {
  MlaDims dims;
  dims.numHeads = heads;
  DecodeAttentionSpec spec{dims,
                           DType::BF16,
                           cacheDType(),
                           page,
                           /*causal=*/true,
                           1.0f / std::sqrt(192.0f)};
  spec.withSplitPlan = true;
  return spec;
}

DecodeOperands decodeOperands(int64_t heads, int64_t batch, int64_t context,
                              int64_t page, const std::vector<int32_t> &table,
                              const std::vector<int32_t> &numSplits,
                              int64_t splits) {
  int64_t blocksPerSeq = (context + page - 1) / page;
  DecodeOperands o;
  o.tensors.push_back(randomTensor(DType::BF16, {batch, 1, heads, 576}));
  o.tensors.push_back(
      randomTensor(cacheDType(), {batch * blocksPerSeq, page, 576}));
  o.tensors.push_back(hostTensor(DType::I32, {batch, blocksPerSeq}, table));
  o.tensors.push_back(hostTensor(
      DType::I32, {batch}, std::vector<int32_t>(batch, int32_t(context))));
  if (isFp8(cacheDType()))
    o.tensors.push_back(scaleTensor());
  o.tensors.push_back(hostTensor(DType::I32, {batch}, numSplits));
  o.tensors.push_back(randomTensor(DType::F32, {batch, 1, heads, splits, 512}));
  o.tensors.push_back(randomTensor(DType::F32, {batch, 1, heads, splits}));
  o.tensors.push_back(randomTensor(DType::BF16, {batch, 1, heads, 512}));
  o.tensors.push_back(randomTensor(DType::F32, {batch, heads, 1}));
  return o;
}

std::vector<int64_t> headCounts() {
  if (onlyHeads > 0)
    return {onlyHeads};
  return {16, 128};
}

/// The strategies --strategy chooses, or an error naming the bad one.
static llvm::Expected<std::vector<KernelStrategy>> parseStrategies() {
  std::string list = strategies;
  if (list == "both")
    list = "generic,mma-sync";
  if (list == "all")
    return strategiesOnDevice();
  llvm::SmallVector<llvm::StringRef> names;
  llvm::StringRef(list).split(names, ',');
  std::vector<KernelStrategy> chosen;
  for (llvm::StringRef n : names) {
    auto strategy = parseStrategy(n.trim());
    if (!strategy)
      return strategy.takeError();
    chosen.push_back(*strategy);
  }
  return chosen;
}

std::vector<KernelStrategy> chosenStrategies() {
  return check(parseStrategies(), "--strategy");
}

} // namespace mla::bench
