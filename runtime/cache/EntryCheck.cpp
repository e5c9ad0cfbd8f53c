//===- EntryCheck.cpp - Reading and checking a cache entry ----------------===//

#include "EntryCheck.h"

#include "AtomicFiles.h"
#include "Manifest.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

namespace mla::runtime::detail {

namespace fs = llvm::sys::fs;
namespace path = llvm::sys::path;
using llvm::StringRef;

llvm::Expected<Probe> probeEntry(StringRef dir, StringRef digest) {
  llvm::SmallString<256> manifestPath(dir), payloadPath(dir);
  path::append(manifestPath, KernelCache::kManifestFile);
  path::append(payloadPath, KernelCache::kPayloadFile);

  // Manifest first: a writer publishes it last, so a manifest that is there
  // vouches for a payload that was complete when it was written.
  llvm::Expected<std::optional<std::string>> manifestText =
      readFile(manifestPath);
  if (!manifestText)
    return manifestText.takeError();
  if (!*manifestText) {
    if (fs::exists(payloadPath))
      return Probe::corrupt("payload without a manifest");
    return Probe{};
  }
  llvm::Expected<Manifest> manifest = parseManifest(**manifestText);
  if (!manifest)
    return Probe::corrupt(llvm::toString(manifest.takeError()));
  // Entry names carry only 16 hex digits of the digest; the manifest carries
  // all of them, so a foreign or colliding entry is caught here.
  if (manifest->digest != digest)
    return Probe::corrupt("manifest names digest " +
                          StringRef(manifest->digest).take_front(16) +
                          "..., this key is " + digest.take_front(16) + "...");

  llvm::Expected<std::optional<std::string>> payload = readFile(payloadPath);
  if (!payload)
    return payload.takeError();
  if (!*payload)
    return Probe::corrupt("manifest without a payload");
  std::string problem = payloadProblem(*manifest, **payload);
  if (!problem.empty())
    return Probe::corrupt(problem);
  return Probe{Probe::State::Valid, std::move(**payload), {}};
}

void removeEntryFiles(StringRef dir) {
  llvm::SmallString<256> manifestPath(dir), payloadPath(dir);
  path::append(manifestPath, KernelCache::kManifestFile);
  path::append(payloadPath, KernelCache::kPayloadFile);
  // Manifest first, for the same reason it is written last.
  (void)fs::remove(manifestPath);
  (void)fs::remove(payloadPath);
  removeTempFiles(dir);
}

CacheEntryInfo describeEntry(StringRef dir, StringRef name, bool readPayloads) {
  CacheEntryInfo info;
  info.name = name.str();
  llvm::SmallString<256> manifestPath(dir), payloadPath(dir);
  path::append(manifestPath, KernelCache::kManifestFile);
  path::append(payloadPath, KernelCache::kPayloadFile);
  fs::file_status manifestStatus, payloadStatus;
  bool hasManifest =
      !fs::status(manifestPath, manifestStatus) && fs::exists(manifestStatus);
  bool hasPayload =
      !fs::status(payloadPath, payloadStatus) && fs::exists(payloadStatus);
  if (hasManifest) {
    info.bytes += manifestStatus.getSize();
    info.written = manifestStatus.getLastModificationTime();
  }
  if (hasPayload)
    info.bytes += payloadStatus.getSize();
  if (!hasManifest) {
    info.incomplete = true;
    info.problem =
        hasPayload ? "payload without a manifest" : "no manifest, no payload";
    return info;
  }
  llvm::Expected<std::optional<std::string>> text = readFile(manifestPath);
  if (!text || !*text) {
    info.problem = text ? "manifest vanished while listed"
                        : llvm::toString(text.takeError());
    return info;
  }
  llvm::Expected<Manifest> manifest = parseManifest(**text);
  if (!manifest) {
    info.problem = llvm::toString(manifest.takeError());
    return info;
  }
  info.op = manifest->key.op;
  info.specialization = manifest->key.specialization;
  info.target = manifest->key.target;
  info.compilerIdentity = manifest->key.compilerIdentity;
  // The key's fields must hash to the digest and name this directory: an
  // entry edited or moved by hand is no longer what its name promises.
  if (manifest->key.digest() != manifest->digest)
    info.problem = "the manifest's key fields do not hash to its digest";
  else if (manifest->key.entryName() != name)
    info.problem = "the manifest names entry " + manifest->key.entryName();
  else if (!hasPayload)
    info.problem = "manifest without a payload";
  else if (!readPayloads &&
           int64_t(payloadStatus.getSize()) != manifest->payloadSize)
    info.problem = "payload has " + std::to_string(payloadStatus.getSize()) +
                   " bytes, the manifest says " +
                   std::to_string(manifest->payloadSize);
  if (!info.problem.empty() || !readPayloads)
    return info;
  llvm::Expected<std::optional<std::string>> payload = readFile(payloadPath);
  if (!payload || !*payload)
    info.problem = payload ? "payload vanished while listed"
                           : llvm::toString(payload.takeError());
  else
    info.problem = payloadProblem(*manifest, **payload);
  return info;
}

} // namespace mla::runtime::detail
