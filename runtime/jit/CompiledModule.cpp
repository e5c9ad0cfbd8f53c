//===- CompiledModule.cpp - Lowered, cached and loaded kernel modules -----===//

#include "mla/Runtime/CompiledModule.h"
#include "mla/Support/Diagnostics.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>

using namespace mlir;

namespace mla {

std::string_view CompileEvent::source() const {
  switch (outcome) {
  case runtime::CacheOutcome::MemoryHit:
    return "memory cache";
  case runtime::CacheOutcome::DiskHit:
    return "disk cache";
  case runtime::CacheOutcome::Compiled:
    break;
  }
  return "compiled";
}

//===----------------------------------------------------------------------===//
// Keys
//===----------------------------------------------------------------------===//

/// Short names of the attributes that shape a kernel, in the order they
/// appear in specializations. Attributes not listed still change the IR
/// hash, so they still change the key; they just do not show in the name.
static constexpr std::pair<const char *, const char *> kShapeAttributes[] = {
    {"num_heads", "h"},        {"qk_head_dim", "qk"},
    {"v_head_dim", "v"},       {"kv_lora_rank", "lkv"},
    {"qk_nope_head_dim", "p"}, {"rope_dim", "r"},
    {"block_size", "bs"},
};

static std::string typeName(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  type.print(os);
  return text;
}

static bool isMlaOp(Operation *op) {
  return op->getDialect() && op->getDialect()->getNamespace() == "mla";
}

runtime::KernelKey kernelKeyFor(ModuleOp module, const CompileRecipe &recipe) {
  runtime::KernelKey key;
  std::string ops, specialization;
  module.walk([&](Operation *op) {
    if (!isMlaOp(op))
      return;
    llvm::StringRef opName = op->getName().stripDialect();
    ops += (ops.empty() ? "" : "+") + opName.str();
    std::vector<std::string> parts;
    for (auto [attrName, shortName] : kShapeAttributes)
      if (auto value = op->getAttrOfType<IntegerAttr>(attrName))
        parts.push_back(shortName + std::to_string(value.getInt()));
    if (op->getNumOperands() != 0)
      if (auto memref = dyn_cast<MemRefType>(op->getOperand(0).getType()))
        parts.push_back(typeName(memref.getElementType()));
    if (auto cache = op->getAttrOfType<TypeAttr>("cache_dtype"))
      parts.push_back("c" + typeName(cache.getValue()));
    if (op->hasAttr("causal"))
      parts.push_back("causal");
    for (const std::string &part : parts)
      specialization += (specialization.empty() ? "" : "_") + part;
  });
  key.op = ops.empty() ? "module" : ops;
  key.specialization = specialization.empty() ? "none" : specialization;
  key.target = recipe.target;
  key.options = recipe.options;
  std::string ir;
  llvm::raw_string_ostream os(ir);
  module.print(os, OpPrintingFlags().enableDebugInfo(false));
  key.irHash = runtime::hashText(ir);
  return key;
}

//===----------------------------------------------------------------------===//
// Artifacts
//===----------------------------------------------------------------------===//

// The cached payload: a magic line, then the object file and the PTX, each
// preceded by its size as 8 little-endian bytes. The cache checksums the
// whole payload; the framing only has to be unambiguous.
static constexpr llvm::StringLiteral kArtifactMagic = "mla-kernel-artifact-1\n";

static void appendSized(std::string &out, llvm::StringRef part) {
  char size[8];
  llvm::support::endian::write64le(size, part.size());
  out.append(size, 8);
  out.append(part.data(), part.size());
}

static std::string packArtifact(llvm::StringRef object, llvm::StringRef ptx) {
  std::string out(kArtifactMagic);
  appendSized(out, object);
  appendSized(out, ptx);
  return out;
}

static bool takeSized(llvm::StringRef &in, llvm::StringRef &part) {
  if (in.size() < 8)
    return false;
  uint64_t size = llvm::support::endian::read64le(in.data());
  in = in.drop_front(8);
  if (size > in.size())
    return false;
  part = in.take_front(size);
  in = in.drop_front(size);
  return true;
}

/// Splits a payload into object and PTX; false when it is not one.
static bool unpackArtifact(llvm::StringRef payload, llvm::StringRef &object,
                           llvm::StringRef &ptx) {
  if (!payload.consume_front(kArtifactMagic))
    return false;
  return takeSized(payload, object) && takeSized(payload, ptx) &&
         payload.empty();
}

/// The PTX of every gpu.binary object in a lowered module (a module per
/// kernel), one after the other.
static std::string collectPtx(ModuleOp module) {
  std::string ptx;
  module.walk([&](Operation *op) {
    if (op->getName().getStringRef() != "gpu.binary")
      return;
    auto objects = op->getAttrOfType<ArrayAttr>("objects");
    if (!objects)
      return;
    for (Attribute object : objects) {
      // #gpu.object<#nvvm.target<...>, "<ptx>">: the text is its last
      // string parameter.
      llvm::StringRef text;
      object.walkImmediateSubElements(
          [&](Attribute sub) {
            if (auto string = dyn_cast<StringAttr>(sub))
              text = string.getValue();
          },
          [](Type) {});
      ptx += text;
    }
  });
  return ptx;
}

//===----------------------------------------------------------------------===//
// Compiling
//===----------------------------------------------------------------------===//

llvm::Expected<CompiledModule>
compileModule(OwningOpRef<ModuleOp> module, llvm::StringRef entry,
              const CompileRecipe &recipe, runtime::KernelCache *cache,
              ExtraSymbols extraSymbols) {
  auto start = std::chrono::steady_clock::now();
  auto entryPoint = EntryPoint::verifyAndPrepare(*module, entry);
  if (!entryPoint)
    return entryPoint.takeError();
  runtime::KernelKey key = kernelKeyFor(*module, recipe);

  auto lowerAndEmit = [&]() -> llvm::Expected<std::string> {
    if (llvm::Error error = EntryPoint::lower(*module, recipe.buildPipeline,
                                              recipe.failureMessage))
      return std::move(error);
    std::string ptx = collectPtx(*module);
    if (recipe.finishKernels)
      if (llvm::Error error = recipe.finishKernels(*module))
        return std::move(error);
    auto object = emitHostObject(*module, entry, recipe.optLevel);
    if (!object)
      return object.takeError();
    return packArtifact(*object, ptx);
  };

  CompiledModule compiled;
  compiled.entry = std::move(*entryPoint);
  compiled.event.entryName = key.entryName();
  llvm::Expected<std::string> payload =
      cache ? cache->getOrCompile(key, lowerAndEmit, &compiled.event.outcome)
            : lowerAndEmit();
  if (!payload)
    return payload.takeError();
  llvm::StringRef object, ptx;
  if (!unpackArtifact(*payload, object, ptx))
    return makeError("the cached artifact " + compiled.event.entryName +
                     " is not a kernel artifact; remove it or set "
                     "MLA_CACHE_FORCE_RECOMPILE=1");
  auto loaded = JitObject::load(object, extraSymbols);
  if (!loaded)
    return loaded.takeError();
  auto packed = (*loaded)->packedEntry(entry);
  if (!packed)
    return packed.takeError();
  compiled.object = std::move(*loaded);
  compiled.packed = *packed;
  compiled.ptx = ptx.str();
  compiled.event.milliseconds =
      std::chrono::duration<double, std::milli>(
          std::chrono::steady_clock::now() - start)
          .count();
  return compiled;
}

} // namespace mla
