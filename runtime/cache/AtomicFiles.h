//===- AtomicFiles.h - The kernel cache's reads and writes ------*- C++ -*-===//
//
// How the kernel cache touches files: a write goes to a temporary file that
// is fsynced and renamed into place, so a reader sees the old file or the
// complete new one; a read copies the bytes (never maps them), since the
// file may be replaced while it is in use.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_CACHE_ATOMICFILES_H
#define MLA_RUNTIME_CACHE_ATOMICFILES_H

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <system_error>

namespace mla::runtime::detail {

/// Whether `ec` says that a file or directory does not exist.
bool isNotFound(std::error_code ec);

/// Makes the renames in `dir` durable. Best effort: some filesystems refuse
/// fsync on a directory, and validation on read covers what a crash loses.
void syncDirectory(const llvm::Twine &dir);

/// Writes `content` to a unique temporary file in `dir`, then renames it to
/// `dir/name`: a reader sees the old file or the complete new one.
llvm::Error writeFileAtomically(llvm::StringRef dir, llvm::StringRef name,
                                llvm::StringRef content);

/// The file's bytes, std::nullopt if it does not exist. Read, not mapped:
/// the file may be replaced while it is in use.
llvm::Expected<std::optional<std::string>> readFile(const llvm::Twine &file);

/// Removes what crashed writers left in `dir`. Only the lock holder may call
/// it: another writer's temporary files would otherwise vanish under it.
void removeTempFiles(llvm::StringRef dir);

} // namespace mla::runtime::detail

#endif // MLA_RUNTIME_CACHE_ATOMICFILES_H
