//===- OnlineSoftmax.h - One attention row, blocked online softmax -*- C++ -*-===//
//
// The attention of one query row over a run of keys, shared by prefill and
// decode: keys are scored a block at a time, the running maximum and sum
// rescale an f32 accumulator (FlashAttention-2's recurrence), and only
// block-sized scratch is used whatever the number of keys.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_LIB_CONVERSION_MLATOLOOPS_ONLINESOFTMAX_H
#define MLA_LIB_CONVERSION_MLATOLOOPS_ONLINESOFTMAX_H

#include "KernelEmitter.h"

namespace mla::loops {

struct AttentionRow {
  Row query;
  int64_t qkDim;
  int64_t vDim;
  float softmaxScale;
  /// Number of keys this row attends to (index); may be zero.
  mlir::Value numKeys;
  /// Key and value rows of key j (0-based among the visible keys).
  std::function<Row(mlir::Value j)> keyRow;
  std::function<Row(mlir::Value j)> valueRow;
};

/// Scratch shared by all rows of one lowered op (allocated once, outside
/// the row loops): `scores` holds keyBlock f32, `accumulator` vDim f32.
struct AttentionScratch {
  mlir::Value scores;
  mlir::Value accumulator;
  int64_t keyBlock;
};

/// Emits the attention of `row`, writing its output (vDim values) to `out`
/// and its natural-log LSE to lse[lseIndices]. A row with no keys gets
/// out = 0 and lse = -inf. With `accumulate`, out and lse hold a state on
/// entry that the row's result is merged into (mla.prefill_attention).
void emitAttentionRow(KernelEmitter &e, const AttentionRow &row,
                      const AttentionScratch &scratch, const Row &out,
                      mlir::Value lse, mlir::ValueRange lseIndices,
                      bool accumulate = false);

} // namespace mla::loops

#endif // MLA_LIB_CONVERSION_MLATOLOOPS_ONLINESOFTMAX_H
