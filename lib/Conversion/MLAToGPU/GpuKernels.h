//===- GpuKernels.h - The lowerings of the mla ops to kernels ---*- C++ -*-===//
//
// One function an op: each creates the op's kernels (KernelFactory.h) and
// replaces the op with their launches in the host function; the ops with a
// kernel per strategy choose it in KernelDispatch.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_LIB_CONVERSION_MLATOGPU_GPUKERNELS_H
#define MLA_LIB_CONVERSION_MLATOGPU_GPUKERNELS_H

#include "KernelFactory.h"
#include "mla/Dialect/MLADialect.h"

namespace mla::gpu {

void lowerPrefillAttention(PrefillAttentionOp op, KernelFactory &kernels);
/// The mma-sync strategy's tensor-core prefill (GpuPrefillMma.cpp): whether
/// it takes `op` on `target`, and its kernel, launched from `host`.
bool useMmaPrefill(PrefillAttentionOp op, const GpuTarget &target);
void lowerMmaPrefill(PrefillAttentionOp op, KernelFactory &kernels,
                     mlir::OpBuilder &host);
/// The wgmma strategy's prefill (GpuPrefillWgmma.cpp), likewise, for
/// 16-byte aligned q, k and v (KernelDispatch checks on the host).
bool useWgmmaPrefill(PrefillAttentionOp op, const GpuTarget &target);
void lowerWgmmaPrefill(PrefillAttentionOp op, KernelFactory &kernels,
                       mlir::OpBuilder &host);
void lowerDecodeAttention(DecodeAttentionOp op, KernelFactory &kernels);
void lowerMergeAttnStates(MergeAttnStatesOp op, KernelFactory &kernels);
void lowerMergeAttnStatesN(MergeAttnStatesNOp op, KernelFactory &kernels);
void lowerGatherCache(GatherCacheOp op, KernelFactory &kernels);
void lowerConcatAndCache(ConcatAndCacheOp op, KernelFactory &kernels);
void lowerKvUpProj(KvUpProjOp op, KernelFactory &kernels);
void lowerQAbsorb(QAbsorbOp op, KernelFactory &kernels);
void lowerVUpProj(VUpProjOp op, KernelFactory &kernels);

} // namespace mla::gpu

#endif // MLA_LIB_CONVERSION_MLATOGPU_GPUKERNELS_H
