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

#include "mla/Runtime/CompileEvent.h"
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
