//===- PreloadedModules.cpp - Kernel modules loaded while others compile --===//

#include "PreloadedModules.h"

#include <cstring>

namespace mla::gpu {

LoadedModule loadPtxModule(const char *ptx) {
  // The driver's default optimization level (ptxas -O3) is the one wanted.
  llvm::Expected<cuda::Module> module = cuda::Module::loadPtx(ptx);
  if (!module)
    return {cuda::Module(), llvm::toString(module.takeError())};
  return {std::move(*module), ""};
}

PreloadedModules::~PreloadedModules() {
  // Each future still held waits for its load, then unloads the module it
  // made (never taken) on this thread, which needs the context current.
  llvm::consumeError(device.makeCurrent());
  std::lock_guard<std::mutex> lock(mutex);
  loads.clear();
}

void PreloadedModules::load(llvm::StringRef ptx) {
  auto entry = std::make_unique<Load>();
  entry->ptx = ptx.str();
  // Objects may carry their terminator; the text compared is without it.
  while (!entry->ptx.empty() && entry->ptx.back() == '\0')
    entry->ptx.pop_back();
  const char *text = entry->ptx.c_str();
  const cuda::Device *target = &device;
  entry->result = std::async(std::launch::async, [target, text] {
    if (llvm::Error error = target->makeCurrent())
      return LoadedModule{cuda::Module(), llvm::toString(std::move(error))};
    return loadPtxModule(text);
  });
  std::lock_guard<std::mutex> lock(mutex);
  loads.push_back(std::move(entry));
}

std::optional<LoadedModule> PreloadedModules::take(const char *ptx) {
  std::future<LoadedModule> result;
  {
    std::lock_guard<std::mutex> lock(mutex);
    size_t length = std::strlen(ptx);
    for (const auto &load : loads)
      if (load->result.valid() && load->ptx.size() == length &&
          std::memcmp(load->ptx.data(), ptx, length) == 0) {
        result = std::move(load->result);
        break;
      }
  }
  if (!result.valid())
    return std::nullopt;
  return result.get();
}

} // namespace mla::gpu
