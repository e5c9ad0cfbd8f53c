//===- CompiledModule.h - Lowered, cached and loaded kernel modules -*- C++ -*-===//
//
// The one compile path of every kernel module, whatever runs it:
//
//   verify -> read the entry's signature -> key (op, specialization, target,
//   IR hash, options) -> kernel cache: memory, disk, or lower + emit host
//   object -> link the object in memory.
//
// The artifact cached is the host object file (with the PTX of GPU kernels
// embedded in it, and a copy for inspection), so a cache hit skips the MLIR
// pipeline, LLVM's optimizer and both code generators.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_COMPILEDMODULE_H
#define MLA_RUNTIME_COMPILEDMODULE_H

#include "mla/Runtime/EntryPoint.h"
#include "mla/Runtime/JitObject.h"
#include "mla/Runtime/KernelCache.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Pass/PassManager.h"

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mla {

/// How a module is lowered, and what of it enters the cache key.
struct CompileRecipe {
  /// The key's target: exactly what the code is specialized for.
  std::string target;
  /// The key's options: every pipeline option, as text.
  std::string options;
  /// Builds the lowering to the LLVM dialect.
  std::function<void(mlir::OpPassManager &)> buildPipeline;
  /// LLVM optimization level of the host code.
  unsigned optLevel = 3;
  /// The CPU the host code is compiled for; `target` names it.
  HostCode hostCode = HostCode::Native;
  /// What a failed lowering is reported as.
  std::string failureMessage = "lowering failed";
};

/// Where one module's artifact came from, for logs and reports.
struct CompileEvent {
  /// The cache entry's readable name (KernelKey::entryName).
  std::string entryName;
  runtime::CacheOutcome outcome = runtime::CacheOutcome::Compiled;
  /// Wall time from the module to a loaded object (for GPU kernels: to
  /// kernels loaded on the device).
  double milliseconds = 0;
  /// Where that time went, in order: "lower" (MLIR pipeline, kernels to
  /// PTX), "host code" (LLVM to an object file) and, with a cache, "cache
  /// write"; or, on a cache hit, "cache read"; then "link" (in memory) and,
  /// for GPU kernels, "load" (the driver compiles their PTX, one module
  /// after another, and loads it).
  std::vector<std::pair<std::string, double>> phases;

  /// One kernel module's compile by the driver, started as soon as its PTX
  /// existed (GPU modules compiled here, not read from a cache).
  struct DriverCompile {
    std::string module;
    /// From the start of the compile, and until the module was loaded
    /// (the driver's module loads compile one at a time, so for those
    /// this includes the wait for the others).
    double startMs = 0, durationMs = 0;
    /// Compiled by the driver's JIT linker (at once with the others, as
    /// relocatable code) rather than by a module load.
    bool linked = false;
  };
  /// In the order the modules were announced.
  std::vector<DriverCompile> driverCompiles;

  /// "lower 812 ms, host code 64 ms, ...": the phases in words.
  std::string describePhases() const;
  /// "decode_attention_combine_3 at 180 + 95 ms linked, ...": the driver's
  /// compiles in words; empty when there were none.
  std::string describeDriverCompiles() const;

  /// "compiled", "memory cache" or "disk cache".
  std::string_view source() const;
};

/// A module compiled to host object code and linked into this process,
/// not yet initialized.
struct CompiledModule {
  EntryPoint entry;
  std::unique_ptr<JitObject> object;
  JitObject::PackedFunction packed = nullptr;
  /// The PTX of each GPU kernel module (a module per kernel), in the order
  /// the host code loads them; empty for CPU modules.
  std::vector<std::string> kernelPtx;
  CompileEvent event;
};

/// The key a module of mla ops is cached under: op = the mla ops it holds,
/// specialization = their shape and dtype attributes ("h16_lkv512_r64_bs64_
/// bf16_cbf16_causal"), irHash over the module as given.
runtime::KernelKey kernelKeyFor(mlir::ModuleOp module,
                                const CompileRecipe &recipe);

/// Compiles `module`'s `entry` (consuming the module) through `cache` when
/// given, else directly, and links it resolving against `extraSymbols`.
llvm::Expected<CompiledModule>
compileModule(mlir::OwningOpRef<mlir::ModuleOp> module, llvm::StringRef entry,
              const CompileRecipe &recipe, runtime::KernelCache *cache,
              ExtraSymbols extraSymbols = nullptr);

} // namespace mla

#endif // MLA_RUNTIME_COMPILEDMODULE_H
