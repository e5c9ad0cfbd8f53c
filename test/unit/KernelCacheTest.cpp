//===- KernelCacheTest.cpp - The on-disk kernel cache ---------------------===//
//
// KernelCache*: runtime/cache, each test in its own temporary directory (and
// with MLA_CACHE_DIR pointing there, so the user's cache is never touched).
//  - KernelCacheKey: digests change with every field (sm_90 vs sm_90a, one
//    environment value), field boundaries are unambiguous, entry names are
//    readable and path-safe.
//  - KernelCacheBasics: miss, memory hit, disk hit from a fresh object, the
//    compile log line, compile errors, the environment switches.
//  - KernelCacheCorruption: truncated, flipped, manifest-less, foreign- and
//    garbage-manifest entries are reported, removed, rebuilt and then served.
//  - KernelCacheConcurrency: forked processes and threads racing on one key
//    all get the same artifact; the number of compiles is reported.
//  - KernelCacheTiming: lookup and store times for a 100 KB artifact.
//
//===----------------------------------------------------------------------===//

#include "mla/Runtime/KernelCache.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <csignal>
#include <sys/wait.h>
#include <unistd.h>

using namespace mla::runtime;
namespace fs = llvm::sys::fs;
namespace path = llvm::sys::path;

namespace {

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// Sets (or unsets, for std::nullopt) an environment variable for one scope.
class ScopedEnv {
public:
  ScopedEnv(const char *name, std::optional<std::string> value) : name(name) {
    if (const char *old = std::getenv(name))
      saved = old;
    if (value)
      ::setenv(name, value->c_str(), 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (saved)
      ::setenv(name, saved->c_str(), 1);
    else
      ::unsetenv(name);
  }

private:
  const char *name;
  std::optional<std::string> saved;
};

/// Collects log lines; shared by the threads of a test.
struct LogCapture {
  std::mutex mutex;
  std::vector<std::string> lines;

  KernelCache::LogSink sink() {
    return [this](const std::string &line) {
      std::lock_guard<std::mutex> guard(mutex);
      lines.push_back(line);
    };
  }
  bool contains(llvm::StringRef text) {
    std::lock_guard<std::mutex> guard(mutex);
    return llvm::any_of(lines, [&](const std::string &line) {
      return llvm::StringRef(line).contains(text);
    });
  }
  std::string all() {
    std::lock_guard<std::mutex> guard(mutex);
    return llvm::join(lines, "\n");
  }
};

/// The decode key from the header's examples, with the environment fixed so
/// that the caller's MLA_CODEGEN_* variables cannot change it.
KernelKey decodeKey() {
  KernelKey key;
  key.op = "decode_attention";
  key.specialization = "h128_lkv512_r64_bs64_bf16_cbf16_causal";
  key.target = "sm_90a+ptx80";
  key.irHash = hashText("module { func.func @decode() }");
  key.options = "num-splits=4 block-n=64";
  key.environment = "";
  return key;
}

/// `size` deterministic bytes (NULs and high bytes included) from `seed`.
std::string artifact(llvm::StringRef seed, size_t size) {
  std::string out(size, '\0');
  uint64_t state = std::hash<std::string>{}(seed.str()) | 1;
  for (char &c : out) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    c = static_cast<char>(state >> 24);
  }
  return out;
}

std::string readWhole(const llvm::Twine &file) {
  auto buffer = llvm::MemoryBuffer::getFile(file, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  return buffer ? (*buffer)->getBuffer().str() : std::string();
}

void writeWhole(const llvm::Twine &file, llvm::StringRef content) {
  std::error_code ec;
  llvm::raw_fd_ostream os(file.str(), ec);
  ASSERT_FALSE(ec) << ec.message();
  os << content;
}

std::vector<std::string> listDir(llvm::StringRef dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec))
    names.push_back(path::filename(it->path()).str());
  llvm::sort(names);
  return names;
}

std::string errorText(llvm::Error err) {
  return err ? llvm::toString(std::move(err)) : "success";
}

/// A fresh temporary directory per test, removed afterwards; the default
/// cache location points into it as well.
class KernelCacheFixture : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_FALSE(fs::createUniqueDirectory("mla-kernel-cache-test", root));
    cacheDir = (root + "/cache").str();
    env.emplace_back("MLA_CACHE_DIR", cacheDir);
    env.emplace_back("MLA_CACHE_DISABLE", std::nullopt);
    env.emplace_back("MLA_CACHE_FORCE_RECOMPILE", std::nullopt);
  }
  void TearDown() override {
    env.clear();
    (void)fs::remove_directories(root);
  }

  KernelCache::Config config() const {
    KernelCache::Config config;
    config.directory = cacheDir;
    return config;
  }

  /// A cache over this test's directory, logging into `log` (or nowhere).
  KernelCache makeCache(LogCapture *log = nullptr) const {
    KernelCache cache(config());
    cache.setLogSink(log ? log->sink() : KernelCache::LogSink());
    return cache;
  }

  llvm::SmallString<256> root;
  std::string cacheDir;
  std::list<ScopedEnv> env;
};

