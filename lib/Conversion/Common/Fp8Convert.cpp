//===- Fp8Convert.cpp - FP8 cache values to and from f32 in IR ------------===//

#include "Fp8Convert.h"

#include "mla/Support/Float8.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinTypes.h"

#include <cmath>

using namespace mlir;

namespace mla {
namespace {

Type elementOf(Type type) {
  if (auto vector = dyn_cast<VectorType>(type))
    return vector.getElementType();
  return type;
}

/// `type` with its element type replaced by `element`.
Type withElement(Type type, Type element) {
  if (auto vector = dyn_cast<VectorType>(type))
    return vector.clone(element);
  return element;
}

const Fp8Format &formatOf(Type fp8) {
  return isa<Float8E4M3FNType>(elementOf(fp8)) ? kFp8E4M3 : kFp8E5M2;
}

/// Integer and float arithmetic on values of one shape, constants splatted.
struct Arith {
  OpBuilder &b;
  Location loc;
  Type shape; ///< any type of the values' shape

  Type i32() { return withElement(shape, b.getI32Type()); }
  Type f32() { return withElement(shape, b.getF32Type()); }
  Value constant(Type type, TypedAttr scalar) {
    if (auto vector = dyn_cast<VectorType>(type))
      return arith::ConstantOp::create(
          b, loc, DenseElementsAttr::get(vector, scalar));
    return arith::ConstantOp::create(b, loc, scalar);
  }
  Value u(uint32_t v) {
    return constant(i32(), b.getI32IntegerAttr(int32_t(v)));
  }
  Value f(float v) { return constant(f32(), b.getF32FloatAttr(v)); }
  Value andI(Value x, uint32_t m) { return arith::AndIOp::create(b, loc, x, u(m)); }
  Value orI(Value x, Value y) { return arith::OrIOp::create(b, loc, x, y); }
  Value shl(Value x, uint32_t n) { return arith::ShLIOp::create(b, loc, x, u(n)); }
  Value shr(Value x, uint32_t n) { return arith::ShRUIOp::create(b, loc, x, u(n)); }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubIOp::create(b, loc, x, y); }
  Value cmp(arith::CmpIPredicate p, Value x, uint32_t v) {
    return arith::CmpIOp::create(b, loc, p, x, u(v));
  }
  Value select(Value c, Value x, Value y) {
    return arith::SelectOp::create(b, loc, c, x, y);
  }
  Value bitsOf(Value x) { return arith::BitcastOp::create(b, loc, i32(), x); }
  Value floatOf(Value x) { return arith::BitcastOp::create(b, loc, f32(), x); }
};

} // namespace

bool isFp8Type(Type type) {
  return isa<Float8E4M3FNType, Float8E5M2Type>(elementOf(type));
}

Value fp8ToF32(OpBuilder &b, Location loc, Value values) {
  const Fp8Format &f = formatOf(values.getType());
  Arith a{b, loc, values.getType()};
  const uint32_t m = f.mantissaBits;
  Value byte = arith::BitcastOp::create(
      b, loc, withElement(values.getType(), b.getI8Type()), values);
  Value code = arith::ExtUIOp::create(b, loc, a.i32(), byte);
  Value sign = a.shl(a.andI(code, 0x80), 24);
  Value magnitude = a.andI(code, 0x7f);
  Value mantissa = a.andI(magnitude, (1u << m) - 1);
  // Normal: the exponent and mantissa bits shifted into place, rebiased.
  Value normal = a.add(a.shl(magnitude, 23 - m), a.u(uint32_t(127 - f.bias) << 23));
  // Subnormal: mantissa x 2^(1 - bias - m), exact in f32.
  Value subnormal = a.bitsOf(arith::MulFOp::create(
      b, loc, arith::UIToFPOp::create(b, loc, a.f32(), mantissa),
      a.f(std::ldexp(1.0f, 1 - f.bias - int(m)))));
  Value isSubnormal = a.cmp(arith::CmpIPredicate::ult, magnitude, 1u << m);
  Value bits = a.select(isSubnormal, subnormal, normal);
  // The top exponent: e4m3 has only NaN there (0x7f), e5m2 infinity and NaN.
  uint32_t top = ((1u << (7 - m)) - 1) << m;
  if (m == 3) {
    Value isNan = a.cmp(arith::CmpIPredicate::eq, magnitude, 0x7f);
    bits = a.select(isNan, a.u(0x7fc00000u), bits);
  } else {
    Value isSpecial = a.cmp(arith::CmpIPredicate::uge, magnitude, top);
    Value isInf = a.cmp(arith::CmpIPredicate::eq, magnitude, top);
    Value special = a.select(isInf, a.u(0x7f800000u), a.u(0x7fc00000u));
    bits = a.select(isSpecial, special, bits);
  }
  return a.floatOf(a.orI(bits, sign));
}

Value f32ToFp8(OpBuilder &b, Location loc, Value values, Type fp8) {
  const Fp8Format &f = formatOf(fp8);
  Arith a{b, loc, values.getType()};
  const uint32_t m = f.mantissaBits, shift = 23 - m;
  Value bits = a.bitsOf(values);
  Value sign = a.andI(a.shr(bits, 24), 0x80);
  Value magnitude = a.andI(bits, 0x7fffffffu);
  // Normal: round the mantissa to nearest even, then rebias (a carry out of
  // the mantissa moves to the next exponent).
  Value rounded = a.add(a.add(magnitude, a.u((1u << (shift - 1)) - 1)),
                        a.andI(a.shr(magnitude, shift), 1));
  Value normal = a.sub(a.shr(rounded, shift), a.u(uint32_t(127 - f.bias) << m));
  // Subnormal: the value in units of the smallest subnormal, rounded to
  // nearest even; 1 << m is then the smallest normal's code.
  // Rounded by adding and taking away 2^23, where f32's own addition
  // rounds to nearest even (units is at most 2^m): no libm call on a GPU.
  Value units = arith::MulFOp::create(
      b, loc, a.floatOf(magnitude), a.f(std::ldexp(1.0f, f.bias - 1 + int(m))));
  Value magic = a.f(8388608.0f);
  Value whole = arith::SubFOp::create(
      b, loc, arith::AddFOp::create(b, loc, units, magic), magic);
  Value subnormal = arith::FPToUIOp::create(b, loc, a.i32(), whole);
  uint32_t smallestNormal = floatBits(std::ldexp(1.0f, 1 - f.bias));
  Value code = a.select(a.cmp(arith::CmpIPredicate::ult, magnitude, smallestNormal),
                        subnormal, normal);
  // Saturate (infinities included); NaN stays NaN.
  uint32_t largest = floatBits(fp8ToFloat(f.largestCode, f));
  code = a.select(a.cmp(arith::CmpIPredicate::uge, magnitude, largest),
                  a.u(f.largestCode), code);
  code = a.select(a.cmp(arith::CmpIPredicate::ugt, magnitude, 0x7f800000u),
                  a.u(f.nanCode), code);
  Value byte = arith::TruncIOp::create(
      b, loc, withElement(values.getType(), b.getI8Type()), a.orI(code, sign));
  return arith::BitcastOp::create(
      b, loc, withElement(values.getType(), elementOf(fp8)), byte);
}

} // namespace mla
