//===- EntryLock.cpp - One writer at a time per cache entry ---------------===//

#include "EntryLock.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <memory>
#include <thread>

#include <unistd.h>

namespace mla::runtime::detail {

namespace fs = llvm::sys::fs;
namespace path = llvm::sys::path;
using llvm::StringRef;

/// The in-process mutex for `name`, shared by every KernelCache object in
/// the process. It keeps threads apart without depending on how the file
/// lock treats two descriptors of one process (flock separates them, fcntl
/// locks would not).
static std::mutex &processMutex(StringRef name) {
  static std::mutex registryMutex;
  // Leaked on purpose: caches may still be used from static destructors.
  static auto *registry = new llvm::StringMap<std::unique_ptr<std::mutex>>;
  std::lock_guard<std::mutex> guard(registryMutex);
  std::unique_ptr<std::mutex> &slot = (*registry)[name];
  if (!slot)
    slot = std::make_unique<std::mutex>();
  return *slot;
}

EntryLock::EntryLock(StringRef name, llvm::function_ref<void()> onWait)
    : guard(processMutex(name), std::defer_lock) {
  // Polling rather than std::timed_mutex::try_lock_for: ThreadSanitizer
  // (clang 14, gcc 12) does not see a lock taken through
  // pthread_mutex_clocklock and reports every later unlock.
  auto deadline = std::chrono::steady_clock::now() + kQuietWait;
  while (!guard.try_lock()) {
    if (std::chrono::steady_clock::now() >= deadline) {
      onWait();
      waited = true;
      guard.lock();
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

EntryLock::~EntryLock() {
  // The file lock goes before the mutex, so a thread of this process that
  // gets the mutex next does not find its own process holding the file.
  if (fd >= 0) {
    (void)fs::unlockFile(fd);
    ::close(fd);
  }
}

llvm::Error EntryLock::lockFile(StringRef lockPath,
                                llvm::function_ref<void()> onWait) {
  if (std::error_code ec = fs::create_directories(path::parent_path(lockPath)))
    return llvm::createFileError(path::parent_path(lockPath), ec);
  int newFd = -1;
  if (std::error_code ec = fs::openFileForReadWrite(
          lockPath, newFd, fs::CD_OpenAlways, fs::OF_None))
    return llvm::createFileError(lockPath, ec);
  if (fs::tryLockFile(newFd, kQuietWait)) {
    if (!waited)
      onWait();
    if (std::error_code ec = fs::lockFile(newFd)) {
      ::close(newFd);
      return llvm::createFileError(lockPath, ec);
    }
  }
  fd = newFd;
  return llvm::Error::success();
}

} // namespace mla::runtime::detail
