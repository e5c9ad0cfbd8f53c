//===- KernelStrategy.h - How GPU kernels are written -----------*- C++ -*-===//
//
// The kernel strategies, in a header of their own (no MLIR) so that the
// runtime's backend declarations can name one.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TARGET_KERNELSTRATEGY_H
#define MLA_TARGET_KERNELSTRATEGY_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>

namespace mla {

/// How kernels are written for a target. `Generic` uses CUDA cores only
/// (any sm_80+ chip). `TensorCore` ("mma-sync") writes the kernels that
/// have a tensor-core form with warp-level mma.sync (sm_80+; the bf16/f16
/// decode split kernel, prefill attention and up-projections) and the
/// others as `Generic`
/// does. `Warpgroup` ("wgmma", sm_90a only) writes the kernels that have a
/// Hopper form with warpgroup-level wgmma (the decode split kernel for 16
/// and more heads) and the others as `TensorCore` does.
enum class KernelStrategy { Generic, TensorCore, Warpgroup };

/// "generic", "mma-sync" or "wgmma".
std::string name(KernelStrategy strategy);
/// The strategy named `name` ("generic", "mma-sync" or "wgmma").
llvm::Expected<KernelStrategy> parseStrategy(llvm::StringRef name);

} // namespace mla

#endif // MLA_TARGET_KERNELSTRATEGY_H
