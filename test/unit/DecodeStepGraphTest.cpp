//===- DecodeStepGraphTest.cpp - Decode steps at a fixed shape, replayed --===//
//
// A serving engine pads its decode batches to a captured shape and replays
// the step as a CUDA graph. These tests check the padded plan (on the CPU
// and the GPU: its real rows as the unpadded batch's, its padding rows
// empty, its padding tokens writing nothing), its refusals, and on a GPU
// the captured step: replays match forward of the same plan bit for bit,
// replays queued back to back each read their own metadata, and a replay
// refuses a plan or a graph that is not its own.
//
//===----------------------------------------------------------------------===//

#include "HostTensor.h"
#include "RuntimeTestSupport.h"
#include "TestSupport.h"

#include "mla/Runtime/CudaDevice.h"
#include "mla/Runtime/CudaGraph.h"
#include "mla/Runtime/MlaLayer.h"
#include "mla/Runtime/Runtime.h"

#include <cmath>
#include <set>

using namespace mla;
using namespace mla::runtime;
using namespace mla::test;

namespace {

constexpr int64_t kPage = 16, kCachePages = 48, kMaxDecodes = 5,
                  kTableWidth = 8;

/// Decode lengths of batches of 3, 1 and kMaxDecodes requests run through
/// one graph.
const std::vector<int32_t> kBatchesOfAGraph[] = {
    {40, 1, 100}, {128}, {7, 1, 128, 64, 33}};

using Tensor = RuntimeTensor;

class DecodeStepGraphTest : public ::testing::Test {
protected:
  void SetUp() override {
    runtime = makeTestRuntime();
    ASSERT_TRUE(runtime);
    config.dims = {4, 128, 64, 32, 64};
    config.blockSize = kPage;
    const MlaDims &d = config.dims;
    kvBProj = random(DType::BF16,
                     {d.kvLoraRank, d.numHeads, d.qkNopeHeadDim + d.vHeadDim});
    wUkT = random(DType::BF16, {d.numHeads, d.qkNopeHeadDim, d.kvLoraRank});
    wUv = random(DType::BF16, {d.numHeads, d.kvLoraRank, d.vHeadDim});
    auto created2 = MlaLayer::create(*runtime, config, weights());
    ASSERT_TRUE(bool(created2)) << llvm::toString(created2.takeError());
    layer = std::move(*created2);

    int64_t rows = kMaxDecodes;
    q = random(DType::BF16, {rows, d.numHeads, d.qkHeadDim()}, 2.0);
    kvC = random(DType::BF16, {rows, d.kvLoraRank});
    kPe = random(DType::BF16, {rows, d.ropeDim});
    cache = random(DType::BF16, {kCachePages, kPage, d.cacheEntry()});
    output = random(DType::BF16, {rows, d.numHeads, d.vHeadDim});
    lse = random(DType::F32, {rows, d.numHeads, 1});
  }

  Tensor random(DType t, std::vector<int64_t> shape, double range = 1.0) {
    return RuntimeTensor::random(*runtime, t, std::move(shape), range);
  }
  void upload(Tensor &x) { x.upload(*runtime); }
  std::vector<double> download(Tensor &x) { return x.download(*runtime); }

  MlaLayerWeights weights() {
    return {kvBProj.view(), wUkT.view(), wUv.view()};
  }
  MlaForwardArgs args(BufferView decodeLse) {
    return {q.view(),     kvC.view(),    kPe.view(),
            cache.view(), output.view(), decodeLse};
  }
  DecodeGraphShape shape() const {
    return {kMaxDecodes, 1, kTableWidth, kCachePages, 0};
  }

  /// Decodes of one new token each over `seqLens`, request b's pages
  /// starting at page `firstPage + b * kTableWidth` (mod the cache).
  CommonAttentionMetadata decodes(const std::vector<int32_t> &seqLens,
                                  int32_t firstPage = 0) {
    std::vector<int32_t> table;
    for (size_t b = 0; b < seqLens.size(); ++b)
      for (int64_t j = 0; j < kTableWidth; ++j)
        table.push_back(
            int32_t((firstPage + b * kTableWidth + j) % kCachePages));
    return makeCommonAttentionMetadata(std::vector<int32_t>(seqLens.size(), 1),
                                       seqLens, table, kTableWidth, kPage);
  }

