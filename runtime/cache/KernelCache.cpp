//===- KernelCache.cpp - On-disk cache of compiled kernels ----------------===//
//
// The invariants this file keeps (see KernelCache.h for the layout):
//  - Only a holder of an entry's lock (EntryLock.h) writes or removes files
//    in the entry directory. Readers take no lock on the fast path; they
//    rely on renames being atomic (AtomicFiles.h) and on validating what
//    they read (EntryCheck.h).
//  - A writer renames the payload before the manifest; a reader reads the
//    manifest before the payload. A reader that races a writer may still see
//    an old manifest beside a new payload, so anything that fails validation
//    is checked again under the lock before it is called corrupt.
//  - Lock files live outside entry directories and are never removed
//    (EntryLock.h says why).
//
//===----------------------------------------------------------------------===//

#include "mla/Runtime/KernelCache.h"

// MLA_BUILD_VERSION and MLA_BUILD_ID, regenerated on every build by
// BuildIdentity.cmake.
#include "BuildIdentity.inc"

#include "AtomicFiles.h"
#include "EntryCheck.h"
#include "EntryLock.h"
#include "Manifest.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/BLAKE3.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <vector>

extern char **environ;

namespace mla::runtime {

namespace fs = llvm::sys::fs;
namespace path = llvm::sys::path;
using llvm::StringRef;
using llvm::Twine;
using namespace detail;

//===----------------------------------------------------------------------===//
// Key
//===----------------------------------------------------------------------===//

const std::string &compilerBuildIdentity() {
  static const std::string identity = std::string("mla-compiler ") +
                                      MLA_BUILD_VERSION + " (" + MLA_BUILD_ID +
                                      ") LLVM " + LLVM_VERSION_STRING;
  return identity;
}

std::string codegenEnvironment(llvm::ArrayRef<StringRef> extraNames) {
  std::vector<std::string> lines;
  for (char **entry = environ; entry && *entry; ++entry)
    if (StringRef(*entry).starts_with(kCodegenEnvPrefix))
      lines.emplace_back(*entry);
  for (StringRef name : extraNames) {
    if (name.starts_with(kCodegenEnvPrefix))
      continue;
    std::string nameStr = name.str();
    if (const char *value = std::getenv(nameStr.c_str()))
      lines.push_back(nameStr + "=" + value);
  }
  // environ's order depends on how the variables were set, which must not
  // change the key.
  llvm::sort(lines);
  lines.erase(std::unique(lines.begin(), lines.end()), lines.end());
  return llvm::join(lines, "\n");
}

std::string hashText(StringRef text) { return blake3Hex(text); }

/// Feeds `name:<length>:value` so that no two different field lists hash the
/// same text (plain concatenation would make "ab"+"c" equal "a"+"bc").
static void hashField(llvm::BLAKE3 &hasher, StringRef name, StringRef value) {
  hasher.update(name);
  hasher.update(":" + std::to_string(value.size()) + ":");
  hasher.update(value);
  hasher.update("\n");
}

std::string KernelKey::digest() const {
  llvm::BLAKE3 hasher;
  hashField(hasher, "format", KernelCache::kFormatVersion);
  hashField(hasher, "compilerIdentity", compilerIdentity);
  hashField(hasher, "op", op);
  hashField(hasher, "specialization", specialization);
  hashField(hasher, "target", target);
  hashField(hasher, "irHash", irHash);
  hashField(hasher, "options", options);
  hashField(hasher, "environment", environment);
  return llvm::toHex(hasher.final(), /*LowerCase=*/true);
}

/// `part`, cut to `maxLength` and reduced to characters that are safe in a
/// path component on every filesystem a cache may sit on.
static std::string pathSafe(StringRef part, size_t maxLength) {
  std::string out;
  for (char c : part.take_front(maxLength)) {
    bool safe =
        llvm::isAlnum(c) || c == '.' || c == '_' || c == '+' || c == '-';
    out.push_back(safe ? c : '-');
  }
  return out;
}

std::string KernelKey::entryName() const {
  // 48 + 120 + 48 + 16 + separators stays well under NAME_MAX (255) with
  // ".lock" appended; the digest keeps shortened names distinct.
  std::string name = pathSafe(op, 48) + "__" + pathSafe(specialization, 120) +
                     "__" + pathSafe(target, 48) + "__" +
                     digest().substr(0, 16);
  // A leading dot would hide the entry from a plain `ls`.
  if (name[0] == '.')
    name[0] = '-';
  return name;
}

//===----------------------------------------------------------------------===//
// KernelCache
//===----------------------------------------------------------------------===//

struct KernelCache::State {
  Config config;
  std::atomic<bool> forceRecompile{false};

