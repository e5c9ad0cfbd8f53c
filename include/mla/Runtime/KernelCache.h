//===- KernelCache.h - On-disk cache of compiled kernels ---------*- C++
//-*-===//
//
// A content cache of compiled artifacts (PTX, cubins, object files), keyed by
// everything that changes the generated code, so a process that starts again
// with the same shapes does not pay for the compile again.
//
// Layout, under the cache directory (see KernelCache::Config::fromEnvironment):
//
//   <dir>/v1/<entryName>/payload          the artifact, byte for byte
//   <dir>/v1/<entryName>/manifest.json    key fields, digest, size, checksum
//   <dir>/v1/.locks/<entryName>.lock      one writer at a time per entry
//
// `v1` is the cache format version: a change to the layout or the manifest
// bumps it, so an old and a new build never read each other's entries.
//
// Why an entry can be trusted:
//  - The key (KernelKey) holds the compiler's build identity, the exact target
//    (sm_90 and sm_90a are different keys), the IR hash, the pipeline options
//    and every environment variable that changes code generation.
//  - A writer renames a complete, fsynced payload into place before it renames
//    the manifest, so a manifest is never seen without its complete payload.
//  - A reader serves an entry only if the manifest parses, names this exact
//    key digest, and the payload's size and BLAKE3 checksum match it.
//    Anything else (a truncated or flipped payload, a missing or foreign
//    manifest) is reported through the log sink, removed and rebuilt.
//  - Compiles of one entry are serialized across processes and threads by a
//    lock file (flock, released by the kernel when a holder dies), with a
//    second lookup after taking it, so N processes starting together compile
//    once.
//
// `mla-cache` (tools/mla-cache) fills a cache ahead of time and lists,
// verifies and prunes its entries (KernelCache::entries, removeEntry).
//
// Switches (read by Config::fromEnvironment):
//   MLA_CACHE_DIR=<dir>            the cache directory
//   MLA_CACHE_DISABLE=1            no disk layer (the in-process map remains)
//   MLA_CACHE_FORCE_RECOMPILE=1    ignore cached entries, recompile, store
//
// Locking relies on flock, which local filesystems honour; on NFS without lock
// support two processes may both compile one entry. That costs time, never
// correctness: each write is atomic and validated on read.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_KERNELCACHE_H
#define MLA_RUNTIME_KERNELCACHE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mla::runtime {

//===----------------------------------------------------------------------===//
// Key
//===----------------------------------------------------------------------===//

/// The compiler's build identity:
///   "mla-compiler <version> (<build id>) LLVM <LLVM_VERSION_STRING>"
/// where the build id is the git commit of the source tree at build time,
/// with "-dirty-<hash of the diff>" appended when tracked files had
/// uncommitted edits, or "unversioned" where the tree is not a git checkout.
/// It is recomputed on every build (not only at configure time), so a new
/// commit never serves kernels compiled by the old one. Untracked new files
/// are not part of it: after adding one without committing, recompile with
/// MLA_CACHE_FORCE_RECOMPILE=1.
const std::string &compilerBuildIdentity();

/// The prefix of environment variables that change code generation. Any knob
/// that alters generated code must be named `MLA_CODEGEN_*`; it then enters
/// every key without further registration.
inline constexpr llvm::StringLiteral kCodegenEnvPrefix = "MLA_CODEGEN_";

/// The values of the environment variables that change code generation, as
/// sorted "NAME=value" lines: every variable named `MLA_CODEGEN_*`, plus
/// `extraNames` (for a caller whose codegen reads something else). An unset
/// variable is omitted; a set but empty one appears as "NAME=".
///
/// Deliberately not included: variables that only find things (CUDA_HOME,
/// MLA_CUDA_DRIVER_PATH: generated kernels do not depend on where the driver
/// lives), MLA_ATTENTION_BACKEND (it picks which kernel, which the key's op
/// and specialization already name), and the MLA_CACHE_* switches.
std::string codegenEnvironment(llvm::ArrayRef<llvm::StringRef> extraNames = {});