/// A compile function that counts its calls.
struct CountingCompile {
  std::string payload;
  std::atomic<int> calls{0};

  llvm::Expected<std::string> operator()() {
    ++calls;
    return payload;
  }
  llvm::function_ref<llvm::Expected<std::string>()> ref() { return *this; }
};

} // namespace

//===----------------------------------------------------------------------===//
// KernelCacheKey
//===----------------------------------------------------------------------===//

TEST(KernelCacheKey, DigestIsStableLowercaseHex) {
  KernelKey key = decodeKey();
  std::string digest = key.digest();
  EXPECT_EQ(digest.size(), 64u);
  EXPECT_TRUE(llvm::all_of(digest, [](char c) {
    return llvm::isDigit(c) || (c >= 'a' && c <= 'f');
  })) << digest;
  EXPECT_EQ(decodeKey().digest(), digest);
}

TEST(KernelCacheKey, EveryFieldChangesTheDigest) {
  std::vector<std::pair<const char *, std::function<void(KernelKey &)>>>
      changes = {
          {"base", [](KernelKey &) {}},
          {"op", [](KernelKey &k) { k.op = "prefill_attention"; }},
          {"specialization",
           [](KernelKey &k) {
             k.specialization = "h16_lkv512_r64_bs64_bf16_cbf16_causal";
           }},
          // The pitfall the key exists for: an sm_90 binary served to a
          // caller that asked for sm_90a (or the reverse).
          {"target arch", [](KernelKey &k) { k.target = "sm_90+ptx80"; }},
          {"target ptx", [](KernelKey &k) { k.target = "sm_90a+ptx83"; }},
          {"irHash",
           [](KernelKey &k) { k.irHash = hashText("module { changed }"); }},
          {"options",
           [](KernelKey &k) { k.options = "num-splits=8 block-n=64"; }},
          {"env set", [](KernelKey &k) { k.environment = "MLA_CODEGEN_X=1"; }},
          {"env value",
           [](KernelKey &k) { k.environment = "MLA_CODEGEN_X=2"; }},
          {"compiler",
           [](KernelKey &k) { k.compilerIdentity += " (another build)"; }},
      };
  std::set<std::string> digests, names;
  for (auto &[what, change] : changes) {
    KernelKey key = decodeKey();
    change(key);
    EXPECT_TRUE(digests.insert(key.digest()).second) << what;
    EXPECT_TRUE(names.insert(key.entryName()).second) << what;
  }
}

TEST(KernelCacheKey, FieldBoundariesAreUnambiguous) {
  KernelKey a = decodeKey(), b = decodeKey();
  a.op = "decode";
  a.specialization = "_attention";
  b.op = "decode_";
  b.specialization = "attention";
  EXPECT_NE(a.digest(), b.digest());
  a = decodeKey();
  b = decodeKey();
  a.options = "x";
  a.environment = "";
  b.options = "";
  b.environment = "x";
  EXPECT_NE(a.digest(), b.digest());
}

TEST(KernelCacheKey, EntryNamesAreReadableAndPathSafe) {
  KernelKey key = decodeKey();
  EXPECT_EQ(key.entryName(), "decode_attention__"
                             "h128_lkv512_r64_bs64_bf16_cbf16_causal__"
                             "sm_90a+ptx80__" +
                                 key.digest().substr(0, 16));

  KernelKey odd = decodeKey();
  odd.op = "../etc/passwd";
  odd.specialization = "a b/c\\d:e*f";
  odd.target = "x86_64 avx2";
  std::string name = odd.entryName();
  EXPECT_EQ(name.find('/'), std::string::npos) << name;
  EXPECT_EQ(name.find(' '), std::string::npos) << name;
  EXPECT_NE(name[0], '.') << name;
  EXPECT_TRUE(llvm::StringRef(name).starts_with("-.-etc-passwd__a-b-c-d-e-f__"
                                                "x86_64-avx2__"))
      << name;

  // Long specializations are shortened; the digest keeps them apart.
  KernelKey long1 = decodeKey(), long2 = decodeKey();
  long1.specialization = std::string(400, 's') + "1";
  long2.specialization = std::string(400, 's') + "2";
  EXPECT_LE(long1.entryName().size() + 5, 255u);
  EXPECT_NE(long1.entryName(), long2.entryName());
}