  std::mutex logMutex;
  LogSink log = [](const std::string &line) { llvm::errs() << line << "\n"; };

  std::mutex memoryMutex;
  llvm::StringMap<std::string> memory;

  std::atomic<uint64_t> memoryHits{0}, diskHits{0}, misses{0}, compiles{0},
      corruptEntries{0}, storeFailures{0};

  void emit(const Twine &line) {
    std::lock_guard<std::mutex> guard(logMutex);
    if (log)
      log(("mla-kernel-cache: " + line).str());
  }

  std::optional<std::string> fromMemory(StringRef digest) {
    std::lock_guard<std::mutex> guard(memoryMutex);
    auto it = memory.find(digest);
    if (it == memory.end())
      return std::nullopt;
    return it->second;
  }

  void remember(StringRef digest, StringRef payload) {
    std::lock_guard<std::mutex> guard(memoryMutex);
    memory[digest] = payload.str();
  }

  std::string entryDir(StringRef name) const {
    llvm::SmallString<256> dir(config.directory);
    path::append(dir, kFormatVersion, name);
    return std::string(dir);
  }

  std::string lockPath(StringRef name) const {
    llvm::SmallString<256> file(config.directory);
    path::append(file, kFormatVersion, ".locks", name + ".lock");
    return std::string(file);
  }

  /// The process-wide mutex name: per entry on disk, per object without a
  /// disk layer (each object then has its own map).
  std::string mutexName(StringRef name) const {
    if (config.diskEnabled)
      return lockPath(name);
    return llvm::formatv("memory:{0}:{1}", static_cast<const void *>(this),
                         name);
  }

  /// Takes the entry's locks; a failure of the file part is returned, with
  /// the in-process part still held.
  std::unique_ptr<EntryLock> lockEntry(StringRef name, llvm::Error &fileError) {
    auto onWait = [&] {
      emit("waiting for " + name + ": another thread or process holds it");
    };
    auto lock = std::make_unique<EntryLock>(mutexName(name), onWait);
    if (config.diskEnabled)
      fileError = lock->lockFile(lockPath(name), onWait);
    return lock;
  }

  /// Looks `key` up on disk. A corrupt-looking entry is checked again under
  /// the entry lock (taken here unless `locked`) before it is reported and
  /// removed: it may only be an entry caught between two renames.
  llvm::Expected<std::optional<std::string>>
  lookupDisk(StringRef digest, StringRef name, bool locked) {
    std::string dir = entryDir(name);
    llvm::Expected<Probe> probe = probeEntry(dir, digest);
    if (!probe)
      return probe.takeError();
    switch (probe->state) {
    case Probe::State::Valid:
      ++diskHits;
      remember(digest, probe->payload);
      return std::move(probe->payload);
    case Probe::State::Absent:
      return std::nullopt;
    case Probe::State::Corrupt:
      break;
    }
    if (!locked) {
      llvm::Error fileError = llvm::Error::success();
      std::unique_ptr<EntryLock> lock = lockEntry(name, fileError);
      if (fileError)
        return std::move(fileError);
      return lookupDisk(digest, name, /*locked=*/true);
    }
    ++corruptEntries;
    emit("corrupt entry " + name + " (" + probe->reason +
         "): removed, it will be rebuilt");
    removeEntryFiles(dir);
    return std::nullopt;
  }