/// Everything that changes the code of one compiled kernel. Two keys with
/// equal fields name the same artifact; any difference names another.
struct KernelKey {
  /// The computation, e.g. "decode_attention".
  std::string op;
  /// A readable summary of the shapes and flags the kernel is specialized
  /// for, e.g. "h128_lkv512_r64_bs64_bf16_cbf16_causal". It names the entry
  /// on disk; the IR hash, not this string, is what guarantees uniqueness.
  std::string specialization;
  /// The exact target, architecture-specific suffix included, e.g.
  /// "sm_90a+ptx80" or "x86_64-avx2".
  std::string target;
  /// A hash of the IR the kernel is compiled from (see hashText).
  std::string irHash;
  /// The pipeline options string.
  std::string options;
  /// The environment that changes code generation; defaults to
  /// codegenEnvironment() at the time the key is made.
  std::string environment = codegenEnvironment();
  /// The compiler that produces the artifact; defaults to
  /// compilerBuildIdentity().
  std::string compilerIdentity = compilerBuildIdentity();

  /// A lowercase hex BLAKE3 hash over all fields (and the cache format
  /// version). Each field enters with its name and length, so moving text
  /// from one field to the next changes the digest.
  std::string digest() const;

  /// `<op>__<specialization>__<target>__<first 16 hex of digest>`, with
  /// characters outside [A-Za-z0-9._+-] replaced by '-' and long parts
  /// shortened, so it is a single, readable path component.
  std::string entryName() const;
};

/// A lowercase hex BLAKE3 hash of `text`, for KernelKey::irHash.
std::string hashText(llvm::StringRef text);

//===----------------------------------------------------------------------===//
// Cache
//===----------------------------------------------------------------------===//

/// What a cache has done since it was created; counts are per object.
struct KernelCacheStats {
  /// Lookups served from the in-process map.
  uint64_t memoryHits = 0;
  /// Lookups served from a validated disk entry (including one found after
  /// waiting for another process to finish compiling it).
  uint64_t diskHits = 0;
  /// Lookups that found nothing usable (getOrCompile counts at most one).
  uint64_t misses = 0;
  /// Calls of a compile function made by getOrCompile.
  uint64_t compiles = 0;
  /// Disk entries found corrupt, reported and removed (then rebuilt by
  /// getOrCompile).
  uint64_t corruptEntries = 0;
  /// Disk writes that failed; the artifact was still returned.
  uint64_t storeFailures = 0;
};

/// One entry of a cache directory, as maintenance (mla-cache list, verify,
/// prune) sees it.
struct CacheEntryInfo {
  /// The entry's directory name (KernelKey::entryName).
  std::string name;
  /// From the manifest; empty when it cannot be read.
  std::string op, specialization, target, compilerIdentity;
  /// The payload and manifest on disk.
  uint64_t bytes = 0;
  /// When the manifest was written (the entry's last store).
  std::chrono::system_clock::time_point written;
  /// Why a lookup would not serve the entry; empty when it would.
  std::string problem;
  /// The entry has no manifest: a write that never finished (its writer
  /// killed, or still at work; a writer publishes the manifest last). A
  /// lookup never serves it and the next compile of its key replaces it,
  /// so it is not corruption.
  bool incomplete = false;

  /// Whether this build's compiler made it: entries of other builds are
  /// never served by this one (their keys differ), only kept.
  bool madeByThisCompiler() const;
};

/// Where getOrCompile found an artifact.
enum class CacheOutcome : uint8_t { MemoryHit, DiskHit, Compiled };

/// A two-level (in-process map, then disk) cache of compiled artifacts. All
/// member functions are safe to call from several threads, and several
/// processes may share one directory.
class KernelCache {
public:
  /// Receives one line per event worth telling a user about: a compile
  /// starting and finishing, a wait for another process, a corrupt entry.
  using LogSink = std::function<void(const std::string &)>;

