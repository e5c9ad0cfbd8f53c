//===- CApi.h - What the C interface's files share --------------*- C++ -*-===//
//
// The C interface (include/mla/mla.h) is written one file per object:
// Errors.cpp (status, last error, version), Tensors.cpp, Runtime.cpp
// (runtime and device memory), Config.cpp (layer configuration and backend
// selection), Layer.cpp (layer, plans, forward), Dcp.cpp (the merge of a
// DCP group's partials), DecodeGraph.cpp, Kernel.cpp.
// This header, implemented in CApi.cpp, holds what they share: the handles
// behind the opaque C types, and the conversions and checks between C
// descriptors and the C++ runtime.
//
// Every entry point runs its body through `guarded`, which turns any C++
// exception into a status (these files are compiled with exceptions on), and
// sets the calling thread's last-error message. Checks that decide the
// status (argument shapes, configuration, backend selection) run before the
// C++ call, so that each failure gets the status of the step that failed
// rather than a guess from the message text.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_CAPI_CAPI_H
#define MLA_RUNTIME_CAPI_CAPI_H

#include "mla/mla.h"

#include "mla/Runtime/MlaLayer.h"
#include "mla/Runtime/Runtime.h"

#include "llvm/Support/Error.h"

#include <atomic>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

namespace mla::capi {

/// The strings a selection hands out, kept by their owner.
struct SelectionText {
  const Backend *backend = nullptr;
  mla_backend_source_t source = MLA_BACKEND_SOURCE_PRIORITY;
  int32_t numSkipped = 0;
  std::string skipped;
  std::string summary;
};

} // namespace mla::capi

//===----------------------------------------------------------------------===//
// The handles
//===----------------------------------------------------------------------===//


struct mla_runtime {
  std::unique_ptr<mla::runtime::Runtime> runtime;
  std::string description;
  std::string cacheDirectory;

  std::mutex mutex;
  /// Live allocations by their pointer.
  std::unordered_map<void *, mla::runtime::DeviceAllocation> allocations;
  /// Strings handed to callers (selections); node-based, so pointers into
  /// them stay valid until the runtime goes away.
  std::set<std::string> strings;
  std::atomic<int64_t> layers{0};
  std::atomic<int64_t> kernels{0};

  const char *intern(std::string text) {
    std::lock_guard<std::mutex> lock(mutex);
    return strings.insert(std::move(text)).first->c_str();
  }

  /// The plan family of layers configured as `fingerprint` says.
  uint64_t planFamily(const std::string &fingerprint);

private:
  std::map<std::string, uint64_t> planFamilies;
};

struct mla_layer {
  mla_runtime *owner = nullptr;
  /// The layers that plan alike: one number for every layer of this
  /// runtime with the same configuration and backend, unique in the
  /// process otherwise, so that a plan serves every such layer (a model's
  /// layers plan a step once) and no other, even when a new layer reuses a
  /// destroyed one's address.
  uint64_t planFamily = 0;
  std::unique_ptr<mla::runtime::MlaLayer> layer;
  mla::capi::SelectionText selection;
  mla::capi::SelectionText prefillSelection;
  /// Graphs captured by the layer and not destroyed: they refer to it.
  std::atomic<int64_t> graphs{0};
};

struct mla_decode_graph {
  mla_layer *owner = nullptr;
  std::unique_ptr<mla::runtime::DecodeStepGraph> graph;
};

struct mla_plan {
  uint64_t planFamily = 0;
  mla::runtime::MlaStepPlan plan;
  std::string line;
};

struct mla_kernel {
  mla_runtime *owner = nullptr;
  std::shared_ptr<mla::runtime::Kernel> kernel;
  std::string cacheEntry;
};

