//===- MmaDecodeRows.h - The online softmax of the mma.sync decodes -*- C++ -*-===//
//
// The two mma.sync decode split kernels (GpuDecodeMma.cpp over a two-byte
// cache, GpuDecodeMmaFp8.cpp over an FP8 one) differ in how their KV tiles
// reach the tensor cores, not in the softmax between their two products:
// four warps, each scoring 16 tokens of a 64-token tile against the
// block's 16 rows, the rows' maxima exchanged through shared memory, the
// exponentials P handed to the caller for its P V, and at the end the row
// sums added across the warps. That part is here, once.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_LIB_CONVERSION_MLATOGPU_MMADECODEROWS_H
#define MLA_LIB_CONVERSION_MLATOGPU_MMADECODEROWS_H

#include "Tiles/DecodeSplitBlock.h"
#include "Tiles/FragmentSoftmax.h"
#include "mla/Target/MmaDecodeShape.h"

namespace mla::gpu {

/// The thread's lane and warp, and its place in the mma fragments: group
/// lane / 4 (the rows it holds) and quad lane % 4 (their columns).
struct WarpLane {
  explicit WarpLane(MmaEmitter &e);
  mlir::Value lane, warp, group, quad;
};

/// The rows of one block of an mma.sync decode split kernel: the lane's
/// two rows (group and group + 8 of the 16), their online softmax over a
/// warp's 16 x 16 scores, and O, the lane's part of the 16 x Lkv / 4
/// output columns of its warp (oFragment, 64 f32 at Lkv = 512).
///
/// A kernel's loop state is [max0, max1, sum0, sum1, O...] (maxima in base
/// 2, sums the lane's partial ones).
class MmaDecodeRows {
public:
  /// The row exchange's buffers (f32 [warps * 16]) at bytes `maxAt` and
  /// `sumAt` of the shared memory `raw`; the scores' scale is
  /// DecodeSplitBlock::scoresScale(`scaleLog2`) (a kernel may multiply
  /// scoreScale by what its scores leave out).
  MmaDecodeRows(MmaEmitter &e, DecodeSplitBlock &block, const WarpLane &thread,
                int64_t latent, mlir::Value raw, int64_t maxAt, int64_t sumAt,
                double scaleLog2);

  virtual ~MmaDecodeRows() = default;

  /// The loop over the split's KV tiles (kvTile); returns the last state.
  llvm::SmallVector<mlir::Value> walkTiles();
  /// out = O / l and lse from the last state, to the split partials or the
  /// final outputs: the rows' ends (finishRows), O staged (stageOutput),
  /// the real rows copied out by the block.
  void writeResults(llvm::ArrayRef<mlir::Value> state);

  /// The softmax step of one tile: the warp's scores `s` (sFragment:
  /// column 8 nt + 2 quad + c is token `warpToken0` + 8 nt + 2 quad + c)
  /// masked, the rows' maxima advanced across the warps (a barrier), and
  /// the exponentials P returned in sFragment's order; `next` (a copy of
  /// `it`) gets the new maxima and sums and O rescaled.
  llvm::SmallVector<mlir::Value> softmaxStep(mlir::Value warpToken0,
                                             llvm::MutableArrayRef<mlir::Value> s,
                                             mlir::ValueRange it,
                                             llvm::MutableArrayRef<mlir::Value> next);

  /// The rows' ends from the final state: row sums added across the warps
  /// (a barrier), O's scale 1 / l (times an FP8 cache's scale) and LSE.
  llvm::SmallVector<FragmentRowEnd, 2> finishRows(llvm::ArrayRef<mlir::Value> state);

  /// The warp's 16 x 16 scores and its 16 x Lkv/4 of O.
  const AccumulatorFragment sFragment, oFragment;
  const int64_t warpColumns; ///< O columns of a warp
  llvm::SmallVector<DecodeSplitBlock::LaneRow, 2> laneRows;

protected:
  /// One KV tile starting at token `tile`: the state `it` stepped over it.
  virtual llvm::SmallVector<mlir::Value> kvTile(mlir::Value tile,
                                                mlir::ValueRange it) = 0;
  /// O / l (the final `state` over the rows' `ends`) staged as f32 rows
  /// [16, Lkv + 8] in shared memory, past a barrier; returns the view.
  virtual mlir::Value stageOutput(llvm::ArrayRef<mlir::Value> state,
                                  llvm::ArrayRef<FragmentRowEnd> ends) = 0;

  const int64_t latent;
  MmaEmitter &e;
  DecodeSplitBlock &block;
  const WarpLane &thread;
  mlir::Value maxS, sumS, scoreScale, negInf, fzero;

  /// The lane rows' values `perRow` to this warp's slot of `buffer` (f32
  /// [warp * 16 + row]), stored by the quads' leaders; a barrier.
  void publishRows(mlir::Value buffer, llvm::ArrayRef<mlir::Value> perRow);
  /// Warp `w`'s value of lane row `i` in `buffer` (see publishRows).
  mlir::Value warpValue(mlir::Value buffer, int64_t w, int64_t i);
};

} // namespace mla::gpu

#endif // MLA_LIB_CONVERSION_MLATOGPU_MMADECODEROWS_H
