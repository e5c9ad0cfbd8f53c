//===- UnalignedBuffersTest.cpp - Buffers the launch path must handle -----===//
//
// Misaligned bases, and (last test) a launch beyond CUDA's grid limits.
//
// The bandwidth-bound GPU kernels move rows in 16-byte vectors when every
// base address allows it and element by element otherwise. Buffers from an
// allocator are always aligned, so these tests offset the views by one
// element (2 bytes) to take the fallback, and check it against the float64
// reference. Run through the Runtime on the CPU, or on the GPU with
// MLA_TEST_DEVICE=gpu (where the fallback matters).
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestSupport.h"
#include "TestSupport.h"

#include "MlaReference.h"
#include "mla/Builders/KernelBuilders.h"
#include "mla/Runtime/Runtime.h"
#include "mla/Runtime/RuntimeCompile.h"

using namespace mla;
using namespace mla::runtime;
using namespace mla::test;

namespace {

/// Device copies of host tensors at a chosen byte offset from an aligned
/// allocation.
class OffsetBuffers {
public:
  explicit OffsetBuffers(Runtime &rt) : rt(rt) {}

  BufferView put(HostTensor &host, size_t offsetBytes) {
    auto a = rt.allocate(host.sizeInBytes() + 64);
    EXPECT_TRUE(bool(a));
    void *data = static_cast<char *>(a->data()) + offsetBytes;
    EXPECT_FALSE(bool(rt.upload(data, host.view().data, host.sizeInBytes())));
    storage.push_back(std::move(*a));
    return BufferView::contiguous(data, host.elementType(), host.dims());
  }

