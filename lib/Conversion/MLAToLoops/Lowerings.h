//===- Lowerings.h - CPU lowerings of the primitive mla ops -----*- C++ -*-===//

#ifndef MLA_LIB_CONVERSION_MLATOLOOPS_LOWERINGS_H
#define MLA_LIB_CONVERSION_MLATOLOOPS_LOWERINGS_H

#include "KernelEmitter.h"
#include "mla/Dialect/MLADialect.h"

namespace mla::loops {

struct LoweringOptions {
  int64_t vectorWidth = 16;
  int64_t keyBlock = 32;
};

/// Each function emits, at the emitter's insertion point, loops that do
/// what the op does; the caller erases the op.
void lowerPrefillAttention(PrefillAttentionOp op, KernelEmitter &e,
                           const LoweringOptions &options);
void lowerDecodeAttention(DecodeAttentionOp op, KernelEmitter &e,
                          const LoweringOptions &options);
void lowerMergeAttnStates(MergeAttnStatesOp op, KernelEmitter &e);
void lowerMergeAttnStatesN(MergeAttnStatesNOp op, KernelEmitter &e);
void lowerGatherCache(GatherCacheOp op, KernelEmitter &e);
void lowerConcatAndCache(ConcatAndCacheOp op, KernelEmitter &e);
void lowerKvUpProj(KvUpProjOp op, KernelEmitter &e);
void lowerQAbsorb(QAbsorbOp op, KernelEmitter &e);
void lowerVUpProj(VUpProjOp op, KernelEmitter &e);

} // namespace mla::loops

#endif // MLA_LIB_CONVERSION_MLATOLOOPS_LOWERINGS_H
