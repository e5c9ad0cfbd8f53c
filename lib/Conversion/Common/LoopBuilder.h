//===- LoopBuilder.h - Scalar and loop helpers for lowerings ----*- C++ -*-===//
//
// What the CPU and GPU lowerings of mla ops both need: constants, loads and
// stores with f32 conversion, clamped index arithmetic, loops, and the two
// pieces of MLA math that do not depend on the target: which keys a causal
// query sees, and the weights that merge two attention states.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_LIB_CONVERSION_COMMON_LOOPBUILDER_H
#define MLA_LIB_CONVERSION_COMMON_LOOPBUILDER_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"

#include <functional>
#include <optional>

namespace mla {

class LoopBuilder {
public:
  LoopBuilder(mlir::OpBuilder &b, mlir::Location loc) : b(b), loc(loc) {}

  mlir::OpBuilder &builder() { return b; }
  mlir::Location location() const { return loc; }

  // Constants.
  mlir::Value index(int64_t v);
  mlir::Value f32(double v);
  mlir::Value negInf();

  // Loads and stores; floats are converted to and from f32.
  mlir::Value loadIndex(mlir::Value memref, mlir::ValueRange indices);
  mlir::Value loadF32(mlir::Value memref, mlir::ValueRange indices);
  void storeF32(mlir::Value value, mlir::Value memref,
                mlir::ValueRange indices);
  /// A loaded value (scalar or vector) as f32, and an f32 value as
  /// `element` (FP8 formats included, see Fp8Convert.h).
  mlir::Value toF32(mlir::Value v);
  /// An FP8 cache's scale, loaded from its kv_scale operand [1] (null
  /// when there is none).
  mlir::Value cacheScale(mlir::Value kvScale);
  mlir::Value fromF32(mlir::Value v, mlir::Type element);

  // Index arithmetic.
  mlir::Value add(mlir::Value a, mlir::Value c);
  mlir::Value sub(mlir::Value a, mlir::Value c);
  mlir::Value mul(mlir::Value a, mlir::Value c);
  mlir::Value minIndex(mlir::Value a, mlir::Value c);
  /// a < c, signed.
  mlir::Value lessThan(mlir::Value a, mlir::Value c);
  /// i1: the index `a` equals `v`.
  mlir::Value eqIndex(mlir::Value a, int64_t v);
  mlir::Value maxIndex(mlir::Value a, mlir::Value c);
  /// clamp(v, lo, hi) on index values.
  mlir::Value clampIndex(mlir::Value v, mlir::Value lo, mlir::Value hi);
  mlir::Value ceilDiv(mlir::Value a, int64_t divisor);
  mlir::Value dim(mlir::Value memref, int64_t d);

  /// Emits `for (i = lb; i < ub; i += step) body(i)`.
  void forLoop(mlir::Value lb, mlir::Value ub, mlir::Value step,
               const std::function<void(mlir::Value)> &body);
  void forLoop(mlir::Value lb, mlir::Value ub, int64_t step,
               const std::function<void(mlir::Value)> &body);
  /// A loop carrying values; returns their final values.
  llvm::SmallVector<mlir::Value>
  forLoop(mlir::Value lb, mlir::Value ub, mlir::Value step,
          mlir::ValueRange init,
          const std::function<llvm::SmallVector<mlir::Value>(
              mlir::Value, mlir::ValueRange)> &body);
  llvm::SmallVector<mlir::Value>
  forLoop(mlir::Value lb, mlir::Value ub, int64_t step, mlir::ValueRange init,
          const std::function<llvm::SmallVector<mlir::Value>(
              mlir::Value, mlir::ValueRange)> &body);
  /// Emits `if (cond) body()`.
  void ifThen(mlir::Value cond, const std::function<void()> &body);

  /// Tokens a paged cache can hold for one request: block_table columns x
  /// `pageSize`, or 0 when `cache` has no pages at all, so that a request
  /// then reads nothing (its page lookups, clamped to the last page, would
  /// otherwise address page -1).
  mlir::Value pagedCapacity(mlir::Value blockTable, mlir::Value cache,
                            mlir::Value pageSize);

