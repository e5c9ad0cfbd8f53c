//===- GpuTargetTest.cpp - Chips, PTX versions and the mla.target attr ----===//
//
// GpuTarget.*: the target chosen for a compute capability (newer chips get
// the newest target whose code runs on them), parsing --chip values, and
// the round trip through the `mla.target` module attribute.
//
//===----------------------------------------------------------------------===//

#include "mla/Target/GpuTarget.h"
#include "mla/Target/MmaDecodeShape.h"
#include "mla/Target/SharedRegions.h"
#include "mla/Target/WgmmaDecodeShape.h"
#include "mla/Target/WgmmaPrefillShape.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <string>

using namespace mla;

namespace {

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

template <typename T> std::string errorText(llvm::Expected<T> &value) {
  return value ? "" : llvm::toString(value.takeError());
}

/// The chip, PTX feature and strategy a device of major.minor gets.
struct Expectation {
  int major, minor;
  const char *chip, *ptx;
  bool archSpecific;
};

void expectTarget(const Expectation &e) {
  SCOPED_TRACE(std::to_string(e.major) + "." + std::to_string(e.minor));
  auto target = GpuTarget::forCapability(e.major, e.minor);
  ASSERT_TRUE(static_cast<bool>(target)) << errorText(target);
  EXPECT_EQ(target->chip(), e.chip);
  EXPECT_EQ(target->ptxFeature(), e.ptx);
  EXPECT_EQ(target->archSpecific, e.archSpecific);
  EXPECT_EQ(target->strategy, KernelStrategy::Generic);
}

TEST(GpuTarget, ForCapabilityAmpere) {
  expectTarget({8, 0, "sm_80", "+ptx70", false});
  expectTarget({8, 6, "sm_86", "+ptx71", false});
  // sm_87 (Orin) has no target of its own: it runs sm_86 code.
  expectTarget({8, 7, "sm_86", "+ptx71", false});
}

TEST(GpuTarget, ForCapabilityAdaAndHopper) {
  expectTarget({8, 9, "sm_89", "+ptx78", false});
  // An sm_90 device gets the architecture-specific target.
  expectTarget({9, 0, "sm_90a", "+ptx80", true});
  auto hopper = GpuTarget::forCapability(9, 0);
  ASSERT_TRUE(static_cast<bool>(hopper)) << errorText(hopper);
  EXPECT_EQ(hopper->major, 9);
  EXPECT_EQ(hopper->minor, 0);
  EXPECT_EQ(hopper->ptxVersion(), 80);
}

// sm_90a code runs only on sm_90 devices: newer chips (Blackwell: 10.0,
// 12.0) must get the newest portable target, sm_90, whose PTX the driver
// JIT-compiles for them.
TEST(GpuTarget, ForCapabilityNewerChipsGetPortableCode) {
  expectTarget({10, 0, "sm_90", "+ptx78", false});
  expectTarget({12, 0, "sm_90", "+ptx78", false});
  expectTarget({9, 9, "sm_90", "+ptx78", false});
}

TEST(GpuTarget, ForCapabilityBelowAmpereFails) {
  for (auto [major, minor] : {std::pair{7, 5}, std::pair{7, 0},
                              std::pair{6, 1}}) {
    auto target = GpuTarget::forCapability(major, minor);
    ASSERT_FALSE(static_cast<bool>(target)) << major << "." << minor;
    std::string message = errorText(target);
    EXPECT_TRUE(contains(message, "sm_80")) << message;
    EXPECT_TRUE(contains(message, std::to_string(major) + "." +
                                      std::to_string(minor)))
        << message;
  }
}

TEST(GpuTarget, ParseKnownChips) {
  struct {
    const char *chip;
    int major, minor;
    bool archSpecific;
    int ptx;
  } chips[] = {{"sm_80", 8, 0, false, 70}, {"sm_86", 8, 6, false, 71},
               {"sm_89", 8, 9, false, 78}, {"sm_90", 9, 0, false, 78},
               {"sm_90a", 9, 0, true, 80}};
  for (const auto &c : chips) {
    SCOPED_TRACE(c.chip);
    auto target = GpuTarget::parse(c.chip);
    ASSERT_TRUE(static_cast<bool>(target)) << errorText(target);
    EXPECT_EQ(target->major, c.major);
    EXPECT_EQ(target->minor, c.minor);
    EXPECT_EQ(target->archSpecific, c.archSpecific);
    EXPECT_EQ(target->ptxVersion(), c.ptx);
    EXPECT_EQ(target->chip(), c.chip);
  }
}

TEST(GpuTarget, ParseUnknownChipFails) {
  for (const char *chip : {"sm_75", "sm_100", "sm_90A", "sm90a", "", "sm_8"}) {
    SCOPED_TRACE(chip);
    auto target = GpuTarget::parse(chip);
    ASSERT_FALSE(static_cast<bool>(target));
    std::string message = errorText(target);
    EXPECT_TRUE(contains(message, std::string("unknown chip '") + chip + "'"))
        << message;
    EXPECT_TRUE(contains(message, "sm_80, sm_86, sm_89, sm_90, sm_90a"))
        << message;
  }
}

TEST(GpuTarget, AttrRoundTrip) {
  mlir::MLIRContext ctx;
  for (const char *chip : {"sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"}) {
    SCOPED_TRACE(chip);
    auto target = GpuTarget::parse(chip);
    ASSERT_TRUE(static_cast<bool>(target)) << errorText(target);
    mlir::DictionaryAttr attr = target->toAttr(&ctx);
    ASSERT_TRUE(attr);
    EXPECT_EQ(attr.size(), 3u);
    auto chipAttr = attr.getAs<mlir::StringAttr>("chip");
    auto ptxAttr = attr.getAs<mlir::StringAttr>("ptx_features");
    auto strategyAttr = attr.getAs<mlir::StringAttr>("strategy");
    ASSERT_TRUE(chipAttr && ptxAttr && strategyAttr);
    EXPECT_EQ(chipAttr.getValue(), chip);
    EXPECT_EQ(ptxAttr.getValue(), target->ptxFeature());
    EXPECT_EQ(strategyAttr.getValue(), "generic");

    auto back = GpuTarget::fromAttr(attr);
    ASSERT_TRUE(static_cast<bool>(back)) << errorText(back);
    EXPECT_EQ(back->major, target->major);
    EXPECT_EQ(back->minor, target->minor);
    EXPECT_EQ(back->archSpecific, target->archSpecific);
    EXPECT_EQ(back->strategy, target->strategy);
    EXPECT_EQ(back->chip(), chip);
    EXPECT_EQ(back->toAttr(&ctx), attr);
  }
}

TEST(GpuTarget, FromAttrErrors) {
  mlir::MLIRContext ctx;
  mlir::Builder b(&ctx);
  auto str = [&](llvm::StringRef s) { return b.getStringAttr(s); };
  auto dict = [&](llvm::ArrayRef<mlir::NamedAttribute> entries) {
    return b.getDictionaryAttr(entries);
  };
  auto expectError = [](mlir::Attribute attr, const std::string &part) {
    auto target = GpuTarget::fromAttr(attr);
    ASSERT_FALSE(static_cast<bool>(target)) << "expected: " << part;
    std::string message = errorText(target);
    EXPECT_TRUE(contains(message, part)) << message;
  };

  // No attribute at all, or not a dictionary.
  expectError(mlir::Attribute(), "run mla-select-gpu-target first");
  expectError(str("sm_90a"), "run mla-select-gpu-target first");
  // Missing or mistyped entries.
  expectError(dict({}), "needs string entries 'chip' and 'strategy'");
  expectError(dict({b.getNamedAttr("chip", str("sm_90a"))}),
              "needs string entries 'chip' and 'strategy'");
  expectError(dict({b.getNamedAttr("strategy", str("generic"))}),
              "needs string entries 'chip' and 'strategy'");
  expectError(dict({b.getNamedAttr("chip", b.getI64IntegerAttr(90)),
                    b.getNamedAttr("strategy", str("generic"))}),
              "needs string entries 'chip' and 'strategy'");
  // An unknown chip or strategy.
  expectError(dict({b.getNamedAttr("chip", str("sm_75")),
                    b.getNamedAttr("strategy", str("generic"))}),
              "unknown chip 'sm_75'");
  expectError(dict({b.getNamedAttr("chip", str("sm_90a")),
                    b.getNamedAttr("strategy", str("wmma"))}),
              "unknown kernel strategy 'wmma' (supported: generic, mma-sync, "
              "wgmma)");
  // wgmma exists in sm_90a code only.
  for (const char *chip : {"sm_80", "sm_89", "sm_90"})
    expectError(dict({b.getNamedAttr("chip", str(chip)),
                      b.getNamedAttr("strategy", str("wgmma"))}),
                std::string("kernel strategy 'wgmma' needs chip sm_90a, not ") +
                    chip);
}

TEST(GpuTarget, StrategiesRoundTrip) {
  mlir::MLIRContext ctx;
  for (KernelStrategy s : {KernelStrategy::Generic, KernelStrategy::TensorCore,
                           KernelStrategy::Warpgroup}) {
    GpuTarget target = cantFail(GpuTarget::parse("sm_90a"));
    target.strategy = s;
    auto back = GpuTarget::fromAttr(target.toAttr(&ctx));
    ASSERT_TRUE(static_cast<bool>(back)) << errorText(back);
    EXPECT_EQ(back->strategy, s);
    EXPECT_EQ(back->usesMmaSync(), s != KernelStrategy::Generic);
  }
}

// ptx_features is derived from the chip: fromAttr does not need it.
TEST(GpuTarget, FromAttrWithoutPtxFeatures) {
  mlir::MLIRContext ctx;
  mlir::Builder b(&ctx);
  auto target = GpuTarget::fromAttr(b.getDictionaryAttr(
      {b.getNamedAttr("chip", b.getStringAttr("sm_89")),
       b.getNamedAttr("strategy", b.getStringAttr("generic"))}));
  ASSERT_TRUE(static_cast<bool>(target)) << errorText(target);
  EXPECT_EQ(target->chip(), "sm_89");
  EXPECT_EQ(target->ptxFeature(), "+ptx78");
}

} // namespace

