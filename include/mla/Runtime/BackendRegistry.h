//===- BackendRegistry.h - Priority-based backend selection -----*- C++ -*-===//
//
// Chooses the attention backend for a configuration, as vLLM's attention
// selector does: each device (CUDA by compute capability, CPU) has a
// priority list, and the first backend that validates the configuration
// without a reason wins. The backends skipped on the way are returned with
// their reasons, so callers can log why a faster backend was not used.
//
// A backend can also be named: by the caller (select's `choice`), else by
// an environment variable (MLA_ATTENTION_BACKEND). A named backend is used
// if it validates and refused with its reasons otherwise; there is no
// fallback, because a user who names a backend wants that one or an
// explanation.
//
// A registry holds the backends of one role (Backend.h): the decode
// backends, or the prefill backends with their own priorities and their
// own variable, MLA_PREFILL_BACKEND, as vLLM's MLA prefill selector has.
// The same machinery selects both.
//
// Selections are cached per (configuration, choice); the cache is
// thread-safe.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_BACKENDREGISTRY_H
#define MLA_RUNTIME_BACKENDREGISTRY_H

#include "mla/Runtime/Backend.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace mla {

/// Names of the built-in backends.
inline constexpr const char *kGenericGpuBackend = "GENERIC_GPU";
inline constexpr const char *kCpuJitBackend = "CPU_JIT";
inline constexpr const char *kTcSm80Backend = "TC_SM80";
inline constexpr const char *kTcSm90aBackend = "TC_SM90A";

/// The environment variable naming a backend.
inline constexpr const char *kAttentionBackendEnvVar = "MLA_ATTENTION_BACKEND";

//===- Prefill backends (role Prefill) -------------------------------------===//

/// Names of the built-in prefill backends: the decode backends' names
/// after PREFILL_, for the same kernel strategies.
inline constexpr const char *kPrefillGenericGpuBackend = "PREFILL_GENERIC_GPU";
inline constexpr const char *kPrefillCpuJitBackend = "PREFILL_CPU_JIT";
inline constexpr const char *kPrefillTcSm80Backend = "PREFILL_TC_SM80";
inline constexpr const char *kPrefillTcSm90aBackend = "PREFILL_TC_SM90A";

/// The environment variable naming a prefill backend.
inline constexpr const char *kPrefillBackendEnvVar = "MLA_PREFILL_BACKEND";

/// The variable naming a backend of `role`.
const char *backendEnvVar(BackendRole role);

//===-----------------------------------------------------------------------===//

/// The built-in (decode) backends: GENERIC_GPU, CPU_JIT, TC_SM80 (mma.sync
/// decode) and TC_SM90A (wgmma decode on sm_90a, 16..128 heads).
std::vector<Backend> builtinBackends();

/// The backends to try, in order, on the devices a rule matches: CUDA
/// devices of capability minCapability..maxCapability (inclusive; no
/// maximum = any newer chip), or every CPU.
struct PriorityRule {
  DeviceKind device = DeviceKind::CUDA;
  DeviceCapability minCapability;
  std::optional<DeviceCapability> maxCapability;
  std::vector<std::string> order;

  bool matches(const AttentionConfig &config) const;
};

/// The built-in priorities: sm_90 -> [TC_SM90A, TC_SM80, GENERIC_GPU],
/// sm_80..sm_89 and sm_100+ -> [TC_SM80, GENERIC_GPU], older CUDA ->
/// [GENERIC_GPU] (which explains the minimum), CPU -> [CPU_JIT].
std::vector<PriorityRule> builtinPriorities();

