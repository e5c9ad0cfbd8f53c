//===- AttentionTest.cpp - prefill_attention and decode_attention ---------===//
//
// Each case JIT-compiles the op for the host, runs it on fresh random inputs
// with NaN-poisoned outputs, and compares with the float64 reference.
//
//===----------------------------------------------------------------------===//

#include "GpuTestSupport.h"
#include "MlaReference.h"
#include "TestSupport.h"
#include "mla/Builders/KernelBuilders.h"
#include "mla/Runtime/CudaDevice.h"
#include "mla/Runtime/CudaGraph.h"
#include "mla/Runtime/GpuKernel.h"
#include "mla/Runtime/MetadataDecodeSplits.h"
#include "mla/Target/MmaDecodeShape.h"
#include "mla/Target/WgmmaDecodeShape.h"
#include "mla/Target/WgmmaPrefillShape.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <random>

using namespace mla;
using namespace mla::test;
using mla::HostTensor;

namespace {

constexpr double kLseTolerance = 2e-3;

struct PrefillCase {
  DType dtype;
  int64_t heads;
  bool causal;
  std::vector<int32_t> queryLens, keyLens;
  int64_t qkDim = 192, vDim = 128;
  /// Merge into a random entry state in out/lse (`accumulate`).
  bool accumulate = false;
};

/// A random attention state for `accumulate`: LSEs in [-2, 6], every
/// fifth row empty (-inf, or +inf, which reads as empty) with a NaN
/// output that must not be read.
void fillEntryState(HostTensor &out, HostTensor &lse, int64_t tokens,
                    int64_t heads, int64_t vDim) {
  std::uniform_real_distribution<double> lseValue(-2.0, 6.0);
  std::vector<double> o(tokens * heads * vDim), l(heads * tokens);
  std::uniform_real_distribution<double> value(-1.0, 1.0);
  for (double &x : o)
    x = value(rng());
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t t = 0; t < tokens; ++t) {
      int64_t row = t * heads + h;
      double &entry = l[h * tokens + t];
      entry = lseValue(rng());
      if (row % 5 == 1 || row % 5 == 3) {
        entry = row % 5 == 1 ? -INFINITY : INFINITY;
        for (int64_t d = 0; d < vDim; ++d)
          o[row * vDim + d] = NAN;
      }
    }
  out.fromDouble(o);
  lse.fromDouble(l);
}

/// Compiles and checks one prefill case; on the GPU, `strategy` chooses the
/// kernel (generic by default).
void checkPrefillWith(const PrefillCase &c,
                      std::optional<KernelStrategy> strategy) {
  float scale = 1.0f / std::sqrt(static_cast<float>(c.qkDim));
  auto kernel = compileKernel(
      buildPrefillAttention(testContext(), {c.heads, c.qkDim, c.vDim, c.dtype,
                                            c.causal, scale, c.accumulate}),
      strategy);
  ASSERT_TRUE(kernel);
  std::vector<int32_t> cuQ = prefixSums(c.queryLens),
                       cuK = prefixSums(c.keyLens);
  int64_t tokens = cuQ.back(), keys = cuK.back(), n = c.heads;

  HostTensor q(c.dtype, {tokens, n, c.qkDim}), k(c.dtype, {keys, n, c.qkDim}),
      v(c.dtype, {keys, n, c.vDim});
  q.fillRandom(rng(), -2.0, 2.0);
  k.fillRandom(rng(), -2.0, 2.0);
  v.fillRandom(rng());
  HostTensor cuQT = HostTensor::i32({(int64_t)cuQ.size()}, cuQ);
  HostTensor cuKT = HostTensor::i32({(int64_t)cuK.size()}, cuK);
  HostTensor out(c.dtype, {tokens, n, c.vDim}), lse(DType::F32, {n, tokens});
  if (c.accumulate) {
    fillEntryState(out, lse, tokens, n, c.vDim);
  } else {
    out.poison();
    lse.poison();
  }
  std::vector<double> entryOut = out.toDouble(), entryLse = lse.toDouble();
  runKernel(*kernel, {q.view(), k.view(), v.view(), cuQT.view(), cuKT.view(),
                      out.view(), lse.view()});

  std::vector<double> outRef(tokens * n * c.vDim), lseRef(n * tokens);
  ref::prefillAttention(q.toDouble(), k.toDouble(), v.toDouble(), cuQ, cuK, n,
                        c.qkDim, c.vDim, scale, c.causal, outRef, lseRef);
  if (c.accumulate) {
    std::vector<double> ownOut = outRef, ownLse = lseRef;
    ref::mergeAttnStates(entryOut, entryLse, ownOut, ownLse, tokens, n, c.vDim,
                         outRef, lseRef);
  }
  expectClose(out.toDouble(), outRef, tolerance(c.dtype), "prefill out");
  expectLseClose(lse.toDouble(), lseRef, kLseTolerance, "prefill lse");
}

/// Whether the mma-sync strategy has a tensor-core prefill kernel for `c`:
/// bf16 or f16, head dims multiples of 16, qk <= 256 and v <= 128 (other
/// cases fall back to the generic kernel).
bool hasMmaPrefillKernel(const PrefillCase &c) {
  return (c.dtype == DType::BF16 || c.dtype == DType::F16) &&
         c.qkDim % 16 == 0 && c.vDim % 16 == 0 && c.qkDim <= 256 &&
         c.vDim <= 128;
}

/// Whether the wgmma strategy has its prefill kernel for `c`, by the rule
/// the lowering uses.
bool hasWgmmaPrefillKernel(const PrefillCase &c) {
  GpuTarget sm90a = cantFail(GpuTarget::parse("sm_90a"));
  return (c.dtype == DType::BF16 || c.dtype == DType::F16) &&
         wgmma_prefill::takesDims(c.qkDim, c.vDim,
                                  sm90a.maxSharedBytesPerBlock());
}

/// Checks a prefill case with the generic kernel and, on the GPU, with each
/// tensor-core kernel that takes it: mma-sync's, and wgmma's on an sm_90
/// device.
void checkPrefill(const PrefillCase &c) {
  {
    SCOPED_TRACE("strategy generic");
    checkPrefillWith(c, std::nullopt);
  }
  if (testingOnGpu() && hasMmaPrefillKernel(c)) {
    SCOPED_TRACE("strategy mma-sync");
    checkPrefillWith(c, KernelStrategy::TensorCore);
  }
  if (testGpuRunsWgmma() && hasWgmmaPrefillKernel(c)) {
    SCOPED_TRACE("strategy wgmma");
    checkPrefillWith(c, KernelStrategy::Warpgroup);
  }
}

class PrefillByDType : public ::testing::TestWithParam<DType> {};

TEST_P(PrefillByDType, CausalVarlenWithContext) {
  // New tokens over context + themselves: Skv >= Sq, ragged lengths.
  checkPrefill({GetParam(), 4, true, {5, 1, 17, 33}, {9, 1, 40, 33}});
}

TEST_P(PrefillByDType, NonCausal) {
  checkPrefill({GetParam(), 4, false, {3, 20, 7}, {50, 2, 7}});
}

INSTANTIATE_TEST_SUITE_P(DTypes, PrefillByDType,
                         ::testing::Values(DType::F32, DType::F16,
                                           DType::BF16),
                         [](const auto &info) {
                           return std::string(name(info.param));
                         });

TEST(Prefill, HeadCounts) {
  for (int64_t heads : {1, 16, 128})
    checkPrefill({DType::BF16, heads, true, {6, 3}, {10, 3}});
}

TEST(Prefill, EmptySequencesAndRowsWithoutKeys) {
  // A sequence with no queries, one with no keys (every row empty: out 0,
  // lse -inf), and a causal one with fewer keys than queries, whose first
  // rows see nothing.
  checkPrefill({DType::F32, 2, true, {0, 4, 6, 1}, {5, 0, 3, 1}});
  checkPrefill({DType::F32, 2, false, {3, 2}, {0, 4}});
}

