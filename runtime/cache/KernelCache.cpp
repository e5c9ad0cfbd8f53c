//===- KernelCache.cpp - On-disk cache of compiled kernels ----------------===//
//
// The invariants this file keeps (see KernelCache.h for the layout):
//  - Only a holder of an entry's lock writes or removes files in the entry
//    directory. Readers take no lock on the fast path; they rely on renames
//    being atomic and on validating what they read.
//  - A writer renames the payload before the manifest; a reader reads the
//    manifest before the payload. A reader that races a writer may still see
//    an old manifest beside a new payload, so anything that fails validation
//    is checked again under the lock before it is called corrupt.
//  - Lock files live outside entry directories and are never removed:
//    removing a lock file while someone waits on it would let a newcomer lock
//    a fresh inode and write beside the waiter.
//
//===----------------------------------------------------------------------===//

#include "mla/Runtime/KernelCache.h"

// MLA_BUILD_VERSION and MLA_BUILD_ID, regenerated on every build by
// BuildIdentity.cmake.
#include "BuildIdentity.inc"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/BLAKE3.h"
#include "llvm/Support/Errc.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

extern char **environ;

namespace mla::runtime {

namespace fs = llvm::sys::fs;
namespace path = llvm::sys::path;
using llvm::StringRef;
using llvm::Twine;

/// Names the manifest layout; a reader rejects any other.
static constexpr StringRef kManifestFormat = "mla-kernel-cache-manifest/1";
/// Marks temporary files, so a writer can clear what a crashed one left.
static constexpr StringRef kTempMarker = ".tmp-";
/// How long a wait for an entry lock stays silent before it is logged: long
/// enough that a wait behind a store is quiet, short enough that a wait
/// behind a compile is explained before a user suspects a hang.
static constexpr std::chrono::milliseconds kQuietWait(500);

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

static std::string blake3Hex(StringRef data) {
  llvm::BLAKE3 hasher;
  hasher.update(data);
  return llvm::toHex(hasher.final(), /*LowerCase=*/true);
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
// Files
//===----------------------------------------------------------------------===//

static std::error_code lastError() {
  return std::error_code(errno, std::generic_category());
}

static bool isNotFound(std::error_code ec) {
  return ec == std::errc::no_such_file_or_directory;
}

/// Writes `data` to `fd` and flushes it to the device: a rename must never
/// publish a file whose blocks are not yet on disk.
static std::error_code writeAllAndSync(int fd, StringRef data) {
  while (!data.empty()) {
    ssize_t written = ::write(fd, data.data(), data.size());
    if (written < 0) {
      if (errno == EINTR)
        continue;
      return lastError();
    }
    data = data.drop_front(static_cast<size_t>(written));
  }
  if (::fsync(fd) != 0)
    return lastError();
  return {};
}

/// Makes the renames in `dir` durable. Best effort: some filesystems refuse
/// fsync on a directory, and validation on read covers what a crash loses.
static void syncDirectory(const Twine &dir) {
  llvm::SmallString<256> storage;
  int fd = ::open(dir.toNullTerminatedStringRef(storage).data(),
                  O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return;
  (void)::fsync(fd);
  ::close(fd);
}

/// Writes `content` to a unique temporary file in `dir`, then renames it to
/// `dir/name`: a reader sees the old file or the complete new one.
static llvm::Error writeFileAtomically(StringRef dir, StringRef name,
                                       StringRef content) {
  llvm::SmallString<256> finalPath(dir);
  path::append(finalPath, name);
  llvm::SmallString<256> tempPath;
  int fd = -1;
  if (std::error_code ec = fs::createUniqueFile(
          finalPath + kTempMarker + "%%%%%%%%%%%%", fd, tempPath))
    return llvm::createFileError(finalPath, ec);
  std::error_code ec = writeAllAndSync(fd, content);
  if (::close(fd) != 0 && !ec)
    ec = lastError();
  if (!ec)
    ec = fs::rename(tempPath, finalPath);
  if (ec) {
    (void)fs::remove(tempPath);
    return llvm::createFileError(finalPath, ec);
  }
  return llvm::Error::success();
}

/// The file's bytes, std::nullopt if it does not exist. Read, not mapped:
/// the file may be replaced while it is in use.
static llvm::Expected<std::optional<std::string>> readFile(const Twine &file) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(file, /*IsText=*/false,
                                  /*RequiresNullTerminator=*/false,
                                  /*IsVolatile=*/true);
  if (!buffer) {
    if (isNotFound(buffer.getError()))
      return std::nullopt;
    return llvm::createFileError(file, buffer.getError());
  }
  return (*buffer)->getBuffer().str();
}

/// Removes what crashed writers left in `dir`. Only the lock holder may call
/// it: another writer's temporary files would otherwise vanish under it.
static void removeTempFiles(StringRef dir) {
  std::error_code ec;
  std::vector<std::string> stale;
  for (fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec))
    if (path::filename(it->path()).contains(kTempMarker))
      stale.push_back(it->path());
  for (const std::string &file : stale)
    (void)fs::remove(file);
}

//===----------------------------------------------------------------------===//
// Manifest
//===----------------------------------------------------------------------===//

static std::string utf8(StringRef text) {
  // llvm::json insists on UTF-8; key fields are informational in the
  // manifest (the digest is what is checked), so a lossy copy is fine.
  return llvm::json::isUTF8(text) ? text.str() : llvm::json::fixUTF8(text);
}

static std::string manifestText(const KernelKey &key, StringRef digest,
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

namespace {

/// What an entry directory holds, as far as one key is concerned.
struct Probe {
  enum class State { Valid, Absent, Corrupt };
  State state = State::Absent;
  /// The artifact, when Valid.
  std::string payload;
  /// What is wrong, when Corrupt.
  std::string reason;

  static Probe corrupt(const Twine &reason) {
    return {State::Corrupt, {}, reason.str()};
  }
};

} // namespace

namespace {
/// What a manifest says, once it parsed and has every field.
struct Manifest {
  std::string digest;
  int64_t payloadSize = 0;
  std::string payloadChecksum;
  KernelKey key;
};
} // namespace

/// Parses a manifest's text; the error says what is wrong with it.
static llvm::Expected<Manifest> parseManifest(StringRef text) {
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

/// Why `payload` is not the one `manifest` describes, or "" when it is.
static std::string payloadProblem(const Manifest &manifest, StringRef payload) {
  std::string expectedSize = std::to_string(manifest.payloadSize);
  std::string actualSize = std::to_string(payload.size());
  if (actualSize != expectedSize)
    return "payload has " + actualSize + " bytes, the manifest says " +
           expectedSize;
  if (blake3Hex(payload) != manifest.payloadChecksum)
    return "payload checksum does not match the manifest";
  return "";
}

/// Reads and validates the entry in `dir` for the key with `digest`.
static llvm::Expected<Probe> probeEntry(StringRef dir, StringRef digest) {
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

static void removeEntryFiles(StringRef dir) {
  llvm::SmallString<256> manifestPath(dir), payloadPath(dir);
  path::append(manifestPath, KernelCache::kManifestFile);
  path::append(payloadPath, KernelCache::kPayloadFile);
  // Manifest first, for the same reason it is written last.
  (void)fs::remove(manifestPath);
  (void)fs::remove(payloadPath);
  removeTempFiles(dir);
}

//===----------------------------------------------------------------------===//
// Entry locks
//===----------------------------------------------------------------------===//

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

namespace {

/// Exclusive ownership of one cache entry, first within the process, then
/// (optionally) across processes through a lock file.
class EntryLock {
public:
  /// Blocks until no other thread of this process holds `name`; calls
  /// `onWait` once if that takes longer than kQuietWait.
  EntryLock(StringRef name, llvm::function_ref<void()> onWait)
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
  EntryLock(const EntryLock &) = delete;
  EntryLock &operator=(const EntryLock &) = delete;
  ~EntryLock() {
    // The file lock goes before the mutex, so a thread of this process that
    // gets the mutex next does not find its own process holding the file.
    if (fd >= 0) {
      (void)fs::unlockFile(fd);
      ::close(fd);
    }
  }

  /// Takes the lock file `lockPath` (created if needed), blocking while
  /// another process holds it. flock locks die with their process, so a
  /// crashed compiler leaves no stale lock.
  llvm::Error lockFile(StringRef lockPath, llvm::function_ref<void()> onWait) {
    if (std::error_code ec =
            fs::create_directories(path::parent_path(lockPath)))
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

private:
  std::unique_lock<std::mutex> guard;
  int fd = -1;
  bool waited = false;
};

} // namespace

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

/// What a listing says of the entry directory `dir` named `name`.
static CacheEntryInfo describeEntry(StringRef dir, StringRef name,
                                    bool readPayloads) {
  CacheEntryInfo info;
  info.name = name.str();
  llvm::SmallString<256> manifestPath(dir), payloadPath(dir);
  path::append(manifestPath, KernelCache::kManifestFile);
  path::append(payloadPath, KernelCache::kPayloadFile);
  fs::file_status manifestStatus, payloadStatus;
  bool hasManifest = !fs::status(manifestPath, manifestStatus) &&
                     fs::exists(manifestStatus);
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
    info.problem = hasPayload ? "payload without a manifest"
                              : "no manifest, no payload";
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