  void get(HostTensor &host, const BufferView &view) {
    EXPECT_FALSE(bool(rt.download(host.view().data, view.data,
                                  host.sizeInBytes())));
  }

private:
  Runtime &rt;
  std::vector<DeviceAllocation> storage;
};


TEST(MergeUnaligned, MisalignedOutputTakesTheElementPath) {
  auto rt = makeTestRuntime();
  ASSERT_TRUE(rt);
  const int64_t tokens = 7, heads = 4, dim = 128;
  auto kernel = runtime::compile(
      *rt,
      [&](mlir::MLIRContext &ctx) {
        return buildMergeAttnStates(ctx, {heads, dim, DType::BF16, true});
      },
      kKernelEntry);
  ASSERT_TRUE(bool(kernel)) << llvm::toString(kernel.takeError());
  HostTensor po(DType::BF16, {tokens, heads, dim}),
      so(DType::BF16, {tokens, heads, dim});
  HostTensor pl(DType::F32, {heads, tokens}), sl(DType::F32, {heads, tokens});
  for (HostTensor *t : {&po, &so, &pl, &sl})
    t->fillRandom(rng(), -3.0, 3.0);
  HostTensor out(DType::BF16, {tokens, heads, dim}),
      outLse(DType::F32, {heads, tokens});
  out.poison();
  outLse.poison();
  OffsetBuffers buffers(*rt);
  // Inputs aligned, the output 2 bytes off: the whole kernel must take
  // the element path (the check is uniform over all its buffers).
  std::vector<BufferView> args{buffers.put(po, 0), buffers.put(pl, 0),
                               buffers.put(so, 0), buffers.put(sl, 0),
                               buffers.put(out, 2), buffers.put(outLse, 0)};
  llvm::Error error = (*kernel)->run(args);
  ASSERT_FALSE(bool(error)) << llvm::toString(std::move(error));
  buffers.get(out, args[4]);
  buffers.get(outLse, args[5]);
  std::vector<double> outRef, lseRef;
  ref::mergeAttnStates(po.toDouble(), pl.toDouble(), so.toDouble(),
                       sl.toDouble(), tokens, heads, dim, outRef, lseRef);
  expectClose(out.toDouble(), outRef, tolerance(DType::BF16), "merged out");
  expectLseClose(outLse.toDouble(), lseRef, 1e-5, "merged lse");
}

TEST(GatherCacheUnaligned, MisalignedCacheAndWorkspace) {
  auto rt = makeTestRuntime();
  ASSERT_TRUE(rt);
  const int64_t entry = 576, page = 16, numBlocks = 6, maxBlocks = 3;
  auto kernel = runtime::compile(
      *rt,
      [&](mlir::MLIRContext &ctx) {
        return buildGatherCache(ctx, {entry, page, DType::BF16, DType::BF16});
      },
      kKernelEntry);
  ASSERT_TRUE(bool(kernel)) << llvm::toString(kernel.takeError());
  HostTensor cache(DType::BF16, {numBlocks, page, entry});
  cache.fillRandom(rng());
  std::vector<int32_t> table{4, 1, 5, 0, 2, 3}, cu{0, 20, 37}, starts{5, 0};
  HostTensor tableT = HostTensor::i32({2, maxBlocks}, table);
  HostTensor cuT = HostTensor::i32({3}, cu), startsT = HostTensor::i32({2}, starts);
  HostTensor ws(DType::BF16, {40, entry});
  ws.poison();
  std::vector<double> want = ws.toDouble();
  ref::gatherCache(cache.toDouble(), table, cu, starts, page, maxBlocks, entry,
                   want);
  for (size_t cacheOffset : {size_t(2), size_t(0)}) {
    SCOPED_TRACE("cache offset " + std::to_string(cacheOffset));
    OffsetBuffers buffers(*rt);
    std::vector<BufferView> args{buffers.put(cache, cacheOffset),
                                 buffers.put(tableT, 0), buffers.put(cuT, 0),
                                 buffers.put(startsT, 0), buffers.put(ws, 2)};
    llvm::Error error = (*kernel)->run(args);
    ASSERT_FALSE(bool(error)) << llvm::toString(std::move(error));
    HostTensor got(DType::BF16, {40, entry});
    buffers.get(got, args[4]);
    std::vector<double> g = got.toDouble();
    // Rows 0..36 are written; the rest keep their poison (NaN) in both.
    for (int64_t i = 0; i < 37 * entry; ++i)
      ASSERT_EQ(g[i], want[i]) << "element " << i;
  }
}

// A launch whose grid exceeds CUDA's per-dimension limits (here the split
// capacity S, grid z of the generic decode, past 65535) is refused with an
// error naming the limits instead of failing inside the driver. The CPU
// ignores the split operands and computes the decode.
TEST(DecodeGridLimit, SplitCapacityBeyondCudaLimitIsAClearError) {
  auto rt = makeTestRuntime();
  ASSERT_TRUE(rt);
  MlaDims d{1, 64, 32, 16, 32};
  const int64_t splits = 70000, page = 16;
  DecodeAttentionSpec spec{d, DType::BF16, DType::BF16, page, true, 0.1f};
  spec.withSplitPlan = true;
  auto kernel = runtime::compile(
      *rt,
      [&](mlir::MLIRContext &ctx) { return buildDecodeAttention(ctx, spec); },
      kKernelEntry, KernelStrategy::Generic);
  ASSERT_TRUE(bool(kernel)) << llvm::toString(kernel.takeError());
  HostTensor q(DType::BF16, {1, 1, 1, d.cacheEntry()});
  HostTensor cache(DType::BF16, {1, page, d.cacheEntry()});
  q.fillRandom(rng());
  cache.fillRandom(rng());
  HostTensor table = HostTensor::i32({1, 1}, {0});
  HostTensor lens = HostTensor::i32({1}, {5});
  HostTensor numSplits = HostTensor::i32({1}, {1});
  HostTensor part(DType::F32, {1, 1, 1, splits, d.kvLoraRank});
  HostTensor partLse(DType::F32, {1, 1, 1, splits});
  HostTensor out(DType::BF16, {1, 1, 1, d.kvLoraRank});
  HostTensor lse(DType::F32, {1, 1, 1});
  OffsetBuffers buffers(*rt);
  std::vector<BufferView> args{
      buffers.put(q, 0),         buffers.put(cache, 0),
      buffers.put(table, 0),     buffers.put(lens, 0),
      buffers.put(numSplits, 0), buffers.put(part, 0),
      buffers.put(partLse, 0),   buffers.put(out, 0),
      buffers.put(lse, 0)};
  llvm::Error error = (*kernel)->run(args);
  if (!testingOnGpu()) {
    EXPECT_FALSE(bool(error)) << llvm::toString(std::move(error));
    return;
  }
  ASSERT_TRUE(bool(error)) << "a grid z of " << splits << " was launched";
  std::string text = llvm::toString(std::move(error));
  EXPECT_NE(text.find("exceeds CUDA's limits"), std::string::npos) << text;
  EXPECT_NE(text.find("70000"), std::string::npos) << text;
}

} // namespace
