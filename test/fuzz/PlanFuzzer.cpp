//===- PlanFuzzer.cpp - Fuzz target: batch metadata through the planners --===//
//
// Input: bytes read as one batch's metadata (ByteReader.h), either built
// consistent and then bent in a few fields, or every field raw. The batch
// goes through everything the host does with an engine's metadata before
// a kernel runs: validate, decodesFirstOrder / applyOrder, a CPU layer's
// plan and planDecodeStep (against a graph shape also read from the
// input), the chunked-context plan, and the decode split planner under the
// schedules of every GPU strategy on H100- and A100-sized devices (which
// the CPU layer does not use) and under a raw config, and a decode context
// parallel group's local lengths and slots. Each may refuse the
// input with an error; none may crash, overflow or allocate without bound,
// and what each returns must hold together (checked below).
//
//===----------------------------------------------------------------------===//

#include "ByteReader.h"
#include "FuzzInput.h"

#include "mla/Runtime/Metadata.h"
#include "mla/Runtime/MetadataChunkedContext.h"
#include "mla/Runtime/MetadataDcp.h"
#include "mla/Runtime/MetadataDecodeSplits.h"
#include "mla/Runtime/MlaLayer.h"
#include "mla/Runtime/Runtime.h"

#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

using namespace mla;
using namespace mla::fuzz;
using namespace mla::runtime;