  /// The error text of planDecodeStep for `m` (empty when it plans).
  std::string planError(const CommonAttentionMetadata &m, DecodeGraphShape s) {
    auto plan = layer->planDecodeStep(m, s);
    return plan ? "" : llvm::toString(plan.takeError());
  }

  std::unique_ptr<Runtime> runtime;
  MlaLayerConfig config;
  Tensor kvBProj, wUkT, wUv, q, kvC, kPe, cache, output, lse;
  std::unique_ptr<MlaLayer> layer;
};

TEST_F(DecodeStepGraphTest, PaddedPlanRunsTheBatchAndLeavesPaddingEmpty) {
  const MlaDims &d = config.dims;
  CommonAttentionMetadata m = decodes({40, 1, 100});
  const int64_t real = 3, rowValues = d.numHeads * d.vHeadDim;
  HostTensor initialCache = cache.host;

  // The batch as planned by plan, into a decode_lse of its own size.
  Tensor lseOfBatch = random(DType::F32, {real, d.numHeads, 1});
  auto plain = layer->plan(m, kCachePages);
  ASSERT_TRUE(bool(plain)) << llvm::toString(plain.takeError());
  ASSERT_FALSE(bool(layer->forward(*plain, args(lseOfBatch.view()))));
  std::vector<double> wantOut = download(output),
                      wantLse = download(lseOfBatch),
                      wantCache = download(cache);

  // The same batch padded to the shape, over the same initial cache.
  cache.host = initialCache;
  upload(cache);
  output.host.poison();
  upload(output);
  auto padded = layer->planDecodeStep(m, shape());
  ASSERT_TRUE(bool(padded)) << llvm::toString(padded.takeError());
  EXPECT_EQ(padded->split.numDecodes, kMaxDecodes);
  EXPECT_EQ(padded->numActualTokens, kMaxDecodes);
  EXPECT_EQ(padded->slotMapping[real], kPaddingSlot);
  EXPECT_EQ(padded->decodeSeqLens[real], 0);
  ASSERT_TRUE(padded->paddedTo);
  EXPECT_GE(padded->paddedTo->maxSplitsPerRequest, 1);
  for (int32_t splits : padded->decodeSplits.numSplits)
    EXPECT_LE(splits, padded->paddedTo->maxSplitsPerRequest);
  ASSERT_FALSE(bool(layer->forward(*padded, args(lse.view()))));
  std::vector<double> gotOut = download(output), gotLse = download(lse);

  // Padding tokens write nothing: the cache is as the batch left it.
  EXPECT_EQ(download(cache), wantCache);
  std::vector<double> realOut(gotOut.begin(),
                              gotOut.begin() + real * rowValues);
  std::vector<double> realWant(wantOut.begin(),
                               wantOut.begin() + real * rowValues);
  std::vector<double> realLse(gotLse.begin(),
                              gotLse.begin() + real * d.numHeads);
  if (testingOnGpu()) {
    // The padding requests count in the split budget, so the splits may
    // differ from the batch's, and with them the rounding.
    expectClose(realOut, realWant, tolerance(DType::BF16), "real rows");
    expectLseClose(realLse, wantLse, 1e-3, "real rows' lse");
  } else {
    EXPECT_EQ(realOut, realWant);
    EXPECT_EQ(realLse, wantLse);
  }
  for (size_t i = real * rowValues; i < gotOut.size(); ++i)
    ASSERT_EQ(gotOut[i], 0.0) << "padding output value " << i;
  for (size_t i = real * d.numHeads; i < gotLse.size(); ++i)
    ASSERT_TRUE(std::isinf(gotLse[i]) && gotLse[i] < 0)
        << "padding lse " << i << " is " << gotLse[i];
}

TEST_F(DecodeStepGraphTest, PlanDecodeStepNamesWhatDoesNotFit) {
  auto expectError = [&](const CommonAttentionMetadata &m, DecodeGraphShape s,
                         const std::string &part) {
    std::string error = planError(m, s);
    EXPECT_NE(error.find(part), std::string::npos)
        << "want '" << part << "' in: " << error;
  };
  CommonAttentionMetadata ok = decodes({40, 1});
  EXPECT_EQ(planError(ok, shape()), "");
  expectError(decodes({1, 2, 3, 4, 5, 6}), shape(), "6 decodes");
  DecodeGraphShape narrow = shape();
  narrow.maxBlocksPerRequest = 4;
  expectError(ok, narrow, "8 pages wide");
  DecodeGraphShape small = shape();
  small.numCacheBlocks = 8;
  expectError(ok, small, "is not a page of the cache");
  DecodeGraphShape empty = shape();
  empty.maxDecodes = 0;
  expectError(ok, empty, "must be positive");
  DecodeGraphShape huge = shape();
  huge.maxDecodes = int64_t(1) << 20;
  huge.maxBlocksPerRequest = int64_t(1) << 12;
  expectError(ok, huge, "must each fit int32");
  DecodeGraphShape speculative = shape();
  speculative.queryLen = 2;
  expectError(ok, speculative, "decodeThreshold");

  std::vector<int32_t> table(2 * kTableWidth);
  for (size_t i = 0; i < table.size(); ++i)
    table[i] = int32_t(i);
  auto mixed =
      makeCommonAttentionMetadata({1, 5}, {9, 20}, table, kTableWidth, kPage);
  expectError(mixed, shape(), "holds prefills (1 of its requests)");
}

TEST_F(DecodeStepGraphTest, CapturedStepReplaysAsForwardRunsItsPlan) {
  if (!testingOnGpu()) {
    auto graph = layer->captureDecodeStep(shape(), args(lse.view()));
    ASSERT_FALSE(bool(graph));
    std::string error = llvm::toString(graph.takeError());
    EXPECT_NE(error.find("needs a GPU runtime"), std::string::npos) << error;
    return;
  }
  auto graph = layer->captureDecodeStep(shape(), args(lse.view()));
  ASSERT_TRUE(bool(graph)) << llvm::toString(graph.takeError());
  EXPECT_EQ((*graph)->shape().maxDecodes, kMaxDecodes);
  EXPECT_GE((*graph)->shape().maxSplitsPerRequest, 1);

  // Different batch sizes and lengths through the one graph.
  for (const std::vector<int32_t> &lens : kBatchesOfAGraph) {
    SCOPED_TRACE("batch of " + std::to_string(lens.size()));
    auto plan = layer->planDecodeStep(decodes(lens), (*graph)->shape());
    ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
    ASSERT_FALSE(bool(layer->replay(**graph, *plan)));
    std::vector<double> replayedOut = download(output),
                        replayedLse = download(lse);
    ASSERT_FALSE(bool(layer->forward(*plan, args(lse.view()))));
    EXPECT_EQ(replayedOut, download(output));
    EXPECT_EQ(replayedLse, download(lse));
  }

  // Replays queued back to back, nothing waited for: each writes its new
  // tokens' rows into its own pages, so each must have read its own
  // metadata. Every batch's kv_c rows are then in its slots.
  cache.host.poison();
  upload(cache);
  const int64_t steps = 6;
  std::vector<CommonAttentionMetadata> batches;
  std::set<int64_t> slots;
  for (int64_t i = 0; i < steps; ++i) {
    batches.push_back(
        decodes({int32_t(3 + i), int32_t(17 + i)}, int32_t(3 * i)));
    for (int64_t t = 0; t < 2; ++t)
      ASSERT_TRUE(slots.insert(batches.back().slotMapping[t]).second)
          << "the batches must write distinct slots";
    auto plan = layer->planDecodeStep(batches.back(), (*graph)->shape());
    ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
    ASSERT_FALSE(bool(layer->replay(**graph, *plan)));
  }
  EXPECT_EQ((*graph)->replays(), 3 + steps);
  std::vector<double> cacheNow = download(cache), kvCRows = kvC.host.toDouble();
  const int64_t entry = config.dims.cacheEntry(),
                latent = config.dims.kvLoraRank;
  for (int64_t i = 0; i < steps; ++i)
    for (int64_t t = 0; t < 2; ++t) {
      int64_t slot = batches[i].slotMapping[t];
      for (int64_t c = 0; c < latent; ++c)
        ASSERT_EQ(cacheNow[slot * entry + c], kvCRows[t * latent + c])
            << "replay " << i << ", token " << t << ", slot " << slot;
    }
}

TEST_F(DecodeStepGraphTest, StagedStepRunsInsideTheCallersOwnGraph) {
  if (!testingOnGpu())
    GTEST_SKIP() << "CUDA graphs need a GPU";
  auto graph = layer->captureDecodeStep(shape(), args(lse.view()));
  ASSERT_TRUE(bool(graph)) << llvm::toString(graph.takeError());
  ASSERT_FALSE(bool(runtime->gpu()->makeCurrent()));
  auto stream = cuda::Stream::create();
  ASSERT_TRUE(bool(stream)) << llvm::toString(stream.takeError());
  Stream s = stream->handle();
  // The caller's graph holds the step's kernels, recorded by enqueue.
  auto callers = cuda::CapturedGraph::capture(
      stream->handle(), [&] { return layer->enqueueDecodeStep(**graph, s); });
  ASSERT_TRUE(bool(callers)) << llvm::toString(callers.takeError());

  for (const std::vector<int32_t> &lens : kBatchesOfAGraph) {
    SCOPED_TRACE("batch of " + std::to_string(lens.size()));
    auto plan = layer->planDecodeStep(decodes(lens), (*graph)->shape());
    ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
    // Staged, then the caller's graph replayed.
    ASSERT_FALSE(bool(layer->stageDecodeStep(**graph, *plan, s)));
    ASSERT_FALSE(bool(callers->launch(stream->handle())));
    ASSERT_FALSE(bool(runtime->synchronize(s)));
    std::vector<double> callersOut = download(output),
                        callersLse = download(lse);
    // Staged, then enqueued outside any capture: a plain run.
    ASSERT_FALSE(bool(layer->stageDecodeStep(**graph, *plan, s)));
    ASSERT_FALSE(bool(layer->enqueueDecodeStep(**graph, s)));
    ASSERT_FALSE(bool(runtime->synchronize(s)));
    EXPECT_EQ(callersOut, download(output));
    EXPECT_EQ(callersLse, download(lse));
    ASSERT_FALSE(bool(layer->forward(*plan, args(lse.view()))));
    EXPECT_EQ(callersOut, download(output));
    EXPECT_EQ(callersLse, download(lse));
  }
  // A plan of another shape is refused before anything is staged.
  DecodeGraphShape other = (*graph)->shape();
  other.maxDecodes = 4;
  auto otherPlan = layer->planDecodeStep(decodes({3}), other);
  ASSERT_TRUE(bool(otherPlan));
  llvm::Error refused = layer->stageDecodeStep(**graph, *otherPlan, s);
  ASSERT_TRUE(bool(refused));
  EXPECT_NE(llvm::toString(std::move(refused)).find("not made for this graph"),
            std::string::npos);
  // Nothing is left running on the stream when it goes away.
  ASSERT_FALSE(bool(runtime->synchronize(s)));
}

TEST_F(DecodeStepGraphTest, ReplayRefusesAPlanOrGraphNotItsOwn) {
  if (!testingOnGpu())
    GTEST_SKIP() << "CUDA graphs need a GPU";
  auto graph = layer->captureDecodeStep(shape(), args(lse.view()));
  ASSERT_TRUE(bool(graph)) << llvm::toString(graph.takeError());
  auto replayError = [&](MlaLayer &by, const MlaStepPlan &plan) {
    llvm::Error error = by.replay(**graph, plan);
    return error ? llvm::toString(std::move(error)) : "";
  };
  CommonAttentionMetadata m = decodes({40, 1});
  auto plain = layer->plan(m, kCachePages);
  ASSERT_TRUE(bool(plain));
  EXPECT_NE(replayError(*layer, *plain).find("planDecodeStep"),
            std::string::npos);
  DecodeGraphShape other = (*graph)->shape();
  other.maxDecodes = 4;
  auto otherPlan = layer->planDecodeStep(m, other);
  ASSERT_TRUE(bool(otherPlan));
  EXPECT_NE(replayError(*layer, *otherPlan).find("not made for this graph"),
            std::string::npos);
  auto second = MlaLayer::create(*runtime, config, weights());
  ASSERT_TRUE(bool(second)) << llvm::toString(second.takeError());
  auto plan = layer->planDecodeStep(m, (*graph)->shape());
  ASSERT_TRUE(bool(plan));
  EXPECT_NE(replayError(**second, *plan).find("another layer"),
            std::string::npos);
  EXPECT_EQ((*graph)->replays(), 0);
}

} // namespace
