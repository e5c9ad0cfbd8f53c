//===- OperandChecker.cpp - Shape checks shared by mla verifiers ----------===//

#include "OperandChecker.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>

using namespace mlir;

namespace mla::detail {

bool isSupportedFloat(Type type) {
  return type.isF32() || type.isF16() || type.isBF16();
}

bool isCacheFp8(Type type) {
  return isa<Float8E4M3FNType, Float8E5M2Type>(type);
}

static std::string describeDims(ArrayRef<Dim> dims) {
  std::string text = "[";
  for (auto [i, dim] : llvm::enumerate(dims)) {
    if (i)
      text += ", ";
    text += dim.name.str();
    if (dim.plusOne)
      text += "+1";
  }
  return text + "]";
}

LogicalResult OperandChecker::check(Value value, StringRef role,
                                    ArrayRef<Dim> dims, ElementKind kind) {
  auto type = dyn_cast<MemRefType>(value.getType());
  if (!type)
    return op->emitOpError() << "'" << role << "' must be a ranked memref "
                             << describeDims(dims) << ", got "
                             << value.getType();
  if (type.getRank() != static_cast<int64_t>(dims.size()))
    return op->emitOpError()
           << "'" << role << "' must have rank " << dims.size() << " "
           << describeDims(dims) << ", got " << type;
  if (failed(checkElement(value, role, kind)))
    return failure();

  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)))
    return op->emitOpError() << "'" << role
                             << "' must have a strided layout, got " << type;
  if (!strides.empty() && strides.back() != 1)
    return op->emitOpError()
           << "'" << role
           << "' must be contiguous in its innermost dimension (stride 1), got "
           << type;

  for (auto [i, dim] : llvm::enumerate(dims))
    if (failed(checkDim(role, i, type.getDimSize(i), dim)))
      return failure();
  return success();
}

LogicalResult OperandChecker::checkDim(StringRef role, unsigned index,
                                       int64_t size, const Dim &dim) {
  if (ShapedType::isDynamic(size)) {
    if (!dim.mustBeStatic)
      return success();
    auto diag = op->emitOpError() << "'" << role << "' dimension " << index
                                  << " (" << dim.name << ") must be static";
    if (dim.expected)
      diag << " (" << dim.source << " is " << *dim.expected << ")";
    return diag;
  }
  if (dim.expected && size != *dim.expected)
    return op->emitOpError()
           << "'" << role << "' dimension " << index << " (" << dim.name
           << ") is " << size << ", but " << dim.source << " is "
           << *dim.expected;
  int64_t base = dim.plusOne ? size - 1 : size;
  if (dim.plusOne && size < 1)
    return op->emitOpError() << "'" << role << "' dimension " << index
                             << " must hold " << dim.name
                             << "+1 entries, got 0";
  std::string where = ("'" + role + "' dimension " + Twine(index)).str();
  auto [it, inserted] = bound.try_emplace(dim.name, Binding{base, where});
  if (!inserted && it->second.size != base) {
    auto diag = op->emitOpError()
                << "'" << role << "' dimension " << index << " (" << dim.name
                << (dim.plusOne ? "+1" : "") << ") is " << size
                << ", inconsistent with " << it->second.source << " ("
                << dim.name << " = " << it->second.size << ")";
    return diag;
  }
  return success();
}

LogicalResult OperandChecker::checkElement(Value value, StringRef role,
                                           ElementKind kind) {
  Type element = cast<MemRefType>(value.getType()).getElementType();
  switch (kind) {
  case ElementKind::Activation:
    if (!isSupportedFloat(element))
      return op->emitOpError() << "'" << role
                               << "' must hold f32, f16 or bf16, got "
                               << element;
    if (!activationType) {
      activationType = {element, role.str()};
    } else if (activationType->first != element) {
      return op->emitOpError()
             << "'" << role << "' holds " << element << " but '"
             << activationType->second << "' holds " << activationType->first
             << "; activations must share one element type";
    }
    return success();
  case ElementKind::Float:
    if (!isSupportedFloat(element))
      return op->emitOpError() << "'" << role
                               << "' must hold f32, f16 or bf16, got "
                               << element;
    return success();
  case ElementKind::Cache:
    if (!isSupportedFloat(element) && !isCacheFp8(element))
      return op->emitOpError() << "'" << role
                               << "' must hold f32, f16, bf16, f8E4M3FN or "
                                  "f8E5M2, got "
                               << element;
    return success();
  case ElementKind::F32:
    if (!element.isF32())
      return op->emitOpError() << "'" << role << "' must hold f32, got "
                               << element;
    return success();
  case ElementKind::I32:
    if (!element.isSignlessInteger(32))
      return op->emitOpError() << "'" << role << "' must hold i32, got "
                               << element;
    return success();
  case ElementKind::I64:
    if (!element.isSignlessInteger(64))
      return op->emitOpError() << "'" << role << "' must hold i64, got "
                               << element;
    return success();
  }
  return success();
}

