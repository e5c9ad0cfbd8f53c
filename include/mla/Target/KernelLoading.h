//===- KernelLoading.h - Modules loaded at first launch ------*- C++ -*-===//
//
// The GPU driver compiles a kernel module's PTX when it loads it, one
// module at a time, and the runtime loads a compile's modules as soon as
// their PTX exists (runtime/gpu/PreloadedModules.h). Some kernels run only
// in rare cases: the generic kernels the host code launches where the
// tensor-core kernels cannot take an operand (not 16-byte aligned). Their
// driver compiles would sit in front of the large kernels' on every cold
// compile, so the lowering marks them and the runtime compiles them at
// their first launch instead. The mark travels with the kernel: an
// attribute on its gpu.func (moved to its own gpu.module when modules are
// split), then the first line of its PTX, which is all the runtime sees
// (also for modules read back from the kernel cache).
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TARGET_KERNELLOADING_H
#define MLA_TARGET_KERNELLOADING_H

#include "llvm/ADT/StringRef.h"

namespace mla {

/// Unit attribute of a kernel (gpu.func) or kernel module (gpu.module)
/// that the runtime loads at the kernel's first launch.
inline constexpr llvm::StringLiteral kLoadAtFirstLaunchAttr =
    "mla.load_at_first_launch";

/// The PTX comment line such a module's text starts with.
inline constexpr llvm::StringLiteral kLoadAtFirstLaunchLine =
    "// mla: loaded at its kernel's first launch\n";

/// Whether kernel module PTX `ptx` is to be loaded at its first launch.
inline bool loadsAtFirstLaunch(llvm::StringRef ptx) {
  return ptx.starts_with(kLoadAtFirstLaunchLine);
}

} // namespace mla

#endif // MLA_TARGET_KERNELLOADING_H
