//===- Harness.h - What every mla-bench suite runs on -----------*- C++ -*-===//
//
// The device and stream of the run, errors that end it, device tensors of
// random or given values, kernel compiles (timed, with the driver's compile
// of each module), the strategies chosen, and the decode every decode row
// and the L2 read flush run.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TOOLS_MLABENCH_HARNESS_H
#define MLA_TOOLS_MLABENCH_HARNESS_H

#include "mla/Builders/KernelBuilders.h"
#include "mla/Runtime/CudaDevice.h"
#include "mla/Runtime/GpuKernel.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace mla::bench {

/// Set by main for the whole run.
extern const cuda::Device *device;
extern const cuda::Stream *stream;

/// Prints `what` and the error, and exits.
[[noreturn]] void fail(llvm::Error error, const char *what);

template <typename T> T check(llvm::Expected<T> value, const char *what) {
  if (!value)
    fail(value.takeError(), what);
  return std::move(*value);
}

void check(llvm::Error error, const char *what);

/// A device buffer of `count` elements of `dtype` filled with random values
/// in [-1, 1) (floats) or the given host data (integers).
struct Tensor {
  cuda::DeviceBuffer buffer;
  BufferView view;
};

Tensor randomTensor(DType dtype, std::vector<int64_t> shape);

/// The scale of the FP8 caches the suites time (values in [-1, 1] become
/// codes up to 50, well inside both formats).
inline constexpr float kBenchKvScale = 0.02f;
/// --cache-dtype, checked (a bad one ends the run).
DType cacheDType();
/// kBenchKvScale as the [1] f32 kv_scale operand.
Tensor scaleTensor();

template <typename T>
Tensor hostTensor(DType dtype, std::vector<int64_t> shape,
                  const std::vector<T> &values) {
  size_t bytes = values.size() * sizeof(T);
  Tensor t{check(cuda::DeviceBuffer::allocate(bytes), "allocating"), {}};
  check(t.buffer.copyFromHost(values.data(), bytes), "copying");
  t.view = BufferView::contiguous(reinterpret_cast<void *>(t.buffer.ptr()),
                                  dtype, std::move(shape));
  return t;
}

/// Compiles `module` for the device (or --chip) with `strategy` and prints
/// how long that took; returns once the kernels run their best code.
std::unique_ptr<GpuKernel>
compile(mlir::OwningOpRef<mlir::ModuleOp> module, const char *what,
        KernelStrategy strategy = KernelStrategy::Generic);

/// The strategies the device runs, slowest first: wgmma needs sm_90a.
std::vector<KernelStrategy> strategiesOnDevice();

/// The head counts --heads chooses.
std::vector<int64_t> headCounts();

/// The strategies --strategy chooses; a bad one ends the run.
std::vector<KernelStrategy> chosenStrategies();

/// The decode every decode row times: DeepSeek dims, bf16 queries over a
/// cache of cacheDType(), causal, with the split plan's operands.
DecodeAttentionSpec decodeSpec(int64_t heads, int64_t page);

/// Operands of decodeSpec's kernel for `batch` requests of `context`
/// tokens each: random q and cache, the block table, the FP8 cache's scale,
/// the plan's split counts, workspaces of `splits` splits and the outputs.
struct DecodeOperands {
  std::vector<Tensor> tensors;
  std::vector<BufferView> views() const {
    std::vector<BufferView> v;
    for (const Tensor &t : tensors)
      v.push_back(t.view);
    return v;
  }
};
DecodeOperands decodeOperands(int64_t heads, int64_t batch, int64_t context,
                              int64_t page, const std::vector<int32_t> &table,
                              const std::vector<int32_t> &numSplits,
                              int64_t splits);

} // namespace mla::bench

#endif // MLA_TOOLS_MLABENCH_HARNESS_H