  /// Writes `key`'s entry; the caller holds the entry lock.
  llvm::Error writeEntry(const KernelKey &key, StringRef digest, StringRef name,
                         StringRef payload) {
    std::string dir = entryDir(name);
    if (std::error_code ec = fs::create_directories(dir))
      return llvm::createFileError(dir, ec);
    removeTempFiles(dir);
    if (llvm::Error err = writeFileAtomically(dir, kPayloadFile, payload))
      return err;
    // The payload's rename must be durable before the manifest's can be.
    syncDirectory(dir);
    if (llvm::Error err = writeFileAtomically(
            dir, kManifestFile, manifestText(key, digest, payload)))
      return err;
    syncDirectory(dir);
    return llvm::Error::success();
  }
};

KernelCache::Config KernelCache::Config::fromEnvironment() {
  using llvm::sys::Process;
  auto isOn = [](const char *name) {
    std::optional<std::string> value = Process::GetEnv(name);
    return value && *value == "1";
  };
  Config config;
  if (std::optional<std::string> dir = Process::GetEnv("MLA_CACHE_DIR");
      dir && !dir->empty()) {
    config.directory = *dir;
  } else if (std::optional<std::string> xdg = Process::GetEnv("XDG_CACHE_HOME");
             xdg && !xdg->empty()) {
    llvm::SmallString<256> dirPath(*xdg);
    path::append(dirPath, "mla");
    config.directory = std::string(dirPath);
  } else if (llvm::SmallString<256> home; path::home_directory(home)) {
    path::append(home, ".cache", "mla");
    config.directory = std::string(home);
  }
  config.diskEnabled = !config.directory.empty() && !isOn("MLA_CACHE_DISABLE");
  config.forceRecompile = isOn("MLA_CACHE_FORCE_RECOMPILE");
  return config;
}

KernelCache::KernelCache(Config config) : state(std::make_unique<State>()) {
  if (config.directory.empty())
    config.diskEnabled = false;
  state->forceRecompile = config.forceRecompile;
  state->config = std::move(config);
}

KernelCache::~KernelCache() = default;
KernelCache::KernelCache(KernelCache &&) noexcept = default;
KernelCache &KernelCache::operator=(KernelCache &&) noexcept = default;

KernelCache KernelCache::openDefault() {
  return KernelCache(Config::fromEnvironment());
}

const KernelCache::Config &KernelCache::config() const { return state->config; }

void KernelCache::setForceRecompile(bool force) {
  state->forceRecompile = force;
}

void KernelCache::setLogSink(LogSink sink) {
  std::lock_guard<std::mutex> guard(state->logMutex);
  state->log = std::move(sink);
}

KernelCacheStats KernelCache::stats() const {
  KernelCacheStats stats;
  stats.memoryHits = state->memoryHits;
  stats.diskHits = state->diskHits;
  stats.misses = state->misses;
  stats.compiles = state->compiles;
  stats.corruptEntries = state->corruptEntries;
  stats.storeFailures = state->storeFailures;
  return stats;
}

std::string KernelCache::entryDirectory(const KernelKey &key) const {
  return state->entryDir(key.entryName());
}

llvm::Expected<std::optional<std::string>>
KernelCache::lookup(const KernelKey &key) {
  if (state->forceRecompile) {
    ++state->misses;
    return std::nullopt;
  }
  std::string digest = key.digest();
  if (std::optional<std::string> payload = state->fromMemory(digest)) {
    ++state->memoryHits;
    return payload;
  }
  if (state->config.diskEnabled) {
    llvm::Expected<std::optional<std::string>> payload =
        state->lookupDisk(digest, key.entryName(), /*locked=*/false);
    if (!payload || *payload)
      return payload;
  }
  ++state->misses;
  return std::nullopt;
}

llvm::Error KernelCache::store(const KernelKey &key, StringRef payload) {
  std::string digest = key.digest();
  state->remember(digest, payload);
  if (!state->config.diskEnabled)
    return llvm::Error::success();
  std::string name = key.entryName();
  llvm::Error fileError = llvm::Error::success();
  std::unique_ptr<EntryLock> lock = state->lockEntry(name, fileError);
  if (fileError)
    return fileError;
  return state->writeEntry(key, digest, name, payload);
}

llvm::Expected<std::string> KernelCache::getOrCompile(
    const KernelKey &key,
    llvm::function_ref<llvm::Expected<std::string>()> compile,
    CacheOutcome *outcome) {
  auto tell = [&](CacheOutcome what) {
    if (outcome)
      *outcome = what;
  };
  std::string digest = key.digest();
  std::string name = key.entryName();
  bool force = state->forceRecompile;
  bool useDisk = state->config.diskEnabled;

  auto warnDisk = [&](llvm::Error err) {
    state->emit("disk layer unusable for " + name +
                ", compiling without it: " + llvm::toString(std::move(err)));
    useDisk = false;
  };
  // Returns the payload if a lookup finds it; any disk error turns the disk
  // layer off for this call, since compiling still gives a correct answer.
  auto tryLookup = [&](bool locked) -> std::optional<std::string> {
    if (std::optional<std::string> payload = state->fromMemory(digest)) {
      ++state->memoryHits;
      tell(CacheOutcome::MemoryHit);
      return payload;
    }
    if (!useDisk)
      return std::nullopt;
    llvm::Expected<std::optional<std::string>> payload =
        state->lookupDisk(digest, name, locked);
    if (!payload) {
      warnDisk(payload.takeError());
      return std::nullopt;
    }
    if (*payload)
      tell(CacheOutcome::DiskHit);
    return std::move(*payload);
  };

  // The fast path takes no lock: a valid entry is served as it is.
  if (!force) {
    if (std::optional<std::string> payload = tryLookup(/*locked=*/false))
      return std::move(*payload);
  }

  llvm::Error fileError = llvm::Error::success();
  std::unique_ptr<EntryLock> lock = state->lockEntry(name, fileError);
  if (fileError)
    warnDisk(std::move(fileError));

  // Whoever held the lock before may have just stored this entry.
  if (!force) {
    if (std::optional<std::string> payload = tryLookup(/*locked=*/true))
      return std::move(*payload);
  }

  ++state->misses;
  ++state->compiles;
  tell(CacheOutcome::Compiled);
  state->emit("compiling " + name + " ...");
  auto start = std::chrono::steady_clock::now();
  llvm::Expected<std::string> payload = compile();
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                std::chrono::steady_clock::now() - start)
                .count();
  if (!payload) {
    state->emit("compiling " + name + " ... failed after " + Twine(ms) + " ms");
    return payload.takeError();
  }
  state->emit("compiling " + name + " ... took " + Twine(ms) + " ms");

