//===- OperandChecker.h - Shape checks shared by mla verifiers --*- C++ -*-===//
//
// Every mla operation checks its buffers the same way: rank, element type,
// layout, and dimensions that must agree across operands or with attributes.
// OperandChecker does that once, with messages that name the operand, the
// dimension and what it was compared with.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_DIALECTS_MLA_OPERANDCHECKER_H
#define MLA_DIALECTS_MLA_OPERANDCHECKER_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/StringMap.h"

#include <optional>
#include <string>

namespace mla::detail {

/// One dimension of an operand. Dimensions with the same `name` must agree
/// (after subtracting `plusOne`, for offset arrays of B+1 entries); a
/// dimension with `expected` must equal it, which came from `source`.
struct Dim {
  llvm::StringRef name;
  std::optional<int64_t> expected = std::nullopt;
  llvm::StringRef source = "";
  bool plusOne = false;
  /// Row lengths the kernels loop over must be known at compile time.
  bool mustBeStatic = false;
};

/// A dimension whose size is shared by name across operands.
inline Dim sym(llvm::StringRef name) { return Dim{name}; }
/// A dimension of B+1 entries, B being the size bound to `name`.
inline Dim symPlusOne(llvm::StringRef name) {
  return Dim{name, std::nullopt, "", /*plusOne=*/true};
}
/// A dimension fixed by an attribute (or by a sum of them, named in source).
inline Dim fixed(llvm::StringRef name, int64_t value, llvm::StringRef source) {
  return Dim{name, value, source, /*plusOne=*/false, /*mustBeStatic=*/true};
}
/// A dimension shared by name that must also be static (a row length not
/// named by any attribute, like the head dim of merge_attn_states).
inline Dim staticSym(llvm::StringRef name) {
  return Dim{name, std::nullopt, "", /*plusOne=*/false, /*mustBeStatic=*/true};
}

/// What the element type of an operand may be.
enum class ElementKind {
  Activation, ///< f32, f16 or bf16, the same for every Activation operand
  Float,      ///< f32, f16 or bf16, checked alone (workspaces)
  Cache,      ///< Float or an FP8 format (f8E4M3FN, f8E5M2): KV caches
  F32,        ///< log-sum-exp values
  I32,        ///< offsets, lengths and page ids
  I64,        ///< slot mappings
};

class OperandChecker {
public:
  explicit OperandChecker(mlir::Operation *op) : op(op) {}

  /// Checks that `value` is a memref of `dims.size()` dimensions with the
  /// given element kind, a strided layout with unit innermost stride, and
  /// dimensions consistent with everything checked before.
  mlir::LogicalResult check(mlir::Value value, llvm::StringRef role,
                            llvm::ArrayRef<Dim> dims, ElementKind kind);

  /// Checks that `value`'s element type is exactly `type`, which the
  /// attribute or operand `source` prescribes.
  mlir::LogicalResult elementTypeIs(mlir::Value value, llvm::StringRef role,
                                    mlir::Type type, llvm::StringRef source);

  // Operand roles several ops share.

  /// The paged latent cache [num_blocks, block_size, latent + rope], whose
  /// element type is the op's cache_dtype.
  mlir::LogicalResult latentCache(mlir::Value cache, int64_t latent,
                                  int64_t rope, int64_t blockSize,
                                  mlir::Type cacheDtype);
  /// New latent entries kv_c [tokens, latent] and rope keys k_pe
  /// [tokens, rope].
  mlir::LogicalResult latentRows(mlir::Value kvC, mlir::Value kPe,
                                 int64_t latent, int64_t rope);
  /// The FP8 cache's scale: kv_scale [1] f32, given exactly when
  /// `cacheDtype` is an FP8 format.
  mlir::LogicalResult kvScale(mlir::Value scale, mlir::Type cacheDtype);
  /// kv_b_proj [latent, heads, nope + v].
  mlir::LogicalResult kvBProj(mlir::Value weight, int64_t latent,
                              int64_t heads, int64_t nope, int64_t vDim);

private:
  mlir::LogicalResult checkDim(llvm::StringRef role, unsigned index,
                               int64_t size, const Dim &dim);
  mlir::LogicalResult checkElement(mlir::Value value, llvm::StringRef role,
                                   ElementKind kind);

  struct Binding {
    int64_t size;
    std::string source;
  };
  mlir::Operation *op;
  llvm::StringMap<Binding> bound;
  std::optional<std::pair<mlir::Type, std::string>> activationType;
};

/// True for f32, f16 and bf16.
bool isSupportedFloat(mlir::Type type);
/// True for the KV cache's FP8 formats, f8E4M3FN and f8E5M2.
bool isCacheFp8(mlir::Type type);

/// Rejects discardable attributes without a dialect prefix: a misspelled
/// flag (`casual` for `causal`) must not silently change the computation.
mlir::LogicalResult verifyNoUnknownAttributes(mlir::Operation *op);

/// Verifies a softmax scale attribute: finite and positive.
mlir::LogicalResult verifySoftmaxScale(mlir::Operation *op, float scale);

/// Verifies a cache dtype attribute: one of the supported float types.
mlir::LogicalResult verifyCacheDtype(mlir::Operation *op, mlir::Type type);

} // namespace mla::detail

#endif // MLA_DIALECTS_MLA_OPERANDCHECKER_H