  /// Keys visible to query `i` of `numQueries` over `numKeys` keys:
  /// bottom-right aligned causal masking (clamped to [0, numKeys]), or all.
  mlir::Value visibleKeys(bool causal, mlir::Value i, mlir::Value numQueries,
                          mlir::Value numKeys);

  /// A decode request's keys (mla.decode_attention): `counted`, its
  /// seq_lens entry as loaded, or under kv_share [W, I] the held tokens of
  /// them; at least 0 and at most `capacity`.
  mlir::Value decodeKeys(std::optional<llvm::ArrayRef<int64_t>> share,
                         mlir::Value counted, mlir::Value capacity);
  /// Keys query `i` of `numQueries` of a decode request sees, of its
  /// `keys` (decodeKeys): visibleKeys, or under kv_share the held tokens of
  /// the sequence's causal prefix counted - numQueries + 1 + i.
  mlir::Value decodeVisibleKeys(bool causal,
                                std::optional<llvm::ArrayRef<int64_t>> share,
                                mlir::Value i, mlir::Value numQueries,
                                mlir::Value counted, mlir::Value keys);

  /// How attention states of the same queries over disjoint key sets
  /// combine (mla.merge_attn_states, mla.merge_attn_states_n): with
  /// m = max_i lse_i, weight_i = exp(lse_i - m) / sum_j exp(lse_j - m) and
  /// lse = m + log(sum_j exp(lse_j - m)).
  struct StateWeights {
    llvm::SmallVector<mlir::Value, 4> weights; ///< one a state, normalized
    mlir::Value lse; ///< the merged LSE (-inf when every state is empty)
  };
  /// Weights for states with LSEs `lses` (at least one); +inf is read as an
  /// empty state, and when every state is empty all weights are 0 (never
  /// NaN). The one formula of every merge.
  StateWeights mergeWeights(llvm::ArrayRef<mlir::Value> lses);

  /// The two-state case, named as mla.merge_attn_states names its inputs.
  struct MergeWeights {
    mlir::Value prefix, suffix; ///< normalized weights of each output
    mlir::Value lse;            ///< the merged LSE (-inf when both empty)
  };
  MergeWeights mergeWeights(mlir::Value prefixLse, mlir::Value suffixLse);

  // The online softmax of one scalar row (the CPU loops and the generic GPU
  // kernel; the tensor-core kernels step through FragmentSoftmax, the same
  // algebra over accumulator fragments). Natural-log scale: scores arrive
  // multiplied by softmax_scale.
  /// max(init, values...), folded left to right.
  mlir::Value foldMax(mlir::Value init, mlir::ValueRange values);
  /// A row's state rescaled to a new running max: alpha = exp(old - new)
  /// (0 on the row's first keys, where old is -inf and new finite) and the
  /// running sum times alpha. Outputs accumulated so far scale by alpha.
  struct RescaledSum {
    mlir::Value alpha, sum;
  };
  RescaledSum rescaleToMax(mlir::Value oldMax, mlir::Value newMax,
                           mlir::Value sum);
  /// The unnormalized weight of a score under the running max: exp(s - max)
  /// (0 for a masked score of -inf).
  mlir::Value softmaxWeight(mlir::Value score, mlir::Value max);

  /// The end of an attention row: its output scale and its LSE.
  struct RowEnd {
    mlir::Value inverse; ///< 1 / sum, or 0 for an empty row
    mlir::Value lse;     ///< max + log(sum), or -inf for an empty row
  };
  /// The end of a row whose scores peaked at `max` (natural-log scale) and
  /// whose exponentials sum to `sum`. Only a row without keys (sum exactly
  /// 0) is empty. A row that read a NaN or an infinity has a NaN sum and
  /// keeps it in both results, so that it comes out NaN rather than being
  /// taken for an empty state (a zero row, or dropped by a merge).
  RowEnd rowEnd(mlir::Value max, mlir::Value sum);

protected:
  mlir::OpBuilder &b;
  mlir::Location loc;
};

} // namespace mla

#endif // MLA_LIB_CONVERSION_COMMON_LOOPBUILDER_H
