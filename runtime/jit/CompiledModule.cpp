//===- CompiledModule.cpp - Lowered, cached and loaded kernel modules -----===//

#include "mla/Runtime/CompiledModule.h"
#include "mla/Support/Diagnostics.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <optional>

using namespace mlir;

namespace mla {

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

// The cached payload: a magic line, the object file, the number of kernel
// modules as 8 little-endian bytes, then each module's PTX; every part
// preceded by its size as 8 little-endian bytes. The cache checksums the
// whole payload; the framing only has to be unambiguous.
static constexpr llvm::StringLiteral kArtifactMagic = "mla-kernel-artifact-2\n";

static void appendSize(std::string &out, uint64_t size) {
  char bytes[8];
  llvm::support::endian::write64le(bytes, size);
  out.append(bytes, 8);
}

static void appendSized(std::string &out, llvm::StringRef part) {
  appendSize(out, part.size());
  out.append(part.data(), part.size());
}

static std::string packArtifact(llvm::StringRef object,
                                const std::vector<std::string> &kernelPtx) {
  std::string out(kArtifactMagic);
  appendSized(out, object);
  appendSize(out, kernelPtx.size());
  for (const std::string &ptx : kernelPtx)
    appendSized(out, ptx);
  return out;
}

static bool takeSize(llvm::StringRef &in, uint64_t &size) {
  if (in.size() < 8)
    return false;
  size = llvm::support::endian::read64le(in.data());
  in = in.drop_front(8);
  return true;
}

static bool takeSized(llvm::StringRef &in, llvm::StringRef &part) {
  uint64_t size;
  if (!takeSize(in, size) || size > in.size())
    return false;
  part = in.take_front(size);
  in = in.drop_front(size);
  return true;
}

/// Splits a payload into object and kernel PTX; false when it is not one.
static bool unpackArtifact(llvm::StringRef payload, llvm::StringRef &object,
                           std::vector<std::string> &kernelPtx) {
  uint64_t modules;
  if (!payload.consume_front(kArtifactMagic) || !takeSized(payload, object) ||
      !takeSize(payload, modules) || modules > payload.size() / 8)
    return false;
  for (uint64_t i = 0; i < modules; ++i) {
    llvm::StringRef ptx;
    if (!takeSized(payload, ptx))
      return false;
    kernelPtx.push_back(ptx.str());
  }
  return payload.empty();
}

/// The PTX of every gpu.binary object in a lowered module, in module order
/// (the order of the host code's loads).
static std::vector<std::string> collectPtx(ModuleOp module) {
  std::vector<std::string> kernelPtx;
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
      kernelPtx.push_back(text.str());
    }
  });
  return kernelPtx;
}

/// With MLA_DUMP_PTX=<dir>, every GPU module's PTX that the driver loads,
/// compiled or read from the cache: <dir>/<entry>.<i>.ptx, where <entry>
/// is the cache entry's name. For reading a kernel beside what ptxas,
/// cuobjdump or compute-sanitizer report about it (their offsets are into
/// the SASS of this text). Each file is written under a short unique name
/// in the same directory (so the temporary name stays within the file
/// system's name limit whatever the entry's length) and renamed into
/// place, so threads or processes dumping the same module never leave a
/// torn file. A dump that cannot be written is reported on stderr and
/// does not fail the compile. Returns whether a dump was asked for.
static bool dumpPtxIfAsked(llvm::StringRef entryName,
                           const std::vector<std::string> &kernelPtx) {
  std::optional<std::string> dir = llvm::sys::Process::GetEnv("MLA_DUMP_PTX");
  if (!dir || dir->empty() || kernelPtx.empty())
    return false;
  if (std::error_code ec = llvm::sys::fs::create_directories(*dir)) {
    llvm::errs() << "mla: MLA_DUMP_PTX: cannot create " << *dir << ": "
                 << ec.message() << "\n";
    return true;
  }
  llvm::SmallString<256> tempModel(*dir);
  llvm::sys::path::append(tempModel, ".ptx-%%%%%%%%.tmp");
  for (size_t i = 0; i < kernelPtx.size(); ++i) {
    llvm::SmallString<256> file(*dir);
    llvm::sys::path::append(file,
                            entryName + "." + std::to_string(i) + ".ptx");
    llvm::SmallString<256> temp;
    int fd;
    std::error_code ec = llvm::sys::fs::createUniqueFile(tempModel, fd, temp);
    if (!ec) {
      llvm::raw_fd_ostream out(fd, /*shouldClose=*/true);
      out << kernelPtx[i];
      out.close();
      ec = out.error();
      out.clear_error();
      if (!ec)
        ec = llvm::sys::fs::rename(temp, file);
      if (ec)
        llvm::sys::fs::remove(temp);
    }
    if (ec)
      llvm::errs() << "mla: MLA_DUMP_PTX: cannot write " << file << ": "
                   << ec.message() << "\n";
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Compiling
//===----------------------------------------------------------------------===//

llvm::Expected<CompiledModule>
compileModule(OwningOpRef<ModuleOp> module, llvm::StringRef entry,
              const CompileRecipe &recipe, runtime::KernelCache *cache,
              ExtraSymbols extraSymbols) {
  auto start = std::chrono::steady_clock::now();
  CompiledModule compiled;
  // Adds the time since the previous phase ended (or since the start).
  auto phaseStart = start;
  auto endPhase = [&](const char *phase) {
    auto now = std::chrono::steady_clock::now();
    compiled.event.phases.emplace_back(
        phase,
        std::chrono::duration<double, std::milli>(now - phaseStart).count());
    phaseStart = now;
  };
  auto entryPoint = EntryPoint::verifyAndPrepare(*module, entry);
  if (!entryPoint)
    return entryPoint.takeError();
  runtime::KernelKey key = kernelKeyFor(*module, recipe);

  auto lowerAndEmit = [&]() -> llvm::Expected<std::string> {
    if (llvm::Error error = EntryPoint::lower(*module, recipe.buildPipeline,
                                              recipe.failureMessage))
      return std::move(error);
    std::vector<std::string> kernelPtx = collectPtx(*module);
    endPhase("lower");
    auto object = emitHostObject(*module, entry, recipe.optLevel, recipe.hostCode);
    if (!object)
      return object.takeError();
    endPhase("host code");
    return packArtifact(*object, kernelPtx);
  };

  compiled.entry = std::move(*entryPoint);
  compiled.event.entryName = key.entryName();
  llvm::Expected<std::string> payload =
      cache ? cache->getOrCompile(key, lowerAndEmit, &compiled.event.outcome)
            : lowerAndEmit();
  if (!payload)
    return payload.takeError();
  if (cache)
    endPhase(compiled.event.outcome == runtime::CacheOutcome::Compiled
                 ? "cache write"
                 : "cache read");
  llvm::StringRef object;
  if (!unpackArtifact(*payload, object, compiled.kernelPtx))
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
  endPhase("link");
  if (dumpPtxIfAsked(compiled.event.entryName, compiled.kernelPtx))
    endPhase("ptx dump");
  compiled.event.milliseconds =
      std::chrono::duration<double, std::milli>(
          std::chrono::steady_clock::now() - start)
          .count();
  return compiled;
}

} // namespace mla