TEST(Prefill, MergesIntoTheEntryState) {
  // accumulate: the result merged into random states, empty ones (NaN
  // outputs behind an infinite LSE) among them, and rows without keys.
  for (DType dtype : {DType::BF16, DType::F16, DType::F32})
    checkPrefill(
        {dtype, 3, true, {5, 0, 17, 2}, {9, 4, 30, 0}, 192, 128, true});
  checkPrefill({DType::BF16, 2, false, {40, 3}, {70, 0}, 192, 128, true});
}

TEST(PrefillTiles, MergesIntoTheEntryState) {
  // Several row tiles of the tensor-core kernels, padding rows in the
  // last one, small head dims.
  checkPrefill(
      {DType::BF16, 2, true, {200, 64, 1}, {300, 64, 1}, 192, 128, true});
  checkPrefill({DType::F16, 3, false, {130, 7}, {65, 190}, 64, 64, true});
}

TEST(Prefill, SingleToken) {
  checkPrefill({DType::BF16, 16, true, {1}, {1}});
}

TEST(Prefill, UnalignedHeadDims) {
  // Head dims that are not multiples of the vector width take the scalar
  // tail path.
  checkPrefill({DType::F16, 3, true, {7, 9}, {12, 9}, 40, 23});
}

// Cases that cross the tensor-core kernel's 128-row and 32-key tiles: tiles
// every row sees whole, tiles on the causal diagonal, partial tiles at the
// end of the queries and of the keys, and many sequences per launch.

TEST(PrefillTiles, CausalLongAndRagged) {
  checkPrefill({DType::BF16, 2, true, {200, 64, 65, 1, 0, 130},
                {200, 64, 65, 1, 0, 130}});
}

TEST(PrefillTiles, CausalWithContext) {
  // Context before the new tokens (Skv > Sq): the first rows already see
  // whole tiles; and Skv < Sq, whose first rows see nothing.
  checkPrefill({DType::BF16, 3, true, {70, 128, 5}, {300, 129, 2}});
  checkPrefill({DType::F16, 2, true, {150}, {90}});
}

TEST(PrefillTiles, NonCausalRagged) {
  checkPrefill({DType::F16, 2, false, {100, 7, 64}, {33, 191, 64}});
}

TEST(PrefillTiles, SmallHeadDims) {
  // Other head dims the tensor-core kernel takes: one k-step, few n-tiles.
  checkPrefill({DType::BF16, 4, true, {80, 17}, {80, 40}, 16, 16});
  checkPrefill({DType::F16, 2, false, {66}, {130}, 64, 32});
}

TEST(PrefillTiles, ExactlyTheDefaultSharedMemoryLimit) {
  // qk 96 / v 64: the tensor-core kernel's tiles take exactly 48 KiB of
  // dynamic shared memory, plus the 1-byte static symbol that addresses
  // it, so the launch must opt in above the default limit.
  checkPrefill({DType::BF16, 4, true, {130, 5}, {140, 5}, 96, 64});
}

TEST(PrefillTiles, WarpgroupHalves) {
  // The wgmma kernel's 128-row tiles are two warpgroups' 64 rows over
  // 128-key tiles in two-stage K and V rings: tiles where only the first
  // warpgroup has real rows (192 rows), where the first warpgroup's rows
  // see none of the block's last key tile (causal, Skv = Sq), where the
  // rings wrap many times (1000 keys), and one column block per head dim
  // (64 / 64).
  checkPrefill({DType::BF16, 2, true, {128, 192, 1000}, {128, 192, 1000}});
  checkPrefill({DType::F16, 3, false, {65, 130}, {1000, 63}, 64, 64});
  checkPrefill({DType::BF16, 2, true, {256, 3}, {64, 700}, 128, 64});
  // Key counts around the 128-key tile: one short of, at and one past a
  // tile's end, and past two, each sequence with its own row tiles.
  checkPrefill({DType::BF16, 2, true, {1, 127, 128, 129}, {127, 128, 129, 257}});
  checkPrefill({DType::F16, 2, false, {129, 64}, {255, 256}, 64, 64});
}

TEST(PrefillTiles, HeadGroups) {
  // The tensor-core prefills hand out causal blocks by head groups whose
  // K and V fit 32 MiB of L2 (PrefillTileBlock.h): 128 heads over 1000
  // keys (640 bytes a key and head) take four groups of 32, 3 heads over
  // 18000 keys three groups of one; without the mask a group is one head.
  checkPrefill({DType::BF16, 128, true, {40, 24}, {400, 600}});
  checkPrefill({DType::BF16, 3, true, {5, 130}, {17000, 1000}});
  checkPrefill({DType::F16, 128, false, {30}, {1000}});
}

TEST(PrefillTiles, LargestHeadDims) {
  // qk 256 leaves the wgmma kernel one V stage: a tile's V is copied once
  // the previous tile's P V is done (1000 keys: eight tiles through it).
  checkPrefill({DType::BF16, 2, true, {97}, {160}, 256, 128});
  checkPrefill({DType::F16, 2, false, {200}, {1000}, 256, 128});
}

/// A decode case run in the scheduled form: a split plan from
/// runtime::planDecodeSplits passed as num_splits, with workspaces of S
/// splits. The plan's numHeads, queryLen and tokensPerBlock come from the
/// case (tokensPerBlock = block_size, the granularity the kernels deal in).
struct DecodeSchedule {
  int64_t numSms, rowsPerCta, minTokensPerSplit;
  /// Workspace splits beyond the plan's most (S = max numSplits + extra):
  /// splits past a request's count must exit without writing.
  int64_t extraSplits = 0;
  /// num_splits entries replaced after planning (index, value): bad
  /// metadata the kernels must clamp to [1, S].
  std::vector<std::pair<int64_t, int32_t>> overrides = {};
  /// The case is meant to split its longest request at least this much.
  int32_t minSplits = 1;
};

struct DecodeCase {
  DType activation, cache;
  int64_t heads, queryLen, blockSize;
  bool causal;
  std::vector<int32_t> seqLens;
  int64_t kvLoraRank = 512, ropeDim = 64;
  std::optional<DecodeSchedule> schedule = std::nullopt;
  /// With a value, one entry of each q row (q is otherwise in [-2, 2]) is
  /// +-qOutlier: beyond f16's range, which a kernel staging q as f16 must
  /// scale away.
  double qOutlier = 0;
};

/// The split workspaces and metadata of a scheduled decode case.
struct DecodeSplitBuffers {
  runtime::DecodeSplitPlan plan; ///< as planned, before any override
  std::vector<int32_t> numSplits; ///< what the kernel reads
  int64_t capacity;               ///< S
  HostTensor numSplitsT, splitOut, splitLse;
};

std::optional<DecodeSplitBuffers> makeSplitBuffers(const DecodeCase &c) {
  const DecodeSchedule &sch = *c.schedule;
  runtime::DecodeSplitConfig config;
  config.numSms = sch.numSms;
  config.numHeads = c.heads;
  config.queryLen = c.queryLen;
  config.rowsPerCta = sch.rowsPerCta;
  config.tokensPerBlock = c.blockSize;
  config.minTokensPerSplit = sch.minTokensPerSplit;
  auto plan = runtime::planDecodeSplits(c.seqLens, config);
  if (!plan) {
    ADD_FAILURE() << llvm::toString(plan.takeError());
    return std::nullopt;
  }
  int32_t most = *std::max_element(plan->numSplits.begin(),
                                   plan->numSplits.end());
  EXPECT_GE(most, sch.minSplits) << "the plan splits less than the case needs";
  std::vector<int32_t> numSplits = plan->numSplits;
  for (auto [b, value] : sch.overrides)
    numSplits[b] = value;
  int64_t batch = c.seqLens.size(), capacity = most + sch.extraSplits;
  int64_t n = c.heads, sq = c.queryLen;
  DecodeSplitBuffers buffers{
      std::move(*plan), numSplits, capacity,
      HostTensor::i32({batch}, numSplits),
      HostTensor(DType::F32, {batch, sq, n, capacity, c.kvLoraRank}),
      HostTensor(DType::F32, {batch, sq, n, capacity})};
  buffers.splitOut.poison();
  buffers.splitLse.poison();
  return buffers;
}

