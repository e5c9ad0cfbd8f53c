//===- MetadataDecodeSplits.cpp - Split-KV plan for decode ----------------===//

#include "MetadataSupport.h"

#include "mla/Runtime/MetadataDecodeSplits.h"
#include "mla/Target/MmaDecodeShape.h"
#include "mla/Target/WgmmaDecodeShape.h"

#include <algorithm>
#include <limits>

namespace mla::runtime {

using detail::cdiv;
using detail::fail;
using llvm::Twine;

static llvm::Error checkConfig(const DecodeSplitConfig &c) {
  struct Field {
    const char *name;
    int64_t value;
    int64_t least, most;
  };
  // The bounds keep every product the planner forms (SMs x CTAs, heads x
  // new tokens, a batch's summed cost) inside int64 (found by the plan
  // fuzzer); real devices and schedules are far inside them.
  constexpr int64_t k16 = int64_t(1) << 16, k31 = int64_t(1) << 31;
  const Field fields[] = {
      {"numSms", c.numSms, 1, k16},
      {"ctasPerSm", c.ctasPerSm, 1, k16},
      {"numHeads", c.numHeads, 1, k16},
      {"queryLen", c.queryLen, 1, k16},
      {"rowsPerCta", c.rowsPerCta, 1, k16},
      {"tokensPerBlock", c.tokensPerBlock, 1, k31},
      {"minTokensPerSplit", c.minTokensPerSplit, 1, k31},
      {"fixedOverheadBlocks", c.fixedOverheadBlocks, 0, k31},
      {"maxSplitsPerRequest", c.maxSplitsPerRequest, 0, k31},
  };
  for (const Field &f : fields)
    if (f.value < f.least || f.value > f.most)
      return fail("decode split config: " + Twine(f.name) + " is " +
                  Twine(f.value) + ", must be in [" + Twine(f.least) + ", " +
                  Twine(f.most) + "]");
  return llvm::Error::success();
}

/// The split budget in blocks: the batch's cost spread over the SM parts,
/// but no less than the configured floor.
static int64_t blocksPerSplit(llvm::ArrayRef<int32_t> seqLens,
                              const DecodeSplitConfig &c, int64_t numSmParts) {
  int64_t totalCost = 0;
  for (int32_t len : seqLens)
    totalCost += cdiv(len, c.tokensPerBlock) + c.fixedOverheadBlocks;
  int64_t floorBlocks = cdiv(c.minTokensPerSplit, c.tokensPerBlock);
  return std::max({cdiv(totalCost, numSmParts), floorBlocks, int64_t(1)});
}

/// Splits of a request of `len` tokens at `perSplit` blocks a split.
static int64_t splitsOf(int32_t len, const DecodeSplitConfig &c,
                        int64_t perSplit) {
  int64_t splits =
      std::max<int64_t>(1, cdiv(cdiv(len, c.tokensPerBlock), perSplit));
  if (c.maxSplitsPerRequest > 0)
    splits = std::min(splits, c.maxSplitsPerRequest);
  return splits;
}

static int64_t totalSplits(llvm::ArrayRef<int32_t> seqLens,
                           const DecodeSplitConfig &c, int64_t perSplit) {
  int64_t total = 0;
  for (int32_t len : seqLens)
    total += splitsOf(len, c, perSplit);
  return total;
}

/// Rounding each request's split count up can make the splits one wave
/// more than the device holds at once (4 requests of 512 blocks over 33
/// parts: 63 blocks a split, 9 splits each, 36 > 33), and the extra wave
/// then runs nearly alone. Takes the smallest budget whose splits fit the
/// waves the batch needs anyway (one, or one split per request when the
/// requests outnumber the parts) when that finishes sooner, counting a
/// wave's time as its budget.
static int64_t waveAlignedBlocksPerSplit(llvm::ArrayRef<int32_t> seqLens,
                                         const DecodeSplitConfig &c,
                                         int64_t numSmParts, int64_t budget) {
  int64_t limit = std::max<int64_t>(numSmParts, seqLens.size());
  int64_t splits = totalSplits(seqLens, c, budget);
  if (splits <= limit)
    return budget;
  int64_t longest = 1;
  for (int32_t len : seqLens)
    longest = std::max(longest, cdiv(len, c.tokensPerBlock));
  // Splits only fall as the budget grows; at `longest` every request has
  // one split, so `limit` is reached.
  int64_t lo = budget + 1, hi = std::max(longest, lo);
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (totalSplits(seqLens, c, mid) <= limit)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo <= cdiv(splits, limit) * budget ? lo : budget;
}

int64_t decodeSplitSlots(const DecodeSplitConfig &config) {
  // One split's rows (heads x new tokens) take this many CTAs side by side;
  // the CTA slots of the device hold that many splits at once.
  int64_t ctasPerSplit =
      cdiv(config.numHeads * config.queryLen, config.rowsPerCta);
  return std::max<int64_t>(1, config.numSms * config.ctasPerSm / ctasPerSplit);
}

llvm::Expected<DecodeSplitPlan>
planDecodeSplits(llvm::ArrayRef<int32_t> seqLens,
                 const DecodeSplitConfig &config) {
  if (llvm::Error err = checkConfig(config))
    return std::move(err);
  for (size_t b = 0; b < seqLens.size(); ++b)
    if (seqLens[b] < 0)
      return fail("decode seq_lens[" + Twine(b) + "] is " + Twine(seqLens[b]) +
                  ", must be non-negative");

  DecodeSplitPlan plan;
  plan.tokensPerBlock = config.tokensPerBlock;
  plan.seqLens.assign(seqLens.begin(), seqLens.end());
  plan.numSmParts = decodeSplitSlots(config);
  plan.blocksPerSplit = waveAlignedBlocksPerSplit(
      seqLens, config, plan.numSmParts,
      blocksPerSplit(seqLens, config, plan.numSmParts));

  int64_t total = 0;
  plan.cuNumSplits.push_back(0);
  for (int32_t len : seqLens) {
    int64_t splits = splitsOf(len, config, plan.blocksPerSplit);
    total += splits;
    if (total > std::numeric_limits<int32_t>::max())
      return fail("decode batch needs " + Twine(total) +
                  "+ splits, more than the int32 num_splits can index");
    plan.numSplits.push_back(static_cast<int32_t>(splits));
    plan.cuNumSplits.push_back(static_cast<int32_t>(total));
  }
  return plan;
}

int64_t DecodeSplitPlan::splitBegin(int64_t b, int64_t s) const {
  int64_t blocks = cdiv(seqLens[b], tokensPerBlock);
  int64_t n = numSplits[b];
  // The first `rest` splits hold one block more than the others.
  int64_t base = blocks / n, rest = blocks % n;
  int64_t firstBlock = s * base + std::min(s, rest);
  return std::min<int64_t>(firstBlock * tokensPerBlock, seqLens[b]);
}

int64_t DecodeSplitPlan::splitEnd(int64_t b, int64_t s) const {
  return splitBegin(b, s + 1);
}

} // namespace mla::runtime