TEST(KernelCacheKey, CodegenEnvironmentReadsOnlyCodegenKnobs) {
  ScopedEnv knob("MLA_CODEGEN_KERNEL_CACHE_TEST", std::string("1"));
  ScopedEnv cudaHome("CUDA_HOME", std::string("/opt/cuda-test"));
  ScopedEnv extra("KERNEL_CACHE_TEST_EXTRA", std::string("x"));
  std::string env = codegenEnvironment();
  EXPECT_NE(env.find("MLA_CODEGEN_KERNEL_CACHE_TEST=1"), std::string::npos)
      << env;
  EXPECT_EQ(env.find("CUDA_HOME"), std::string::npos) << env;
  EXPECT_EQ(env.find("KERNEL_CACHE_TEST_EXTRA"), std::string::npos) << env;
  EXPECT_NE(codegenEnvironment({"KERNEL_CACHE_TEST_EXTRA"})
                .find("KERNEL_CACHE_TEST_EXTRA=x"),
            std::string::npos);

  // A key made under another knob value is another key.
  KernelKey withOne;
  std::string digestOne = withOne.digest();
  ScopedEnv knob2("MLA_CODEGEN_KERNEL_CACHE_TEST", std::string("2"));
  KernelKey withTwo;
  EXPECT_NE(withTwo.digest(), digestOne);
}

TEST(KernelCacheKey, BuildIdentityNamesCompilerAndLLVM) {
  const std::string &identity = compilerBuildIdentity();
  EXPECT_NE(identity.find("mla-compiler"), std::string::npos) << identity;
  EXPECT_NE(identity.find(LLVM_VERSION_STRING), std::string::npos) << identity;
  EXPECT_EQ(KernelKey().compilerIdentity, identity);
  std::printf("[ info     ] build identity: %s\n", identity.c_str());
}

//===----------------------------------------------------------------------===//
// KernelCacheBasics
//===----------------------------------------------------------------------===//

using KernelCacheBasics = KernelCacheFixture;

TEST_F(KernelCacheBasics, MissThenMemoryHit) {
  KernelCache cache = makeCache();
  KernelKey key = decodeKey();
  llvm::Expected<std::optional<std::string>> miss = cache.lookup(key);
  ASSERT_TRUE(bool(miss)) << errorText(miss.takeError());
  EXPECT_FALSE(miss->has_value());

  std::string payload = artifact("memory", 1000);
  ASSERT_FALSE(cache.store(key, payload));
  llvm::Expected<std::optional<std::string>> hit = cache.lookup(key);
  ASSERT_TRUE(bool(hit)) << errorText(hit.takeError());
  ASSERT_TRUE(hit->has_value());
  EXPECT_EQ(**hit, payload);

  KernelCacheStats stats = cache.stats();
  EXPECT_EQ(stats.misses, 1u);
  EXPECT_EQ(stats.memoryHits, 1u);
  EXPECT_EQ(stats.diskHits, 0u);
}

TEST_F(KernelCacheBasics, DiskHitFromAFreshObject) {
  KernelKey key = decodeKey();
  CountingCompile compile{artifact("disk", 4096)};
  {
    KernelCache first = makeCache();
    llvm::Expected<std::string> got = first.getOrCompile(key, compile.ref());
    ASSERT_TRUE(bool(got)) << errorText(got.takeError());
    EXPECT_EQ(*got, compile.payload);
    // The same object answers from memory.
    got = first.getOrCompile(key, compile.ref());
    ASSERT_TRUE(bool(got));
    EXPECT_EQ(first.stats().memoryHits, 1u);
    EXPECT_EQ(first.stats().compiles, 1u);
  }

  KernelCache second = makeCache();
  llvm::Expected<std::optional<std::string>> hit = second.lookup(key);
  ASSERT_TRUE(bool(hit)) << errorText(hit.takeError());
  ASSERT_TRUE(hit->has_value());
  EXPECT_EQ(**hit, compile.payload);
  llvm::Expected<std::string> got = second.getOrCompile(key, compile.ref());
  ASSERT_TRUE(bool(got));
  EXPECT_EQ(compile.calls, 1);
  EXPECT_EQ(second.stats().diskHits, 1u);
  EXPECT_EQ(second.stats().memoryHits, 1u);

  // The entry is namespaced by format version and holds exactly the payload
  // and its manifest (no temporary files left behind).
  std::string dir = second.entryDirectory(key);
  EXPECT_EQ(dir, cacheDir + "/v1/" + key.entryName());
  EXPECT_EQ(listDir(dir),
            (std::vector<std::string>{"manifest.json", "payload"}));
  llvm::Expected<llvm::json::Value> manifest =
      llvm::json::parse(readWhole(dir + "/manifest.json"));
  ASSERT_TRUE(bool(manifest)) << errorText(manifest.takeError());
  const llvm::json::Object *object = manifest->getAsObject();
  ASSERT_TRUE(object);
  EXPECT_EQ(object->getString("digest"), llvm::StringRef(key.digest()));
  EXPECT_EQ(object->getString("entry"), llvm::StringRef(key.entryName()));
  EXPECT_EQ(object->getObject("key")->getString("target"),
            llvm::StringRef("sm_90a+ptx80"));
  EXPECT_EQ(object->getObject("payload")->getInteger("size"), 4096);
}

