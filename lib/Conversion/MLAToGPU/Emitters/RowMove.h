//===- RowMove.h - Moving one row by a group of threads ---------*- C++ -*-===//
//
// The bandwidth-bound kernels (merge, gather, concat-and-cache) and the
// up-projections' rope copies move rows the same way: a group of `lanes`
// threads owns one row and lane i takes columns i, i + lanes, ... (8 at a
// time, as 16-byte vectors (8-byte ones of FP8 codes), where the static
// types and a uniform run-time alignment flag allow it; single elements
// otherwise), so every warp-wide access covers consecutive words.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_LIB_CONVERSION_MLATOGPU_ROWMOVE_H
#define MLA_LIB_CONVERSION_MLATOGPU_ROWMOVE_H

#include "Emitters/GpuEmitter.h"

namespace mla::gpu {

/// Moves one row of `length` columns: element c of the destination row
/// (from column `dstFirstColumn`) is `combine(src[srcPrefix..., c +
/// srcFirstColumn], ...)` over the sources, computed in f32 (a plain copy,
/// without `combine`, moves the values as they are, converted on store if
/// the types differ).
struct RowMove {
  mlir::Value dst;
  llvm::SmallVector<mlir::Value> dstPrefix;
  int64_t dstFirstColumn = 0;
  /// Sources read at the same column.
  llvm::SmallVector<std::pair<mlir::Value, llvm::SmallVector<mlir::Value>>>
      sources;
  int64_t length = 0;
  /// Combines the sources' values (scalars or vector<8xf32>) into the
  /// value stored.
  std::function<mlir::Value(GpuEmitter &, llvm::ArrayRef<mlir::Value>)> combine;
  /// Where the moved columns start in the sources' rows.
  int64_t srcFirstColumn = 0;

  /// Whether the static types allow the vector path.
  bool vectorizable() const;
  /// Emits the move by the `lanes` threads whose lane id is `lane`; with
  /// `vectorOk` (uniform over them) in vectors where vectorizable().
  void emit(GpuEmitter &e, mlir::Value lane, int64_t lanes,
            mlir::Value vectorOk) const;
};

/// The uniform flag of the vector path for a kernel moving rows of
/// `memrefs`: null when the static types rule it out.
mlir::Value vectorPathFlag(GpuEmitter &e, mlir::ValueRange memrefs);

} // namespace mla::gpu

#endif // MLA_LIB_CONVERSION_MLATOGPU_ROWMOVE_H
