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
// ptxas in the lit tests (test/lit/Target/ptxas-register-a.mlir,
// ptxas-fp8.mlir).
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

/// mma.sync.aligned.m16n8k32.row.col.f32.e4m3.T.f32 (sm_89 and later; T
/// e4m3 or e5m2, `bElement` f8E4M3FN or f8E5M2): D (16 x 8, f32) = A (16
/// x 32, e4m3) B (32 x 8, T) + C. The fragments are mma.m16n8k32's for
/// one-byte types: `a` four 32-bit registers of four codes each (a[0] row
/// g, columns 4 q .. 4 q + 3; a[1] row g + 8; a[2], a[3] the same at
/// columns + 16), `b` two (b[0] rows 4 q .. 4 q + 3 of column g, b[1]
/// rows + 16), `c` the four f32 of m16n8k16's accumulator layout. Returns
/// D's four f32. Synchronous, and pure: it may be scheduled like
/// arithmetic.
llvm::SmallVector<mlir::Value, 4>
mmaFp8(mlir::OpBuilder &b, mlir::Location loc, llvm::ArrayRef<mlir::Value> c,
       llvm::ArrayRef<mlir::Value> a, llvm::ArrayRef<mlir::Value> bRegs,
       mlir::Type bElement);

} // namespace mla::gpu::ptx

#endif // MLA_LIB_CONVERSION_MLATOGPU_INLINEPTX_H