TEST_F(KernelCacheBasics, CompileIsLoggedWithItsDuration) {
  LogCapture log;
  KernelCache cache = makeCache(&log);
  KernelKey key = decodeKey();
  CountingCompile compile{"ptx"};
  ASSERT_TRUE(bool(cache.getOrCompile(key, compile.ref())));
  EXPECT_TRUE(log.contains("compiling " + key.entryName() + " ..."))
      << log.all();
  EXPECT_TRUE(log.contains(" ms")) << log.all();
  // A hit compiles nothing and says nothing.
  size_t lines = log.lines.size();
  ASSERT_TRUE(bool(cache.getOrCompile(key, compile.ref())));
  EXPECT_EQ(log.lines.size(), lines);
}

TEST_F(KernelCacheBasics, CompileErrorsPropagateAndAreNotCached) {
  KernelCache cache = makeCache();
  KernelKey key = decodeKey();
  int calls = 0;
  llvm::Expected<std::string> failed =
      cache.getOrCompile(key, [&]() -> llvm::Expected<std::string> {
        ++calls;
        return llvm::createStringError("ptxas died");
      });
  ASSERT_FALSE(bool(failed));
  EXPECT_EQ(llvm::toString(failed.takeError()), "ptxas died");
  EXPECT_FALSE(fs::exists(cache.entryDirectory(key) + "/manifest.json"));
  CountingCompile compile{"fine"};
  llvm::Expected<std::string> got = cache.getOrCompile(key, compile.ref());
  ASSERT_TRUE(bool(got));
  EXPECT_EQ(*got, "fine");
  EXPECT_EQ(calls + compile.calls, 2);
}

TEST_F(KernelCacheBasics, DisabledDiskLayerWritesNothing) {
  KernelCache::Config noDisk = config();
  noDisk.diskEnabled = false;
  KernelCache cache(noDisk);
  cache.setLogSink({});
  KernelKey key = decodeKey();
  CountingCompile compile{"in memory only"};
  ASSERT_TRUE(bool(cache.getOrCompile(key, compile.ref())));
  ASSERT_TRUE(bool(cache.getOrCompile(key, compile.ref())));
  EXPECT_EQ(compile.calls, 1);
  EXPECT_EQ(cache.stats().memoryHits, 1u);
  EXPECT_FALSE(fs::exists(cacheDir));
}

TEST_F(KernelCacheBasics, EnvironmentSwitches) {
  {
    KernelCache::Config config = KernelCache::Config::fromEnvironment();
    EXPECT_EQ(config.directory, cacheDir);
    EXPECT_TRUE(config.diskEnabled);
    EXPECT_FALSE(config.forceRecompile);
  }
  {
    ScopedEnv disable("MLA_CACHE_DISABLE", std::string("1"));
    ScopedEnv force("MLA_CACHE_FORCE_RECOMPILE", std::string("1"));
    KernelCache cache = KernelCache::openDefault();
    EXPECT_FALSE(cache.config().diskEnabled);
    EXPECT_TRUE(cache.config().forceRecompile);
  }
  {
    // "0" and other values leave the switches off.
    ScopedEnv disable("MLA_CACHE_DISABLE", std::string("0"));
    EXPECT_TRUE(KernelCache::Config::fromEnvironment().diskEnabled);
  }
  // Without MLA_CACHE_DIR: XDG_CACHE_HOME, then HOME (both pointed into the
  // test directory).
  ScopedEnv noDir("MLA_CACHE_DIR", std::nullopt);
  {
    ScopedEnv xdg("XDG_CACHE_HOME", (root + "/xdg").str());
    EXPECT_EQ(KernelCache::Config::fromEnvironment().directory,
              (root + "/xdg/mla").str());
  }
  ScopedEnv noXdg("XDG_CACHE_HOME", std::nullopt);
  ScopedEnv home("HOME", (root + "/home").str());
  EXPECT_EQ(KernelCache::Config::fromEnvironment().directory,
            (root + "/home/.cache/mla").str());
}

TEST_F(KernelCacheBasics, ForceRecompileSkipsLookupsAndStores) {
  KernelKey key = decodeKey();
  CountingCompile v1{"version 1"};
  {
    KernelCache cache = makeCache();
    ASSERT_TRUE(bool(cache.getOrCompile(key, v1.ref())));
  }
  // The API flag.
  CountingCompile v2{"version 2"};
  {
    KernelCache cache = makeCache();
    cache.setForceRecompile(true);
    llvm::Expected<std::string> got = cache.getOrCompile(key, v2.ref());
    ASSERT_TRUE(bool(got));
    EXPECT_EQ(*got, "version 2");
    // Even the in-process map is skipped.
    got = cache.getOrCompile(key, v2.ref());
    ASSERT_TRUE(bool(got));
    EXPECT_EQ(v2.calls, 2);
    llvm::Expected<std::optional<std::string>> looked = cache.lookup(key);
    ASSERT_TRUE(bool(looked));
    EXPECT_FALSE(looked->has_value());
  }
  // What was stored replaced the old entry.
  {
    KernelCache cache = makeCache();
    llvm::Expected<std::optional<std::string>> looked = cache.lookup(key);
    ASSERT_TRUE(bool(looked) && looked->has_value());
    EXPECT_EQ(**looked, "version 2");
  }
  // The environment switch.
  CountingCompile v3{"version 3"};
  {
    ScopedEnv force("MLA_CACHE_FORCE_RECOMPILE", std::string("1"));
    KernelCache cache = KernelCache::openDefault();
    cache.setLogSink({});
    llvm::Expected<std::string> got = cache.getOrCompile(key, v3.ref());
    ASSERT_TRUE(bool(got));
    EXPECT_EQ(*got, "version 3");
    EXPECT_EQ(v3.calls, 1);
  }
  KernelCache cache = makeCache();
  ASSERT_TRUE(bool(cache.getOrCompile(key, v1.ref())));
  EXPECT_EQ(v1.calls, 1);
  EXPECT_EQ(cache.stats().diskHits, 1u);
}

