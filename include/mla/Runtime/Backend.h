//===- Backend.h - Attention backends and what they support -----*- C++ -*-===//
//
// An attention backend is one way of running MLA attention (a device and a
// kernel strategy). Each declares, as data, what it supports: devices and
// compute capabilities, dtypes, cache block sizes, head counts, MLA dims,
// multi-token decode, returning the decode LSE and CUDA-graph capture.
// `Backend::validate` compares a configuration against that declaration and
// names every mismatch, so a selector can say why a backend was skipped.
//
// A backend has a role: the decode (the layer's decode and the kernels
// around it) or the chunked prefill. The two are chosen apart, each from
// its own backends and priorities, as vLLM chooses MLA prefill backends
// apart from the decode's: a layer may pair the wgmma decode with the
// mma.sync prefill.
//
// This mirrors vLLM's AttentionBackend.validate_configuration, with one
// readable reason per mismatch instead of a fixed phrase.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_BACKEND_H
#define MLA_RUNTIME_BACKEND_H

#include "mla/Support/DType.h"
#include "mla/Support/MlaDims.h"
#include "mla/Target/KernelStrategy.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mla {

enum class DeviceKind : uint8_t { CPU, CUDA };

std::string_view name(DeviceKind kind);

/// A CUDA compute capability. Kept here (rather than using GpuTarget) so
/// backend selection needs no MLIR.
struct DeviceCapability {
  int major = 0;
  int minor = 0;

  /// 90 for 9.0, as vLLM's DeviceCapability.to_int; orders capabilities.
  int toInt() const { return major * 10 + minor; }
  /// "9.0".
  std::string str() const;

  friend bool operator==(DeviceCapability a, DeviceCapability b) {
    return a.major == b.major && a.minor == b.minor;
  }
  friend bool operator!=(DeviceCapability a, DeviceCapability b) {
    return !(a == b);
  }
  friend bool operator<(DeviceCapability a, DeviceCapability b) {
    return a.toInt() < b.toInt();
  }
  friend bool operator>(DeviceCapability a, DeviceCapability b) {
    return b < a;
  }
};

/// How far a backend's calls can be captured into CUDA graphs, as vLLM's
/// AttentionCGSupport (the levels are ordered: each includes the ones
/// below it).
enum class CudaGraphSupport : uint8_t {
  /// No capture.
  NEVER = 0,
  /// Batches of decodes with one query token each.
  UNIFORM_SINGLE_TOKEN_DECODE = 1,
  /// Batches whose requests all have the same query length (speculative
  /// decoding: 1 + the number of speculative tokens).
  UNIFORM_BATCH = 2,
  /// Any batch, mixed prefill and decode included.
  ALWAYS = 3,
};

std::string_view name(CudaGraphSupport support);

/// What a backend's kernels run in a layer. Decode: the cache write, the
/// decode query, the decode attention and the V up-projection (the decode
/// backend decides the split schedule and CUDA-graph capture). Prefill:
/// the chunked prefill (new tokens and cached context, its gather,
/// kv_up_proj and merges), which no CUDA graph holds.
enum class BackendRole : uint8_t { Decode, Prefill };

/// Everything backend selection depends on, in a hashable form: the
/// selector's cache key (vLLM's AttentionSelectorConfig). Two configs that
/// differ in any field are different keys.
struct AttentionConfig {
  DeviceKind device = DeviceKind::CPU;
  /// Meaningful only for CUDA; CPU configs leave it 0.0.
  DeviceCapability capability;

  DType dtype = DType::BF16;        ///< activations (q, outputs)
  DType kvCacheDType = DType::BF16; ///< the latent KV cache
  int blockSize = 64;               ///< tokens per KV-cache block
  /// Heads on this device and the MLA dims (DeepSeek-V2/V3/R1 defaults).
  MlaDims dims;

  /// The most query tokens one request has in a decode step: 1, or
  /// 1 + the number of speculative tokens.
  int maxQueryLen = 1;
  /// Decode must return its LSE (decode context parallelism merges partial
  /// results across ranks with it).
  bool needsDecodeLse = false;
  /// The caller wants to capture decode steps into CUDA graphs.
  bool wantsCudaGraphs = false;

