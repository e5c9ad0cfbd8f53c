//===- EntryLock.h - One writer at a time per cache entry -------*- C++ -*-===//
//
// Exclusive ownership of one cache entry: first within the process (a mutex
// per entry, shared by every KernelCache object), then, for a disk layer,
// across processes through a lock file. Lock files live outside entry
// directories and are never removed: removing a lock file while someone
// waits on it would let a newcomer lock a fresh inode and write beside the
// waiter.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_CACHE_ENTRYLOCK_H
#define MLA_RUNTIME_CACHE_ENTRYLOCK_H

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <chrono>
#include <mutex>

namespace mla::runtime::detail {

/// How long a wait for an entry lock stays silent before it is logged: long
/// enough that a wait behind a store is quiet, short enough that a wait
/// behind a compile is explained before a user suspects a hang.
inline constexpr std::chrono::milliseconds kQuietWait(500);

/// Exclusive ownership of one cache entry, first within the process, then
/// (optionally) across processes through a lock file.
class EntryLock {
public:
  /// Blocks until no other thread of this process holds `name`; calls
  /// `onWait` once if that takes longer than kQuietWait.
  EntryLock(llvm::StringRef name, llvm::function_ref<void()> onWait);
  EntryLock(const EntryLock &) = delete;
  EntryLock &operator=(const EntryLock &) = delete;
  ~EntryLock();

  /// Takes the lock file `lockPath` (created if needed), blocking while
  /// another process holds it. flock locks die with their process, so a
  /// crashed compiler leaves no stale lock.
  llvm::Error lockFile(llvm::StringRef lockPath,
                       llvm::function_ref<void()> onWait);

private:
  std::unique_lock<std::mutex> guard;
  int fd = -1;
  bool waited = false;
};

} // namespace mla::runtime::detail

#endif // MLA_RUNTIME_CACHE_ENTRYLOCK_H