namespace mla::runtime {

DecodeSplitConfig genericDecodeSchedule(int64_t numSms, int64_t numHeads,
                                        int64_t queryLen, int64_t blockSize) {
  DecodeSplitConfig config;
  config.numSms = numSms;
  config.ctasPerSm = 8;
  config.numHeads = numHeads;
  config.queryLen = queryLen;
  config.rowsPerCta = 4;
  config.tokensPerBlock = blockSize;
  return config;
}

int64_t mmaDecodeSharedBytes(DecodeOperandTypes types, int64_t kvLoraRank,
                             int64_t ropeDim) {
  return mma_decode::sharedBytes(types, kvLoraRank, ropeDim);
}

DecodeSplitConfig mmaDecodeSchedule(int64_t numSms, int64_t ctasPerSm,
                                    int64_t numHeads, int64_t queryLen,
                                    int64_t blockSize) {
  DecodeSplitConfig config = genericDecodeSchedule(numSms, numHeads, queryLen,
                                                   blockSize);
  config.ctasPerSm = std::max<int64_t>(1, ctasPerSm);
  config.rowsPerCta = 16;
  return config;
}

DecodeSplitConfig wgmmaDecodeSchedule(int64_t numSms, int64_t numHeads,
                                      int64_t queryLen, int64_t blockSize) {
  DecodeSplitConfig config = genericDecodeSchedule(numSms, numHeads, queryLen,
                                                   blockSize);
  // One block an SM at any dims: its 256 threads use about 244 registers
  // each (the 64 x 512 output accumulators alone take 128), most of an
  // SM's 64K.
  config.ctasPerSm = 1;
  config.rowsPerCta = wgmma_decode::kTileRows;
  return config;
}

DecodeSplitConfig decodeScheduleFor(const DecodeKernelShape &s) {
  const MlaDims &d = s.dims;
  if (s.strategy == KernelStrategy::Warpgroup &&
      wgmma_decode::runsOn(s.operandTypes, d.numHeads, d.kvLoraRank,
                           d.ropeDim, s.maxSharedBytesPerBlock))
    return wgmmaDecodeSchedule(s.numSms, d.numHeads, s.queryLen, s.blockSize);
  if (s.strategy != KernelStrategy::Generic &&
      mma_decode::runsOn(s.operandTypes, d.kvLoraRank, d.ropeDim,
                         s.maxSharedBytesPerBlock)) {
    int64_t perBlock = mmaDecodeSharedBytes(s.operandTypes, d.kvLoraRank, d.ropeDim);
    return mmaDecodeSchedule(s.numSms, s.sharedBytesPerSm / perBlock,
                             d.numHeads, s.queryLen, s.blockSize);
  }
  return genericDecodeSchedule(s.numSms, d.numHeads, s.queryLen, s.blockSize);
}

} // namespace mla::runtime
