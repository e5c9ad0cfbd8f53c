//===- FragmentSoftmax.h - Online softmax over accumulator fragments ------===//
//
// The tile algebra of the tensor-core attention kernels: the online
// softmax of one tile of scores held as accumulator fragments, written
// once for every decode and prefill schedule (mma.sync and wgmma).
//
// Fragments. The accumulators of m16n8k16 mma.sync and, per warp, of
// m64nNk16 wgmma have one layout: lane 4 g + q holds, of each 16-row tile
// m and 8-column tile j, rows g and g + 8 (lane row 2 m + i) at columns
// 2 q and 2 q + 1 (c), in register (m * columnTiles + j) * 4 + 2 i + c. A
// row therefore lives in one quad: its max and sum need two shuffles.
//
// The step, in base 2 with the scale c = softmax_scale * log2(e) > 0 (the
// verifier's) folded into the exponent, as FlashAttention-3 does:
//   masked keys    s = -inf                  (mask)
//   tile max       t = c * max_quad(s)       (rowMax)
//   running max    m' = max(m, t)            (advance: also safe, the max
//                  to subtract, m' or 0 while the row is empty, and
//                  alpha = 2^(m - safe), 0 on a row's first keys)
//   exponentials   p = 2^(c s - safe)        one fma and one ex2 each
//   partial sum    l' = alpha l + sum(p)     (exponentiate)
//   output         O' = alpha O              (rescale)
// A row's end (1 / l and its LSE) and its merge into an entry state come
// from LoopBuilder::rowEnd and mergeWeights, shared with every other
// lowering. Where a row's keys are spread over warps (the decode kernels
// score a tile's keys in several warps), the kernel combines the warps'
// rowMax results before `advance`, and their sums at the end.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_LIB_CONVERSION_MLATOGPU_FRAGMENTSOFTMAX_H
#define MLA_LIB_CONVERSION_MLATOGPU_FRAGMENTSOFTMAX_H

#include "Emitters/MmaEmitter.h"

namespace mla::gpu {

/// Which accumulator register holds which (row, column) of the lane.
struct AccumulatorFragment {
  int64_t rowTiles;    ///< 16-row tiles: lane rows 2 m + i
  int64_t columnTiles; ///< 8-column tiles

  int64_t size() const { return rowTiles * columnTiles * 4; }
  int64_t laneRows() const { return 2 * rowTiles; }
  /// Register of lane row 2 m + i, column 8 j + 2 quad + c.
  int64_t at(int64_t m, int64_t j, int64_t i, int64_t c) const {
    return (m * columnTiles + j) * 4 + 2 * i + c;
  }
  /// The lane row of register `k`.
  int64_t laneRowOf(int64_t k) const {
    return 2 * (k / (4 * columnTiles)) + (k % 4) / 2;
  }
};

/// A row's running max advanced by a tile (base 2, scaled): the new max
/// (-inf while the row has seen nothing), the max to subtract (0 instead
/// of -inf, so that 2^(-inf - m) is 0, never NaN) and alpha = 2^(old -
/// safe), the factor that rescales earlier sums and outputs.
struct OnlineMax {
  mlir::Value max, safe, alpha;
};

/// A finished row: 1 / l (0 when l = 0) and its LSE (-inf when l = 0);
/// merged into an entry state, also the weight of the entry's output (0
/// for an empty entry state, whose output is not read).
struct FragmentRowEnd {
  mlir::Value inverse, lse, entryWeight;
};

class FragmentSoftmax {
public:
  /// Scores of one tile in `scores`' layout; `quad` is lane % 4 and
  /// `scaleLog2` = softmax_scale * log2(e) (f32; times an FP8 cache's
  /// scale, known at run time, where the scores are products with its
  /// codes).
  FragmentSoftmax(MmaEmitter &e, AccumulatorFragment scores,
                  mlir::Value scaleLog2, mlir::Value quad)
      : e(e), layout(scores), scaleLog2(scaleLog2), quad(quad) {}
  FragmentSoftmax(MmaEmitter &e, AccumulatorFragment scores, double scaleLog2,
                  mlir::Value quad)
      : FragmentSoftmax(e, scores, e.f32(scaleLog2), quad) {}

  /// The scores of keys at or past their row's end set to -inf: register
  /// (m, j, i, c) is key `firstKey` + 8 j + 2 quad + c of lane row 2 m + i,
  /// whose keys end at `rowEnds`[2 m + i].
  void mask(llvm::MutableArrayRef<mlir::Value> s, mlir::Value firstKey,
            llvm::ArrayRef<mlir::Value> rowEnds) const;
  /// The same only where `needed` holds (one branch for the tile), for
  /// schedules that know which tiles cross a row's end.
  void maskWhere(mlir::Value needed, llvm::MutableArrayRef<mlir::Value> s,
                 mlir::Value firstKey,
                 llvm::ArrayRef<mlir::Value> rowEnds) const;

  /// Lane row `row`'s max over its quad, scaled (base 2).
  mlir::Value rowMax(llvm::ArrayRef<mlir::Value> s, int64_t row) const;
  /// The running max `old` advanced by the tile's `tileMax`.
  OnlineMax advance(mlir::Value old, mlir::Value tileMax) const;
  /// Lane row `row`'s exponentials 2^(c s - safe), handed to `sink` a
  /// column pair at a time (m, j: the pair's tiles; p0, p1), and its
  /// partial sum alpha `oldSum` + sum(p) over the lane's columns.
  using PairSink = std::function<void(int64_t m, int64_t j, mlir::Value p0,
                                      mlir::Value p1)>;
  mlir::Value exponentiate(llvm::ArrayRef<mlir::Value> s, int64_t row,
                           const OnlineMax &step, mlir::Value oldSum,
                           const PairSink &sink) const;

  /// A row whose tile lies in one quad, stepped whole: rowMax, advance and
  /// exponentiate. Returns its new max, partial sum and alpha.
  struct RowStep {
    mlir::Value max, sum, alpha;
  };
  RowStep step(llvm::ArrayRef<mlir::Value> s, int64_t row, mlir::Value oldMax,
               mlir::Value oldSum, const PairSink &sink) const;

  /// Accumulators `acc` in `layout` scaled by their lane row's alpha.
  /// With `onlyIfMoved`, left as they are unless some row max of the warp
  /// moved (one vote and a branch instead of a multiply an accumulator:
  /// worth it for outputs of a hundred registers a lane).
  static llvm::SmallVector<mlir::Value>
  rescale(MmaEmitter &e, mlir::ValueRange acc, AccumulatorFragment layout,
          llvm::ArrayRef<mlir::Value> alpha, bool onlyIfMoved);

  /// The end of a row whose running max (base 2, scaled) is `max` and
  /// whose exponentials sum to `sum`.
  static FragmentRowEnd finishRow(MmaEmitter &e, mlir::Value max,
                                  mlir::Value sum);
  /// `end` merged into the state of LSE `entryLse` that the output and the
  /// LSE hold on entry (mla.prefill_attention's accumulate): the row's
  /// output scale takes its merge weight and the LSE becomes the merged
  /// one.
  static FragmentRowEnd mergeIntoEntry(MmaEmitter &e, const FragmentRowEnd &end,
                                       mlir::Value entryLse);

private:
  MmaEmitter &e;
  AccumulatorFragment layout;
  mlir::Value scaleLog2;
  mlir::Value quad;
};

} // namespace mla::gpu

#endif // MLA_LIB_CONVERSION_MLATOGPU_FRAGMENTSOFTMAX_H
