//===- PreloadedModules.cpp - Kernel modules loaded while others compile --===//

#include "PreloadedModules.h"
#include "mla/Target/KernelLoading.h"

#include <cstring>

namespace mla::gpu {

PreloadedModules::~PreloadedModules() {
  // Each future still held waits for its load, then unloads the module it
  // made (never taken) on this thread, which needs the context current.
  llvm::consumeError(device.makeCurrent());
  std::lock_guard<std::mutex> lock(mutex);
  loads.clear();
}

void PreloadedModules::load(llvm::StringRef name, llvm::StringRef ptx) {
  // Loaded at its kernel's first launch, if ever (the shims' handle).
  if (loadsAtFirstLaunch(ptx))
    return;
  auto entry = std::make_unique<Load>();
  entry->name = name.str();
  entry->ptx = ptx.str();
  // Objects may carry their terminator; the text compared is without it.
  while (!entry->ptx.empty() && entry->ptx.back() == '\0')
    entry->ptx.pop_back();
  const char *text = entry->ptx.c_str();
  const cuda::Device *target = &device;
  std::atomic<std::chrono::steady_clock::rep> *finished = &entry->finished;
  std::atomic<bool> *linked = &entry->linked;
  entry->started = std::chrono::steady_clock::now();
  entry->result = std::async(std::launch::async, [target, text, finished,
                                                   linked] {
    LoadedModule loaded;
    if (llvm::Error error = target->makeCurrent())
      loaded.error = llvm::toString(std::move(error));
    else
      loaded = loadPtxModule(text);
    linked->store(loaded.linked);
    finished->store(
        std::chrono::steady_clock::now().time_since_epoch().count());
    return loaded;
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

std::vector<CompileEvent::DriverCompile> PreloadedModules::timeline() {
  using Clock = std::chrono::steady_clock;
  auto ms = [](Clock::duration d) {
    return std::chrono::duration<double, std::milli>(d).count();
  };
  std::vector<CompileEvent::DriverCompile> compiles;
  std::lock_guard<std::mutex> lock(mutex);
  for (const auto &load : loads) {
    Clock::rep finished = load->finished.load();
    Clock::time_point end =
        finished ? Clock::time_point(Clock::duration(finished)) : Clock::now();
    compiles.push_back({load->name, ms(load->started - start),
                        ms(end - load->started),
                        load->linked.load()});
  }
  return compiles;
}

} // namespace mla::gpu
