//===- GpuTarget.h - NVIDIA targets and their PTX versions ------*- C++ -*-===//
//
// The chips the compiler generates code for, the PTX ISA each needs, and the
// kernel strategy chosen for it. The choice is made once (from a device's
// compute capability or a user's --chip) and recorded in the IR as the
// module attribute `mla.target`; later passes read that attribute and never
// query hardware.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TARGET_GPUTARGET_H
#define MLA_TARGET_GPUTARGET_H

#include "mla/Target/KernelStrategy.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace mlir {
class ModuleOp;
} // namespace mlir

namespace mla {

/// The LLVM optimization level of the kernels (the #nvvm.target's O). The
/// lowering emits kernels already unrolled, folded and common-subexpression
/// free, and the NVPTX backend and ptxas do the rest: at O1 every kernel
/// runs as fast as at O3 (measured over every suite of mla-bench on an
/// H100), and its serialization takes 5 to 10% less time.
constexpr int kKernelLlvmOptLevel = 1;

struct GpuTarget {
  int major = 9, minor = 0;
  /// sm_90a: the architecture-specific features (wgmma, setmaxnreg).
  bool archSpecific = false;
  /// Set by callers; forCapability and parse choose Generic.
  KernelStrategy strategy = KernelStrategy::Generic;

  /// "sm_90a", "sm_80", ...
  std::string chip() const;
  /// Whether the strategy writes mma.sync kernels (mma-sync and wgmma).
  bool usesMmaSync() const { return strategy != KernelStrategy::Generic; }
  /// Why `strategy` cannot run on this chip (wgmma needs sm_90a), or
  /// success.
  llvm::Error checkStrategy() const;
  /// The PTX ISA version the chip needs, as an NVPTX feature ("+ptx80").
  std::string ptxFeature() const;
  int ptxVersion() const;
  /// Dynamic shared memory a block may have on the chip (the opt-in limit,
  /// less 1 KiB of margin): sm_90a 227 KiB, sm_80 163 KiB, the others
  /// (sm_86, sm_89, and portable sm_90 code) 99 KiB.
  int64_t maxSharedBytesPerBlock() const;

  /// The best target for a device of compute capability major.minor
  /// (sm_90 devices get sm_90a). Fails for chips below sm_80.
  static llvm::Expected<GpuTarget> forCapability(int major, int minor);
  /// Parses "sm_80", "sm_86", "sm_89", "sm_90" or "sm_90a".
  static llvm::Expected<GpuTarget> parse(llvm::StringRef chip);
  /// Every chip the compiler generates code for, oldest first.
  static std::vector<GpuTarget> all();
  /// Their names joined by `separator`: "sm_80, sm_86, ...".
  static std::string allChips(llvm::StringRef separator = ", ");

  /// The `mla.target` attribute: {chip, ptx_features, strategy}.
  mlir::DictionaryAttr toAttr(mlir::MLIRContext *ctx) const;
  static llvm::Expected<GpuTarget> fromAttr(mlir::Attribute attr);
};

/// Name of the module attribute recording the target.
inline constexpr const char *kTargetAttrName = "mla.target";

} // namespace mla

#endif // MLA_TARGET_GPUTARGET_H
