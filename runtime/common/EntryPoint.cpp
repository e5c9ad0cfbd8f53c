//===- EntryPoint.cpp - Calling a JIT-compiled entry on buffers -----------===//

#include "mla/Runtime/EntryPoint.h"
#include "mla/Support/Diagnostics.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Verifier.h"

#include <cstdlib>
#include <string_view>

using namespace mlir;

namespace mla {

static std::optional<DType> toDType(Type t) {
  if (t.isF32())
    return DType::F32;
  if (t.isF16())
    return DType::F16;
  if (t.isBF16())
    return DType::BF16;
  if (t.isSignlessInteger(32))
    return DType::I32;
  if (t.isSignlessInteger(64))
    return DType::I64;
  if (isa<Float8E4M3FNType>(t))
    return DType::FP8E4M3;
  if (isa<Float8E5M2Type>(t))
    return DType::FP8E5M2;
  return std::nullopt;
}

/// The argument contract of a memref type. Identity layouts are row-major
/// contiguous (strides derived from the actual sizes, checked at run time),
/// which the -2 marker in `strides` stands for.
static llvm::Expected<ArgumentSpec> specFor(MemRefType type, unsigned index) {
  std::optional<DType> dtype = toDType(type.getElementType());
  if (!dtype)
    return makeError("entry argument " + Twine(index) +
                     " has unsupported element type");
  ArgumentSpec spec{*dtype, {}, {}};
  for (int64_t d : type.getShape())
    spec.shape.push_back(ShapedType::isDynamic(d) ? -1 : d);
  if (type.getLayout().isIdentity()) {
    spec.strides.assign(type.getRank(), -2);
    return spec;
  }
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)) ||
      (!ShapedType::isDynamic(offset) && offset != 0))
    return makeError("entry argument " + Twine(index) +
                     " needs a strided layout with offset 0");
  for (int64_t s : strides)
    spec.strides.push_back(ShapedType::isDynamic(s) ? -1 : s);
  return spec;
}

llvm::Expected<EntryPoint> EntryPoint::prepare(ModuleOp module,
                                              llvm::StringRef name) {
  auto func = module.lookupSymbol<func::FuncOp>(name);
  if (!func)
    return makeError("the module has no func.func named '" + name + "'");
  EntryPoint entry;
  entry.entry = name.str();
  for (auto [i, type] : llvm::enumerate(func.getArgumentTypes())) {
    auto memref = dyn_cast<MemRefType>(type);
    if (!memref)
      return makeError("entry argument " + Twine(i) + " is not a memref");
    auto spec = specFor(memref, i);
    if (!spec)
      return spec.takeError();
    entry.specs.push_back(std::move(*spec));
  }
  if (func.getNumResults() != 0)
    return makeError("the entry must return nothing (outputs are buffers)");
  func->setAttr(LLVM::LLVMDialect::getEmitCWrapperAttrName(),
                UnitAttr::get(module.getContext()));
  return entry;
}

llvm::Expected<EntryPoint> EntryPoint::verifyAndPrepare(ModuleOp module,
                                                       llvm::StringRef name) {
  DiagnosticCollector diagnostics(module.getContext());
  if (failed(verify(module)))
    return diagnostics.takeError("the module is not valid");
  return prepare(module, name);
}

llvm::Error EntryPoint::lower(
    ModuleOp module, llvm::function_ref<void(OpPassManager &)> buildPipeline,
    const Twine &what) {
  DiagnosticCollector diagnostics(module.getContext());
  PassManager pm(module.getContext());
  buildPipeline(pm);
  // MLA_TIME_PASSES=1: each pass's time, printed to stderr (as mla-opt's
  // --mlir-timing) once the pipeline has run.
  if (const char *timing = std::getenv("MLA_TIME_PASSES");
      timing && *timing && std::string_view(timing) != "0")
    pm.enableTiming();
  if (failed(pm.run(module)))
    return diagnostics.takeError(what.str());
  return llvm::Error::success();
}

