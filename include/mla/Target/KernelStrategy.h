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
/// (any sm_80+ chip). `TensorCore` ("mma-sync", sm_80+) writes with
/// warp-level m16n8k16 mma.sync the kernels that have that form for bf16
/// or f16 operands: the decode split kernel, the prefill attention (the
/// chunked prefill's too) and the up-projections (q_absorb, v_up_proj,
/// kv_up_proj); the others (the decode's combine, merge, gather,
/// concat_and_cache) as `Generic` does. `Warpgroup` ("wgmma", sm_90a only)
/// writes with warpgroup-level wgmma the decode split kernel (16 or more
/// heads over a latent cache it takes), the prefill attention (head dims
/// in whole 64-column blocks) and the prefill-sized up-projection (the
/// chunked prefill's kv_up_proj); the decode-sized up-projections
/// (q_absorb, v_up_proj), the shapes those wgmma kernels do not take, and
/// the others as `TensorCore` does. Where q, k, v or the cache is not
/// 16-byte aligned, the wgmma decode and prefill launch the generic kernel
/// instead.
enum class KernelStrategy { Generic, TensorCore, Warpgroup };

/// "generic", "mma-sync" or "wgmma".
std::string name(KernelStrategy strategy);
/// The strategy named `name` ("generic", "mma-sync" or "wgmma").
llvm::Expected<KernelStrategy> parseStrategy(llvm::StringRef name);

} // namespace mla

#endif // MLA_TARGET_KERNELSTRATEGY_H
