//===- Backend.cpp - Attention backends and what they support -------------===//

#include "mla/Runtime/Backend.h"

#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/STLExtras.h"

#include <tuple>

namespace mla {

std::string_view name(DeviceKind kind) {
  switch (kind) {
  case DeviceKind::CPU:
    return "CPU";
  case DeviceKind::CUDA:
    return "CUDA";
  }
  return "?";
}

std::string_view name(CudaGraphSupport support) {
  switch (support) {
  case CudaGraphSupport::NEVER:
    return "NEVER";
  case CudaGraphSupport::UNIFORM_SINGLE_TOKEN_DECODE:
    return "UNIFORM_SINGLE_TOKEN_DECODE";
  case CudaGraphSupport::UNIFORM_BATCH:
    return "UNIFORM_BATCH";
  case CudaGraphSupport::ALWAYS:
    return "ALWAYS";
  }
  return "?";
}

std::string DeviceCapability::str() const {
  return std::to_string(major) + "." + std::to_string(minor);
}

//===----------------------------------------------------------------------===//
// AttentionConfig
//===----------------------------------------------------------------------===//

AttentionConfig AttentionConfig::cpu() { return AttentionConfig(); }

AttentionConfig AttentionConfig::cuda(int major, int minor) {
  AttentionConfig config;
  config.device = DeviceKind::CUDA;
  config.capability = {major, minor};
  return config;
}

namespace {

const char *boolStr(bool value) { return value ? "true" : "false"; }

/// The fields in one tuple, so equality and hashing cannot miss one.
auto fields(const AttentionConfig &c) {
  return std::make_tuple(c.device, c.capability.major, c.capability.minor,
                         c.dtype, c.kvCacheDType, c.blockSize, c.dims.numHeads,
                         c.dims.kvLoraRank, c.dims.ropeDim,
                         c.dims.qkNopeHeadDim, c.dims.vHeadDim,
                         c.maxQueryLen, c.needsDecodeLse, c.wantsCudaGraphs);
}

} // namespace

std::string AttentionConfig::str() const {
  std::string device(name(this->device));
  if (this->device == DeviceKind::CUDA)
    device += " " + capability.str();
  return "{device=" + device + ", dtype=" + std::string(name(dtype)) +
         ", kv_cache_dtype=" + std::string(name(kvCacheDType)) +
         ", block_size=" + std::to_string(blockSize) +
         ", num_heads=" + std::to_string(dims.numHeads) +
         ", kv_lora_rank=" + std::to_string(dims.kvLoraRank) +
         ", rope_dim=" + std::to_string(dims.ropeDim) +
         ", qk_nope_head_dim=" + std::to_string(dims.qkNopeHeadDim) +
         ", v_head_dim=" + std::to_string(dims.vHeadDim) +
         ", max_query_len=" + std::to_string(maxQueryLen) +
         ", decode_lse=" + boolStr(needsDecodeLse) +
         ", cuda_graphs=" + boolStr(wantsCudaGraphs) + "}";
}

size_t AttentionConfig::hash() const {
  return std::apply(
      [](const auto &...field) {
        return static_cast<size_t>(llvm::hash_combine(field...));
      },
      fields(*this));
}

bool operator==(const AttentionConfig &a, const AttentionConfig &b) {
  return fields(a) == fields(b);
}

//===----------------------------------------------------------------------===//
// Backend
//===----------------------------------------------------------------------===//

bool BlockSizeRule::accepts(int blockSize) const {
  return multiple ? blockSize % size == 0 : blockSize == size;
}

std::string BlockSizeRule::str() const {
  return multiple ? "a multiple of " + std::to_string(size)
                  : std::to_string(size);
}

CudaGraphSupport requiredCudaGraphSupport(const AttentionConfig &config) {
  return config.maxQueryLen > 1 ? CudaGraphSupport::UNIFORM_BATCH
                                : CudaGraphSupport::UNIFORM_SINGLE_TOKEN_DECODE;
}

namespace {

std::string dtypeList(const std::vector<DType> &dtypes) {
  std::string list;
  for (DType t : dtypes)
    list += (list.empty() ? "" : ", ") + std::string(name(t));
  return list;
}

/// "num heads 8 not supported (supports multiples of 16 in 16..128)".
std::string headsReason(const Backend &b, int64_t numHeads) {
  std::string range = std::to_string(b.minHeads) + ".." +
                      (b.maxHeads ? std::to_string(*b.maxHeads) : "");
  std::string supports =
      b.headsMultipleOf > 1
          ? "multiples of " + std::to_string(b.headsMultipleOf) + " in " + range
          : range;
  return "num heads " + std::to_string(numHeads) + " not supported (supports " +
         supports + ")";
}

/// Checks one MLA dim against a fixed value (0: any) and the alignment.
void checkDim(std::vector<std::string> &reasons, const char *dimName,
              int64_t value, int64_t required, int64_t multipleOf) {
  std::string prefix = std::string(dimName) + " " + std::to_string(value);
  if (value < 1)
    reasons.push_back(prefix + " invalid (must be positive)");
  else if (required != 0 && value != required)
    reasons.push_back(prefix + " not supported (requires " +
                      std::to_string(required) + ")");
  else if (value % multipleOf != 0)
    reasons.push_back(prefix + " not supported (requires a multiple of " +
                      std::to_string(multipleOf) + ")");
}

/// Checks a prefill head dim (a sum of dims, or v) against its rule. A
/// non-positive part was named invalid already.
void checkHeadDim(std::vector<std::string> &reasons, const std::string &what,
                  int64_t value, const HeadDimRule &rule) {
  if (value < 1 || (value % rule.multipleOf == 0 &&
                    (rule.max == 0 || value <= rule.max)))
    return;
  std::string needs;
  if (rule.multipleOf > 1)
    needs = "a multiple of " + std::to_string(rule.multipleOf);
  if (rule.max > 0)
    needs += (needs.empty() ? "" : " ") + std::string("up to ") +
             std::to_string(rule.max);
  reasons.push_back(what + " " + std::to_string(value) +
                    " not supported (requires " + needs + ")");
}

} // namespace

std::vector<std::string> Backend::validate(const AttentionConfig &c) const {
  std::vector<std::string> reasons;
  // First, so a listing of skipped backends leads with the decisive reason.
  if (!available)
    reasons.push_back(unavailableReason.empty() ? "not available"
                                                : unavailableReason);

  if (c.device != device)
    reasons.push_back("device " + std::string(mla::name(c.device)) +
                      " not supported (requires " +
                      std::string(mla::name(device)) + ")");
  // The capability of another kind of device means nothing here.
  if (c.device == DeviceKind::CUDA && device == DeviceKind::CUDA) {
    if (c.capability < minCapability)
      reasons.push_back("compute capability " + c.capability.str() +
                        " below minimum " + minCapability.str());
    if (maxCapability && c.capability > *maxCapability)
      reasons.push_back("compute capability " + c.capability.str() +
                        " above maximum " + maxCapability->str());
  }

  if (!llvm::is_contained(dtypes, c.dtype))
    reasons.push_back("activation dtype " + std::string(mla::name(c.dtype)) +
                      " not supported (supports " + dtypeList(dtypes) + ")");
  if (!llvm::is_contained(kvCacheDTypes, c.kvCacheDType))
    reasons.push_back(
        "kv-cache dtype " + std::string(mla::name(c.kvCacheDType)) +
        " not supported (supports " + dtypeList(kvCacheDTypes) + ")");

  if (c.blockSize < 1) {
    reasons.push_back("block size " + std::to_string(c.blockSize) +
                      " invalid (must be positive)");
  } else if (!blockSizes.empty() &&
             llvm::none_of(blockSizes, [&](const BlockSizeRule &rule) {
               return rule.accepts(c.blockSize);
             })) {
    std::string accepted;
    for (const BlockSizeRule &rule : blockSizes)
      accepted += (accepted.empty() ? "" : " or ") + rule.str();
    reasons.push_back("block size " + std::to_string(c.blockSize) +
                      " not supported (requires " + accepted + ")");
  }

  const MlaDims &d = c.dims;
  if (d.numHeads < minHeads || (maxHeads && d.numHeads > *maxHeads) ||
      d.numHeads % headsMultipleOf != 0)
    reasons.push_back(headsReason(*this, d.numHeads));

  checkDim(reasons, "kv_lora_rank", d.kvLoraRank, dims.kvLoraRank,
           dims.multipleOf);
  checkDim(reasons, "rope dim", d.ropeDim, dims.ropeDim, dims.multipleOf);
  checkDim(reasons, "qk_nope_head_dim", d.qkNopeHeadDim, dims.qkNopeHeadDim,
           dims.multipleOf);
  checkDim(reasons, "v_head_dim", d.vHeadDim, dims.vHeadDim, dims.multipleOf);
  if (d.qkNopeHeadDim > 0 && d.ropeDim > 0)
    checkHeadDim(reasons, "qk head dim (qk_nope_head_dim + rope dim)",
                 d.qkHeadDim(), qkHeadDim);
  checkHeadDim(reasons, "v_head_dim", d.vHeadDim, vHeadDim);

  // A prefill backend's kernels run no decode: the rules below are the
  // decode backend's to answer.
  if (role == BackendRole::Prefill)
    return reasons;

  if (c.maxQueryLen < 1)
    reasons.push_back("max query length " + std::to_string(c.maxQueryLen) +
                      " invalid (must be at least 1)");
  else if (c.maxQueryLen > 1 && !supportsMultiTokenQuery)
    reasons.push_back("max query length " + std::to_string(c.maxQueryLen) +
                      " not supported (single-token decode only)");

  if (c.needsDecodeLse && !returnsDecodeLse)
    reasons.push_back("returning the decode LSE not supported (needed for "
                      "decode context parallelism)");

  // CUDA graphs capture CUDA work only: on a CPU the wish has no effect, so
  // it cannot make a CPU backend unusable.
  if (c.wantsCudaGraphs && c.device == DeviceKind::CUDA) {
    CudaGraphSupport needed = requiredCudaGraphSupport(c);
    if (cudaGraphs < needed)
      reasons.push_back("CUDA graph capture not supported (supports " +
                        std::string(mla::name(cudaGraphs)) +
                        "; max query length " + std::to_string(c.maxQueryLen) +
                        " needs " + std::string(mla::name(needed)) + ")");
  }
  return reasons;
}

} // namespace mla
