//===- GpuTarget.cpp - NVIDIA targets and their PTX versions --------------===//

#include "mla/Target/GpuTarget.h"
#include "mla/Support/Diagnostics.h"

#include "mlir/IR/Builders.h"

namespace mla {

namespace {
/// Chips with generated code, with the PTX ISA that introduced each
/// (PTX 7.0: sm_80, 7.1: sm_86, 7.8: sm_89 and sm_90, 8.0: sm_90a).
struct ChipInfo {
  int major, minor;
  bool archSpecific;
  int ptx;
};
constexpr ChipInfo kChips[] = {
    {8, 0, false, 70}, {8, 6, false, 71}, {8, 9, false, 78},
    {9, 0, false, 78}, {9, 0, true, 80},
};
} // namespace

std::string name(KernelStrategy strategy) {
  switch (strategy) {
  case KernelStrategy::Generic:
    return "generic";
  case KernelStrategy::TensorCore:
    return "mma-sync";
  case KernelStrategy::Warpgroup:
    return "wgmma";
  }
  return "?";
}

llvm::Expected<KernelStrategy> parseStrategy(llvm::StringRef text) {
  for (KernelStrategy s : {KernelStrategy::Generic, KernelStrategy::TensorCore,
                           KernelStrategy::Warpgroup})
    if (name(s) == text)
      return s;
  return makeError("unknown kernel strategy '" + text +
                   "' (supported: generic, mma-sync, wgmma)");
}

llvm::Error GpuTarget::checkStrategy() const {
  // wgmma and setmaxnreg exist only in sm_90a code.
  if (strategy == KernelStrategy::Warpgroup && !(major == 9 && archSpecific))
    return makeError("kernel strategy 'wgmma' needs chip sm_90a, not " +
                     chip());
  return llvm::Error::success();
}

std::string GpuTarget::chip() const {
  return "sm_" + std::to_string(major) + std::to_string(minor) +
         (archSpecific ? "a" : "");
}

int64_t GpuTarget::maxSharedBytesPerBlock() const {
  int64_t kib = 99;
  if (major == 9 && archSpecific)
    kib = 227;
  else if (major == 8 && minor == 0)
    kib = 163;
  return (kib - 1) * 1024;
}

int GpuTarget::ptxVersion() const {
  for (const ChipInfo &c : kChips)
    if (c.major == major && c.minor == minor && c.archSpecific == archSpecific)
      return c.ptx;
  return 80;
}

std::string GpuTarget::ptxFeature() const {
  return "+ptx" + std::to_string(ptxVersion());
}

llvm::Expected<GpuTarget> GpuTarget::forCapability(int major, int minor) {
  if (major < 8)
    return makeError("compute capability " + llvm::Twine(major) + "." +
                     llvm::Twine(minor) +
                     " is not supported: kernels need sm_80 or newer");
  GpuTarget t;
  // Newer chips run the closest older chip's code: PTX is forward
  // compatible and the driver JIT-compiles it.
  const ChipInfo *best = nullptr;
  for (const ChipInfo &c : kChips)
    if (std::make_pair(c.major, c.minor) <= std::make_pair(major, minor) &&
        (!c.archSpecific || (c.major == major && c.minor == minor)))
      best = &c;
  t.major = best->major;
  t.minor = best->minor;
  t.archSpecific = best->archSpecific;
  return t;
}

std::vector<GpuTarget> GpuTarget::all() {
  std::vector<GpuTarget> targets;
  for (const ChipInfo &c : kChips) {
    GpuTarget t;
    t.major = c.major;
    t.minor = c.minor;
    t.archSpecific = c.archSpecific;
    targets.push_back(t);
  }
  return targets;
}

std::string GpuTarget::allChips(llvm::StringRef separator) {
  std::string names;
  for (const GpuTarget &t : all())
    names += (names.empty() ? "" : separator.str()) + t.chip();
  return names;
}

llvm::Expected<GpuTarget> GpuTarget::parse(llvm::StringRef chip) {
  for (const GpuTarget &t : all())
    if (t.chip() == chip)
      return t;
  return makeError("unknown chip '" + chip + "' (supported: " + allChips() +
                   ")");
}

mlir::DictionaryAttr GpuTarget::toAttr(mlir::MLIRContext *ctx) const {
  mlir::Builder b(ctx);
  return b.getDictionaryAttr(
      {b.getNamedAttr("chip", b.getStringAttr(chip())),
       b.getNamedAttr("ptx_features", b.getStringAttr(ptxFeature())),
       b.getNamedAttr("strategy", b.getStringAttr(name(strategy)))});
}

llvm::Expected<GpuTarget> GpuTarget::fromAttr(mlir::Attribute attr) {
  auto dict = llvm::dyn_cast_or_null<mlir::DictionaryAttr>(attr);
  if (!dict)
    return makeError(llvm::Twine("the module has no '") + kTargetAttrName +
                     "' attribute: run mla-select-gpu-target first");
  auto chip = dict.getAs<mlir::StringAttr>("chip");
  auto strategy = dict.getAs<mlir::StringAttr>("strategy");
  if (!chip || !strategy)
    return makeError(llvm::Twine("'") + kTargetAttrName +
                     "' needs string entries 'chip' and 'strategy'");
  auto target = parse(chip.getValue());
  if (!target)
    return target.takeError();
  auto kind = parseStrategy(strategy.getValue());
  if (!kind)
    return kind.takeError();
  target->strategy = *kind;
  if (llvm::Error error = target->checkStrategy())
    return std::move(error);
  return target;
}

} // namespace mla