//===----------------------------------------------------------------------===//
// KernelCacheMaintenance: entries() and removeEntry() (mla-cache)
//===----------------------------------------------------------------------===//

using KernelCacheMaintenance = KernelCacheFixture;

TEST_F(KernelCacheMaintenance, EntriesReadManifestsAndFlagStaleAndCorrupt) {
  KernelCache cache = makeCache();
  KernelKey current = decodeKey();
  KernelKey stale = decodeKey();
  stale.compilerIdentity = "mla-compiler 0 (an older build) LLVM 22.1.8";
  KernelKey damaged = decodeKey();
  damaged.op = "merge_attn_states";
  ASSERT_FALSE(cache.store(current, artifact("current", 3000)));
  ASSERT_FALSE(cache.store(stale, artifact("stale", 2000)));
  ASSERT_FALSE(cache.store(damaged, artifact("damaged", 1000)));
  std::string payloadPath = cache.entryDirectory(damaged) + "/payload";
  std::string payload = readWhole(payloadPath);
  payload[10] ^= 0x01;
  writeWhole(payloadPath, payload);

  // Without reading payloads, the flipped byte (same size) goes unseen.
  auto quick = cache.entries(/*readPayloads=*/false);
  ASSERT_TRUE(bool(quick)) << errorText(quick.takeError());
  ASSERT_EQ(quick->size(), 3u);
  for (const CacheEntryInfo &e : *quick)
    EXPECT_EQ(e.problem, "") << e.name;

  auto checked = cache.entries(/*readPayloads=*/true);
  ASSERT_TRUE(bool(checked)) << errorText(checked.takeError());
  ASSERT_EQ(checked->size(), 3u);
  std::map<std::string, CacheEntryInfo> byName;
  for (const CacheEntryInfo &e : *checked)
    byName[e.name] = e;
  const CacheEntryInfo &c = byName.at(current.entryName());
  EXPECT_EQ(c.problem, "");
  EXPECT_TRUE(c.madeByThisCompiler());
  EXPECT_EQ(c.op, current.op);
  EXPECT_EQ(c.specialization, current.specialization);
  EXPECT_EQ(c.target, current.target);
  EXPECT_GT(c.bytes, 3000u);
  EXPECT_LT(std::chrono::system_clock::now() - c.written, std::chrono::hours(1));
  const CacheEntryInfo &s = byName.at(stale.entryName());
  EXPECT_EQ(s.problem, "");
  EXPECT_FALSE(s.madeByThisCompiler());
  EXPECT_EQ(byName.at(damaged.entryName()).problem,
            "payload checksum does not match the manifest");

  // A manifest whose key fields were edited no longer hashes to its digest.
  std::string manifestPath = cache.entryDirectory(current) + "/manifest.json";
  std::string manifest = readWhole(manifestPath);
  size_t at = manifest.find("\"" + current.specialization + "\"",
                            manifest.find("\"specialization\""));
  ASSERT_NE(at, std::string::npos);
  manifest[at + 1] = 'x';
  writeWhole(manifestPath, manifest);
  auto edited = cache.entries(/*readPayloads=*/false);
  ASSERT_TRUE(bool(edited));
  int seen = 0;
  for (const CacheEntryInfo &e : *edited) {
    if (e.name != current.entryName())
      continue;
    ++seen;
    EXPECT_EQ(e.problem, "the manifest's key fields do not hash to its digest");
  }
  EXPECT_EQ(seen, 1);

  ASSERT_FALSE(cache.removeEntry(damaged.entryName()));
  EXPECT_FALSE(fs::exists(cache.entryDirectory(damaged)));
  auto left = cache.entries(/*readPayloads=*/true);
  ASSERT_TRUE(bool(left));
  EXPECT_EQ(left->size(), 2u);
  // Names that are not entries are refused, never resolved as paths.
  for (const char *bad : {"", ".locks", "../v1", "a/b"}) {
    llvm::Error error = cache.removeEntry(bad);
    EXPECT_TRUE(bool(error)) << bad;
    llvm::consumeError(std::move(error));
  }
}

