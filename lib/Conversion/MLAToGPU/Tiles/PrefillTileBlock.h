//===- PrefillTileBlock.h - What the tensor-core prefill kernels share ----===//
//
// The mma.sync (GpuPrefillMma.cpp) and wgmma (GpuPrefillWgmma.cpp) prefill
// kernels differ in their products, not in what a block works on: a tile
// of `tileRows` consecutive queries of one sequence for one head, and the
// keys those queries see. A block for each of ceil(T / tileRows) + B row
// tiles (an upper bound on the row tiles over all sequences) and each
// head; a block finds its sequence and tile by walking cu_seqlens_q.
//
// Blocks start in index order, so the order of the (tile, head) pairs is
// the schedule. Under causal masking heads go in groups whose K and V fit
// in L2 together (kL2BudgetBytes; all of them for short sequences), on
// the grid (heads of a group, row tiles, groups), whose y limit (65535
// row tiles, 8.4M query tokens at 128 rows a tile) the launch reports if
// exceeded: a group's blocks run close in time and read their K and V
// from L2. Within a group, tiles go
// in reverse order with the group's heads inner: every head's last tile
// (the longest under causal masking, at the end of a sequence), then every
// head's one before, and so on, so the short tiles come last and fill the
// SMs the long ones leave. Taking one head's tiles after another started
// the last head's longest tile near the end of the grid. Without the mask
// every tile is as long as the others, and the grid stays (row tiles,
// heads): one head's tiles after another's, each head's K and V in L2 for
// the fewest blocks (head groups there, on either grid, were 1 to 5%
// slower).
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
#include "Tiles/FragmentSoftmax.h"

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
  llvm::SmallVector<FragmentRowEnd, 4> finishRows(mlir::ValueRange maxes,
                                                      mlir::ValueRange sums,
                                                      mlir::ValueRange rows,
                                                      bool accumulate);
  /// With accumulate: the quads' leaders write their rows' entry-output
  /// weights to their tile rows of `entryWeights` (a shared f32 [tileRows]
  /// view), for copyStagedRows.
  void storeEntryWeights(llvm::ArrayRef<FragmentRowEnd> ends,
                         mlir::ValueRange rows, mlir::Value quad,
                         mlir::Value entryWeights);
  /// Writes the LSEs of the real ones among `rows`, by the quads' leaders.
  /// With accumulate, only past a block barrier that follows finishRows
  /// (the entry LSEs are read there, in place).
  void storeLse(llvm::ArrayRef<FragmentRowEnd> ends, mlir::ValueRange rows,
                mlir::Value quad);

  /// The L2 bytes a head group's K and V may take together: below the
  /// 40 to 50 MiB of A100 and H100, so that they stay there while the
  /// group's blocks run.
  static constexpr int64_t kL2BudgetBytes = 32 << 20;

private:
  MmaEmitter &e;
  int64_t tileRows;
  bool causal;
  /// The block's row tile, counted over all sequences from the first.
  mlir::Value tileIndex;
};

/// Launches a prefill kernel from `host` on the grid above.
void launchPrefillTiles(PrefillAttentionOp op, mlir::OpBuilder &host,
                        mlir::gpu::GPUFuncOp kernel, int64_t tileRows,
                        int64_t sharedBytes);

} // namespace mla::gpu

#endif // MLA_LIB_CONVERSION_MLATOGPU_PREFILLTILEBLOCK_H
