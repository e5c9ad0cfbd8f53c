//===- JitObject.h - Host object code: emitted, cached, loaded --*- C++ -*-===//
//
// Every compiled kernel module ends as one relocatable object file for the
// host: the CPU kernels themselves, or the host code that loads and launches
// GPU kernels (their PTX embedded as data). An object file is what the
// kernel cache stores, because loading one (linking it in memory) takes
// well under a millisecond, where generating code from IR again takes tens.
//
// Two conventions make an object loadable without a language runtime:
//  - Static constructors and destructors (the GPU host code loads and
//    unloads its kernel module in them) are gathered into two plain
//    functions, `kModuleInitSymbol` and `kModuleFiniSymbol`, that the loader
//    calls explicitly: an object file's .init_array is otherwise run by no
//    one in an in-memory link.
//  - The entry gets a packed wrapper `packedEntrySymbol(entry)` of type
//    void(void **args), args[i] pointing at the i-th argument of the entry's
//    C interface (a pointer to a memref descriptor), so calls of any arity
//    go through one C signature.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_JITOBJECT_H
#define MLA_RUNTIME_JITOBJECT_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ExecutionEngine/Orc/Core.h"
#include "llvm/ExecutionEngine/Orc/Mangling.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <string>

namespace llvm::orc {
class LLJIT;
} // namespace llvm::orc

namespace mla {

inline constexpr const char *kModuleInitSymbol = "__mla_module_init";
inline constexpr const char *kModuleFiniSymbol = "__mla_module_fini";

/// "__mla_packed_<entry>".
std::string packedEntrySymbol(llvm::StringRef entry);

/// Which CPU host object code is compiled for.
enum class HostCode : uint8_t {
  /// This host's CPU and every feature it has: CPU kernels, whose speed is
  /// the host code's.
  Native,
  /// The architecture's baseline (x86-64 without extensions): the launch
  /// code of GPU modules, whose speed is the kernels', so that kernel
  /// cache entries move between hosts (a container's prefilled cache).
  Portable,
};

/// "<triple>-<cpu>-<hash of the CPU features>" for Native, "<triple>-
/// portable" for Portable: what host object code is specialized for, part
/// of every cache key (an object built for one host may use instructions
/// another lacks).
const std::string &hostTargetDescription(HostCode code = HostCode::Native);

/// Translates `module` (already lowered to the LLVM dialect, with
/// translations for its dialects registered in its context) to LLVM IR, adds
/// the init/fini functions and the packed wrapper of `entry`'s C interface,
/// optimizes at `optLevel` for the CPU `code` names and returns the object
/// file.
llvm::Expected<std::string> emitHostObject(mlir::ModuleOp module,
                                           llvm::StringRef entry,
                                           unsigned optLevel, HostCode code);

/// Symbols a loaded object may call besides the process's own.
using ExtraSymbols =
    llvm::function_ref<llvm::orc::SymbolMap(llvm::orc::MangleAndInterner)>;

/// An object file linked into this process. The loader runs nothing on its
/// own: call `initialize` once before the first entry call and `finalize`
/// before destruction if initialize ran (with whatever context the
/// constructors need, e.g. the CUDA context current).
class JitObject {
public:
  ~JitObject();

  /// Links `object` in memory, resolving undefined symbols against
  /// `extraSymbols` first, then against the process (libc, libm).
  static llvm::Expected<std::unique_ptr<JitObject>>
  load(llvm::StringRef object, ExtraSymbols extraSymbols = nullptr);

  /// Calls the module's gathered constructors.
  llvm::Error initialize();
  /// Calls the module's gathered destructors if `initialize` ran.
  void finalize();

  using PackedFunction = void (*)(void **);
  /// The packed wrapper of `entry`.
  llvm::Expected<PackedFunction> packedEntry(llvm::StringRef entry);

private:
  JitObject() = default;
  llvm::Expected<void *> address(llvm::StringRef symbol);

  std::unique_ptr<llvm::orc::LLJIT> jit;
  bool initialized = false;
};

} // namespace mla

#endif // MLA_RUNTIME_JITOBJECT_H
