//===- CApi.cpp - What the C interface's files share ----------------------===//

#include "CApi.h"

#include "mla/Support/Diagnostics.h"

#include <climits>
#include <cmath>
#include <cstring>

using namespace mla::runtime;

/// Plan families are numbered across runtimes: a plan of one runtime's
/// layer never passes for another runtime's.
static std::atomic<uint64_t> nextPlanFamily{1};

uint64_t mla_runtime::planFamily(const std::string &fingerprint) {
  std::lock_guard<std::mutex> lock(mutex);
  auto [at, added] = planFamilies.try_emplace(fingerprint, 0);
  if (added)
    at->second = nextPlanFamily++;
  return at->second;
}

namespace mla::capi {

thread_local std::string lastError;

const char *lastErrorText() { return lastError.c_str(); }

mla_status_t succeed() {
  lastError.clear();
  return MLA_OK;
}

mla_status_t fail(mla_status_t status, const std::string &message) {
  lastError = message;
  return status;
}

mla_status_t fail(mla_status_t status, const char *fn,
                  const std::string &message) {
  return fail(status, std::string(fn) + ": " + message);
}

mla_status_t fail(mla_status_t status, const char *fn, llvm::Error error) {
  return fail(status, fn, llvm::toString(std::move(error)));
}

/// Sets the message without allocating more than it must: the handlers
/// below may run because memory ran out.
void setLastErrorNoThrow(const char *fn, const char *what) {
  try {
    lastError = std::string(fn) + ": " + what;
  } catch (...) {
    lastError.clear();
  }
}

/// Every field of the configuration (the DCP rank's place included), and
/// the backend, whose kernels the decode schedule follows. Not the prefill backend: a plan is the same
/// whichever kernel runs the prefill.
std::string planFingerprint(const MlaLayer &layer) {
  const MlaLayerConfig &c = layer.config();
  return c.selectionKey().str() + " scale=" + std::to_string(c.softmaxScale) +
         " workspace=" + std::to_string(c.workspaceTokens) +
         " max_model_len=" + std::to_string(c.maxModelLen) +
         " max_num_seqs=" + std::to_string(c.maxNumSeqs) +
         " backend=" + layer.selection().backend->name +
         // A DCP rank's plan reads its own share of the cache.
         " dcp=" + std::to_string(c.dcp.worldSize) + "/" +
         std::to_string(c.dcp.rank) + "/" + std::to_string(c.dcp.interleave);
}

std::string str(int64_t value) { return std::to_string(value); }

//===----------------------------------------------------------------------===//
// Element types and tensors
//===----------------------------------------------------------------------===//

std::optional<DType> toDType(mla_dtype_t dtype) {
  switch (dtype) {
  case MLA_DTYPE_F32:
    return DType::F32;
  case MLA_DTYPE_F16:
    return DType::F16;
  case MLA_DTYPE_BF16:
    return DType::BF16;
  case MLA_DTYPE_I32:
    return DType::I32;
  case MLA_DTYPE_I64:
    return DType::I64;
  case MLA_DTYPE_FP8_E4M3:
    return DType::FP8E4M3;
  case MLA_DTYPE_FP8_E5M2:
    return DType::FP8E5M2;
  }
  return std::nullopt;
}

mla_dtype_t fromDType(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return MLA_DTYPE_F32;
  case DType::F16:
    return MLA_DTYPE_F16;
  case DType::BF16:
    return MLA_DTYPE_BF16;
  case DType::I32:
    return MLA_DTYPE_I32;
  case DType::I64:
    return MLA_DTYPE_I64;
  case DType::FP8E4M3:
    return MLA_DTYPE_FP8_E4M3;
  case DType::FP8E5M2:
    return MLA_DTYPE_FP8_E5M2;
  }
  return MLA_DTYPE_F32;
}

std::string badDType(const std::string &what, mla_dtype_t dtype) {
  return what + " has an invalid dtype (" + str(static_cast<int64_t>(dtype)) +
         "; valid: MLA_DTYPE_F32, _F16, _BF16, _I32, _I64)";
}