TEST_F(KernelCacheMaintenance, AnEmptyOrAbsentDirectoryHasNoEntries) {
  KernelCache cache = makeCache();
  auto none = cache.entries(/*readPayloads=*/true);
  ASSERT_TRUE(bool(none)) << errorText(none.takeError());
  EXPECT_TRUE(none->empty());
  KernelCache::Config memoryOnly;
  KernelCache inMemory(memoryOnly);
  auto memory = inMemory.entries(/*readPayloads=*/false);
  ASSERT_TRUE(bool(memory));
  EXPECT_TRUE(memory->empty());
  llvm::Error error = inMemory.removeEntry("x");
  EXPECT_TRUE(bool(error));
  llvm::consumeError(std::move(error));
}

//===----------------------------------------------------------------------===//
// KernelCacheCorruption
//===----------------------------------------------------------------------===//

class KernelCacheCorruption : public KernelCacheFixture {
protected:
  /// Stores an entry, damages it with `damage`, then checks that a fresh
  /// cache reports it (the log names `reason`), rebuilds it with one compile,
  /// and that the rebuilt entry is served from disk afterwards.
  void expectRebuilt(std::function<void(const std::string &dir)> damage,
                     llvm::StringRef reason) {
    KernelKey key = decodeKey();
    CountingCompile compile{artifact("corruption", 10000)};
    std::string dir;
    {
      KernelCache cache = makeCache();
      ASSERT_TRUE(bool(cache.getOrCompile(key, compile.ref())));
      dir = cache.entryDirectory(key);
    }
    damage(dir);

    LogCapture log;
    {
      KernelCache cache = makeCache(&log);
      llvm::Expected<std::string> got = cache.getOrCompile(key, compile.ref());
      ASSERT_TRUE(bool(got)) << errorText(got.takeError());
      EXPECT_EQ(*got, compile.payload);
      EXPECT_EQ(compile.calls, 2);
      EXPECT_EQ(cache.stats().corruptEntries, 1u);
      EXPECT_TRUE(log.contains("corrupt entry " + key.entryName()))
          << log.all();
      EXPECT_TRUE(log.contains(reason)) << log.all();
    }

    LogCapture quiet;
    KernelCache cache = makeCache(&quiet);
    llvm::Expected<std::optional<std::string>> hit = cache.lookup(key);
    ASSERT_TRUE(bool(hit)) << errorText(hit.takeError());
    ASSERT_TRUE(hit->has_value());
    EXPECT_EQ(**hit, compile.payload);
    EXPECT_EQ(cache.stats().diskHits, 1u);
    EXPECT_EQ(cache.stats().corruptEntries, 0u);
    EXPECT_TRUE(quiet.lines.empty()) << quiet.all();
  }
};

TEST_F(KernelCacheCorruption, TruncatedPayload) {
  expectRebuilt(
      [](const std::string &dir) {
        std::string payload = readWhole(dir + "/payload");
        writeWhole(dir + "/payload", payload.substr(0, payload.size() / 2));
      },
      "payload has 5000 bytes, the manifest says 10000");
}

TEST_F(KernelCacheCorruption, FlippedByte) {
  expectRebuilt(
      [](const std::string &dir) {
        std::string payload = readWhole(dir + "/payload");
        payload[payload.size() / 3] ^= 0x20;
        writeWhole(dir + "/payload", payload);
      },
      "checksum");
}

TEST_F(KernelCacheCorruption, MissingManifest) {
  expectRebuilt(
      [](const std::string &dir) {
        ASSERT_FALSE(fs::remove(dir + "/manifest.json"));
      },
      "payload without a manifest");
}

TEST_F(KernelCacheCorruption, MissingPayload) {
  expectRebuilt(
      [](const std::string &dir) {
        ASSERT_FALSE(fs::remove(dir + "/payload"));
      },
      "manifest without a payload");
}

TEST_F(KernelCacheCorruption, ManifestOfAnotherKey) {
  expectRebuilt(
      [this](const std::string &dir) {
        // A valid manifest, but for sm_90 instead of sm_90a.
        KernelKey other = decodeKey();
        other.target = "sm_90+ptx80";
        KernelCache cache = makeCache();
        ASSERT_FALSE(cache.store(other, artifact("corruption", 10000)));
        ASSERT_FALSE(
            fs::copy_file(cache.entryDirectory(other) + "/manifest.json",
                          dir + "/manifest.json"));
      },
      "manifest names digest");
}

TEST_F(KernelCacheCorruption, GarbageManifest) {
  expectRebuilt(
      [](const std::string &dir) {
        writeWhole(dir + "/manifest.json", "{\"format\": \"mla-kernel-ca");
      },
      "manifest does not parse");
}

