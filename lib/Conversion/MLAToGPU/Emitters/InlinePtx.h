//===- InlinePtx.h - PTX instructions the NVVM dialect does not model -----===//
//
// Each function here emits exactly one PTX instruction as an
// `llvm.inline_asm` with typed operands, for an instruction MLIR 22's NVVM
// dialect has no op for. Results are SSA values: a register the
// instruction reads and writes (a wgmma accumulator) is an output tied to
// its input ("=f" with "0", "1", ...), as in the inline assembly the NVVM
// dialect's own nvvm.wgmma.mma_async lowers to (which passes scale-d as a
// predicate; here it is an immediate), so the values before and after the
// instruction stay distinct in the IR. (`nvvm.inline_ptx` would instead
// rewrite later uses of a read-write operand in place, which does not
// compose with loop-carried accumulators.) Every form is assembled by
// ptxas in the lit tests (test/lit/Target/ptxas-register-a.mlir).
//
//===----------------------------------------------------------------------===//

#ifndef MLA_LIB_CONVERSION_MLATOGPU_INLINEPTX_H
#define MLA_LIB_CONVERSION_MLATOGPU_INLINEPTX_H

#include "mlir/IR/Builders.h"

namespace mla::gpu::ptx {

/// wgmma.mma_async.sync.aligned.m64n`n`k16.f32.T.T with A in registers
/// (sm_90a): D (64 x n, f32) = A (64 x 16) B (16 x n) + (accumulate ? D :
/// 0). `acc` is the accumulator struct of n / 2 f32 (one thread's share,
/// the layout of WgmmaEmitter.h); `a` the thread's four 32-bit registers
/// of A, each two elements of type T (bf16 or f16, `element`): a[0] row
/// 16 w + g, columns 2 q and 2 q + 1; a[1] row + 8; a[2] and a[3] the same
/// at columns + 8 (the mma.sync m16n8k16 A fragment of warp w); `descB`
/// B's shared-memory descriptor, K-major or (`transposeB`) N-major.
/// Returns the new accumulator struct. The instruction is asynchronous:
/// the accumulators are read after a wgmma.wait_group, and neither they
/// nor `a` may be written before it (ptxas serializes the wgmma if they
/// are, reported as a "Performance Loss" the lit tests reject).
mlir::Value wgmmaRegisterA(mlir::OpBuilder &b, mlir::Location loc,
                           mlir::Value acc, llvm::ArrayRef<mlir::Value> a,
                           mlir::Value descB, int64_t n, mlir::Type element,
                           bool accumulate, bool transposeB);

} // namespace mla::gpu::ptx

#endif // MLA_LIB_CONVERSION_MLATOGPU_INLINEPTX_H