mla_status_t toView(const char *fn, const std::string &what,
                    const mla_tensor_t &tensor, BufferView &view) {
  std::optional<DType> dtype = toDType(tensor.dtype);
  if (!dtype)
    return fail(MLA_ERROR_INVALID_ARGUMENT, fn, badDType(what, tensor.dtype));
  if (tensor.rank < 0 || tensor.rank > MLA_MAX_RANK)
    return fail(MLA_ERROR_INVALID_ARGUMENT, fn,
                what + " has rank " + str(tensor.rank) + ", must be 0 to " +
                    str(MLA_MAX_RANK));
  view.data = tensor.data;
  view.dtype = *dtype;
  view.shape.assign(tensor.shape, tensor.shape + tensor.rank);
  view.strides.assign(tensor.strides, tensor.strides + tensor.rank);
  for (int32_t d = 0; d < tensor.rank; ++d)
    if (tensor.shape[d] < 0)
      return fail(MLA_ERROR_INVALID_ARGUMENT, fn,
                  what + " has a negative size in dimension " + str(d) +
                      ": " + view.describe());
  return MLA_OK;
}

mla_status_t statusOf(const llvm::Error &error, mla_status_t otherwise) {
  return error.isA<mla::ArgumentError>() ? MLA_ERROR_INVALID_ARGUMENT
                                         : otherwise;
}

mla_status_t failCall(mla_status_t otherwise, const char *fn,
                      llvm::Error error) {
  mla_status_t status = statusOf(error, otherwise);
  return fail(status, fn, std::move(error));
}

//===----------------------------------------------------------------------===//
// Configuration and selection
//===----------------------------------------------------------------------===//

mla_status_t toLayerConfig(const char *fn, const mla_layer_config_t &c,
                           MlaLayerConfig &out) {
  struct Field {
    const char *name;
    int64_t value;
    int64_t min;
  };
  const Field fields[] = {
      {"num_heads", c.num_heads, 1},
      {"kv_lora_rank", c.kv_lora_rank, 1},
      {"qk_nope_head_dim", c.qk_nope_head_dim, 1},
      {"qk_rope_head_dim", c.qk_rope_head_dim, 1},
      {"v_head_dim", c.v_head_dim, 1},
      {"block_size", c.block_size, 1},
      {"decode_threshold", c.decode_threshold, 1},
      {"max_model_len", c.max_model_len, 1},
      {"max_num_seqs", c.max_num_seqs, 1},
      {"workspace_tokens", c.workspace_tokens, 0},
  };
  for (const Field &f : fields) {
    if (f.value < f.min)
      return fail(MLA_ERROR_INVALID_ARGUMENT, fn,
                  std::string("config->") + f.name + " must be " +
                      (f.min ? "positive" : "non-negative") + ", got " +
                      str(f.value));
    if (f.value > INT32_MAX)
      return fail(MLA_ERROR_INVALID_ARGUMENT, fn,
                  std::string("config->") + f.name + " is too large (" +
                      str(f.value) + ")");
  }
  for (auto [field, dtype] : {std::pair{"activation_dtype", c.activation_dtype},
                              std::pair{"cache_dtype", c.cache_dtype}}) {
    std::optional<DType> t = toDType(dtype);
    if (!t)
      return fail(MLA_ERROR_INVALID_ARGUMENT, fn,
                  badDType(std::string("config->") + field, dtype));
    bool cache = std::string_view(field) == "cache_dtype";
    if (cache ? !isCacheFormat(*t) : !isFloat(*t))
      return fail(MLA_ERROR_INVALID_ARGUMENT, fn,
                  std::string("config->") + field + " must be f32, f16" +
                      (cache ? ", bf16, fp8_e4m3 or fp8_e5m2" : " or bf16") +
                      ", got " + std::string(name(*t)));
  }
  if (!std::isfinite(c.softmax_scale) || c.softmax_scale < 0)
    return fail(MLA_ERROR_INVALID_ARGUMENT, fn,
                "config->softmax_scale must be finite and non-negative (0: "
                "the default), got " + std::to_string(c.softmax_scale));

  out = MlaLayerConfig();
  out.dims.numHeads = c.num_heads;
  out.dims.kvLoraRank = c.kv_lora_rank;
  out.dims.qkNopeHeadDim = c.qk_nope_head_dim;
  out.dims.ropeDim = c.qk_rope_head_dim;
  out.dims.vHeadDim = c.v_head_dim;
  out.activation = *toDType(c.activation_dtype);
  out.cacheDType = *toDType(c.cache_dtype);
  out.blockSize = c.block_size;
  out.softmaxScale = c.softmax_scale;
  out.decodeThreshold = c.decode_threshold;
  out.needsDecodeLse = c.needs_decode_lse != 0;
  out.wantsCudaGraphs = c.wants_cuda_graphs != 0;
  out.maxModelLen = c.max_model_len;
  out.maxNumSeqs = c.max_num_seqs;
  out.workspaceTokens = c.workspace_tokens;
  out.backend = c.backend ? c.backend : "";
  out.prefillBackend = c.prefill_backend ? c.prefill_backend : "";
  // Zero-initialized configs run without DCP; the layer checks the rest.
  out.dcp.worldSize = c.dcp_world_size == 0 ? 1 : c.dcp_world_size;
  out.dcp.rank = c.dcp_rank;
  out.dcp.interleave = c.dcp_interleave == 0 ? 1 : c.dcp_interleave;
  return MLA_OK;
}