namespace mla::capi {

//===----------------------------------------------------------------------===//
// Status and the last error
//===----------------------------------------------------------------------===//

/// Clears the calling thread's last error; MLA_OK.
mla_status_t succeed();
/// Sets the last error; `status`.
mla_status_t fail(mla_status_t status, const std::string &message);
/// The same, the message prefixed with the function's name.
mla_status_t fail(mla_status_t status, const char *fn,
                  const std::string &message);
mla_status_t fail(mla_status_t status, const char *fn, llvm::Error error);
/// Sets the message without allocating more than it must.
void setLastErrorNoThrow(const char *fn, const char *what);
/// The calling thread's last error.
const char *lastErrorText();
/// The status of a failed C++ call: INVALID_ARGUMENT for an ArgumentError
/// (a buffer of the wrong type, shape or layout), else `otherwise`.
mla_status_t statusOf(const llvm::Error &error, mla_status_t otherwise);
/// Records a failed C++ call with statusOf's status.
mla_status_t failCall(mla_status_t otherwise, const char *fn,
                      llvm::Error error);

/// Runs `body(fn)`; no exception leaves it.
template <typename Body> mla_status_t guarded(const char *fn, Body &&body) {
  try {
    return body(fn);
  } catch (const std::bad_alloc &) {
    setLastErrorNoThrow(fn, "out of host memory");
    return MLA_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception &e) {
    setLastErrorNoThrow(fn, (std::string("unexpected exception: ") + e.what()).c_str());
    return MLA_ERROR_INTERNAL;
  } catch (...) {
    setLastErrorNoThrow(fn, "unexpected exception");
    return MLA_ERROR_INTERNAL;
  }
}

/// Returns MLA_ERROR_INVALID_ARGUMENT naming the argument when it is NULL.
#define MLA_REQUIRE(arg)                                                       \
  do {                                                                         \
    if (!(arg))                                                                \
      return ::mla::capi::fail(MLA_ERROR_INVALID_ARGUMENT, fn,                 \
                               "argument '" #arg "' is NULL");                 \
  } while (false)

std::string str(int64_t value);

//===----------------------------------------------------------------------===//
// Conversions between the C descriptors and the C++ runtime
//===----------------------------------------------------------------------===//

std::optional<DType> toDType(mla_dtype_t dtype);
mla_dtype_t fromDType(DType dtype);
/// "<what> has an invalid dtype (...)".
std::string badDType(const std::string &what, mla_dtype_t dtype);
/// `tensor` as a BufferView, checking what every tensor must satisfy: a
/// dtype of the enum, a rank in [0, MLA_MAX_RANK], non-negative sizes.
mla_status_t toView(const char *fn, const std::string &what,
                    const mla_tensor_t &tensor, BufferView &view);
/// `c` as the C++ layer config, checking every field the C++ side would
/// otherwise reject late or truncate.
mla_status_t toLayerConfig(const char *fn, const mla_layer_config_t &c,
                           runtime::MlaLayerConfig &out);
SelectionText describeSelection(const Selection &s);
/// `text` as the C struct, its strings `skipped` and `summary` kept by the
/// caller's owner (the runtime or the layer).
mla_backend_selection_t toCSelection(const SelectionText &text,
                                     const char *skipped, const char *summary);
/// Everything a layer's plans depend on: its configuration and backend.
std::string planFingerprint(const runtime::MlaLayer &layer);
/// What a plan of another plan family is refused with.
inline constexpr const char *kForeignPlan =
    "the plan was made by a layer of another configuration or runtime";
mla_status_t toWeights(const char *fn, const mla_layer_weights_t &w,
                       runtime::MlaLayerWeights &out);
mla_status_t toForwardArgs(const char *fn, const mla_forward_args_t &a,
                           runtime::MlaForwardArgs &out);
/// `m` as the C++ metadata, its counts and arrays checked before any is
/// read (`num_cache_blocks` is checked with the counts).
mla_status_t toMetadata(const char *fn, const mla_batch_metadata_t &m,
                        int64_t num_cache_blocks,
                        runtime::CommonAttentionMetadata &c);
/// The shape as the C++ one, its fields checked by the layer.
runtime::DecodeGraphShape toShape(const mla_decode_graph_shape_t &s);

} // namespace mla::capi

#endif // MLA_RUNTIME_CAPI_CAPI_H