TEST_F(KernelCacheCorruption, CrashedWritersTempFilesAreCleared) {
  KernelKey key = decodeKey();
  KernelCache cache = makeCache();
  std::string dir = cache.entryDirectory(key);
  ASSERT_FALSE(fs::create_directories(dir));
  writeWhole(dir + "/payload.tmp-abcdef", "half of a payload");
  writeWhole(dir + "/manifest.json.tmp-123456", "{");
  // Temporary files alone are no entry: a plain miss, nothing reported.
  LogCapture log;
  cache.setLogSink(log.sink());
  CountingCompile compile{"whole"};
  ASSERT_TRUE(bool(cache.getOrCompile(key, compile.ref())));
  EXPECT_FALSE(log.contains("corrupt")) << log.all();
  EXPECT_EQ(listDir(dir),
            (std::vector<std::string>{"manifest.json", "payload"}));
}

TEST_F(KernelCacheCorruption, LookupReportsAndRemoves) {
  KernelKey key = decodeKey();
  std::string dir;
  {
    KernelCache cache = makeCache();
    ASSERT_FALSE(cache.store(key, artifact("lookup", 3000)));
    dir = cache.entryDirectory(key);
  }
  writeWhole(dir + "/payload", "short");
  LogCapture log;
  KernelCache cache = makeCache(&log);
  llvm::Expected<std::optional<std::string>> looked = cache.lookup(key);
  ASSERT_TRUE(bool(looked)) << errorText(looked.takeError());
  EXPECT_FALSE(looked->has_value());
  EXPECT_TRUE(log.contains("corrupt entry")) << log.all();
  EXPECT_EQ(cache.stats().corruptEntries, 1u);
  EXPECT_EQ(cache.stats().misses, 1u);
  EXPECT_TRUE(listDir(dir).empty());
}

//===----------------------------------------------------------------------===//
// KernelCacheConcurrency
//===----------------------------------------------------------------------===//

using KernelCacheConcurrency = KernelCacheFixture;

/// A compile that takes ~100 ms and leaves one marker file per call in
/// `markerDir`, so compiles can be counted across processes.
static llvm::Expected<std::string> slowCompile(const std::string &markerDir,
                                               const std::string &payload) {
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  int fd = -1;
  llvm::SmallString<256> marker;
  if (std::error_code ec =
          fs::createUniqueFile(markerDir + "/compile-%%%%%%%%", fd, marker))
    return llvm::errorCodeToError(ec);
  ::close(fd);
  return payload;
}

TEST_F(KernelCacheConcurrency, ForkedProcessesAgree) {
  constexpr int kChildren = 6;
  std::string markers = (root + "/markers").str();
  std::string results = (root + "/results").str();
  ASSERT_FALSE(fs::create_directories(markers));
  ASSERT_FALSE(fs::create_directories(results));
  const std::string payload = artifact("fork", 100 * 1024);
  KernelKey key = decodeKey();

  // A start barrier: every child blocks reading the pipe until the parent
  // closes its end, so all of them call getOrCompile at the same moment.
  int barrier[2];
  ASSERT_EQ(::pipe(barrier), 0);
  std::fflush(nullptr);
  std::vector<pid_t> children;
  for (int i = 0; i < kChildren; ++i) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(barrier[1]);
      char byte;
      while (::read(barrier[0], &byte, 1) < 0 && errno == EINTR) {
      }
      KernelCache cache(config());
      cache.setLogSink({});
      llvm::Expected<std::string> got = cache.getOrCompile(
          key, [&] { return slowCompile(markers, payload); });
      if (!got) {
        llvm::consumeError(got.takeError());
        ::_exit(2);
      }
      std::error_code ec;
      {
        llvm::raw_fd_ostream os(results + "/child-" + std::to_string(i), ec);
        if (!ec)
          os << hashText(*got);
      }
      ::_exit(ec ? 3 : 0);
    }
    children.push_back(pid);
  }
  ::close(barrier[0]);
  ::close(barrier[1]);

  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "child exited with status " << status;
  }
  std::vector<std::string> written = listDir(results);
  ASSERT_EQ(written.size(), size_t(kChildren));
  for (const std::string &file : written)
    EXPECT_EQ(readWhole(results + "/" + file), hashText(payload)) << file;

  size_t compiles = listDir(markers).size();
  std::printf("[ info     ] %d processes, one key: %zu compile(s)\n", kChildren,
              compiles);
  RecordProperty("compiles", static_cast<int>(compiles));
  ASSERT_GE(compiles, 1u);
  EXPECT_LE(compiles, size_t(kChildren));

  // What they left behind is one valid entry.
  KernelCache cache = makeCache();
  llvm::Expected<std::optional<std::string>> hit = cache.lookup(key);
  ASSERT_TRUE(bool(hit) && hit->has_value());
  EXPECT_EQ(**hit, payload);
}