  state->remember(digest, *payload);
  if (useDisk) {
    if (llvm::Error err = state->writeEntry(key, digest, name, *payload)) {
      ++state->storeFailures;
      state->emit("could not store " + name + ": " +
                  llvm::toString(std::move(err)));
    }
  }
  return payload;
}

//===----------------------------------------------------------------------===//
// Maintenance
//===----------------------------------------------------------------------===//

bool CacheEntryInfo::madeByThisCompiler() const {
  return compilerIdentity == compilerBuildIdentity();
}

llvm::Expected<std::vector<CacheEntryInfo>>
KernelCache::entries(bool readPayloads) const {
  std::vector<CacheEntryInfo> found;
  if (!state->config.diskEnabled)
    return found;
  llvm::SmallString<256> root(state->config.directory);
  path::append(root, kFormatVersion);
  std::error_code ec;
  for (fs::directory_iterator it(root, ec), end; it != end && !ec;
       it.increment(ec)) {
    StringRef name = path::filename(it->path());
    // The lock files' directory; every other name is an entry.
    if (name == ".locks" || it->type() != fs::file_type::directory_file)
      continue;
    found.push_back(describeEntry(it->path(), name, readPayloads));
  }
  if (ec && !isNotFound(ec))
    return llvm::createFileError(root, ec);
  llvm::sort(found, [](const CacheEntryInfo &a, const CacheEntryInfo &b) {
    return a.name < b.name;
  });
  return found;
}

llvm::Error KernelCache::removeEntry(StringRef name) {
  if (!state->config.diskEnabled)
    return llvm::createStringError("the kernel cache has no disk layer");
  if (name.empty() || name.starts_with(".") || name.contains('/'))
    return llvm::createStringError("'" + name + "' is not an entry name");
  llvm::Error fileError = llvm::Error::success();
  std::unique_ptr<EntryLock> lock = state->lockEntry(name, fileError);
  if (fileError)
    return fileError;
  std::string dir = state->entryDir(name);
  removeEntryFiles(dir);
  // Empty now unless someone put other files there; then it stays.
  (void)fs::remove(dir);
  return llvm::Error::success();
}

} // namespace mla::runtime