/// The built-in prefill backends (BuiltinPrefillBackends.cpp):
/// PREFILL_TC_SM90A (the wgmma prefill, sm_90a), PREFILL_TC_SM80 (the
/// mma.sync prefill, sm_80+), PREFILL_GENERIC_GPU, PREFILL_CPU_JIT.
std::vector<Backend> builtinPrefillBackends();
/// Their priorities, per device as the decode's: sm_90 -> [PREFILL_TC_SM90A,
/// PREFILL_TC_SM80, PREFILL_GENERIC_GPU], sm_80..sm_89 and sm_100+ ->
/// [PREFILL_TC_SM80, PREFILL_GENERIC_GPU], older CUDA ->
/// [PREFILL_GENERIC_GPU], CPU -> [PREFILL_CPU_JIT].
std::vector<PriorityRule> builtinPrefillPriorities();

/// A backend that was not chosen, with every reason.
struct Rejection {
  const Backend *backend = nullptr;
  std::vector<std::string> reasons;
};

/// Where the backend name of an explicit choice came from.
enum class ChoiceSource : uint8_t { Priority, Api, Environment };

/// The result of backend selection.
struct Selection {
  const Backend *backend = nullptr;
  /// The higher-priority backends passed over, in priority order. Empty when
  /// the backend was named explicitly.
  std::vector<Rejection> skipped;
  ChoiceSource source = ChoiceSource::Priority;

  /// One line for logs: "GENERIC_GPU (skipped TC_SM90A: [not implemented
  /// yet])"; a named backend says where the name came from.
  std::string str() const;
};

/// Backends of one role and per-device priorities, with the selection
/// cache. Immutable after construction except for the cache, so Backend
/// pointers handed out stay valid for the registry's lifetime.
class BackendRegistry {
public:
  /// Every name in `priorities` must name one of `backends`; names must be
  /// unique; every backend must have the registry's `role`, which decides
  /// the environment variable read and the wording of errors ("attention
  /// backend" or "prefill backend").
  BackendRegistry(std::vector<Backend> backends,
                  std::vector<PriorityRule> priorities,
                  BackendRole role = BackendRole::Decode);
  BackendRegistry(const BackendRegistry &) = delete;
  BackendRegistry &operator=(const BackendRegistry &) = delete;

  /// The process-wide registry of the built-in backends and priorities of
  /// `role`.
  static BackendRegistry &builtin(BackendRole role = BackendRole::Decode);

  BackendRole role() const { return backendRole; }
  const std::vector<Backend> &backends() const { return allBackends; }
  /// The backend called `name`, or null.
  const Backend *find(llvm::StringRef name) const;
  /// The backends to try for `config`, highest priority first (empty for a
  /// device no rule covers).
  std::vector<const Backend *> priorities(const AttentionConfig &config) const;

  /// The backend for `config`. `choice` names one explicitly; when empty,
  /// the role's variable (MLA_ATTENTION_BACKEND, MLA_PREFILL_BACKEND) does
  /// if set and non-empty; otherwise the first backend in priority order
  /// without a rejection reason. Fails with every reason when the named
  /// backend is refused or none fits, and with the valid names when the
  /// named backend does not exist.
  llvm::Expected<Selection> select(const AttentionConfig &config,
                                   llvm::StringRef choice = {}) const;

  /// Forgets cached selections (tests; the environment changing).
  void clearCache();
  size_t cacheSize() const;

private:
  struct CacheKey {
    AttentionConfig config;
    std::string choice;
    ChoiceSource source;
    bool operator==(const CacheKey &other) const;
  };
  struct CacheKeyHash {
    size_t operator()(const CacheKey &key) const;
  };

  llvm::Expected<Selection> selectUncached(const AttentionConfig &config,
                                           llvm::StringRef choice,
                                           ChoiceSource source) const;
  std::string validNames() const;
  /// "attention backend" or "prefill backend", for messages.
  std::string noun() const;

  std::vector<Backend> allBackends;
  std::vector<PriorityRule> rules;
  BackendRole backendRole;

  mutable std::mutex cacheMutex;
  /// Only successful selections: failures are rare, end the caller's setup,
  /// and an llvm::Error cannot be copied out of a cache.
  mutable std::unordered_map<CacheKey, Selection, CacheKeyHash> cache;
};

} // namespace mla

#endif // MLA_RUNTIME_BACKENDREGISTRY_H
