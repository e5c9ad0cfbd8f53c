//===- Manifest.h - What a kernel cache entry says of itself ----*- C++ -*-===//
//
// The manifest beside an entry's payload (manifest.json): the format's name,
// the entry name, the key's full digest and fields, and the payload's size
// and BLAKE3 checksum. The digest is what a lookup checks; the key's fields
// are informational there, and what a listing shows.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_CACHE_MANIFEST_H
#define MLA_RUNTIME_CACHE_MANIFEST_H

#include "mla/Runtime/KernelCache.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>

namespace mla::runtime::detail {

/// Names the manifest layout; a reader rejects any other.
inline constexpr llvm::StringRef kManifestFormat =
    "mla-kernel-cache-manifest/1";

/// The BLAKE3 hash of `data`, in lower-case hex.
std::string blake3Hex(llvm::StringRef data);

/// The manifest of `key`'s entry (its full digest `digest`) holding
/// `payload`, as JSON text.
std::string manifestText(const KernelKey &key, llvm::StringRef digest,
                         llvm::StringRef payload);

/// What a manifest says, once it parsed and has every field.
struct Manifest {
  std::string digest;
  int64_t payloadSize = 0;
  std::string payloadChecksum;
  KernelKey key;
};

/// Parses a manifest's text; the error says what is wrong with it.
llvm::Expected<Manifest> parseManifest(llvm::StringRef text);

/// Why `payload` is not the one `manifest` describes, or "" when it is.
std::string payloadProblem(const Manifest &manifest, llvm::StringRef payload);

} // namespace mla::runtime::detail

#endif // MLA_RUNTIME_CACHE_MANIFEST_H