  /// The defaults on a CPU.
  static AttentionConfig cpu();
  /// The defaults on a CUDA device of compute capability major.minor.
  static AttentionConfig cuda(int major, int minor);

  /// Every field, for messages: "{device=CUDA 9.0, dtype=bf16, ...}".
  std::string str() const;
  size_t hash() const;

  friend bool operator==(const AttentionConfig &a, const AttentionConfig &b);
  friend bool operator!=(const AttentionConfig &a, const AttentionConfig &b) {
    return !(a == b);
  }
};

/// A block size a backend's kernels accept: exactly `size`, or any multiple
/// of it (vLLM's `int | MultipleOf`).
struct BlockSizeRule {
  int size = 1;
  bool multiple = false;

  static BlockSizeRule exactly(int size) { return {size, false}; }
  static BlockSizeRule multipleOf(int size) { return {size, true}; }
  bool accepts(int blockSize) const;
  /// "64" or "a multiple of 16".
  std::string str() const;
};

/// MLA dims a backend's kernels are written for; 0 accepts any value.
struct MlaDimsRule {
  int64_t kvLoraRank = 0;
  int64_t ropeDim = 0;
  int64_t qkNopeHeadDim = 0;
  int64_t vHeadDim = 0;
  /// Every dim must be a multiple of this (tensor-core tiles).
  int64_t multipleOf = 1;
};

/// A head dim of the prefill attention (qk: qk_nope_head_dim + rope dim,
/// or v): a multiple of `multipleOf`, at most `max` (0: no maximum). The
/// prefill kernels cut their tiles along these, which MlaDimsRule's
/// per-dim rules cannot say for the qk sum.
struct HeadDimRule {
  int64_t multipleOf = 1;
  int64_t max = 0;
};

/// One attention backend: a name and a declaration of what it supports.
/// Plain data, so adding a backend is adding a table entry
/// (runtime/backends/BuiltinBackends.cpp, BuiltinPrefillBackends.cpp).
struct Backend {
  std::string name;
  /// One line for listings.
  std::string description;
  /// The decode backends and the prefill backends are registries apart
  /// (BackendRegistry::builtin(role)).
  BackendRole role = BackendRole::Decode;

  /// False for a backend that is declared but cannot run (not built, not
  /// implemented); validate then names `unavailableReason` first.
  bool available = true;
  std::string unavailableReason;

  DeviceKind device = DeviceKind::CUDA;
  /// The GPU kernel strategy the backend's kernels are compiled with; none
  /// for CPU backends.
  std::optional<KernelStrategy> kernelStrategy;
  /// Inclusive range, CUDA backends only; no maximum = any newer chip.
  DeviceCapability minCapability;
  std::optional<DeviceCapability> maxCapability;

  std::vector<DType> dtypes;
  std::vector<DType> kvCacheDTypes;
  /// Any one rule accepting the block size is enough; empty accepts any.
  std::vector<BlockSizeRule> blockSizes;

  int64_t minHeads = 1;
  std::optional<int64_t> maxHeads;
  int64_t headsMultipleOf = 1;

  MlaDimsRule dims;
  /// The prefill attention's qk and v head dims (prefill backends).
  HeadDimRule qkHeadDim;
  HeadDimRule vHeadDim;

  /// Decode with more than one query token per request. This and the two
  /// below concern the decode: a prefill backend's validate skips them.
  bool supportsMultiTokenQuery = true;
  bool returnsDecodeLse = true;
  CudaGraphSupport cudaGraphs = CudaGraphSupport::NEVER;

  /// Every reason `config` cannot run on this backend, one readable string
  /// each ("block size 16 not supported (requires 64)"); empty when it can.
  std::vector<std::string> validate(const AttentionConfig &config) const;
};

/// The CUDA-graph level capturing `config`'s decode steps needs: uniform
/// single-token decode for Sq = 1, uniform batches for speculative decoding.
CudaGraphSupport requiredCudaGraphSupport(const AttentionConfig &config);

} // namespace mla

namespace std {
template <> struct hash<mla::AttentionConfig> {
  size_t operator()(const mla::AttentionConfig &config) const {
    return config.hash();
  }
};
} // namespace std

#endif // MLA_RUNTIME_BACKEND_H