/// On the GPU, where the kernels follow the schedule: split s < n of
/// request b (n = num_splits[b] clamped to [1, S]) holds the LSE of each
/// query row over the tokens DecodeSplitPlan::splitBegin/splitEnd deal it
/// (within what the row sees), and splits s >= n are left untouched, as
/// are all of a request of one split (its split kernel writes out and lse,
/// which the caller checks).
void checkSplitPartials(const DecodeCase &c, const DecodeSplitBuffers &w,
                        const std::vector<double> &q,
                        const std::vector<double> &cache,
                        const std::vector<int32_t> &blockTable,
                        int64_t maxBlocks, float scale) {
  int64_t batch = c.seqLens.size(), sq = c.queryLen, n = c.heads;
  int64_t entry = c.kvLoraRank + c.ropeDim, S = w.capacity;
  runtime::DecodeSplitPlan effective = w.plan;
  for (int64_t b = 0; b < batch; ++b)
    effective.numSplits[b] = static_cast<int32_t>(
        std::clamp<int64_t>(w.numSplits[b], 1, S));
  std::vector<double> lse = w.splitLse.toDouble(),
                      out = w.splitOut.toDouble();
  std::vector<double> got, want;
  int64_t untouchedWritten = 0;
  for (int64_t b = 0; b < batch; ++b) {
    int64_t len = c.seqLens[b], splits = effective.numSplits[b];
    for (int64_t i = 0; i < sq; ++i) {
      int64_t visible =
          c.causal ? std::clamp<int64_t>(len - sq + i + 1, 0, len) : len;
      for (int64_t h = 0; h < n; ++h) {
        const double *qRow = &q[((b * sq + i) * n + h) * entry];
        for (int64_t s = 0; s < S; ++s) {
          int64_t at = ((b * sq + i) * n + h) * S + s;
          if (s >= splits || splits == 1) {
            bool written = !std::isnan(lse[at]);
            for (int64_t col = 0; col < c.kvLoraRank; ++col)
              written |= !std::isnan(out[at * c.kvLoraRank + col]);
            untouchedWritten += written;
            continue;
          }
          int64_t begin = effective.splitBegin(b, s);
          int64_t end = std::min(effective.splitEnd(b, s), visible);
          double max = -std::numeric_limits<double>::infinity(), sum = 0.0;
          std::vector<double> scores;
          for (int64_t j = begin; j < end; ++j) {
            int64_t page = blockTable[b * maxBlocks + j / c.blockSize];
            const double *key =
                &cache[(page * c.blockSize + j % c.blockSize) * entry];
            double dot = 0.0;
            for (int64_t e = 0; e < entry; ++e)
              dot += qRow[e] * key[e];
            scores.push_back(scale * dot);
            max = std::max(max, scores.back());
          }
          for (double score : scores)
            sum += std::exp(score - max);
          got.push_back(lse[at]);
          want.push_back(scores.empty() ? max : max + std::log(sum));
        }
      }
    }
  }
  EXPECT_EQ(untouchedWritten, 0)
      << "splits past a request's count, or of a one-split request, were "
         "written";
  expectLseClose(got, want, kLseTolerance, "decode split lse");
}

/// Compiles and checks one decode case; on the GPU, `strategy` chooses the
/// split kernel (generic by default).
void checkDecodeWith(const DecodeCase &c,
                     std::optional<KernelStrategy> strategy) {
  MlaDims dims;
  dims.numHeads = c.heads;
  dims.kvLoraRank = c.kvLoraRank;
  dims.ropeDim = c.ropeDim;
  int64_t entry = dims.cacheEntry();
  float scale = 1.0f / std::sqrt(192.0f);
  DecodeAttentionSpec spec{dims, c.activation, c.cache, c.blockSize, c.causal,
                           scale};
  spec.withSplitPlan = c.schedule.has_value();
  auto kernel =
      compileKernel(buildDecodeAttention(testContext(), spec), strategy);
  ASSERT_TRUE(kernel);

  int64_t batch = c.seqLens.size(), n = c.heads, sq = c.queryLen;
  int64_t maxLen = *std::max_element(c.seqLens.begin(), c.seqLens.end());
  int64_t maxBlocks = std::max<int64_t>(1, (maxLen + c.blockSize - 1) / c.blockSize);
  int64_t numBlocks = batch * maxBlocks + 3;

  // Pages in shuffled order; unused pages and the rows past each sequence's
  // end stay NaN, so reading them would poison the result.
  std::vector<int32_t> pages(numBlocks);
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), rng());
  std::vector<int32_t> blockTable(batch * maxBlocks);
  for (int64_t i = 0; i < batch * maxBlocks; ++i)
    blockTable[i] = pages[i];

  // An FP8 cache holds value / kv_scale (the codes reach about +-50); the
  // reference reads the dequantized entries, code x kv_scale.
  const bool fp8 = isFp8(c.cache);
  const double kvScale = 0.02;
  HostTensor cache(c.cache, {numBlocks, c.blockSize, entry});
  std::vector<double> cacheValues(numBlocks * c.blockSize * entry,
                                  std::nan(""));
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t j = 0; j < c.seqLens[b]; ++j) {
      int64_t page = blockTable[b * maxBlocks + j / c.blockSize];
      int64_t row = page * c.blockSize + j % c.blockSize;
      for (int64_t e = 0; e < entry; ++e)
        cacheValues[row * entry + e] = dist(rng()) / (fp8 ? kvScale : 1.0);
    }
  cache.fromDouble(cacheValues);
  std::vector<double> entries = cache.toDouble();
  if (fp8)
    for (double &v : entries)
      v = double(float(v) * float(kvScale));
  HostTensor scaleT(DType::F32, {1});
  scaleT.fromDouble({kvScale});

  HostTensor q(c.activation, {batch, sq, n, entry});
  q.fillRandom(rng(), -2.0, 2.0);
  if (c.qOutlier != 0) {
    std::vector<double> values = q.toDouble();
    for (int64_t r = 0; r < batch * sq * n; ++r)
      values[r * entry + (7 * r) % entry] = (r % 2 ? -1 : 1) * c.qOutlier;
    q.fromDouble(values);
  }
  HostTensor table = HostTensor::i32({batch, maxBlocks}, blockTable);
  HostTensor lens = HostTensor::i32({batch}, c.seqLens);
  HostTensor out(c.activation, {batch, sq, n, c.kvLoraRank});
  HostTensor lse(DType::F32, {batch, n, sq});
  out.poison();
  lse.poison();
  std::vector<BufferView> args{q.view(), cache.view(), table.view(),
                               lens.view()};
  if (fp8)
    args.push_back(scaleT.view());
  // The scheduled form: split counts and NaN-poisoned workspaces, which
  // the CPU lowering ignores and the GPU kernels fill.
  std::optional<DecodeSplitBuffers> splits;
  if (c.schedule) {
    splits = makeSplitBuffers(c);
    ASSERT_TRUE(splits);
    args.insert(args.end(), {splits->numSplitsT.view(),
                             splits->splitOut.view(),
                             splits->splitLse.view()});
  }
  args.insert(args.end(), {out.view(), lse.view()});
  runKernel(*kernel, args);

  std::vector<double> outRef(batch * sq * n * c.kvLoraRank),
      lseRef(batch * n * sq);
  ref::decodeAttention(q.toDouble(), entries, blockTable, c.seqLens,
                       numBlocks, c.blockSize, maxBlocks, batch, sq, n,
                       c.kvLoraRank, c.ropeDim, scale, c.causal, outRef,
                       lseRef);
  expectClose(out.toDouble(), outRef, tolerance(c.activation), "decode out");
  // An outlier makes the scores large: each of the f32 roundings along a
  // score's accumulation (at most 32: 18 chunk pairs, two sets, the
  // scale) may be off by 2^-24 of the outlier's term, |qOutlier| x 1 (the
  // cache's values are within [-1, 1]) x scale, and the LSE with it.
  const double lseTolerance =
      kLseTolerance + 32 * std::ldexp(1.0, -24) * c.qOutlier * scale;
  expectLseClose(lse.toDouble(), lseRef, lseTolerance, "decode lse");
  if (splits && testingOnGpu())
    checkSplitPartials(c, *splits, q.toDouble(), entries, blockTable,
                       maxBlocks, scale);
}