SelectionText describeSelection(const Selection &s) {
  SelectionText text;
  text.backend = s.backend;
  text.source = s.source == ChoiceSource::Api ? MLA_BACKEND_SOURCE_REQUESTED
                : s.source == ChoiceSource::Environment
                    ? MLA_BACKEND_SOURCE_ENVIRONMENT
                    : MLA_BACKEND_SOURCE_PRIORITY;
  text.numSkipped = static_cast<int32_t>(s.skipped.size());
  for (const Rejection &r : s.skipped) {
    if (!text.skipped.empty())
      text.skipped += "\n";
    text.skipped += r.backend ? r.backend->name : std::string("?");
    text.skipped += ": ";
    for (size_t i = 0; i < r.reasons.size(); ++i)
      text.skipped += (i ? "; " : "") + r.reasons[i];
  }
  text.summary = s.str();
  return text;
}

static_assert(int(CudaGraphSupport::NEVER) == MLA_CUDA_GRAPHS_NEVER &&
                  int(CudaGraphSupport::UNIFORM_SINGLE_TOKEN_DECODE) ==
                      MLA_CUDA_GRAPHS_UNIFORM_SINGLE_TOKEN_DECODE &&
                  int(CudaGraphSupport::UNIFORM_BATCH) ==
                      MLA_CUDA_GRAPHS_UNIFORM_BATCH &&
                  int(CudaGraphSupport::ALWAYS) == MLA_CUDA_GRAPHS_ALWAYS,
              "the C levels are the C++ ones");

mla_backend_selection_t toCSelection(const SelectionText &text,
                                     const char *skipped, const char *summary) {
  mla_backend_selection_t c;
  c.backend = text.backend->name.c_str();
  c.source = text.source;
  c.num_skipped = text.numSkipped;
  c.skipped = skipped;
  c.summary = summary;
  c.description = text.backend->description.c_str();
  c.cuda_graphs =
      static_cast<mla_cuda_graph_support_t>(text.backend->cudaGraphs);
  return c;
}

//===----------------------------------------------------------------------===//
// Layer buffers
//===----------------------------------------------------------------------===//

/// The weights as views; their types and shapes are checked by
/// MlaLayer::create.
mla_status_t toWeights(const char *fn, const mla_layer_weights_t &w,
                       MlaLayerWeights &out) {
  if (mla_status_t s = toView(fn, "'kv_b_proj'", w.kv_b_proj, out.kvBProj))
    return s;
  if (mla_status_t s = toView(fn, "'w_uk_t'", w.w_uk_t, out.wUkT))
    return s;
  return toView(fn, "'w_uv'", w.w_uv, out.wUv);
}

