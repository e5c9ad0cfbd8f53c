//===- GpuEmitter.h - Building blocks of the GPU kernels ---------*- C++ -*-===//
//
// Device-side helpers for kernels written as gpu.func bodies: thread and
// block indices, block-strided loops, base-2 exponentials and logarithms,
// warp reductions through shuffles, dynamic shared memory, 16-byte
// accesses (the tensor-core kernels add theirs in MmaEmitter.h).
// The generic strategy maps one warp to one attention row (head, query)
// and spreads a row's head dim across the 32 lanes; element c of a row
// belongs to lane c % 32, so every warp-wide load is coalesced.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_LIB_CONVERSION_MLATOGPU_GPUEMITTER_H
#define MLA_LIB_CONVERSION_MLATOGPU_GPUEMITTER_H

#include "../../Common/LoopBuilder.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace mla::gpu {

inline constexpr int64_t kWarpSize = 32;

class GpuEmitter : public LoopBuilder {
public:
  using LoopBuilder::LoopBuilder;

  mlir::Value threadId(mlir::gpu::Dimension d = mlir::gpu::Dimension::x);
  mlir::Value blockId(mlir::gpu::Dimension d);
  mlir::Value blockDim(mlir::gpu::Dimension d = mlir::gpu::Dimension::x);
  mlir::Value gridDim(mlir::gpu::Dimension d);
  mlir::Value laneId();
  mlir::Value warpId();

  /// for (i = lb + threadIdx.x; i < ub; i += blockDim.x) body(i)
  void blockStridedLoop(mlir::Value lb, mlir::Value ub,
                        const std::function<void(mlir::Value)> &body);

  /// 2^x and log2(x) of an f32 on the special-function unit (about 2 ulp),
  /// subnormals flushed to zero. Without the flush, ptxas wraps each
  /// MUFU.EX2 in a compare and two predicated multiplies that keep results
  /// below 2^-126: four instructions instead of one per probability of a
  /// softmax, where such a value is below f32 resolution next to the row's
  /// largest term (1) and changes no sum.
  mlir::Value exp2(mlir::Value x);
  mlir::Value log2(mlir::Value x);

  /// The sum (or max) of `value` over the 32 lanes of a warp, in every lane.
  mlir::Value warpSum(mlir::Value value);
  mlir::Value warpMax(mlir::Value value);

  /// Columns of a row a lane owns: lane + 32 k for k in [0, count).
  static int64_t columnsPerLane(int64_t length) {
    return (length + kWarpSize - 1) / kWarpSize;
  }
  /// Column `lane + 32 k` and whether it is inside a row of `length`.
  std::pair<mlir::Value, mlir::Value> laneColumn(mlir::Value lane, int64_t k,
                                                 int64_t length);
  /// memref[prefix..., column] as f32, or 0 where `inside` is false (the
  /// column is clamped so the load stays in bounds).
  mlir::Value loadColumn(mlir::Value memref, mlir::ValueRange prefix,
                         mlir::Value column, mlir::Value inside,
                         int64_t length, int64_t firstColumn = 0);
  /// memref[prefix..., firstColumn + column] = value where `inside`.
  void storeColumn(mlir::Value value, mlir::Value memref,
                   mlir::ValueRange prefix, mlir::Value column,
                   mlir::Value inside, int64_t firstColumn = 0);

  /// __syncthreads().
  void barrier();
  /// The block's dynamic shared memory as bytes.
  mlir::Value dynamicShared();
  /// A static 2-D (or 1-D) view of `raw` at byte `offset`.
  mlir::Value sharedView(mlir::Value raw, mlir::Value offset,
                         llvm::ArrayRef<int64_t> shape, mlir::Type type);
  mlir::Value sharedView(mlir::Value raw, int64_t offset,
                         llvm::ArrayRef<int64_t> shape, mlir::Type type) {
    return sharedView(raw, index(offset), shape, type);
  }

  /// Emits `if (cond) thenBody() else elseBody()`.
  void ifThenElse(mlir::Value cond, const std::function<void()> &thenBody,
                  const std::function<void()> &elseBody);
  /// Emits `if (cond) thenValues() else elseValues()`, yielding values of
  /// `types`.
  llvm::SmallVector<mlir::Value>
  selectValues(mlir::Value cond, mlir::TypeRange types,
               const std::function<llvm::SmallVector<mlir::Value>()> &thenValues,
               const std::function<llvm::SmallVector<mlir::Value>()> &elseValues);

  //===--------------------------------------------------------------------===//
  // 16-byte accesses
  //===--------------------------------------------------------------------===//

