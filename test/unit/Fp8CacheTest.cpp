//===- Fp8CacheTest.cpp - The FP8 KV cache formats ------------------------===//
//
// The host conversions (include/mla/Support/Float8.h) against LLVM's
// APFloat, an independent implementation of the same formats; then the
// kernels' own conversions (Fp8Convert) through the ops that touch an FP8
// cache, bit for bit against the host's, and the decode over an FP8 cache
// against the float64 reference over the dequantized cache, on the suite's
// device (the CPU, or the GPU's generic kernels).
//
//===----------------------------------------------------------------------===//

#include "MlaReference.h"
#include "TestSupport.h"
#include "mla/Builders/KernelBuilders.h"
#include "mla/Support/Float8.h"

#include "llvm/ADT/APFloat.h"

#include <algorithm>
#include <cmath>
#include <numeric>

using namespace mla;
using namespace mla::test;
using mla::HostTensor;

namespace {

const llvm::fltSemantics &semanticsOf(const Fp8Format &f) {
  return f.mantissaBits == 3 ? llvm::APFloat::Float8E4M3FN()
                             : llvm::APFloat::Float8E5M2();
}

float apDecode(uint8_t code, const Fp8Format &f) {
  llvm::APFloat v(semanticsOf(f), llvm::APInt(8, code));
  return v.convertToFloat();
}

/// APFloat's nearest-even rounding of `x`, for |x| within the format.
uint8_t apEncode(float x, const Fp8Format &f) {
  llvm::APFloat v(x);
  bool lost;
  v.convert(semanticsOf(f), llvm::APFloat::rmNearestTiesToEven, &lost);
  return uint8_t(v.bitcastToAPInt().getZExtValue());
}

class Fp8Formats : public ::testing::TestWithParam<DType> {
protected:
  const Fp8Format &format() const {
    return GetParam() == DType::FP8E4M3 ? kFp8E4M3 : kFp8E5M2;
  }
};

TEST_P(Fp8Formats, EveryCodeDecodesAsApFloatDoes) {
  for (int code = 0; code < 256; ++code) {
    float got = fp8ToFloat(uint8_t(code), format()),
          want = apDecode(uint8_t(code), format());
    if (std::isnan(want))
      EXPECT_TRUE(std::isnan(got)) << code;
    else
      EXPECT_EQ(got, want) << code;
  }
}

TEST_P(Fp8Formats, EncodingRoundsToNearestEvenAndSaturates) {
  const Fp8Format &f = format();
  float largest = fp8ToFloat(f.largestCode, f);
  std::vector<float> values{0.0f, -0.0f, largest, -largest};
  // Every finite value, the midpoints between neighbours (ties), and a
  // hair either side of them.
  for (int code = 0; code < 256; ++code) {
    float v = fp8ToFloat(uint8_t(code), f);
    float next = fp8ToFloat(uint8_t(code + 1), f);
    if (!std::isfinite(v))
      continue;
    values.push_back(v);
    if (code != f.largestCode && code != 0xff && std::isfinite(next) &&
        (code & 0x7f) < f.largestCode) {
      float mid = 0.5f * (v + next);
      values.insert(values.end(), {mid, std::nextafter(mid, v),
                                   std::nextafter(mid, next)});
    }
  }
  std::uniform_real_distribution<float> any(-largest, largest);
  for (int i = 0; i < 10000; ++i)
    values.push_back(any(rng()) * std::ldexp(1.0f, -int(rng()() % 20)));
  for (float v : values)
    EXPECT_EQ(floatToFp8(v, f), apEncode(v, f)) << v;
  // Beyond the range (infinities included): the largest finite value.
  for (float v : {largest * 1.01f, largest * 4.0f, INFINITY, 1e30f}) {
    EXPECT_EQ(floatToFp8(v, f), f.largestCode) << v;
    EXPECT_EQ(floatToFp8(-v, f), 0x80 | f.largestCode) << -v;
  }
  EXPECT_TRUE(std::isnan(fp8ToFloat(floatToFp8(NAN, f), f)));
}

/// A tensor's bytes (the FP8 codes of an FP8 tensor).
uint8_t *codes(HostTensor &t) { return static_cast<uint8_t *>(t.view().data); }

/// Every entry stored as value / scale, bit for bit the host's encoding,
/// values far beyond the range included (saturated).
TEST_P(Fp8Formats, ConcatAndCacheQuantizesAsTheHostDoes) {
  const Fp8Format &f = format();
  int64_t latent = 512, rope = 64, blockSize = 16, numBlocks = 2, tokens = 5;
  auto kernel = compileKernel(buildConcatAndCache(
      testContext(), {latent, rope, blockSize, DType::F32, GetParam()}));
  ASSERT_TRUE(kernel);
  HostTensor kvc(DType::F32, {tokens, latent}), kpe(DType::F32, {tokens, rope});
  kvc.fillRandom(rng(), -3.0, 3.0);
  kpe.fillRandom(rng(), -3.0, 3.0);
  std::vector<double> kvcValues = kvc.toDouble();
  kvcValues[7] = 1e6; // saturates
  kvcValues[8] = -1e6;
  kvcValues[9] = 1e-9; // underflows to 0 (or the smallest subnormal)
  kvc.fromDouble(kvcValues);
  float scale = 0.0173f;
  HostTensor scaleT(DType::F32, {1});
  scaleT.fromDouble({scale});
  std::vector<int64_t> slots{3, -1, 17, 0, 31};
  HostTensor slotT = HostTensor::i64({tokens}, slots);
  HostTensor cache(GetParam(), {numBlocks, blockSize, latent + rope});
  cache.fillRandom(rng());
  std::vector<uint8_t> want(codes(cache), codes(cache) + cache.sizeInBytes());
  runKernel(*kernel, {kvc.view(), kpe.view(), slotT.view(), scaleT.view(),
                      cache.view()});
  std::vector<double> kpeValues = kpe.toDouble();
  for (int64_t t = 0; t < tokens; ++t) {
    if (slots[t] < 0)
      continue;
    for (int64_t c = 0; c < latent + rope; ++c) {
      double v = c < latent ? kvcValues[t * latent + c]
                            : kpeValues[t * rope + c - latent];
      want[slots[t] * (latent + rope) + c] = floatToFp8(float(v) / scale, f);
    }
  }
  EXPECT_TRUE(std::equal(want.begin(), want.end(), codes(cache)));
}

/// The values where rounding is decided (every code's value, the midpoints
/// between neighbours and a hair either side, subnormals included) and
/// values beyond the range, through the kernel's encoder: its codes are the
/// host's.
TEST_P(Fp8Formats, ConcatAndCacheRoundsEveryTieAsTheHostDoes) {
  const Fp8Format &f = format();
  std::vector<float> sweep;
  for (int code = 0; code < 256; ++code) {
    float v = fp8ToFloat(uint8_t(code), f), next = fp8ToFloat(uint8_t(code + 1), f);
    if (!std::isfinite(v))
      continue;
    sweep.push_back(v);
    if ((code & 0x7f) < f.largestCode && std::isfinite(next)) {
      float mid = 0.5f * (v + next);
      sweep.insert(sweep.end(), {mid, std::nextafter(mid, v),
                                 std::nextafter(mid, next)});
    }
  }
  float largest = fp8ToFloat(f.largestCode, f);
  sweep.insert(sweep.end(), {largest * 1.5f, -largest * 3.0f, INFINITY, -INFINITY});
  int64_t latent = 512, rope = 64, blockSize = 16;
  int64_t tokens = int64_t(sweep.size() + latent - 1) / latent;
  auto kernel = compileKernel(buildConcatAndCache(
      testContext(), {latent, rope, blockSize, DType::F32, GetParam()}));
  ASSERT_TRUE(kernel);
  std::vector<double> values(tokens * latent, 0.0);
  std::copy(sweep.begin(), sweep.end(), values.begin());
  HostTensor kvc(DType::F32, {tokens, latent}), kpe(DType::F32, {tokens, rope});
  kvc.fromDouble(values);
  kpe.fromDouble(std::vector<double>(tokens * rope, 0.0));
  HostTensor scaleT(DType::F32, {1});
  scaleT.fromDouble({1.0});
  std::vector<int64_t> slots(tokens);
  std::iota(slots.begin(), slots.end(), 0);
  HostTensor slotT = HostTensor::i64({tokens}, slots);
  int64_t numBlocks = (tokens + blockSize - 1) / blockSize;
  HostTensor cache(GetParam(), {numBlocks, blockSize, latent + rope});
  runKernel(*kernel, {kvc.view(), kpe.view(), slotT.view(), scaleT.view(),
                      cache.view()});
  for (size_t i = 0; i < sweep.size(); ++i) {
    int64_t t = int64_t(i) / latent, c = int64_t(i) % latent;
    EXPECT_EQ(codes(cache)[t * (latent + rope) + c], floatToFp8(sweep[i], f))
        << sweep[i];
  }
}

/// Every code of the cache, dequantized: code's value x scale, exactly.
TEST_P(Fp8Formats, GatherDequantizesEveryCode) {
  const Fp8Format &f = format();
  int64_t entry = 256, blockSize = 4;
  auto kernel = compileKernel(
      buildGatherCache(testContext(), {entry, blockSize, GetParam(), DType::F32}));
  ASSERT_TRUE(kernel);
  HostTensor cache(GetParam(), {2, blockSize, entry});
  for (size_t i = 0; i < cache.sizeInBytes(); ++i)
    codes(cache)[i] = uint8_t(i % 256);
  float scale = 3.5f;
  HostTensor scaleT(DType::F32, {1});
  scaleT.fromDouble({scale});
  HostTensor table = HostTensor::i32({1, 2}, {1, 0});
  HostTensor cu = HostTensor::i32({2}, {0, 8}), starts = HostTensor::i32({1}, {0});
  HostTensor workspace(DType::F32, {8, entry});
  runKernel(*kernel, {cache.view(), table.view(), cu.view(), starts.view(),
                      scaleT.view(), workspace.view()});
  std::vector<double> got = workspace.toDouble();
  for (int64_t row = 0; row < 8; ++row)
    for (int64_t c = 0; c < entry; ++c) {
      int64_t page = row < 4 ? 1 : 0;
      uint8_t code = codes(cache)[(page * blockSize + row % 4) * entry + c];
      float want = fp8ToFloat(code, f) * scale;
      if (std::isnan(want))
        EXPECT_TRUE(std::isnan(got[row * entry + c])) << int(code);
      else
        EXPECT_EQ(float(got[row * entry + c]), want) << int(code);
    }
}

/// The absorbed decode over an FP8 cache against the float64 reference
/// over the dequantized cache (code x scale): the kernel dequantizes
/// exactly and computes in f32, so the f32 tolerance holds.
TEST_P(Fp8Formats, DecodeReadsTheDequantizedCache) {
  MlaDims d{8, 64, 32, 16, 32};
  int64_t blockSize = 16, batch = 3, queryLen = 2, maxBlocks = 4;
  int64_t numBlocks = batch * maxBlocks;
  float softmaxScale = 0.125f, kvScale = 0.021f;
  DecodeAttentionSpec spec{d, DType::F32, GetParam(), blockSize,
                           /*causal=*/true, softmaxScale};
  auto kernel = compileKernel(buildDecodeAttention(testContext(), spec));
  ASSERT_TRUE(kernel);
  int64_t entry = d.cacheEntry(), n = d.numHeads;
  HostTensor q(DType::F32, {batch, queryLen, n, entry});
  q.fillRandom(rng(), -2.0, 2.0);
  HostTensor cache(GetParam(), {numBlocks, blockSize, entry});
  std::vector<double> raw(cache.numElements());
  std::uniform_real_distribution<double> u(-40.0, 40.0);
  for (double &v : raw)
    v = u(rng());
  cache.fromDouble(raw);
  std::vector<int32_t> table(numBlocks);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng());
  std::vector<int32_t> lens{2, 37, 64};
  HostTensor tableT = HostTensor::i32({batch, maxBlocks}, table);
  HostTensor lensT = HostTensor::i32({batch}, lens);
  HostTensor scaleT(DType::F32, {1});
  scaleT.fromDouble({kvScale});
  HostTensor out(DType::F32, {batch, queryLen, n, d.kvLoraRank});
  HostTensor lse(DType::F32, {batch, n, queryLen});
  out.poison();
  lse.poison();
  runKernel(*kernel, {q.view(), cache.view(), tableT.view(), lensT.view(),
                      scaleT.view(), out.view(), lse.view()});
  std::vector<double> dequantized = cache.toDouble();
  for (double &v : dequantized)
    v = double(float(v) * kvScale);
  std::vector<double> outRef, lseRef;
  ref::decodeAttention(q.toDouble(), dequantized, table, lens, numBlocks,
                       blockSize, maxBlocks, batch, queryLen, n, d.kvLoraRank,
                       d.ropeDim, softmaxScale, /*causal=*/true, outRef, lseRef);
  expectClose(out.toDouble(), outRef, tolerance(DType::F32), "decode output");
  expectClose(lse.toDouble(), lseRef, tolerance(DType::F32), "decode lse");
}

INSTANTIATE_TEST_SUITE_P(Formats, Fp8Formats,
                         ::testing::Values(DType::FP8E4M3, DType::FP8E5M2),
                         [](const auto &info) {
                           return std::string(
                               info.param == DType::FP8E4M3 ? "E4M3" : "E5M2");
                         });

} // namespace
