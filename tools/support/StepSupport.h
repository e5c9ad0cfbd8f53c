//===- StepSupport.h - What the serving-step harnesses share ----*- C++ -*-===//
//
// Host tensors mirrored on the runtime's device, the layer's random
// weights, and the slicing and LSE comparison the checks against the
// float64 reference use (ServingStep.cpp, DcpSimulation.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TOOLS_SUPPORT_STEPSUPPORT_H
#define MLA_TOOLS_SUPPORT_STEPSUPPORT_H

#include "HostTensor.h"
#include "mla/Runtime/MlaLayer.h"
#include "mla/Runtime/Runtime.h"
#include "mla/Support/MlaDims.h"

#include "llvm/Support/Error.h"

#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace mla::step {

/// Max |dLSE| a decode may differ from the float64 reference by.
constexpr double kLseTolerance = 5e-2;

/// The kv_scale of the harnesses' FP8 caches: latent entries of about
/// [-1, 1] are stored as value / 0.03, well inside either format's range.
constexpr double kFp8CacheScale = 0.03;

/// The relative L2 tolerance of a layer's outputs in `activation`.
double outputTolerance(DType activation);

/// A host tensor with a device copy.
struct Mirrored {
  HostTensor host;
  runtime::DeviceAllocation device;

  BufferView deviceView() {
    return BufferView::contiguous(device.data(), host.elementType(),
                                  host.dims());
  }
};

llvm::Expected<Mirrored> mirror(runtime::Runtime &runtime, HostTensor host);

/// The kv_scale operand of a `cache` cache: kFp8CacheScale as [1] f32 on
/// the device for an FP8 format, nothing for the others.
llvm::Expected<std::optional<Mirrored>> cacheScaleFor(runtime::Runtime &runtime,
                                                      DType cache);
/// A cache's values as the kernels read them: its FP8 codes' values times
/// kFp8CacheScale (`fp8`), the values themselves otherwise.
std::vector<double> cacheEntries(const HostTensor &cache, bool fp8);
/// Latent rows as an FP8 cache stores them: value / kFp8CacheScale.
void toFp8CacheUnits(std::vector<double> &row);
/// The device copy back into the host tensor.
llvm::Error download(runtime::Runtime &runtime, Mirrored &m);

/// Rows [first, first + count) of [rows, width] data.
std::vector<double> rows(const std::vector<double> &v, int64_t first,
                         int64_t count, int64_t width);
/// Columns [from, from + keep) of every row of [rows, width] data.
std::vector<double> columns(const std::vector<double> &v, int64_t width,
                            int64_t from, int64_t keep);
/// The largest |got - want| (equal infinities count 0, NaN infinite).
double maxLseError(const std::vector<double> &got,
                   const std::vector<double> &want);

/// The layer's weights: kv_b_proj and the W_UK_T / W_UV slices a serving
/// engine derives from it once, on the host and on the device.
struct Weights {
  std::vector<double> kvBProj, wUkT, wUv;
  /// kv_b_proj, W_UK_T, W_UV on the device.
  std::vector<Mirrored> onDevice;

  runtime::MlaLayerWeights views();
};

/// A layer's config for the harnesses: `dims`, the dtypes and page size,
/// the decode LSE on (the checks read it), the backends asked for.
runtime::MlaLayerConfig checkedLayerConfig(const MlaDims &dims, DType activation,
                                           DType cache, int64_t blockSize,
                                           const std::string &backend,
                                           const std::string &prefillBackend);

/// Output rows [rows, heads, V] in `activation` and their LSE [rows,
/// heads, 1] f32, NaN-poisoned on the host and the device, so that a check
/// sees only what a step wrote.
llvm::Expected<std::pair<Mirrored, Mirrored>>
poisonedRows(runtime::Runtime &runtime, DType activation, int64_t rows,
             int64_t heads, int64_t headDim);

llvm::Expected<Weights> makeWeights(runtime::Runtime &runtime,
                                    const MlaDims &d, DType act,
                                    std::mt19937 &rng);

/// The float64 decode reference: the absorbed query from q's rows
/// [0, numDecodes x queryLen), attention over `cacheValues` through the
/// block table and sequence lengths, then W_UV: output rows [Td, N, V] and
/// LSE [numDecodes, N, queryLen].
void referenceDecode(const std::vector<double> &qValues,
                     const std::vector<double> &cacheValues,
                     const Weights &weights, const MlaDims &d,
                     llvm::ArrayRef<int32_t> blockTable,
                     llvm::ArrayRef<int32_t> seqLens, int64_t tableWidth,
                     int64_t numBlocks, int64_t blockSize, int64_t queryLen,
                     float scale, std::vector<double> &out,
                     std::vector<double> &lse);

} // namespace mla::step

#endif // MLA_TOOLS_SUPPORT_STEPSUPPORT_H