  /// Elements of one vector access: 8, so 16 bytes of a 2-byte type (and
  /// two 16-byte accesses of f32).
  static constexpr int64_t kVectorWidth = 8;
  /// Whether `memref`'s rows can be read in whole vectors at any column
  /// that is a multiple of kVectorWidth, given a suitably aligned first
  /// element: a strided layout with contiguous rows (innermost stride 1),
  /// the innermost dimension static and a multiple of the width, and every
  /// outer stride a multiple of it: static, or with `dynamicStrides` also
  /// dynamic (then checked at run time by vectorAligned; for kernels that
  /// address rows through the strides alone, as RowMove does). Identity
  /// layouts and views such as a column range of wider rows or a range of
  /// heads qualify.
  static bool hasVectorRows(mlir::Value memref, bool dynamicStrides = false);
  /// i1: every memref's first element (base plus the view's offset) is at
  /// a multiple of its vector access size (kVectorWidth elements), and its
  /// dynamic strides are multiples of kVectorWidth. The same for every
  /// thread, so branching on it never diverges.
  /// With `elements`, vectors of that many elements instead (16 one-byte
  /// codes make a 16-byte copy).
  mlir::Value vectorAligned(mlir::ValueRange memrefs,
                            int64_t elements = kVectorWidth);
  /// memref[indices] .. memref[indices + kVectorWidth - 1] (innermost
  /// index) as a vector of the element type.
  mlir::Value loadVector(mlir::Value memref, mlir::ValueRange indices);
  /// The same as vector<8xf32> (FP8 codes as their values, unscaled:
  /// Fp8Dequant.h).
  mlir::Value loadVectorF32(mlir::Value memref, mlir::ValueRange indices);
  /// A loaded vector as vector<8xf32>, as loadVectorF32 converts it.
  mlir::Value vectorF32(mlir::Value loaded);
  /// A float (or vector of floats) as `element` (or a vector of it):
  /// truncated, extended or as is; encoded for an FP8 format (Fp8Convert).
  mlir::Value convertFloat(mlir::Value value, mlir::Type element);
  /// An output merged into an entry state's output (f32 scalars or
  /// vectors): own + weight * entry, or own alone where weight = 0 (an
  /// empty entry state, whose output may be NaN). `own` already carries its
  /// own merge weight (LoopBuilder::mergeWeights).
  mlir::Value mergeIntoEntryOutput(mlir::Value own, mlir::Value entry,
                                   mlir::Value weight);
  /// Stores a vector of floats there, converted to the element type.
  void storeVector(mlir::Value value, mlir::Value memref,
                   mlir::ValueRange indices);

  /// Copies rows staged in shared memory out to `dest`, converted to its
  /// element type: columns [0, `columns`) (a multiple of kVectorWidth) of
  /// rows [0, `rows`) of `staging` (a shared [rows, stride] view, its rows
  /// 16 bytes apart times a whole number and starting 16-byte aligned) go
  /// to dest[destRow(r)..., column] where `real(r)` holds. The `threads`
  /// threads (`tid` numbering this one) take kVectorWidth-column pieces in
  /// turn, so a warp reads and writes whole lines; 16-byte stores where
  /// dest's rows allow them and its base is aligned, else element by
  /// element. The rows must be written and the block past a barrier.
  /// With `destColumn0` (a multiple of kVectorWidth), staged column c goes
  /// to dest column `destColumn0` + c.
  /// (A loop, not unrolled: the kernels' results leave through it in a
  /// few instructions whatever their size.)
  ///
  /// With `entry` the staged rows are merged into what dest holds (an
  /// attention state: mla.prefill_attention's accumulate): row r becomes
  /// staged + weights[r] * dest in f32 (staged alone where the weight is 0).
  /// The dest pieces come from loadEntryPieces, issued early so that their
  /// latency is not paid piece after piece at the end of the block; the
  /// copy is unrolled then.
  struct EntryState {
    mlir::Value weights; ///< shared f32 [rows]
    llvm::SmallVector<mlir::Value> pieces;
  };
  void copyStagedRows(
      mlir::Value staging, int64_t rows, int64_t columns, mlir::Value tid,
      int64_t threads, const std::function<mlir::Value(mlir::Value)> &real,
      const std::function<llvm::SmallVector<mlir::Value, 4>(mlir::Value)>
          &destRow,
      mlir::Value dest, mlir::Value destColumn0 = {},
      const EntryState *entry = nullptr);
  /// The dest pieces a merging copyStagedRows with the same arguments
  /// reads, loaded now (all in flight together; zeros for rows that are not
  /// real), as vectors of dest's element type.
  llvm::SmallVector<mlir::Value> loadEntryPieces(
      int64_t rows, int64_t columns, mlir::Value tid, int64_t threads,
      const std::function<mlir::Value(mlir::Value)> &real,
      const std::function<llvm::SmallVector<mlir::Value, 4>(mlir::Value)>
          &destRow,
      mlir::Value dest, mlir::Value destColumn0 = {});

private:
  mlir::Value warpReduce(mlir::Value value, bool max);
  /// Piece `piece` of a staged copy: its staged row and column and where
  /// it goes in dest.
  struct StagedPiece {
    mlir::Value row, column;
    llvm::SmallVector<mlir::Value, 4> at;
  };
  StagedPiece stagedPiece(
      mlir::Value piece, int64_t piecesPerRow,
      const std::function<llvm::SmallVector<mlir::Value, 4>(mlir::Value)>
          &destRow,
      mlir::Value destColumn0);
};

} // namespace mla::gpu

#endif // MLA_LIB_CONVERSION_MLATOGPU_GPUEMITTER_H