/// Whether the mma-sync strategy has its tensor-core split kernel for `c`
/// on the test GPU, by the rule the lowering and the MLA layer share
/// (other cases fall back to the generic kernel).
bool hasMmaSplitKernel(const DecodeCase &c) {
  const cuda::Device *device = testGpu();
  if (!device)
    return false;
  GpuTarget target = cantFail(GpuTarget::forCapability(
      device->capability().major, device->capability().minor));
  return mma_decode::runsOn(decodeOperandTypes(c.activation, c.cache), c.kvLoraRank, c.ropeDim,
                            target.maxSharedBytesPerBlock());
}

/// Whether the wgmma strategy has its split kernel for `c`, by the rule
/// the lowering and the MLA layer share.
bool hasWgmmaSplitKernel(const DecodeCase &c) {
  GpuTarget sm90a = cantFail(GpuTarget::parse("sm_90a"));
  return wgmma_decode::runsOn(decodeOperandTypes(c.activation, c.cache), c.heads,
                              c.kvLoraRank, c.ropeDim,
                              sm90a.maxSharedBytesPerBlock());
}

/// Checks a decode case with the generic kernels and, on the GPU, with
/// each tensor-core split kernel that takes it: mma-sync's, and wgmma's on
/// an sm_90 device.
void checkDecode(const DecodeCase &c) {
  {
    SCOPED_TRACE("strategy generic");
    checkDecodeWith(c, std::nullopt);
  }
  if (testingOnGpu() && hasMmaSplitKernel(c)) {
    SCOPED_TRACE("strategy mma-sync");
    checkDecodeWith(c, KernelStrategy::TensorCore);
  }
  if (testGpuRunsWgmma() && hasWgmmaSplitKernel(c)) {
    SCOPED_TRACE("strategy wgmma");
    checkDecodeWith(c, KernelStrategy::Warpgroup);
  }
}

TEST(Decode, SingleQueryBf16) {
  checkDecode({DType::BF16, DType::BF16, 16, 1, 64, false, {1, 64, 65, 130}});
}

TEST(Decode, SpeculativeQueriesCausal) {
  for (int64_t sq = 1; sq <= 4; ++sq)
    checkDecode({DType::BF16, DType::BF16, 16, sq, 16, true, {4, 37, 16}});
}

TEST(Decode, HeadCounts) {
  for (int64_t heads : {1, 16, 128})
    checkDecode({DType::BF16, DType::BF16, heads, 2, 64, true, {70, 3}});
}

TEST(Decode, DTypesAndMixedCache) {
  checkDecode({DType::F32, DType::F32, 4, 1, 32, false, {33, 7}});
  checkDecode({DType::F16, DType::F16, 4, 2, 32, true, {33, 7}});
  checkDecode({DType::F32, DType::BF16, 4, 1, 16, false, {50}});
  checkDecode({DType::BF16, DType::F16, 4, 3, 16, true, {50, 9}});
}

/// FP8 caches, e4m3 and e5m2, under bf16 and f16 queries: the generic
/// kernel everywhere, and on an sm_90 GPU the wgmma kernel, which
/// dequantizes each tile exactly into q's type, so its error is the
/// two-byte cache's (tolerance(activation)) against the reference over the
/// dequantized entries. Empty and partial pages, Sq > 1 causal, 16, 64 and
/// 128 heads, planned schedules with many splits.
TEST(Decode, Fp8Caches) {
  for (DType cache : {DType::FP8E4M3, DType::FP8E5M2}) {
    SCOPED_TRACE(name(cache));
    checkDecode({DType::BF16, cache, 16, 1, 64, false, {1, 64, 65, 130, 0}});
    checkDecode({DType::F16, cache, 16, 2, 16, true, {37, 2, 200}});
    checkDecode({DType::BF16, cache, 128, 2, 64, true, {70, 3}});
    checkDecode({DType::BF16, cache, 16, 1, 32, false, {1000}, 512, 64,
                 DecodeSchedule{8, 16, 32, 0, {}, 7}});
    // q entries of 7e4, past f16's 65504 (the mma.sync kernel's f16 Q).
    checkDecode({DType::BF16, cache, 16, 1, 64, false, {200, 33}, 512, 64,
                 std::nullopt, 7.0e4});
    // Other widths: the mma.sync kernel's scores loop takes 14 and 9
    // 32-column chunks (two an iteration, then all nine in one).
    checkDecode({DType::BF16, cache, 16, 1, 64, false, {130, 7}, 384, 64});
    checkDecode({DType::BF16, cache, 16, 1, 64, false, {70, 0}, 256, 32});
    // 64 and 128 heads: on sm_90a the seesaw whose producer warpgroup
    // converts the tiles. Pages of 16 tokens (a tile from four pages), an
    // empty request, odd and even tile counts, a planned schedule with
    // several splits and a spare one, f16 q, and q entries of 7e4.
    checkDecode({DType::F16, cache, 128, 1, 16, false, {1000, 0, 129}});
    checkDecode({DType::BF16, cache, 64, 2, 64, true, {900, 5, 333}, 512, 64,
                 DecodeSchedule{132, 64, 64, 1, {}, 8}});
    checkDecode({DType::BF16, cache, 128, 1, 64, false, {200, 33}, 512, 64,
                 std::nullopt, 7.0e4});
  }
}

TEST(Decode, EmptyAndShortSequences) {
  // A request with no cached tokens (lse -inf, out 0), and causal requests
  // shorter than the query length, whose first queries see nothing.
  checkDecode({DType::F32, DType::F32, 2, 1, 16, false, {0, 5}});
  checkDecode({DType::F32, DType::F32, 2, 3, 16, true, {1, 2, 0}});
}

TEST(Decode, CacheWithoutPagesReadsNothing) {
  // Bad metadata: lengths > 0 over a cache of zero pages. Every row reads
  // nothing (out 0, lse -inf) instead of addressing page -1.
  for (std::optional<KernelStrategy> strategy :
       {std::optional<KernelStrategy>(), std::optional<KernelStrategy>(
                                             KernelStrategy::TensorCore)}) {
    if (strategy && !testingOnGpu())
      continue;
    SCOPED_TRACE(strategy ? "strategy mma-sync" : "default strategy");
    MlaDims dims;
    dims.numHeads = 16;
    DecodeAttentionSpec spec{dims, DType::BF16, DType::BF16, 16, false,
                             1.0f / std::sqrt(192.0f)};
    auto kernel =
        compileKernel(buildDecodeAttention(testContext(), spec), strategy);
    ASSERT_TRUE(kernel);
    HostTensor q(DType::BF16, {2, 1, 16, 576});
    q.fillRandom(rng());
    HostTensor cache(DType::BF16, {0, 16, 576});
    HostTensor table = HostTensor::i32({2, 2}, {0, 1, 2, 3});
    HostTensor lens = HostTensor::i32({2}, {20, 7});
    HostTensor out(DType::BF16, {2, 1, 16, 512}), lse(DType::F32, {2, 16, 1});
    out.poison();
    lse.poison();
    runKernel(*kernel, {q.view(), cache.view(), table.view(), lens.view(),
                        out.view(), lse.view()});
    for (double v : out.toDouble())
      ASSERT_EQ(v, 0.0);
    for (double v : lse.toDouble())
      ASSERT_EQ(v, -std::numeric_limits<double>::infinity());
  }
}

TEST(Decode, BlockSizes) {
  for (int64_t block : {16, 32, 128})
    checkDecode({DType::BF16, DType::BF16, 8, 1, block, false,
                 {static_cast<int32_t>(block + 3), 1}});
}