  /// How a cache is set up.
  struct Config {
    /// The cache directory; entries live under `<directory>/v1`.
    std::string directory;
    /// Whether the disk layer is used; without it only the in-process map
    /// remains.
    bool diskEnabled = true;
    /// Whether lookups are skipped: every getOrCompile compiles (and stores).
    bool forceRecompile = false;

    /// The directory from MLA_CACHE_DIR if set, else $XDG_CACHE_HOME/mla,
    /// else $HOME/.cache/mla; MLA_CACHE_DISABLE=1 clears diskEnabled (as
    /// does finding no directory at all); MLA_CACHE_FORCE_RECOMPILE=1 sets
    /// forceRecompile. Values other than "1" leave the switches off.
    static Config fromEnvironment();
  };

  /// A cache over `config.directory`. Nothing is created on disk until the
  /// first store.
  explicit KernelCache(Config config);
  ~KernelCache();
  KernelCache(KernelCache &&) noexcept;
  KernelCache &operator=(KernelCache &&) noexcept;

  /// A cache configured by Config::fromEnvironment().
  static KernelCache openDefault();

  /// The artifact for `key`, or std::nullopt on a miss. Looks in the
  /// in-process map, then on disk; a disk hit is remembered in the map. A
  /// corrupt disk entry is reported through the log sink, removed, and is a
  /// miss. Errors only when the disk cannot be read (permissions, I/O).
  llvm::Expected<std::optional<std::string>> lookup(const KernelKey &key);

  /// Stores `payload` as the artifact for `key`, in the map and (if enabled)
  /// on disk, replacing any previous entry atomically: payload first,
  /// manifest last.
  llvm::Error store(const KernelKey &key, llvm::StringRef payload);

  /// The artifact for `key`: cached if present, else produced by `compile`
  /// and stored. Concurrent callers (threads or processes) of one key
  /// compile it once; the rest wait and read the result. Compile errors are
  /// returned as they are; a failure of the disk layer is logged and the
  /// compiled artifact returned anyway. `compile` runs with the entry locked,
  /// so it must not ask this cache for the same key. `outcome`, when given,
  /// receives where the artifact came from.
  llvm::Expected<std::string>
  getOrCompile(const KernelKey &key,
               llvm::function_ref<llvm::Expected<std::string>()> compile,
               CacheOutcome *outcome = nullptr);

  /// Where `key`'s entry lives on disk (it may not exist).
  std::string entryDirectory(const KernelKey &key) const;

  /// The configuration this cache was made with.
  const Config &config() const;
  /// Turns force-recompile on or off for later calls.
  void setForceRecompile(bool force);
  /// Sends log lines to `sink` instead of stderr; an empty sink drops them.
  void setLogSink(LogSink sink);
  /// A snapshot of the counters.
  KernelCacheStats stats() const;

  /// Every entry on disk, sorted by name, each checked as a lookup would
  /// check it (manifest, key, sizes; with `readPayloads`, the payload's
  /// checksum too). Empty without a disk layer.
  llvm::Expected<std::vector<CacheEntryInfo>>
  entries(bool readPayloads) const;
  /// Removes the entry named `name` from disk, under its lock.
  llvm::Error removeEntry(llvm::StringRef name);

  /// The cache format version, the name of the directory entries live in.
  static constexpr llvm::StringLiteral kFormatVersion = "v1";
  /// The artifact's file inside an entry directory.
  static constexpr llvm::StringLiteral kPayloadFile = "payload";
  /// The manifest's file inside an entry directory.
  static constexpr llvm::StringLiteral kManifestFile = "manifest.json";

private:
  struct State;
  std::unique_ptr<State> state;
};

} // namespace mla::runtime

#endif // MLA_RUNTIME_KERNELCACHE_H