namespace {

constexpr int64_t kBlockSize = 16;

/// A CPU runtime with two small layers: plain decodes, and decodes of up
/// to 4 tokens (speculative decoding).
struct Layers {
  std::unique_ptr<Runtime> runtime;
  std::vector<DeviceAllocation> weights;
  std::unique_ptr<MlaLayer> decodeOne, decodeFour;
};

BufferView allocateBf16(Layers &layers, std::vector<int64_t> shape) {
  int64_t elements = 1;
  for (int64_t s : shape)
    elements *= s;
  auto allocation = cantFail(layers.runtime->allocate(size_t(elements) * 2));
  BufferView view = BufferView::contiguous(allocation.data(), DType::BF16, shape);
  layers.weights.push_back(std::move(allocation));
  return view;
}

std::unique_ptr<MlaLayer> makeLayer(Layers &layers, int64_t decodeThreshold) {
  MlaLayerConfig config;
  config.dims = {4, 128, 64, 32, 64};
  config.blockSize = kBlockSize;
  config.decodeThreshold = decodeThreshold;
  config.workspaceTokens = 256;
  const MlaDims &d = config.dims;
  MlaLayerWeights w = {
      allocateBf16(layers, {d.kvLoraRank, d.numHeads, d.qkNopeHeadDim + d.vHeadDim}),
      allocateBf16(layers, {d.numHeads, d.qkNopeHeadDim, d.kvLoraRank}),
      allocateBf16(layers, {d.numHeads, d.kvLoraRank, d.vHeadDim})};
  auto layer = MlaLayer::create(*layers.runtime, config, w);
  if (!layer)
    fuzzDefect("creating the CPU layer failed: " + llvm::toString(layer.takeError()));
  return std::move(*layer);
}

Layers &layers() {
  static Layers instance = [] {
    Layers l;
    RuntimeOptions options;
    options.device = DevicePreference::Cpu;
    l.runtime = cantFail(Runtime::create(options));
    l.decodeOne = makeLayer(l, 1);
    l.decodeFour = makeLayer(l, 4);
    return l;
  }();
  return instance;
}

//===----------------------------------------------------------------------===//
// Reading a batch
//===----------------------------------------------------------------------===//

/// A batch makeCommonAttentionMetadata builds (consistent unless the block
/// table is too narrow), in any order of decodes and prefills.
CommonAttentionMetadata consistentBatch(ByteReader &in, int64_t numCacheBlocks) {
  int64_t numReqs = in.range(0, 12);
  std::vector<int32_t> queryLens, seqLens;
  int64_t maxBlocks = in.range(0, 2);
  for (int64_t b = 0; b < numReqs; ++b) {
    queryLens.push_back(int32_t(in.flag() ? in.range(0, 4) : in.range(0, 64)));
    seqLens.push_back(queryLens.back() + int32_t(in.range(0, 600)));
    maxBlocks = std::max<int64_t>(maxBlocks, (seqLens.back() + kBlockSize - 1) / kBlockSize);
  }
  std::vector<int32_t> table(numReqs * maxBlocks);
  for (int32_t &page : table)
    page = int32_t(in.range(0, std::max<int64_t>(numCacheBlocks - 1, 0)));
  CommonAttentionMetadata m =
      makeCommonAttentionMetadata(queryLens, seqLens, table, maxBlocks, kBlockSize);
  for (int64_t pad = in.range(0, 3); pad > 0; --pad)
    m.slotMapping.push_back(kPaddingSlot);
  return m;
}

/// Sets one field (or one element of one) to a value read from the input.
void bendOneField(ByteReader &in, CommonAttentionMetadata &m) {
  auto element = [&in](auto &vector) {
    if (!vector.empty())
      vector[in.range(0, int64_t(vector.size()) - 1)] =
          in.flag() ? in.any32() : int32_t(in.range(-2, 700));
  };
  switch (in.range(0, 9)) {
  case 0: element(m.queryStartLoc); break;
  case 1: element(m.seqLens); break;
  case 2: element(m.blockTable); break;
  case 3:
    if (!m.slotMapping.empty())
      m.slotMapping[in.range(0, int64_t(m.slotMapping.size()) - 1)] =
          in.flag() ? in.any64() : in.range(-2, 4000);
    break;
  case 4: m.numReqs = in.flag() ? in.any64() : in.range(-1, 13); break;
  case 5: m.numActualTokens = in.flag() ? in.any64() : in.range(-1, 800); break;
  case 6: m.maxQueryLen = in.flag() ? in.any64() : in.range(-1, 70); break;
  case 7: m.maxSeqLen = in.flag() ? in.any64() : in.range(-1, 700); break;
  case 8: m.maxBlocks = in.flag() ? in.any64() : in.range(-1, 50); break;
  default:
    if (!m.seqLens.empty())
      m.seqLens.pop_back();
    break;
  }
}

/// Every field raw, every vector of any length up to 16.
CommonAttentionMetadata rawBatch(ByteReader &in) {
  CommonAttentionMetadata m;
  auto fill = [&in](auto &vector, bool wide) {
    vector.resize(in.range(0, 16));
    for (auto &v : vector)
      v = wide ? in.any64() : in.any32();
  };
  fill(m.queryStartLoc, false);
  fill(m.seqLens, false);
  fill(m.blockTable, false);
  fill(m.slotMapping, true);
  m.maxBlocks = in.any64();
  m.numReqs = in.any64();
  m.numActualTokens = in.any64();
  m.maxQueryLen = in.any64();
  m.maxSeqLen = in.any64();
  return m;
}

//===----------------------------------------------------------------------===//
// What a successful result must satisfy
//===----------------------------------------------------------------------===//

void expect(bool holds, const std::string &what) {
  if (!holds)
    fuzzDefect(what);
}

/// Each request's splits cover [0, seq_len) in order, as many as planned.
void checkSplits(const DecodeSplitPlan &p, llvm::ArrayRef<int32_t> seqLens,
                 int64_t maxSplitsPerRequest) {
  expect(p.numRequests() == int64_t(seqLens.size()) &&
             p.cuNumSplits.size() == seqLens.size() + 1 && p.cuNumSplits[0] == 0,
         "split plan sizes do not match the batch");
  for (size_t b = 0; b < seqLens.size(); ++b) {
    int64_t n = p.numSplits[b];
    expect(n >= 1, "a request has no split");
    expect(maxSplitsPerRequest <= 0 || n <= maxSplitsPerRequest,
           "a request has more splits than its cap");
    expect(p.cuNumSplits[b + 1] - p.cuNumSplits[b] == n,
           "cu_num_splits does not add up num_splits");
    expect(p.splitBegin(b, 0) == 0 && p.splitEnd(b, n - 1) == seqLens[b],
           "a request's splits do not cover its sequence");
    // Raw configs can plan millions of splits: the first and last 64 are
    // checked in order.
    for (int64_t s = 0; s < n; s = (s == 63 && n > 128) ? n - 64 : s + 1)
      expect(p.splitBegin(b, s) <= p.splitEnd(b, s), "a split ends before it begins");
  }
}

/// Every chunk fits the workspace and the chunks add up each context.
void checkChunks(const ChunkedContextPlan &c, llvm::ArrayRef<int32_t> contextLens) {
  expect(c.numPrefills == int64_t(contextLens.size()),
         "chunk plan sizes do not match the batch");
  std::vector<int64_t> covered(contextLens.size(), 0);
  for (int64_t k = 0; k < c.numChunks; ++k) {
    expect(c.chunkSeqTot[k] <= c.workspaceTokens, "a chunk overflows the workspace");
    for (int64_t b = 0; b < c.numPrefills; ++b)
      covered[b] += c.chunkSeqLens[k * c.numPrefills + b];
  }
  for (size_t b = 0; b < contextLens.size(); ++b)
    expect(covered[b] == contextLens[b], "the chunks do not add up a context");
}

/// A plan of `requests` requests and `tokens` tokens (the batch's, or
/// those of the shape it was padded to).
void checkPlan(const MlaStepPlan &plan, int64_t requests, int64_t tokens) {
  expect(plan.split.numDecodes + plan.split.numPrefills == requests,
         "decodes and prefills do not add up the requests");
  expect(plan.split.numDecodeTokens + plan.split.numPrefillTokens == tokens,
         "decode and prefill tokens do not add up the batch");
  expect(int64_t(plan.decodeSeqLens.size()) >= plan.split.numDecodes,
         "fewer decode sequence lengths than decodes");
  // The decode and prefill parts are planned only when there are any.
  if (plan.split.numDecodes > 0)
    checkSplits(plan.decodeSplits, plan.decodeSeqLens, 0);
  if (plan.split.numPrefills > 0)
    checkChunks(plan.prefill.chunks, plan.prefill.chunks.contextLens);
}

//===----------------------------------------------------------------------===//
// The planners
//===----------------------------------------------------------------------===//

void planThroughLayer(ByteReader &in, const MlaLayer &layer,
                      const CommonAttentionMetadata &m, int64_t numCacheBlocks) {
  if (auto plan = layer.plan(m, numCacheBlocks))
    checkPlan(*plan, m.numReqs, m.numActualTokens);
  else
    llvm::consumeError(plan.takeError());

  // Shapes the layer accepts cost memory in proportion (a padded block
  // table of decodes x pages): the raw ones stay under 16M entries, or
  // take any value, which the layer must refuse.
  DecodeGraphShape shape;
  bool raw = in.flag();
  auto wide = [&in] { return in.flag() ? in.any64() : in.range(-2, 4096); };
  shape.maxDecodes = raw ? wide() : in.range(-1, 16);
  shape.queryLen = raw ? in.any64() : in.range(0, 5);
  shape.maxBlocksPerRequest = raw ? wide() : in.range(-1, 48);
  shape.numCacheBlocks = raw ? in.any64() : numCacheBlocks;
  shape.maxSplitsPerRequest = raw ? in.any64() : in.range(-1, 8);
  if (auto plan = layer.planDecodeStep(m, shape)) {
    checkPlan(*plan, shape.maxDecodes, shape.maxDecodes * shape.queryLen);
    expect(plan->split.numPrefills == 0 && m.numReqs <= shape.maxDecodes,
           "a padded decode plan holds prefills or more requests than fit");
    expect(int64_t(plan->decodeSeqLens.size()) == shape.maxDecodes,
           "a padded decode plan is not as long as its shape");
  } else {
    llvm::consumeError(plan.takeError());
  }
}

/// The reorder keeps a batch valid or invalid.
void reorder(const CommonAttentionMetadata &m, int64_t numCacheBlocks,
             int64_t threshold) {
  auto order = decodesFirstOrder(m, threshold);
  if (!order) {
    llvm::consumeError(order.takeError());
    return;
  }
  auto ordered = applyOrder(m, *order);
  if (!ordered) {
    llvm::consumeError(ordered.takeError());
    return;
  }
  llvm::Error before = validate(m, numCacheBlocks, kBlockSize);
  llvm::Error after = validate(*ordered, numCacheBlocks, kBlockSize);
  bool same = bool(before) == bool(after), valid = !after;
  llvm::consumeError(std::move(before));
  llvm::consumeError(std::move(after));
  expect(same, "reordering a batch changed whether it is valid");
  // Chunks are planned for validated batches, as the layer does (a raw
  // batch's contexts of 2^31 tokens plan millions of chunks: correct, only
  // slow).
  if (!valid)
    return;
  auto chunks = buildChunkedPrefillMetadata(*ordered, 256, kBlockSize, threshold);
  if (chunks)
    checkChunks(chunks->chunks, chunks->chunks.contextLens);
  else
    llvm::consumeError(chunks.takeError());
}

/// The GPU schedules' split plans over the batch's sequence lengths.
void planGpuSplits(ByteReader &in, llvm::ArrayRef<int32_t> seqLens) {
  DecodeKernelShape shape;
  shape.strategy = KernelStrategy(in.range(0, 2));
  shape.operandTypes = in.flag() ? DecodeOperandTypes::SameTwoByte
                                  : DecodeOperandTypes::Other;
  const int64_t heads[] = {1, 4, 16, 32, 64, 128};
  shape.dims.numHeads = heads[in.range(0, 5)];
  shape.dims.kvLoraRank = 512;
  shape.dims.ropeDim = 64;
  shape.queryLen = in.range(1, 4);
  shape.blockSize = in.flag() ? 64 : 16;
  bool hopper = in.flag();
  shape.numSms = hopper ? 132 : 108;
  shape.sharedBytesPerSm = hopper ? 233472 : 167936;
  shape.maxSharedBytesPerBlock = hopper ? 232448 : 166912;
  DecodeSplitConfig config = decodeScheduleFor(shape);
  config.maxSplitsPerRequest = in.range(0, 4);
  if (auto plan = planDecodeSplits(seqLens, config))
    checkSplits(*plan, seqLens, config.maxSplitsPerRequest);
  else
    llvm::consumeError(plan.takeError());

  DecodeSplitConfig raw;
  for (int64_t *field : {&raw.numSms, &raw.ctasPerSm, &raw.numHeads, &raw.queryLen,
                         &raw.rowsPerCta, &raw.tokensPerBlock, &raw.fixedOverheadBlocks,
                         &raw.minTokensPerSplit, &raw.maxSplitsPerRequest})
    *field = in.flag() ? in.any64() : in.range(-1, 300);
  if (auto plan = planDecodeSplits(seqLens, raw))
    checkSplits(*plan, seqLens, raw.maxSplitsPerRequest);
  else
    llvm::consumeError(plan.takeError());

  // A chunk plan is as large as its chunks: contexts of up to 16K tokens
  // keep one input's plan small enough to run a million.
  int64_t workspace = in.flag() ? in.any64() : in.range(-1, 2048);
  std::vector<int32_t> contexts;
  for (int32_t len : seqLens)
    contexts.push_back(std::min(len, int32_t(1) << 14));
  if (auto chunks = planChunkedContext(contexts, workspace, shape.blockSize))
    checkChunks(*chunks, contexts);
  else
    llvm::consumeError(chunks.takeError());
}

/// A DCP group read from the input: every rank's local lengths add up to
/// the sequences, and where every rank maps the new tokens, each token has
/// a slot on exactly one rank and padding rows have none.
void planDcp(ByteReader &in, const CommonAttentionMetadata &m) {
  bool rawConfig = in.range(0, 7) == 0;
  DcpConfig group{rawConfig ? in.any64() : in.range(1, 8), 0,
                  rawConfig ? in.any64() : int64_t(1) << in.range(0, 5)};
  int64_t blockSize = rawConfig ? in.any64() : group.interleave << in.range(0, 3);
  if (llvm::Error error = checkDcp(group, blockSize)) {
    llvm::consumeError(std::move(error));
    return;
  }
  std::vector<int64_t> total(m.seqLens.size(), 0);
  std::vector<int64_t> owners(m.slotMapping.size(), 0);
  bool everyRankMapped = true;
  for (int64_t rank = 0; rank < group.worldSize; ++rank) {
    DcpConfig dcp = group;
    dcp.rank = rank;
    auto local = dcpLocalSeqLens(m.seqLens, dcp);
    if (!local) {
      llvm::consumeError(local.takeError());
      return;
    }
    for (size_t b = 0; b < local->size(); ++b)
      total[b] += (*local)[b];
    auto slots = dcpLocalSlotMapping(m, blockSize, dcp);
    if (!slots) {
      llvm::consumeError(slots.takeError());
      everyRankMapped = false;
      continue;
    }
    expect(slots->size() == m.slotMapping.size(),
           "a DCP slot mapping of another size than the batch's");
    for (size_t row = 0; row < slots->size(); ++row)
      owners[row] += (*slots)[row] != kPaddingSlot;
  }
  for (size_t b = 0; b < total.size(); ++b)
    expect(total[b] == m.seqLens[b],
           "DCP local lengths that do not add up to a sequence");
  if (!everyRankMapped)
    return;
  for (size_t row = 0; row < owners.size(); ++row)
    expect(owners[row] == (int64_t(row) < m.numActualTokens ? 1 : 0),
           "a new token with " + std::to_string(owners[row]) +
               " DCP owners");
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  layers();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ByteReader in(data, size);
  int64_t numCacheBlocks = in.flag() ? in.range(-1, 80) : in.any64();
  bool raw = in.range(0, 3) == 0;
  CommonAttentionMetadata m =
      raw ? rawBatch(in) : consistentBatch(in, std::max<int64_t>(numCacheBlocks, 1));
  for (int64_t bends = raw ? 0 : in.range(0, 3); bends > 0; --bends)
    bendOneField(in, m);
  bool speculative = in.flag();
  const MlaLayer &layer = speculative ? *layers().decodeFour : *layers().decodeOne;
  planThroughLayer(in, layer, m, numCacheBlocks);
  reorder(m, numCacheBlocks, speculative ? 4 : 1);
  planGpuSplits(in, m.seqLens);
  planDcp(in, m);
  return 0;
}