// The scheduled form (num_splits and caller-owned workspaces). On the CPU
// the schedule is ignored, so these check the verifier and builder path;
// on the GPU the kernels follow it, and the result must not change.

TEST(DecodeScheduled, ManyUnevenSplits) {
  // 1000 tokens in 32 pages of 32 tokens (the last one partial) over 8 SMs:
  // 7 splits of 5, 5, 5, 5, 4, 4, 4 pages.
  checkDecode({DType::F32, DType::BF16, 16, 1, 32, false, {1000}, 512, 64,
               DecodeSchedule{8, 16, 32, 0, {}, 7}});
  checkDecode({DType::BF16, DType::BF16, 16, 1, 32, false, {1000}, 512, 64,
               DecodeSchedule{8, 16, 32, 0, {}, 7}});
}

TEST(DecodeScheduled, HundredsOfSplits) {
  // The small-batch, long-context shape: one request cut into hundreds of
  // 16-token splits (more than a combine block has threads, and a count
  // that leaves its warps uneven), with a latent width that is not a whole
  // number of the combine's 128-column chunks.
  checkDecode({DType::BF16, DType::BF16, 16, 1, 16, false, {5003}, 512, 64,
               DecodeSchedule{400, 16, 16, 0, {}, 300}});
  checkDecode({DType::F16, DType::F16, 4, 2, 16, true, {2100, 7}, 320, 32,
               DecodeSchedule{300, 8, 16, 0, {}, 120}});
}

TEST(DecodeScheduled, EmptyOneTokenAndLongRequests) {
  // Split counts proportional to length: the empty and 1-token requests
  // keep one split (the empty one still gets out 0, lse -inf).
  checkDecode({DType::F32, DType::F32, 16, 1, 16, false, {0, 1, 1000, 37, 300},
               512, 64, DecodeSchedule{16, 16, 16, 0, {}, 5}});
}

TEST(DecodeScheduled, SpeculativeQueriesCausal) {
  // Sq = 3: each query row clamps its split's range to the tokens it sees,
  // so the last splits of the first rows are partly or wholly empty; the
  // 2-token request leaves its first row with no token at all.
  checkDecode({DType::BF16, DType::BF16, 8, 3, 16, true, {2, 500, 130}, 512,
               64, DecodeSchedule{48, 8, 16, 0, {}, 4}});
  checkDecode({DType::F32, DType::F32, 4, 3, 16, true, {3, 49, 17}, 512, 64,
               DecodeSchedule{64, 4, 16, 0, {}, 2}});
  // The same with 3 spare splits (S = 7): the wide combine, whose warps
  // merge their splits against their own running max, meets the empty
  // splits (LSE -inf) of the first rows, and warps with no split at all.
  checkDecode({DType::BF16, DType::BF16, 8, 3, 16, true, {2, 500, 130}, 512,
               64, DecodeSchedule{48, 8, 16, 3, {}, 4}});
}

TEST(DecodeScheduled, WorkspaceWiderThanPlan) {
  // S = most splits + 5: every request has splits that must exit early.
  checkDecode({DType::F32, DType::BF16, 16, 2, 64, true, {700, 64, 0, 129},
               512, 64, DecodeSchedule{16, 32, 64, 5, {}, 2}});
}

TEST(DecodeScheduled, FewSplitsWithARaggedLatentWidth) {
  // At most 4 splits a request (the plan's most is 3: the narrow combine,
  // a warp per row, the splits unrolled) over an Lkv of 320, two and a half
  // 128-column groups; the empty and 5-token requests keep one split (written
  // by the split kernel, skipped by the combine).
  checkDecode({DType::BF16,
               DType::BF16,
               16,
               1,
               16,
               false,
               {700, 5, 300, 0},
               320,
               64,
               DecodeSchedule{6, 16, 16, 0, {}, 3}});
}

TEST(DecodeScheduled, BadSplitCountsAreClamped) {
  // num_splits of 0 and negative are read as 1, one beyond S as S: the
  // kernels stay inside the workspaces and the result is unchanged.
  checkDecode({DType::F32, DType::F32, 16, 1, 16, false, {700, 300, 50, 900},
               512, 64,
               DecodeSchedule{16, 16, 16, 0, {{0, 0}, {1, 1000}, {2, -3}}, 3}});
}

TEST(DecodeScheduled, HeadCountsAndSmallDims) {
  for (int64_t heads : {1, 128})
    checkDecode({DType::BF16, DType::BF16, heads, 1, 64, false, {900, 5}, 512,
                 64, DecodeSchedule{132, 64, 64, 1, {}, 2}});
  // Latent and rope dims that are not multiples of the warp width.
  checkDecode({DType::F32, DType::F32, 3, 2, 16, true, {100, 7}, 40, 8,
               DecodeSchedule{32, 4, 16, 0, {}, 3}});
}

// Cases aimed at the mma-sync split kernel (16-row tiles of a request's
// (query, head) rows over 64-token KV tiles); on the CPU and with the
// generic strategy they are ordinary decode cases.

TEST(DecodeMma, HeadCountsAndQueryLengths) {
  // 8 heads at Sq 1 leave half a tile of padding rows; 128 heads at Sq 2
  // are 16 tiles. The 300-token request spans several KV tiles and, at 8
  // and 16 heads, two default splits (256 tokens per 16 heads), the second
  // one partial; the 3-token request is one partial tile; 0 is empty.
  for (int64_t heads : {8, 16, 128})
    for (int64_t sq : {1, 2})
      checkDecode({DType::BF16, DType::BF16, heads, sq, 64, sq > 1,
                   {70, 3, 300, 0}});
}

TEST(DecodeMma, F16CausalShortRequests) {
  // Sq 3 over 1- and 2-token requests: the first rows see nothing.
  checkDecode({DType::F16, DType::F16, 16, 3, 16, true, {1, 2, 0, 40}});
  checkDecode({DType::F16, DType::F16, 128, 1, 64, false, {129, 1}});
}

TEST(DecodeMma, BlockSizes) {
  // Pages of 16, 48 (not a power of two) and 64 tokens: a 64-token KV tile
  // gathers rows of several pages, or of part of one.
  for (int64_t block : {16, 48, 64})
    checkDecode({DType::BF16, DType::BF16, 16, 1, block, false,
                 {static_cast<int32_t>(block + 3), 1, 200}});
}

TEST(DecodeMma, SmallLatentDims) {
  // The smallest dims the tensor-core kernel takes: Lkv 64 (16 O columns
  // per warp), rope 16.
  checkDecode({DType::BF16, DType::BF16, 16, 2, 16, true, {90, 17}, 64, 16});
}

TEST(DecodeScheduled, MmaOddSplitCounts) {
  // Planned as 1, 1, 9, 1 and 3 splits of 7 pages of 16 tokens (the last
  // split of each request shorter).
  for (DType t : {DType::BF16, DType::F16})
    checkDecode({t, t, 16, 1, 16, false, {0, 1, 1000, 37, 300}, 512, 64,
                 DecodeSchedule{16, 16, 16, 0, {}, 9}});
}

TEST(DecodeScheduled, MmaManyHeadsCausal) {
  // 128 heads at Sq 2 (16 tiles per request): 8, 1 and 3 splits of 2 pages
  // of 64 tokens, one spare split that must stay unwritten.
  checkDecode({DType::BF16, DType::BF16, 128, 2, 64, true, {900, 5, 333},
               512, 64, DecodeSchedule{132, 64, 64, 1, {}, 8}});
  // 8 heads at Sq 2 fill one tile exactly: 1, 11 and 3 splits.
  checkDecode({DType::BF16, DType::BF16, 8, 2, 16, true, {2, 500, 130}, 512,
               64, DecodeSchedule{48, 8, 16, 0, {}, 11}});
}