/// The step's tensors as views; their types and shapes are checked by
/// MlaLayer::forward.
mla_status_t toForwardArgs(const char *fn, const mla_forward_args_t &a,
                           MlaForwardArgs &out) {
  struct Arg {
    const char *name;
    const mla_tensor_t &tensor;
    BufferView &view;
  };
  const Arg args[] = {{"q", a.q, out.q},
                      {"kv_c", a.kv_c, out.kvC},
                      {"k_pe", a.k_pe, out.kPe},
                      {"kv_cache", a.kv_cache, out.kvCache},
                      {"output", a.output, out.output}};
  for (const Arg &arg : args)
    if (mla_status_t s = toView(fn, std::string("'") + arg.name + "'",
                                arg.tensor, arg.view))
      return s;
  // The decode LSE and the FP8 scale are optional: a zeroed tensor means
  // "none".
  if (a.decode_lse.data || a.decode_lse.rank != 0)
    if (mla_status_t s =
            toView(fn, "'decode_lse'", a.decode_lse, out.decodeLse))
      return s;
  if (a.kv_scale.data || a.kv_scale.rank != 0)
    return toView(fn, "'kv_scale'", a.kv_scale, out.kvScale);
  return MLA_OK;
}

mla_status_t toMetadata(const char *fn, const mla_batch_metadata_t &m,
                        int64_t num_cache_blocks, CommonAttentionMetadata &c) {
  // The counts size the arrays read below, so they are checked first.
  struct Count {
    const char *name;
    int64_t value;
  };
  const Count counts[] = {{"num_reqs", m.num_reqs},
                          {"max_blocks", m.max_blocks},
                          {"num_actual_tokens", m.num_actual_tokens},
                          {"num_slots", m.num_slots},
                          {"num_cache_blocks", num_cache_blocks}};
  for (const Count &count : counts) {
    if (count.value < 0)
      return fail(MLA_ERROR_INVALID_METADATA, fn,
                  std::string(count.name) + " must be non-negative, got " +
                      str(count.value));
    if (count.value > INT32_MAX)
      return fail(MLA_ERROR_INVALID_METADATA, fn,
                  std::string(count.name) + " is too large (" +
                      str(count.value) + ")");
  }
  const int64_t tableSize = m.num_reqs * m.max_blocks;
  const int64_t numSlots = m.num_slots ? m.num_slots : m.num_actual_tokens;
  if (!m.query_start_loc)
    return fail(MLA_ERROR_INVALID_ARGUMENT, fn,
                "metadata->query_start_loc is NULL (it has num_reqs + 1 "
                "entries)");
  if (m.num_reqs > 0 && !m.seq_lens)
    return fail(MLA_ERROR_INVALID_ARGUMENT, fn,
                "metadata->seq_lens is NULL but num_reqs is " +
                    str(m.num_reqs));
  if (tableSize > 0 && !m.block_table)
    return fail(MLA_ERROR_INVALID_ARGUMENT, fn,
                "metadata->block_table is NULL but num_reqs * max_blocks "
                "is " +
                    str(tableSize));
  if (numSlots > 0 && !m.slot_mapping)
    return fail(MLA_ERROR_INVALID_ARGUMENT, fn,
                "metadata->slot_mapping is NULL but it has " + str(numSlots) +
                    " entries");

  c.queryStartLoc.assign(m.query_start_loc, m.query_start_loc + m.num_reqs + 1);
  if (m.num_reqs > 0)
    c.seqLens.assign(m.seq_lens, m.seq_lens + m.num_reqs);
  if (tableSize > 0)
    c.blockTable.assign(m.block_table, m.block_table + tableSize);
  if (numSlots > 0)
    c.slotMapping.assign(m.slot_mapping, m.slot_mapping + numSlots);
  c.maxBlocks = m.max_blocks;
  c.numReqs = m.num_reqs;
  c.numActualTokens = m.num_actual_tokens;
  c.maxQueryLen = m.max_query_len;
  c.maxSeqLen = m.max_seq_len;

  return MLA_OK;
}

DecodeGraphShape toShape(const mla_decode_graph_shape_t &s) {
  return {s.max_decodes, s.query_len, s.max_blocks_per_request,
          s.num_cache_blocks, s.max_splits_per_request};
}

} // namespace mla::capi
