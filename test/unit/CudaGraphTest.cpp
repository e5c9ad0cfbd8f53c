//===- CudaGraphTest.cpp - Decode steps captured once, replayed ----------===//
//
// A serving engine captures its decode step into a CUDA graph at a fixed
// capacity and replays it every step with new lengths written into the same
// metadata buffers. This checks that the generated decode (split-KV with the
// schedule operands) can be captured (no host waits, no allocation in the
// call), and that replays with different lengths, batch sizes and split
// counts match the float64 reference and a direct call. GPU only: skipped
// without a CUDA device.
//
//===----------------------------------------------------------------------===//

#include "TestSupport.h"

#include "MlaReference.h"
#include "mla/Builders/KernelBuilders.h"
#include "mla/Runtime/CudaDevice.h"
#include "mla/Runtime/MetadataBuffers.h"
#include "mla/Runtime/MetadataDecodeSplits.h"
#include "mla/Runtime/Runtime.h"
#include "mla/Runtime/RuntimeCompile.h"

using namespace mla;
using namespace mla::runtime;
using namespace mla::test;

namespace {

TEST(CudaGraph, DecodeStepReplaysWithNewLengths) {
  RuntimeOptions options;
  options.device = DevicePreference::Gpu;
  options.cache.diskEnabled = false;
  auto created = Runtime::create(options);
  if (!created) {
    GTEST_SKIP() << "no GPU: " << llvm::toString(created.takeError());
  }
  Runtime &rt = **created;
  const cuda::Driver &driver = rt.gpu()->driver();

  // Capacity of the captured step.
  const int64_t maxBatch = 4, maxBlocks = 8, page = 16, maxSplits = 4;
  const int64_t numBlocks = maxBatch * maxBlocks;
  MlaDims d{16, 128, 64, 32, 64};
  const int64_t n = d.numHeads, entry = d.cacheEntry(), latent = d.kvLoraRank;
  const float scale = 0.1f;
  DecodeAttentionSpec spec{d, DType::BF16, DType::BF16, page, true, scale};
  spec.withSplitPlan = true;
  auto kernel = runtime::compile(
      rt,
      [&](mlir::MLIRContext &ctx) { return buildDecodeAttention(ctx, spec); },
      kKernelEntry);
  ASSERT_TRUE(bool(kernel)) << llvm::toString(kernel.takeError());

  std::vector<DeviceAllocation> storage;
  auto device = [&](DType t, std::vector<int64_t> shape) {
    BufferView probe = BufferView::contiguous(nullptr, t, shape);
    auto a = rt.allocate(size_t(probe.numElements()) * byteWidth(t));
    EXPECT_TRUE(bool(a));
    probe.data = a->data();
    storage.push_back(std::move(*a));
    return probe;
  };
  BufferView q = device(DType::BF16, {maxBatch, 1, n, entry});
  BufferView cache = device(DType::BF16, {numBlocks, page, entry});
  BufferView table = device(DType::I32, {maxBatch, maxBlocks});
  BufferView lens = device(DType::I32, {maxBatch});
  BufferView splits = device(DType::I32, {maxBatch});
  BufferView part = device(DType::F32, {maxBatch, 1, n, maxSplits, latent});
  BufferView partLse = device(DType::F32, {maxBatch, 1, n, maxSplits});
  BufferView out = device(DType::BF16, {maxBatch, 1, n, latent});
  BufferView lse = device(DType::F32, {maxBatch, n, 1});
  std::vector<BufferView> args{q, cache, table, lens, splits,
                               part, partLse, out, lse};

  HostTensor cacheH(DType::BF16, {numBlocks, page, entry});
  cacheH.fillRandom(rng());
  ASSERT_FALSE(bool(rt.upload(cache.data, cacheH.view().data,
                              cacheH.sizeInBytes())));
  auto buffers = DecodeMetadataBuffers::create(maxBatch, maxBlocks);
  ASSERT_TRUE(bool(buffers)) << llvm::toString(buffers.takeError());

  auto stream = cuda::Stream::create();
  ASSERT_TRUE(bool(stream)) << llvm::toString(stream.takeError());
  cuda::CUstream s = stream->handle();

  // Writes one step's lengths, pages, schedule and queries into the fixed
  // buffers (outside the graph, as an engine does before a replay).
  HostTensor qH(DType::BF16, {maxBatch, 1, n, entry});
  auto prepare = [&](const std::vector<int32_t> &seqLens) {
    std::vector<int32_t> pages;
    for (size_t b = 0; b < seqLens.size(); ++b)
      for (int64_t j = 0; j < maxBlocks; ++j)
        pages.push_back(int32_t((b * maxBlocks + j * 5) % numBlocks));
    ASSERT_FALSE(bool(buffers->update(seqLens, pages, maxBlocks)));
    DecodeSplitConfig config =
        genericDecodeSchedule(rt.parallelism(), n, 1, page);
    config.minTokensPerSplit = page;
    config.maxSplitsPerRequest = maxSplits;
    std::vector<int32_t> padded(buffers->seqLensData(),
                                buffers->seqLensData() + maxBatch);
    auto plan = planDecodeSplits(padded, config);
    ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
    qH.fillRandom(rng(), -2.0, 2.0);
    ASSERT_FALSE(bool(rt.upload(lens.data, buffers->seqLensData(),
                                maxBatch * sizeof(int32_t), s)));
    ASSERT_FALSE(bool(rt.upload(table.data, buffers->blockTableData(),
                                maxBatch * maxBlocks * sizeof(int32_t), s)));
    ASSERT_FALSE(bool(rt.upload(splits.data, plan->numSplits.data(),
                                maxBatch * sizeof(int32_t), s)));
    ASSERT_FALSE(bool(rt.upload(q.data, qH.view().data, qH.sizeInBytes(), s)));
  };
  auto results = [&]() {
    HostTensor outH(DType::BF16, {maxBatch, 1, n, latent});
    HostTensor lseH(DType::F32, {maxBatch, n, 1});
    EXPECT_FALSE(bool(rt.download(outH.view().data, out.data,
                                  outH.sizeInBytes(), s)));
    EXPECT_FALSE(bool(rt.download(lseH.view().data, lse.data,
                                  lseH.sizeInBytes(), s)));
    std::vector<double> all = outH.toDouble(), l = lseH.toDouble();
    all.insert(all.end(), l.begin(), l.end());
    return all;
  };

  // Capture once, at capacity.
  prepare({64, 1, 0, 100});
  ASSERT_FALSE(bool(driver.check(
      driver.fn.cuStreamBeginCapture(s, cuda::CU_STREAM_CAPTURE_MODE_RELAXED),
      "cuStreamBeginCapture")));
  llvm::Error captured = (*kernel)->run(args, s);
  cuda::CUgraph graph = nullptr;
  llvm::Error ended = driver.check(driver.fn.cuStreamEndCapture(s, &graph),
                                   "cuStreamEndCapture");
  ASSERT_FALSE(bool(captured)) << llvm::toString(std::move(captured));
  ASSERT_FALSE(bool(ended)) << llvm::toString(std::move(ended));
  cuda::CUgraphExec exec = nullptr;
  ASSERT_FALSE(bool(driver.check(
      driver.fn.cuGraphInstantiateWithFlags(&exec, graph, 0),
      "cuGraphInstantiateWithFlags")));

  // Replays: full batch, a smaller one (padding rows), longer contexts.
  for (const std::vector<int32_t> &seqLens :
       {std::vector<int32_t>{64, 1, 0, 100}, std::vector<int32_t>{17, 128},
        std::vector<int32_t>{128, 127, 126, 33}}) {
    SCOPED_TRACE("batch of " + std::to_string(seqLens.size()));
    prepare(seqLens);
    ASSERT_FALSE(bool(driver.check(driver.fn.cuGraphLaunch(exec, s),
                                   "cuGraphLaunch")));
    std::vector<double> replayed = results();
    llvm::Error direct = (*kernel)->run(args, s);
    ASSERT_FALSE(bool(direct)) << llvm::toString(std::move(direct));
    EXPECT_EQ(replayed, results()) << "replay and direct call differ";

    std::vector<int32_t> padded(buffers->seqLensData(),
                                buffers->seqLensData() + maxBatch);
    std::vector<int32_t> pages(buffers->blockTableData(),
                               buffers->blockTableData() + maxBatch * maxBlocks);
    std::vector<double> outRef, lseRef;
    ref::decodeAttention(qH.toDouble(), cacheH.toDouble(), pages, padded,
                         numBlocks, page, maxBlocks, maxBatch, 1, n, latent,
                         d.ropeDim, scale, true, outRef, lseRef);
    size_t outSize = outRef.size();
    expectClose(std::vector<double>(replayed.begin(), replayed.begin() + outSize),
                outRef, tolerance(DType::BF16), "replayed decode out");
    expectLseClose(std::vector<double>(replayed.begin() + outSize,
                                       replayed.end()),
                   lseRef, 1e-3, "replayed decode lse");
  }
  driver.fn.cuGraphExecDestroy(exec);
  driver.fn.cuGraphDestroy(graph);
}

} // namespace