TEST(DecodeScheduled, MmaBadSplitCountsAreClamped) {
  checkDecode({DType::BF16, DType::BF16, 16, 1, 16, false,
               {700, 300, 50, 900}, 512, 64,
               DecodeSchedule{16, 16, 16, 0, {{0, 0}, {1, 1000}, {2, -3}}, 3}});
}

// Cases aimed at the wgmma split kernel (64-row tiles, two warpgroups, KV
// tiles of 64 tokens in two shared-memory stages); elsewhere they are
// ordinary decode cases.

TEST(DecodeWgmma, HeadCountsQueryLengthsAndTiles) {
  // 64 heads at Sq 1 are one tile, at Sq 3 three; 96 heads at Sq 1 leave
  // half a tile of padding rows. Lengths cover an empty request, one
  // token, one tile exactly, one token past it and many tiles (both
  // stages in turn, the last tile partial).
  for (int64_t heads : {64, 96})
    for (int64_t sq : {1, 3})
      checkDecode({DType::BF16, DType::BF16, heads, sq, 64, sq > 1,
                   {0, 1, 64, 65, 1000}});
}

TEST(DecodeWgmma, F16AndBlockSizes) {
  // Pages of 16 and 48 tokens: a 64-token tile gathers rows of several.
  for (int64_t block : {16, 48})
    checkDecode({DType::F16, DType::F16, 128, 1, block, false,
                 {static_cast<int32_t>(4 * block + 5), 2, 300}});
}

TEST(DecodeWgmma, LatentDims) {
  // Smaller dims the kernel takes: Lkv 128 (64 O columns a warpgroup) and
  // 256, rope 64 and 128; and Lkv 512 with rope 128, where only one KV
  // stage fits in shared memory.
  checkDecode({DType::BF16, DType::BF16, 64, 2, 16, true, {90, 17}, 128, 64});
  checkDecode({DType::BF16, DType::BF16, 64, 1, 64, false, {200, 7}, 256, 128});
  checkDecode({DType::BF16, DType::BF16, 64, 2, 64, true, {300, 9}, 512, 128});
}

TEST(DecodeWgmma, TilesByTensorCopies) {
  // 128 heads over pages of 64 and 128 tokens, 1 and 2 queries (causal):
  // the KV tiles come in by tensor copies (TMA) from the cache's tensor
  // map. Lengths: empty, one token, one tile, one past it (a zero-filled
  // last B tile), half of a 128-token page, and many tiles; rows past each
  // end hold NaN, which the blocks must zero before P V.
  for (int64_t sq : {1, 2})
    for (int64_t block : {64, 128})
      checkDecode({DType::BF16,
                   DType::BF16,
                   128,
                   sq,
                   block,
                   sq > 1,
                   {0, 1, 64, 65, 192, 1000}});
  checkDecode({DType::F16, DType::F16, 128, 1, 64, false, {300, 7}});
}

TEST(DecodeScheduled, WgmmaTensorCopySplitCounts) {
  // The planned schedule's splits, on page boundaries, with 128 heads'
  // tiles by tensor copies; a spare split past the plan.
  checkDecode({DType::BF16,
               DType::BF16,
               128,
               1,
               64,
               false,
               {1, 4100, 37, 700},
               512,
               64,
               DecodeSchedule{132, 64, 64, 1, {}, 8}});
}

TEST(DecodeScheduled, WgmmaSplitCounts) {
  // 128 heads over 16-token pages, the longest request in several splits;
  // 64 heads at Sq 2 causal over 64-token pages with a spare split.
  checkDecode({DType::BF16, DType::BF16, 128, 1, 16, false, {1, 1000, 37, 300},
               512, 64, DecodeSchedule{132, 64, 16, 0, {}, 4}});
  checkDecode({DType::BF16, DType::BF16, 64, 2, 64, true, {900, 5, 333}, 512,
               64, DecodeSchedule{132, 64, 64, 1, {}, 8}});
}

//===----------------------------------------------------------------------===//
// Decode on device buffers (GPU only): misaligned bases, and timings.
//===----------------------------------------------------------------------===//

/// How a decode test runs its compiled kernel on its arguments.
using KernelRun = std::function<llvm::Error(const GpuKernel &,
                                            const std::vector<BufferView> &)>;

/// Decode on device buffers `inputOffset` bytes past aligned allocations
/// (q and the cache) with every strategy the device runs (or `strategies`);
/// with a `workspaceOffset`, under a plan of 3 and 1 splits whose
/// workspaces start that many bytes past theirs; out starts `outOffset`
/// bytes past its allocation. `run` runs the kernel (a plain call by
/// default). The cache is bf16, or `cacheType` (an FP8 cache holds value /
/// 0.02; the reference reads code x 0.02).
void checkDecodeOnDeviceBuffers(
    size_t inputOffset, std::optional<size_t> workspaceOffset,
    size_t outOffset = 0,
    std::optional<std::vector<KernelStrategy>> strategies = std::nullopt,
    const KernelRun &run = nullptr, DType cacheType = DType::BF16) {
  // 64 heads, so that the wgmma kernel takes the case too.
  const int64_t batch = 2, sq = 2, n = 64, block = 16, latent = 512,
                rope = 64, entry = latent + rope, splits = 3;
  std::vector<int32_t> lens{100, 7};
  const int64_t maxBlocks = 7, numBlocks = batch * maxBlocks;
  float scale = 1.0f / std::sqrt(192.0f);
  std::vector<int32_t> blockTable(batch * maxBlocks);
  std::iota(blockTable.begin(), blockTable.end(), 0);
  std::shuffle(blockTable.begin(), blockTable.end(), rng());
  HostTensor q(DType::BF16, {batch, sq, n, entry}),
      cache(cacheType, {numBlocks, block, entry});
  q.fillRandom(rng(), -2.0, 2.0);
  const bool fp8 = isFp8(cacheType);
  const double kvScale = fp8 ? 0.02 : 1.0;
  cache.fillRandom(rng(), -1.0 / kvScale, 1.0 / kvScale);
  std::vector<double> entries = cache.toDouble();
  for (double &v : entries)
    v = double(float(v) * float(kvScale));
  HostTensor scaleT(DType::F32, {1});
  scaleT.fromDouble({kvScale});
  HostTensor table = HostTensor::i32({batch, maxBlocks}, blockTable);
  HostTensor lensT = HostTensor::i32({batch}, lens);
  HostTensor numSplits = HostTensor::i32({batch}, {splits, 1});
  std::vector<double> outRef(batch * sq * n * latent), lseRef(batch * n * sq);
  ref::decodeAttention(q.toDouble(), entries, blockTable, lens, numBlocks,
                       block, maxBlocks, batch, sq, n, latent, rope, scale,
                       true, outRef, lseRef);
  for (KernelStrategy strategy :
       strategies ? *strategies : gpuStrategies(/*withGeneric=*/true)) {
    SCOPED_TRACE("strategy " + name(strategy));
    MlaDims dims;
    dims.numHeads = n;
    dims.kvLoraRank = latent;
    dims.ropeDim = rope;
    DecodeAttentionSpec spec{dims, DType::BF16, cacheType, block, true,
                             scale};
    spec.withSplitPlan = workspaceOffset.has_value();
    auto kernel =
        compileOnGpu(buildDecodeAttention(testContext(), spec), strategy);
    ASSERT_TRUE(kernel);
    HostTensor out(DType::BF16, {batch, sq, n, latent}),
        lse(DType::F32, {batch, n, sq});
    HostTensor splitOut(DType::F32, {batch, sq, n, splits, latent}),
        splitLse(DType::F32, {batch, sq, n, splits});
    for (HostTensor *t : {&out, &lse, &splitOut, &splitLse})
      t->poison();
    DeviceTensor dq = DeviceTensor::of(q, inputOffset),
                 dc = DeviceTensor::of(cache, inputOffset),
                 dt = DeviceTensor::of(table), dl = DeviceTensor::of(lensT),
                 dout = DeviceTensor::of(out, outOffset),
                 dlse = DeviceTensor::of(lse);
    std::vector<BufferView> args{dq.view, dc.view, dt.view, dl.view};
    DeviceTensor dscale = DeviceTensor::of(scaleT);
    if (fp8)
      args.push_back(dscale.view);
    std::optional<DeviceTensor> dns, dso, dsl;
    if (workspaceOffset) {
      dns = DeviceTensor::of(numSplits);
      dso = DeviceTensor::of(splitOut, *workspaceOffset);
      dsl = DeviceTensor::of(splitLse, *workspaceOffset);
      args.insert(args.end(), {dns->view, dso->view, dsl->view});
    }
    args.insert(args.end(), {dout.view, dlse.view});
    llvm::Error error = run ? run(*kernel, args) : kernel->run(args);
    ASSERT_FALSE(bool(error)) << llvm::toString(std::move(error));
    dout.copyTo(out);
    dlse.copyTo(lse);
    expectClose(out.toDouble(), outRef, tolerance(DType::BF16), "decode out");
    expectLseClose(lse.toDouble(), lseRef, kLseTolerance, "decode lse");
  }
}

