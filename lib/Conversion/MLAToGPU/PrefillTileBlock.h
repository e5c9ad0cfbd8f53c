//===- PrefillTileBlock.h - What the tensor-core prefill kernels share ----===//
//
// The mma.sync (GpuPrefillMma.cpp) and wgmma (GpuPrefillWgmma.cpp) prefill
// kernels differ in their products, not in what a block works on: a tile
// of `tileRows` consecutive queries of one sequence for one head, and the
// keys those queries see. Grid: (ceil(T / tileRows) + B, heads), an upper
// bound on the row tiles over all sequences; a block finds its sequence and
// tile by walking cu_seqlens_q. Blocks take tiles in reverse order, so the
// long causal tiles at the end of a sequence start first.
//
// Offsets are clamped to [0, T] (and [0, Tkv]), so malformed ones never
// make a block read or write out of bounds; decreasing ones give
// overlapping (and then unspecified) rows, as the op's contract leaves
// them.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_LIB_CONVERSION_MLATOGPU_PREFILLTILEBLOCK_H
#define MLA_LIB_CONVERSION_MLATOGPU_PREFILLTILEBLOCK_H

#include "GpuKernels.h"
#include "MmaEmitter.h"

namespace mla::gpu {

/// Whether q, k, v and out are all bf16 or all f16 and q, k and v have
/// rows of whole 16-byte vectors: the operands both tensor-core prefill
/// kernels take.
bool hasTensorCoreOperands(PrefillAttentionOp op);

class PrefillTileBlock {
public:
  /// `args` are the op's operands as the kernel receives them.
  PrefillTileBlock(MmaEmitter &e, PrefillAttentionOp op, mlir::ValueRange args,
                   int64_t tileRows);

  /// Emits `body` for a block that has a tile, after the bounds below are
  /// set.
  void run(const std::function<void()> &body);

  mlir::Value q, k, v, cuQ, cuK, out, lse;
  mlir::Value head;
  /// Set by run: the sequence's queries [qBegin, qBegin + sq) and keys
  /// [kBegin, kBegin + skv), and the tile's first query row (in the
  /// sequence).
  mlir::Value qBegin, sq, kBegin, skv, row0;

  /// Keys visible to row `row` of the sequence (causal: bottom-right
  /// aligned).
  mlir::Value keysOf(mlir::Value row);
  /// Keys the tile rows [first, first + count) need at all (the last real
  /// one's; none without a real row), and the keys every one of them sees
  /// (the first's).
  std::pair<mlir::Value, mlir::Value> keyRange(mlir::Value first,
                                               int64_t count);
  /// Where row `tileRow` of the tile's Q comes from (rows past the
  /// sequence's queries are zero-filled).
  MmaEmitter::SourceRow queryRow(mlir::Value tileRow);
  /// Where key `key` (of the sequence) of K or V comes from (keys at or
  /// past `keyLimit` are zero-filled).
  MmaEmitter::SourceRow keyRow(mlir::Value key, mlir::Value keyLimit);

  /// The ends of the lane's rows `rows` (sequence rows) from their maxima
  /// (base 2) and sums over the quad. With `accumulate` each is merged into
  /// the state out and lse hold on entry (its LSE read here, by every lane
  /// of the quad; padding rows read none).
  llvm::SmallVector<MmaEmitter::RowEnd, 4> finishRows(mlir::ValueRange maxes,
                                                      mlir::ValueRange sums,
                                                      mlir::ValueRange rows,
                                                      bool accumulate);
  /// With accumulate: the quads' leaders write their rows' entry-output
  /// weights to their tile rows of `entryWeights` (a shared f32 [tileRows]
  /// view), for copyStagedRows.
  void storeEntryWeights(llvm::ArrayRef<MmaEmitter::RowEnd> ends,
                         mlir::ValueRange rows, mlir::Value quad,
                         mlir::Value entryWeights);
  /// Writes the LSEs of the real ones among `rows`, by the quads' leaders.
  /// With accumulate, only past a block barrier that follows finishRows
  /// (the entry LSEs are read there, in place).
  void storeLse(llvm::ArrayRef<MmaEmitter::RowEnd> ends, mlir::ValueRange rows,
                mlir::Value quad);

private:
  MmaEmitter &e;
  int64_t tileRows;
  bool causal;
};

/// Launches a prefill kernel from `host` on the grid above.
void launchPrefillTiles(PrefillAttentionOp op, mlir::OpBuilder &host,
                        mlir::gpu::GPUFuncOp kernel, int64_t tileRows,
                        int64_t sharedBytes);

} // namespace mla::gpu

#endif // MLA_LIB_CONVERSION_MLATOGPU_PREFILLTILEBLOCK_H
