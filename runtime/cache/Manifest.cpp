//===- Manifest.cpp - What a kernel cache entry says of itself ------------===//

#include "Manifest.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/BLAKE3.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

namespace mla::runtime::detail {

using llvm::StringRef;
using llvm::Twine;

std::string blake3Hex(StringRef data) {
  llvm::BLAKE3 hasher;
  hasher.update(data);
  return llvm::toHex(hasher.final(), /*LowerCase=*/true);
}

static std::string utf8(StringRef text) {
  // llvm::json insists on UTF-8; key fields are informational in the
  // manifest (the digest is what is checked), so a lossy copy is fine.
  return llvm::json::isUTF8(text) ? text.str() : llvm::json::fixUTF8(text);
}

std::string manifestText(const KernelKey &key, StringRef digest,
                         StringRef payload) {
  llvm::json::Object keyFields{
      {"op", utf8(key.op)},
      {"specialization", utf8(key.specialization)},
      {"target", utf8(key.target)},
      {"irHash", utf8(key.irHash)},
      {"options", utf8(key.options)},
      {"environment", utf8(key.environment)},
      {"compilerIdentity", utf8(key.compilerIdentity)},
  };
  llvm::json::Object manifest{
      {"format", kManifestFormat},
      {"entry", key.entryName()},
      {"digest", digest},
      {"key", std::move(keyFields)},
      {"payload",
       llvm::json::Object{
           {"size", static_cast<int64_t>(payload.size())},
           {"blake3", blake3Hex(payload)},
       }},
  };
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(manifest))) << "\n";
  return text;
}

llvm::Expected<Manifest> parseManifest(StringRef text) {
  auto wrong = [](const Twine &why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), why);
  };
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(text);
  if (!parsed)
    return wrong("manifest does not parse: " +
                 llvm::toString(parsed.takeError()));
  const llvm::json::Object *manifest = parsed->getAsObject();
  if (!manifest)
    return wrong("manifest is not a JSON object");
  std::optional<StringRef> format = manifest->getString("format");
  if (!format || *format != kManifestFormat)
    return wrong("manifest format is not " + kManifestFormat);
  std::optional<StringRef> digest = manifest->getString("digest");
  const llvm::json::Object *payloadInfo = manifest->getObject("payload");
  std::optional<int64_t> size =
      payloadInfo ? payloadInfo->getInteger("size") : std::nullopt;
  std::optional<StringRef> checksum =
      payloadInfo ? payloadInfo->getString("blake3") : std::nullopt;
  if (!digest || !size || !checksum)
    return wrong("manifest lacks digest, payload.size or payload.blake3");
  Manifest result{digest->str(), *size, checksum->str(), {}};
  // The key's fields are informational for a lookup (the digest decides),
  // but a listing reads them.
  if (const llvm::json::Object *key = manifest->getObject("key")) {
    auto field = [&](StringRef name) {
      return key->getString(name).value_or("").str();
    };
    result.key.op = field("op");
    result.key.specialization = field("specialization");
    result.key.target = field("target");
    result.key.irHash = field("irHash");
    result.key.options = field("options");
    result.key.environment = field("environment");
    result.key.compilerIdentity = field("compilerIdentity");
  }
  return result;
}

std::string payloadProblem(const Manifest &manifest, StringRef payload) {
  std::string expectedSize = std::to_string(manifest.payloadSize);
  std::string actualSize = std::to_string(payload.size());
  if (actualSize != expectedSize)
    return "payload has " + actualSize + " bytes, the manifest says " +
           expectedSize;
  if (blake3Hex(payload) != manifest.payloadChecksum)
    return "payload checksum does not match the manifest";
  return "";
}

} // namespace mla::runtime::detail