TEST(DecodeMma, MisalignedQueryAndCache) {
  // 2 bytes off: no 16-byte copies are possible, so the tensor-core
  // kernels copy their tiles element by element.
  if (!testingOnGpu() || !testGpu())
    GTEST_SKIP() << "device buffers: GPU only";
  checkDecodeOnDeviceBuffers(2, std::nullopt);
}

TEST(DecodeMma, Fp8CacheMisalignedAndAligned) {
  // The FP8 kernel's codes: 8 bytes off (q too), element by element; 16
  // bytes off, 16-byte copies.
  if (!testingOnGpu() || !testGpu())
    GTEST_SKIP() << "device buffers: GPU only";
  for (size_t offset : {8, 16}) {
    SCOPED_TRACE("offset " + std::to_string(offset));
    checkDecodeOnDeviceBuffers(offset, std::nullopt, 0,
                               {{KernelStrategy::TensorCore}}, nullptr,
                               DType::FP8E4M3);
  }
}

TEST(DecodeWgmma, FallbackCompiledAtItsFirstLaunchInsideAGraphCapture) {
  // q and the cache 2 bytes off: the host code launches the generic split
  // kernel, whose module the runtime did not load with the others (no
  // driver compile of it during the compile) but at that first launch,
  // here while the stream is being captured (thread-local mode, in which a
  // module load is refused unless the shims relax it); the replayed graph
  // computes the decode.
  if (!testingOnGpu() || !testGpu() || !testGpuRunsWgmma())
    GTEST_SKIP() << "the wgmma decode: an sm_90a GPU only";
  auto inCapturedGraph = [](const GpuKernel &kernel,
                            const std::vector<BufferView> &args) {
    // (A kernel-cache hit loads its modules without this timeline.)
    const CompileEvent &event = kernel.compileEvent();
    if (event.outcome == runtime::CacheOutcome::Compiled) {
      bool splitKernelLoaded = false;
      for (const CompileEvent::DriverCompile &compile : event.driverCompiles) {
        bool split = compile.module.rfind("decode_attention_split_", 0) == 0;
        bool wgmma = compile.module.find("wgmma") != std::string::npos;
        EXPECT_FALSE(split && !wgmma)
            << compile.module << " was loaded with the other modules";
        splitKernelLoaded |= split && wgmma;
      }
      EXPECT_TRUE(splitKernelLoaded) << event.describeDriverCompiles();
    }
    llvm::Expected<cuda::Stream> stream = cuda::Stream::create();
    if (!stream)
      return stream.takeError();
    llvm::Expected<cuda::CapturedGraph> graph = cuda::CapturedGraph::capture(
        stream->handle(), [&] { return kernel.run(args, stream->handle()); });
    if (!graph)
      return graph.takeError();
    if (llvm::Error error = graph->launch(stream->handle()))
      return error;
    return stream->synchronize();
  };
  checkDecodeOnDeviceBuffers(2, std::nullopt, 0, {{KernelStrategy::Warpgroup}},
                             inCapturedGraph);
}

TEST(DecodeWgmma, MisalignedSplitWorkspaces) {
  // Workspaces 4 bytes off (f32-aligned, not 16-byte aligned): the wgmma
  // kernel cannot store its partial rows in 16-byte vectors and writes
  // them element by element, and the combine reads them so (the 3-split
  // request; the 1-split one gets out and lse from its split).
  if (!testingOnGpu() || !testGpu())
    GTEST_SKIP() << "device buffers: GPU only";
  checkDecodeOnDeviceBuffers(0, 4);
}

TEST(DecodeWgmma, MisalignedOutput) {
  // out 2 bytes off (bf16-aligned, not 16-byte aligned): the 1-split
  // request's rows cannot leave in 16-byte vectors and are stored element
  // by element; the 3-split one's come from the combine.
  if (!testingOnGpu() || !testGpu())
    GTEST_SKIP() << "device buffers: GPU only";
  checkDecodeOnDeviceBuffers(0, 0, 2);
}

/// Runs a bf16 causal prefill compiled for the test GPU by `strategy` (for
/// `chip` if given) on device copies of fresh inputs that start
/// `offsetBytes` past an aligned allocation (out `outOffsetBytes` past
/// its), and checks it against the float64 reference.
void checkPrefillOnGpu(KernelStrategy strategy, int64_t qkDim, int64_t vDim,
                       size_t offsetBytes, const char *chip = nullptr,
                       size_t outOffsetBytes = 0) {
  const int64_t n = 2;
  std::vector<int32_t> cuQ = prefixSums({70, 9}), cuK = prefixSums({90, 9});
  int64_t tokens = cuQ.back(), keys = cuK.back();
  float scale = 1.0f / std::sqrt(float(qkDim));
  HostTensor q(DType::BF16, {tokens, n, qkDim}), k(DType::BF16, {keys, n, qkDim}),
      v(DType::BF16, {keys, n, vDim});
  q.fillRandom(rng(), -2.0, 2.0);
  k.fillRandom(rng(), -2.0, 2.0);
  v.fillRandom(rng());
  HostTensor cuQT = HostTensor::i32({(int64_t)cuQ.size()}, cuQ);
  HostTensor cuKT = HostTensor::i32({(int64_t)cuK.size()}, cuK);
  std::vector<double> outRef(tokens * n * vDim), lseRef(n * tokens);
  ref::prefillAttention(q.toDouble(), k.toDouble(), v.toDouble(), cuQ, cuK, n,
                        qkDim, vDim, scale, true, outRef, lseRef);
  auto kernel = compileOnGpu(
      buildPrefillAttention(testContext(),
                            {n, qkDim, vDim, DType::BF16, true, scale}),
      strategy, chip);
  ASSERT_TRUE(kernel);
  HostTensor out(DType::BF16, {tokens, n, vDim}), lse(DType::F32, {n, tokens});
  out.poison();
  lse.poison();
  DeviceTensor dq = DeviceTensor::of(q, offsetBytes),
               dk = DeviceTensor::of(k, offsetBytes),
               dv = DeviceTensor::of(v, offsetBytes),
               dcq = DeviceTensor::of(cuQT), dck = DeviceTensor::of(cuKT),
               dout = DeviceTensor::of(out, outOffsetBytes),
               dlse = DeviceTensor::of(lse);
  llvm::Error error = kernel->run(
      {dq.view, dk.view, dv.view, dcq.view, dck.view, dout.view, dlse.view});
  ASSERT_FALSE(bool(error)) << llvm::toString(std::move(error));
  dout.copyTo(out);
  dlse.copyTo(lse);
  expectClose(out.toDouble(), outRef, tolerance(DType::BF16), "prefill out");
  expectLseClose(lse.toDouble(), lseRef, kLseTolerance, "prefill lse");
}

