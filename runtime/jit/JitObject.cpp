//===- JitObject.cpp - Host object files linked in memory -----------------===//

#include "mla/Runtime/JitObject.h"
#include "mla/Support/Diagnostics.h"

#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/Support/MemoryBuffer.h"

namespace mla {

JitObject::~JitObject() = default;

llvm::Expected<std::unique_ptr<JitObject>>
JitObject::load(llvm::StringRef object, ExtraSymbols extraSymbols) {
  auto jit = llvm::orc::LLJITBuilder().create();
  if (!jit)
    return jit.takeError();
  llvm::orc::JITDylib &library = (*jit)->getMainJITDylib();
  if (extraSymbols) {
    llvm::orc::MangleAndInterner interner((*jit)->getExecutionSession(),
                                          (*jit)->getDataLayout());
    if (llvm::Error error = library.define(
            llvm::orc::absoluteSymbols(extraSymbols(interner))))
      return std::move(error);
  }
  auto process =
      llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
          (*jit)->getDataLayout().getGlobalPrefix());
  if (!process)
    return process.takeError();
  library.addGenerator(std::move(*process));
  if (llvm::Error error = (*jit)->addObjectFile(
          llvm::MemoryBuffer::getMemBufferCopy(object, "mla-kernel.o")))
    return std::move(error);

  std::unique_ptr<JitObject> loaded(new JitObject());
  loaded->jit = std::move(*jit);
  return loaded;
}

llvm::Expected<void *> JitObject::address(llvm::StringRef symbol) {
  auto found = jit->lookup(symbol);
  if (!found)
    return makeError("linking the kernel object: " +
                     llvm::toString(found.takeError()));
  return found->toPtr<void *>();
}

llvm::Error JitObject::initialize() {
  auto init = address(kModuleInitSymbol);
  if (!init)
    return init.takeError();
  reinterpret_cast<void (*)()>(*init)();
  initialized = true;
  return llvm::Error::success();
}

void JitObject::finalize() {
  if (!initialized)
    return;
  initialized = false;
  auto fini = address(kModuleFiniSymbol);
  if (!fini) {
    llvm::consumeError(fini.takeError());
    return;
  }
  reinterpret_cast<void (*)()>(*fini)();
}

llvm::Expected<JitObject::PackedFunction>
JitObject::packedEntry(llvm::StringRef entry) {
  auto packed = address(packedEntrySymbol(entry));
  if (!packed)
    return packed.takeError();
  return reinterpret_cast<PackedFunction>(*packed);
}

} // namespace mla