llvm::Error checkContiguousBuffer(llvm::StringRef what, const BufferView &view,
                                  DType dtype, const std::vector<int64_t> &shape,
                                  int64_t minRows) {
  std::string want = std::string(name(dtype)) + "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    want += i ? ", " : "";
    if (shape[i] >= 0)
      want += std::to_string(shape[i]);
    else
      want += i == 0 && minRows >= 0 ? ">= " + std::to_string(minRows) : "?";
  }
  want += "]";
  auto wrong = [&](const Twine &why) {
    return makeArgumentError("'" + what + "' must be a contiguous " + want +
                             ", got " + view.describe() + ": " + why);
  };
  if (view.dtype != dtype)
    return wrong("wrong element type");
  if (view.shape.size() != shape.size() ||
      view.strides.size() != shape.size())
    return wrong("wrong rank");
  for (size_t i = 0; i < shape.size(); ++i) {
    if (view.shape[i] < 0)
      return wrong("negative size in dimension " + Twine(i));
    if (shape[i] >= 0 && view.shape[i] != shape[i])
      return wrong("dimension " + Twine(i) + " should be " + Twine(shape[i]));
  }
  if (minRows >= 0 && view.shape[0] < minRows)
    return wrong("fewer rows than the step's " + Twine(minRows) + " tokens");
  int64_t contiguous = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (view.shape[i] > 1 && view.strides[i] != contiguous)
      return wrong("stride of dimension " + Twine(i) + " is " +
                   Twine(view.strides[i]) + ", contiguous is " +
                   Twine(contiguous));
    contiguous *= view.shape[i];
  }
  if (!view.data && view.numElements() != 0)
    return wrong("NULL data");
  return llvm::Error::success();
}

llvm::Error EntryPoint::check(const std::vector<BufferView> &args) const {
  if (args.size() != specs.size())
    return makeArgumentError("'" + entry + "' takes " + Twine(specs.size()) +
                             " buffers, got " + Twine(args.size()));
  for (size_t i = 0; i < args.size(); ++i) {
    const BufferView &arg = args[i];
    const ArgumentSpec &spec = specs[i];
    auto fail = [&](const Twine &why) {
      return makeArgumentError("argument " + Twine(i) + " (" +
                               arg.describe() + ") of '" + entry + "': " + why);
    };
    if (arg.dtype != spec.dtype)
      return fail("expected element type " +
                  std::string(mla::name(spec.dtype)));
    if (arg.shape.size() != spec.shape.size() ||
        arg.strides.size() != arg.shape.size())
      return fail("expected rank " + Twine(spec.shape.size()) +
                  " with one stride per dimension");
    for (size_t d = 0; d < arg.shape.size(); ++d) {
      if (arg.shape[d] < 0)
        return fail("negative size in dimension " + Twine(d));
      if (spec.shape[d] >= 0 && arg.shape[d] != spec.shape[d])
        return fail("dimension " + Twine(d) + " must be " +
                    Twine(spec.shape[d]));
    }
    int64_t contiguous = 1;
    for (size_t d = arg.shape.size(); d-- > 0;) {
      int64_t want = spec.strides[d] == -2 ? contiguous : spec.strides[d];
      if (want >= 0 && arg.strides[d] != want && arg.shape[d] > 1)
        return fail("stride of dimension " + Twine(d) + " must be " +
                    Twine(want) + ", got " + Twine(arg.strides[d]));
      contiguous *= arg.shape[d];
    }
    if (!arg.data && arg.numElements() != 0)
      return fail("NULL data pointer");
  }
  return llvm::Error::success();
}

llvm::Error EntryPoint::invoke(void (*packed)(void **),
                               const std::vector<BufferView> &args) const {
  if (llvm::Error error = check(args))
    return error;
  // One ranked memref descriptor per argument: allocated and aligned
  // pointers, offset, sizes, strides, all 64-bit.
  std::vector<std::vector<int64_t>> descriptors;
  descriptors.reserve(args.size());
  for (const BufferView &arg : args) {
    std::vector<int64_t> d;
    d.push_back(reinterpret_cast<int64_t>(arg.data));
    d.push_back(reinterpret_cast<int64_t>(arg.data));
    d.push_back(0);
    d.insert(d.end(), arg.shape.begin(), arg.shape.end());
    d.insert(d.end(), arg.strides.begin(), arg.strides.end());
    descriptors.push_back(std::move(d));
  }
  std::vector<void *> descriptorPointers, slots;
  descriptorPointers.reserve(args.size());
  for (auto &d : descriptors)
    descriptorPointers.push_back(d.data());
  for (void *&p : descriptorPointers)
    slots.push_back(&p);
  packed(slots.data());
  return llvm::Error::success();
}

} // namespace mla