// Regions lie one after another; an overlay counts only where it reaches
// further; slack comes on top.
TEST(SharedRegions, RegionsOverlayAndSlack) {
  SharedRegions r;
  EXPECT_EQ(r.tiles(2, 16, 72, 2), 0);
  EXPECT_EQ(r.bytes(100), 2 * 16 * 72 * 2);
  EXPECT_EQ(r.total(), 2 * 16 * 72 * 2 + 100);
  r.overlay(10);
  EXPECT_EQ(r.total(), 2 * 16 * 72 * 2 + 100);
  r.overlay(10000);
  EXPECT_EQ(r.total(1024), 10000 + 1024);
}

// The kernels' layouts at DeepSeek's dims, as the kernels were measured
// with them (offsets in bytes).
TEST(SharedRegions, KernelLayoutsAtDeepSeekDims) {
  mma_decode::SharedLayout mma(576, 2);
  EXPECT_EQ(mma.kv, 16 * 584 * 2);
  EXPECT_EQ(mma.p, mma.kv + 64 * 584 * 2);
  EXPECT_EQ(mma.max, mma.p + 16 * 72 * 2);
  EXPECT_EQ(mma.bytes, 96256);

  // Over an FP8 cache: Q rows of 608 f16 (16 words past a multiple of 32),
  // code rows of 608 bytes (24 words past one), two code stages.
  mma_decode::Fp8SharedLayout fp8(576);
  EXPECT_EQ(fp8.qStride, 608);
  EXPECT_EQ(fp8.codeStride, 608);
  EXPECT_EQ(fp8.codes, 16 * 608 * 2);
  EXPECT_EQ(fp8.codeStage, 64 * 608);
  EXPECT_EQ(fp8.p, fp8.codes + 2 * 64 * 608);
  EXPECT_EQ(fp8.bytes, 100096);
  // qk 544: a Q row of 272 words needs no padding; a code row of 136
  // words takes 16 more.
  mma_decode::Fp8SharedLayout narrow(544);
  EXPECT_EQ(narrow.qStride, 544);
  EXPECT_EQ(narrow.codeStride % 128, 96);

  wgmma_decode::SharedLayout decode(576, 2);
  EXPECT_EQ(decode.kv, 64 * 576 * 2);
  EXPECT_EQ(decode.kvStage, 64 * 576 * 2);
  EXPECT_EQ(decode.p, 3 * 64 * 576 * 2);
  EXPECT_EQ(decode.sum, decode.p + 64 * 64 * 2 + 2 * 64 * 4);
  EXPECT_EQ(decode.bytes, 231424);

  // Q (128 rows), two K stages and two V stages of 128 keys, nine
  // mbarriers, 1024 bytes of alignment slack; qk 256 keeps one V stage.
  wgmma_prefill::SharedLayout prefill(192, 128, 2, 2);
  EXPECT_EQ(prefill.k, 128 * 192 * 2);
  EXPECT_EQ(prefill.kStage, 128 * 192 * 2);
  EXPECT_EQ(prefill.v, prefill.k + 2 * prefill.kStage);
  EXPECT_EQ(prefill.vStage, 128 * 128 * 2);
  EXPECT_EQ(prefill.barriers, prefill.v + 2 * prefill.vStage);
  EXPECT_EQ(prefill.bytes, prefill.barriers + 9 * 8 + 1024);
  EXPECT_EQ(prefill.bytes, 214088);
  const int64_t sm90Shared = 226 * 1024; // GpuTarget, sm_90a
  EXPECT_EQ(wgmma_prefill::stagesFor(192, 128, sm90Shared).v, 2);
  EXPECT_EQ(wgmma_prefill::stagesFor(256, 128, sm90Shared).v, 1);
  EXPECT_TRUE(wgmma_prefill::takesDims(256, 128, sm90Shared));
}
