//===- PreloadedModules.cpp - Kernel modules loaded while others compile --===//

#include "PreloadedModules.h"

#include <cstring>

namespace mla::gpu {

LoadedModule loadPtxModule(const char *ptx) {
  // The driver's default optimization level (ptxas -O3) is the one wanted.
  llvm::Expected<cuda::Module> module = cuda::Module::loadPtx(ptx);
  if (!module)
    return {nullptr, llvm::toString(module.takeError())};
  return {module->releaseHandle(), ""};
}

PreloadedModules::~PreloadedModules() {
  std::lock_guard<std::mutex> lock(mutex);
  bool current = false;
  for (const auto &load : loads) {
    const LoadedModule &loaded = load->result.get();
    if (load->taken || !loaded.module)
      continue;
    // Unloading needs the context current on this thread.
    if (!current) {
      if (llvm::Error error = device.makeCurrent()) {
        llvm::consumeError(std::move(error));
        return;
      }
      current = true;
    }
    device.driver().fn.cuModuleUnload(loaded.module);
  }
}

void PreloadedModules::load(llvm::StringRef ptx) {
  auto entry = std::make_unique<Load>();
  entry->ptx = ptx.str();
  // Objects may carry their terminator; the text compared is without it.
  while (!entry->ptx.empty() && entry->ptx.back() == '\0')
    entry->ptx.pop_back();
  const char *text = entry->ptx.c_str();
  const cuda::Device *target = &device;
  entry->result =
      std::async(std::launch::async, [target, text] {
        if (llvm::Error error = target->makeCurrent())
          return LoadedModule{nullptr, llvm::toString(std::move(error))};
        return loadPtxModule(text);
      }).share();
  std::lock_guard<std::mutex> lock(mutex);
  loads.push_back(std::move(entry));
}

std::optional<LoadedModule> PreloadedModules::take(const char *ptx) {
  std::shared_future<LoadedModule> result;
  {
    std::lock_guard<std::mutex> lock(mutex);
    size_t length = std::strlen(ptx);
    for (const auto &load : loads)
      if (!load->taken && load->ptx.size() == length &&
          std::memcmp(load->ptx.data(), ptx, length) == 0) {
        load->taken = true;
        result = load->result;
        break;
      }
  }
  if (!result.valid())
    return std::nullopt;
  return result.get();
}

} // namespace mla::gpu
