//===- EntryCheck.h - Reading and checking a cache entry --------*- C++ -*-===//
//
// What an entry directory holds, checked against its manifest: for a
// lookup (is this key's payload there, whole?) and for a listing (what does
// the entry claim, and does it hold?), and the removal of a bad entry.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_CACHE_ENTRYCHECK_H
#define MLA_RUNTIME_CACHE_ENTRYCHECK_H

#include "mla/Runtime/KernelCache.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

#include <string>

namespace mla::runtime::detail {

/// What an entry directory holds, as far as one key is concerned.
struct Probe {
  enum class State { Valid, Absent, Corrupt };
  State state = State::Absent;
  /// The artifact, when Valid.
  std::string payload;
  /// What is wrong, when Corrupt.
  std::string reason;

  static Probe corrupt(const llvm::Twine &reason) {
    return {State::Corrupt, {}, reason.str()};
  }
};

/// Reads and validates the entry in `dir` for the key with `digest`.
llvm::Expected<Probe> probeEntry(llvm::StringRef dir, llvm::StringRef digest);

/// Removes the entry's files in `dir` (the caller holds its lock).
void removeEntryFiles(llvm::StringRef dir);

/// What a listing says of the entry directory `dir` named `name`; with
/// `readPayloads`, the payload's checksum is checked too.
CacheEntryInfo describeEntry(llvm::StringRef dir, llvm::StringRef name,
                             bool readPayloads);

} // namespace mla::runtime::detail

#endif // MLA_RUNTIME_CACHE_ENTRYCHECK_H