LogicalResult OperandChecker::elementTypeIs(Value value, StringRef role,
                                            Type type, StringRef source) {
  Type element = cast<MemRefType>(value.getType()).getElementType();
  if (element != type)
    return op->emitOpError() << "'" << role << "' holds " << element
                             << ", but " << source << " is " << type;
  return success();
}

LogicalResult OperandChecker::latentCache(Value cache, int64_t latent,
                                          int64_t rope, int64_t blockSize,
                                          Type cacheDtype) {
  if (failed(check(cache, "kv_cache",
                   {sym("num_blocks"),
                    fixed("block_size", blockSize, "block_size"),
                    fixed("entry", latent + rope, "kv_lora_rank + rope_dim")},
                   ElementKind::Cache)))
    return failure();
  return elementTypeIs(cache, "kv_cache", cacheDtype, "cache_dtype");
}

LogicalResult OperandChecker::kvScale(Value scale, Type cacheDtype) {
  bool fp8 = isCacheFp8(cacheDtype);
  if (fp8 && !scale)
    return op->emitOpError() << "an " << cacheDtype
                             << " cache needs 'kv_scale' (its entries are "
                                "stored as value / kv_scale)";
  if (!fp8 && scale)
    return op->emitOpError() << "'kv_scale' is for FP8 caches, not "
                             << cacheDtype;
  if (!scale)
    return success();
  return check(scale, "kv_scale", {fixed("one", 1, "one scale a layer")},
               ElementKind::F32);
}

LogicalResult OperandChecker::latentRows(Value kvC, Value kPe, int64_t latent,
                                         int64_t rope) {
  if (failed(check(kvC, "kv_c",
                   {sym("tokens"),
                    fixed("kv_lora_rank", latent, "kv_lora_rank")},
                   ElementKind::Activation)))
    return failure();
  return check(kPe, "k_pe",
               {sym("tokens"), fixed("rope_dim", rope, "rope_dim")},
               ElementKind::Activation);
}

LogicalResult OperandChecker::kvBProj(Value weight, int64_t latent,
                                      int64_t heads, int64_t nope,
                                      int64_t vDim) {
  return check(weight, "kv_b_proj",
               {fixed("kv_lora_rank", latent, "kv_lora_rank"),
                fixed("heads", heads, "num_heads"),
                fixed("nope_plus_v", nope + vDim,
                      "qk_nope_head_dim + v_head_dim")},
               ElementKind::Activation);
}

LogicalResult verifyNoUnknownAttributes(Operation *op) {
  for (NamedAttribute attr : op->getDiscardableAttrs())
    if (!attr.getName().strref().contains('.'))
      return op->emitOpError() << "has unknown attribute '" << attr.getName().strref()
                               << "' (attributes of other dialects must be "
                                  "prefixed, e.g. 'mydialect.name')";
  return success();
}

LogicalResult verifySoftmaxScale(Operation *op, float scale) {
  if (!std::isfinite(scale) || scale <= 0.0f)
    return op->emitOpError()
           << "softmax_scale must be finite and positive, got " << scale;
  return success();
}

LogicalResult verifyCacheDtype(Operation *op, Type type) {
  if (!isSupportedFloat(type) && !isCacheFp8(type))
    return op->emitOpError() << "cache_dtype must be f32, f16, bf16, "
                                "f8E4M3FN or f8E5M2, got "
                             << type;
  return success();
}

} // namespace mla::detail
