//===- Fp8Dequant.cpp - FP8 codes to two-byte floats, four at a time ------===//

#include "Emitters/Fp8Dequant.h"

#include "../../Common/Fp8Convert.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>

using namespace mlir;

namespace mla::gpu {
namespace {

/// How one format's codes become one two-byte type's bits. A pair of codes
/// sits in a word as two 16-bit lanes, each code in its lane's high byte
/// (so its sign bit is already the lane's); the magnitude bits move right
/// by `shift` (into the target's exponent field, the code's exponent field
/// aligned to the target's lowest exponent bits, its mantissa to the
/// target's highest mantissa bits). The lane's value is then the code's
/// times 2^-`exponent`.
struct PairRecipe {
  uint32_t shift;
  int exponent;
  /// Magnitude bits whose all-ones exponent field makes a NaN or infinity
  /// (0: the format has none the recipe gets wrong).
  uint32_t specialMask;
};

PairRecipe recipeFor(Type fp8, Type element) {
  const bool e4m3 = isa<Float8E4M3FNType>(fp8);
  if (element.isBF16())
    // bf16 has 8 exponent bits (bias 127) and 7 mantissa bits.
    return e4m3 ? PairRecipe{4, 127 - 7, 0x7f} : PairRecipe{3, 127 - 15, 0x7c};
  // f16 has 5 exponent bits (bias 15) and 10 mantissa bits: e5m2 is its
  // high byte.
  return e4m3 ? PairRecipe{1, 15 - 7, 0x7f} : PairRecipe{0, 0, 0};
}

struct Words {
  OpBuilder &b;
  Location loc;
  VectorType type;

  Value splat(uint32_t v) {
    return arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(type, b.getI32IntegerAttr(int32_t(v))));
  }
  Value andI(Value x, uint32_t m) {
    return arith::AndIOp::create(b, loc, x, splat(m));
  }
  Value orI(Value x, Value y) { return arith::OrIOp::create(b, loc, x, y); }
  Value shl(Value x, uint32_t n) {
    return n ? arith::ShLIOp::create(b, loc, x, splat(n)).getResult() : x;
  }
  Value shr(Value x, uint32_t n) {
    return n ? arith::ShRUIOp::create(b, loc, x, splat(n)).getResult() : x;
  }
  Value add(Value x, uint32_t v) {
    return arith::AddIOp::create(b, loc, x, splat(v));
  }
};

/// Whether any code of `words` has the all-ones exponent of `mask` (per
/// byte: magnitude & mask == mask, found as a carry into the byte's top
/// bit, which the magnitude leaves clear).
Value anySpecial(OpBuilder &b, Location loc, Words &w, Value words,
                 uint32_t mask) {
  uint32_t masks = mask * 0x01010101u;
  uint32_t carry = (0x80u - mask) * 0x01010101u;
  Value hits = w.andI(w.add(w.andI(words, masks), carry), 0x80808080u);
  Value any = vector::ReductionOp::create(b, loc, vector::CombiningKind::OR,
                                          hits);
  return arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::ne, any,
      arith::ConstantIntOp::create(b, loc, 0, 32));
}

} // namespace

Value dequantizeFp8(OpBuilder &b, Location loc, Value codes, Type element) {
  auto codeType = cast<VectorType>(codes.getType());
  const int64_t n = codeType.getNumElements();
  if (n % 4 != 0 || !isFp8Type(codeType) ||
      !(element.isBF16() || element.isF16()))
    llvm::report_fatal_error("dequantizeFp8: needs vector<4k x fp8> codes "
                             "and a bf16 or f16 result");
  PairRecipe recipe = recipeFor(codeType.getElementType(), element);
  Words w{b, loc, VectorType::get({n / 4}, b.getI32Type())};
  Value bytes = arith::BitcastOp::create(
      b, loc, VectorType::get({n}, b.getI8Type()), codes);
  Value words = vector::BitCastOp::create(b, loc, w.type, bytes);
  // Codes 0 and 1 of each word into the high bytes of its lanes, then
  // codes 2 and 3 (the backend makes each a byte permute).
  Value low = w.orI(w.andI(w.shl(words, 8), 0x0000ff00u),
                    w.andI(w.shl(words, 16), 0xff000000u));
  Value high = w.orI(w.andI(w.shr(words, 8), 0x0000ff00u),
                     w.andI(words, 0xff000000u));
  auto toBits = [&](Value pair) {
    if (recipe.shift == 0)
      return pair;
    uint32_t magnitude = (0x7f00u >> recipe.shift) * 0x00010001u;
    return w.orI(w.andI(pair, 0x80008000u),
                 w.andI(w.shr(pair, recipe.shift), magnitude));
  };
  SmallVector<int64_t> interleave;
  for (int64_t i = 0; i < n / 4; ++i)
    interleave.append({i, i + n / 4});
  Value pairs = vector::ShuffleOp::create(b, loc, toBits(low), toBits(high),
                                          interleave);
  auto resultType = VectorType::get({n}, element);
  Value fast = vector::BitCastOp::create(b, loc, resultType, pairs);
  if (recipe.exponent != 0)
    fast = arith::MulFOp::create(
        b, loc, fast,
        arith::ConstantOp::create(
            b, loc,
            DenseElementsAttr::get(
                resultType, b.getFloatAttr(element, std::ldexp(1.0,
                                                          recipe.exponent)))));
  if (recipe.specialMask == 0)
    return fast;
  auto exact = scf::IfOp::create(
      b, loc, anySpecial(b, loc, w, words, recipe.specialMask),
      [&](OpBuilder &then, Location l) {
        Value f32 = fp8ToF32(then, l, codes);
        Value v = arith::TruncFOp::create(then, l, resultType, f32);
        scf::YieldOp::create(then, l, v);
      },
      [&](OpBuilder &otherwise, Location l) {
        scf::YieldOp::create(otherwise, l, fast);
      });
  return exact.getResult(0);
}

} // namespace mla::gpu