TEST(PrefillMma, MisalignedQueryKeysValues) {
  // q, k and v 2 bytes past aligned allocations: the mma-sync prefill
  // copies its tiles element by element; with wgmma the host launches the
  // generic kernel instead of the tensor-core one.
  if (!testingOnGpu() || !testGpu())
    GTEST_SKIP() << "device buffers: GPU only";
  for (KernelStrategy strategy : gpuStrategies(/*withGeneric=*/true)) {
    SCOPED_TRACE("strategy " + name(strategy));
    checkPrefillOnGpu(strategy, 192, 128, 2);
  }
}

TEST(PrefillMma, MisalignedOutput) {
  // out 2 bytes past an aligned allocation: the tensor-core prefills
  // cannot store their rows in 16-byte vectors and store them element by
  // element.
  if (!testingOnGpu() || !testGpu())
    GTEST_SKIP() << "device buffers: GPU only";
  for (KernelStrategy strategy : gpuStrategies(/*withGeneric=*/false)) {
    SCOPED_TRACE("strategy " + name(strategy));
    checkPrefillOnGpu(strategy, 192, 128, 0, nullptr, 2);
  }
}

TEST(PrefillMma, OneStageRingOfTheSmallSharedMemoryChips) {
  // Compiled for sm_86 (99 KiB of shared memory a block), qk 256 leaves
  // room for one K/V stage only: the kernel waits for each tile whole and
  // copies the next after its last use. sm_86 PTX runs on newer GPUs.
  if (!testingOnGpu() || !testGpu())
    GTEST_SKIP() << "GPU only";
  checkPrefillOnGpu(KernelStrategy::TensorCore, 256, 128, 0, "sm_86");
}

/// Milliseconds per call of `kernel` on `args` (after warming up).
double timeCalls(const GpuKernel &kernel, const std::vector<BufferView> &args,
                 int calls) {
  auto check = [](llvm::Error e) {
    if (e)
      ADD_FAILURE() << llvm::toString(std::move(e));
  };
  for (int i = 0; i < 3; ++i)
    check(kernel.run(args));
  auto start = cuda::Event::create(), end = cuda::Event::create();
  if (!start || !end) {
    ADD_FAILURE() << "no events";
    llvm::consumeError(start.takeError());
    llvm::consumeError(end.takeError());
    return 0.0;
  }
  check(start->record(nullptr));
  for (int i = 0; i < calls; ++i)
    check(kernel.run(args));
  check(end->record(nullptr));
  check(end->synchronize());
  auto ms = cuda::Event::elapsedMs(*start, *end);
  if (!ms) {
    ADD_FAILURE() << llvm::toString(ms.takeError());
    return 0.0;
  }
  return *ms / calls;
}

TEST(DecodeTiming, MmaVersusGeneric) {
  // Opt-in (MLA_TEST_TIMING=1 with MLA_TEST_DEVICE=gpu): bf16 decode over
  // a paged cache of 64-token pages, every strategy the device runs, with the default
  // schedule and with a split plan sized for the device; prints the time
  // per call, the cache bandwidth and the tensor throughput, and checks
  // that both strategies agree.
  if (!testingOnGpu() || !testGpu() || !std::getenv("MLA_TEST_TIMING"))
    GTEST_SKIP() << "set MLA_TEST_TIMING=1 with MLA_TEST_DEVICE=gpu";
  const cuda::Device &device = *testGpu();
  struct Shape {
    int64_t heads, sq, batch, seqLen;
  };
  const int64_t latent = 512, rope = 64, entry = latent + rope, block = 64;
  float scale = 1.0f / std::sqrt(192.0f);
  for (Shape shape : {Shape{16, 1, 64, 4096}, Shape{128, 1, 64, 4096},
                      Shape{128, 2, 64, 4096}, Shape{16, 1, 8, 16384},
                      Shape{128, 1, 132, 1024}}) {
    const int64_t b = shape.batch, n = shape.heads, sq = shape.sq;
    const int64_t maxBlocks = (shape.seqLen + block - 1) / block;
    const int64_t numBlocks = b * maxBlocks;
    std::vector<int32_t> lens(b, static_cast<int32_t>(shape.seqLen));
    std::vector<int32_t> blockTable(b * maxBlocks);
    std::iota(blockTable.begin(), blockTable.end(), 0);
    HostTensor q(DType::BF16, {b, sq, n, entry}),
        cache(DType::BF16, {numBlocks, block, entry});
    q.fillRandom(rng(), -2.0, 2.0);
    cache.fillRandom(rng());
    HostTensor table = HostTensor::i32({b, maxBlocks}, blockTable);
    HostTensor lensT = HostTensor::i32({b}, lens);
    DeviceTensor dq = DeviceTensor::of(q), dc = DeviceTensor::of(cache),
                 dt = DeviceTensor::of(table), dl = DeviceTensor::of(lensT);
    double cacheBytes = double(b) * shape.seqLen * entry * 2;
    double flops = 2.0 * b * sq * n * shape.seqLen * (entry + latent);
    std::vector<std::vector<double>> results;
    std::vector<KernelStrategy> strategies =
        gpuStrategies(/*withGeneric=*/true);
    for (bool planned : {false, true})
      for (KernelStrategy strategy : strategies) {
        MlaDims dims;
        dims.numHeads = n;
        dims.kvLoraRank = latent;
        dims.ropeDim = rope;
        DecodeAttentionSpec spec{dims, DType::BF16, DType::BF16, block, sq > 1,
                                 scale};
        spec.withSplitPlan = planned;
        auto kernel =
            compileOnGpu(buildDecodeAttention(testContext(), spec), strategy);
        ASSERT_TRUE(kernel);
        HostTensor out(DType::BF16, {b, sq, n, latent}),
            lse(DType::F32, {b, n, sq});
        DeviceTensor dout = DeviceTensor::of(out), dlse = DeviceTensor::of(lse);
        std::vector<BufferView> args{dq.view, dc.view, dt.view, dl.view};
        std::optional<DeviceTensor> dns, dso, dsl;
        int64_t splits = 0;
        if (planned) {
          runtime::DecodeKernelShape kernelShape;
          kernelShape.strategy = strategy;
          kernelShape.operandTypes = DecodeOperandTypes::SameTwoByte;
          kernelShape.dims.numHeads = n;
          kernelShape.dims.kvLoraRank = latent;
          kernelShape.dims.ropeDim = rope;
          kernelShape.queryLen = sq;
          kernelShape.blockSize = block;
          kernelShape.numSms = device.multiprocessorCount();
          kernelShape.sharedBytesPerSm = cantFail(device.attribute(
              cuda::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR));
          kernelShape.maxSharedBytesPerBlock =
              kernel->target().maxSharedBytesPerBlock();
          runtime::DecodeSplitConfig config =
              runtime::decodeScheduleFor(kernelShape);
          auto plan = runtime::planDecodeSplits(lens, config);
          ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
          splits = *std::max_element(plan->numSplits.begin(),
                                     plan->numSplits.end());
          HostTensor ns = HostTensor::i32({b}, plan->numSplits);
          HostTensor so(DType::F32, {b, sq, n, splits, latent}),
              sl(DType::F32, {b, sq, n, splits});
          dns = DeviceTensor::of(ns);
          dso = DeviceTensor::of(so);
          dsl = DeviceTensor::of(sl);
          args.insert(args.end(), {dns->view, dso->view, dsl->view});
        }
        args.insert(args.end(), {dout.view, dlse.view});
        double ms = timeCalls(*kernel, args, 10);
        dout.copyTo(out);
        results.push_back(out.toDouble());
        std::printf("[ timing   ] %-8s %-9s heads %3lld sq %lld batch %3lld "
                    "seq %5lld splits %3lld: %8.3f ms  %6.0f GB/s  %6.1f "
                    "TFLOP/s\n",
                    name(strategy).c_str(), planned ? "planned" : "default",
                    (long long)n, (long long)sq, (long long)b,
                    (long long)shape.seqLen, (long long)splits, ms,
                    cacheBytes / ms * 1e-6, flops / ms * 1e-9);
      }
    for (size_t i = 1; i < results.size(); ++i)
      expectClose(results[i], results[0], 2e-2, "strategies agree");
  }
}

} // namespace