TEST_F(KernelCacheConcurrency, KilledCompilerLeavesNoStaleLock) {
  std::string markers = (root + "/markers").str();
  ASSERT_FALSE(fs::create_directories(markers));
  KernelKey key = decodeKey();
  std::fflush(nullptr);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Holds the entry lock inside a compile that never finishes.
    KernelCache cache(config());
    cache.setLogSink({});
    llvm::Expected<std::string> got =
        cache.getOrCompile(key, [&]() -> llvm::Expected<std::string> {
          llvm::Expected<std::string> marker = slowCompile(markers, "");
          llvm::consumeError(marker.takeError());
          std::this_thread::sleep_for(std::chrono::seconds(60));
          return std::string("never");
        });
    llvm::consumeError(got.takeError());
    ::_exit(0);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (listDir(markers).empty() &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ::kill(pid, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_EQ(listDir(markers).size(), 1u) << "the child never started compiling";

  // The kernel dropped the dead process's lock: this compile does not wait.
  KernelCache cache = makeCache();
  auto start = std::chrono::steady_clock::now();
  llvm::Expected<std::string> got = cache.getOrCompile(
      key, [&] { return slowCompile(markers, "after the crash"); });
  ASSERT_TRUE(bool(got)) << errorText(got.takeError());
  EXPECT_EQ(*got, "after the crash");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(listDir(markers).size(), 2u);
}

TEST_F(KernelCacheConcurrency, ThreadsOfOneProcessCompileOnce) {
  constexpr int kThreads = 8;
  const std::string payload = artifact("threads", 50 * 1024);
  KernelKey key = decodeKey();

  // Once sharing one object, once with an object per thread (the lock must
  // hold across objects, not only inside one).
  for (bool shared : {true, false}) {
    SCOPED_TRACE(shared ? "shared cache object" : "one object per thread");
    std::string markers =
        (root + (shared ? "/markers-shared" : "/markers-own")).str();
    ASSERT_FALSE(fs::create_directories(markers));
    std::string dir = cacheDir + (shared ? "-shared" : "-own");
    KernelCache::Config config;
    config.directory = dir;
    KernelCache sharedCache(config);
    sharedCache.setLogSink({});

    std::atomic<int> ready{0};
    std::atomic<int> failures{0};
    std::vector<std::string> got(kThreads);
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i)
      threads.emplace_back([&, i] {
        std::optional<KernelCache> own;
        if (!shared) {
          own.emplace(config);
          own->setLogSink({});
        }
        KernelCache &cache = shared ? sharedCache : *own;
        ++ready;
        while (ready < kThreads)
          std::this_thread::yield();
        llvm::Expected<std::string> result = cache.getOrCompile(
            key, [&] { return slowCompile(markers, payload); });
        if (!result) {
          llvm::consumeError(result.takeError());
          ++failures;
          return;
        }
        got[i] = std::move(*result);
      });
    for (std::thread &thread : threads)
      thread.join();

    EXPECT_EQ(failures, 0);
    for (const std::string &result : got)
      EXPECT_TRUE(result == payload);
    EXPECT_EQ(listDir(markers).size(), 1u);
    if (shared) {
      KernelCacheStats stats = sharedCache.stats();
      EXPECT_EQ(stats.compiles, 1u);
      EXPECT_EQ(stats.memoryHits + stats.diskHits, unsigned(kThreads - 1));
    }
  }
}

//===----------------------------------------------------------------------===//
// KernelCacheTiming
//===----------------------------------------------------------------------===//

using KernelCacheTiming = KernelCacheFixture;

TEST_F(KernelCacheTiming, HundredKilobyteArtifact) {
  const std::string payload = artifact("timing", 100 * 1024);
  KernelKey key = decodeKey();
  using Clock = std::chrono::steady_clock;
  auto micros = [](Clock::duration d) {
    return std::chrono::duration<double, std::micro>(d).count();
  };
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };

  constexpr int kRuns = 50;
  std::vector<double> stores, diskHits, memoryHits;
  KernelCache writer = makeCache();
  for (int i = 0; i < kRuns; ++i) {
    auto start = Clock::now();
    ASSERT_FALSE(writer.store(key, payload));
    stores.push_back(micros(Clock::now() - start));
  }
  for (int i = 0; i < kRuns; ++i) {
    // A fresh object each time, so the lookup goes to disk.
    KernelCache reader = makeCache();
    auto start = Clock::now();
    llvm::Expected<std::optional<std::string>> hit = reader.lookup(key);
    diskHits.push_back(micros(Clock::now() - start));
    ASSERT_TRUE(bool(hit) && hit->has_value());
    ASSERT_EQ(reader.stats().diskHits, 1u);
  }
  KernelCache reader = makeCache();
  ASSERT_TRUE(bool(reader.lookup(key)));
  for (int i = 0; i < kRuns; ++i) {
    auto start = Clock::now();
    llvm::Expected<std::optional<std::string>> hit = reader.lookup(key);
    memoryHits.push_back(micros(Clock::now() - start));
    ASSERT_TRUE(bool(hit) && hit->has_value());
  }
  std::printf("[ info     ] 100 KB artifact, median of %d: store %.1f us "
              "(fsync included), disk hit %.1f us, memory hit %.1f us\n",
              kRuns, median(stores), median(diskHits), median(memoryHits));
  RecordProperty("store_us", std::to_string(median(stores)));
  RecordProperty("disk_hit_us", std::to_string(median(diskHits)));
  RecordProperty("memory_hit_us", std::to_string(median(memoryHits)));
}
