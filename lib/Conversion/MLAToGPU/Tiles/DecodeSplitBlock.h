//===- DecodeSplitBlock.h - What the tensor-core split kernels share ------===//
//
// The mma.sync (GpuDecodeMma.cpp) and wgmma (GpuDecodeWgmma.cpp) decode
// split kernels differ in their tiles and products, not in what a block
// works on: a request, a tile of its (query, head) rows r = s * N + h, a
// split of its tokens, pages looked up in the block table. Those are here,
// once (the online softmax's steps are FragmentSoftmax's).
//
//===----------------------------------------------------------------------===//

#ifndef MLA_LIB_CONVERSION_MLATOGPU_DECODESPLITBLOCK_H
#define MLA_LIB_CONVERSION_MLATOGPU_DECODESPLITBLOCK_H

#include "Tiles/GpuDecode.h"
#include "mla/Target/DecodeOperandTypes.h"
#include "Tiles/FragmentSoftmax.h"

namespace mla::gpu {

/// The class of the op's q and cache element types (what the tensor-core
/// split kernels' runsOn rules take).
DecodeOperandTypes decodeOperandTypes(DecodeAttentionOp op);

/// One block of a tensor-core split kernel: grid (row tile, request,
/// split), operands as launchDecodeSplit passes them (the split kernel's
/// operands of GpuDecode.h: q, cache, block_table, seq_lens, [kv_scale,]
/// [num_splits,] partials, out and lse last).
class DecodeSplitBlock {
public:
  DecodeSplitBlock(MmaEmitter &e, DecodeAttentionOp op,
                   const DecodeSchedule &schedule, mlir::ValueRange args,
                   int64_t tileRows);

  /// Emits `body` for a split the request uses (with the planned schedule,
  /// splits past num_splits[req] write nothing: the combine reads only the
  /// first n), after the request's bounds below are set.
  void run(const std::function<void()> &body);

  mlir::Value q, cache, table, lens, part, partLse, out, lse;
  /// The FP8 cache's scale ([1] f32), null for a two-byte cache.
  mlir::Value kvScale;
  mlir::Value req, tileRow0, split, queryLen, rows;
  /// Set by run: the request's length (clamped to the block table), the
  /// split's tokens [first, last) and the ones it copies [first, kvEnd),
  /// and whether q and the cache allow 16-byte copies.
  mlir::Value seqLen, first, last, kvEnd, aligned;
  /// The request's seq_lens entry as loaded (seqLen counts its keys).
  mlir::Value counted;

  /// The scores' scale, softmax_scale * log2(e) (`scaleLog2`) as f32; over
  /// an FP8 cache times its scale, since the kernels' tiles hold the
  /// codes' values (loaded once, by run).
  mlir::Value scoresScale(double scaleLog2);
  /// A finished row's output scale, 1 / l, times an FP8 cache's scale.
  void scaleOutput(FragmentRowEnd &end);

  /// Where row `row` of the Q tile comes from (padding rows past Sq * N
  /// are zero-filled).
  MmaEmitter::SourceRow queryRow(mlir::Value row);
  /// Where row `row` of the KV tile starting at token `tile` comes from:
  /// row j % page of page block_table[req, j / page] for token j (rows
  /// past kvEnd are zero-filled, tail pages may hold NaN).
  MmaEmitter::SourceRow cacheRow(mlir::Value tile, mlir::Value row);

  /// Row `local` of the tile as the lanes holding it see it: whether it is
  /// a real row, its query and head, and the end of the tokens it sees
  /// (the split's, causally limited).
  struct LaneRow {
    mlir::Value local, real, query, head, end;
  };
  LaneRow laneRow(mlir::Value local);

  /// Emits `write` once for where this block's normalized rows go (see
  /// SplitResults): the final out and lse when the request has one split,
  /// else the split's partials. The branch is uniform over the block.
  void writeResults(const std::function<void(const SplitResults &)> &write);
  /// The tile's finished rows through writeResults: each lane row's LSE
  /// (`ends`) from the lanes where `writesLse` holds, and the rows staged
  /// as f32 in `staging` (`columns` wide) copied out by the block's
  /// `threads` threads (`tid` numbering this one), real rows only.
  void writeStagedRows(llvm::ArrayRef<LaneRow> laneRows,
                       llvm::ArrayRef<FragmentRowEnd> ends,
                       mlir::Value writesLse, mlir::Value staging,
                       int64_t columns, mlir::Value tid, int64_t threads);

private:
  MmaEmitter &e;
  const DecodeSchedule &schedule;
  int64_t heads, page, tileRows;
  bool causal;
  /// decode_attention's kv_share, when the cache holds a DCP rank's share.
  std::optional<llvm::ArrayRef<int64_t>> share;
  mlir::Value numSplits, capacity, lastBlock, splitCount;
  /// kv_scale[0] as loaded by run (null for a two-byte cache).
  mlir::Value loadedKvScale;
};

/// Launches a split kernel from `host` on grid (ceil(Sq * N / tileRows),
/// B, splits).
void launchSplitGrid(DecodeAttentionOp op, mlir::OpBuilder &host,
                     mlir::gpu::GPUFuncOp kernel, mlir::ValueRange splitArgs,
                     mlir::Value splits, int64_t tileRows,
                     int64_t sharedBytes);

} // namespace mla::gpu

#endif // MLA_LIB_CONVERSION_MLATOGPU_DECODESPLITBLOCK_H
