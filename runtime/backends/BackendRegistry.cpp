//===- BackendRegistry.cpp - Priority-based attention backend choice ------===//

#include "mla/Runtime/BackendRegistry.h"

#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/STLExtras.h"

#include <cassert>
#include <cstdlib>

namespace mla {

namespace {

std::string reasonList(const std::vector<std::string> &reasons) {
  std::string list;
  for (const std::string &reason : reasons)
    list += (list.empty() ? "" : ", ") + reason;
  return "[" + list + "]";
}

std::string rejectionList(const std::vector<Rejection> &rejections) {
  std::string list;
  for (const Rejection &r : rejections)
    list += (list.empty() ? "" : "; ") + r.backend->name + ": " +
            reasonList(r.reasons);
  return list;
}

llvm::Error error(const std::string &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// How a named backend was named: "requested", "named by
/// MLA_PREFILL_BACKEND".
std::string sourceName(ChoiceSource source, BackendRole role) {
  return source == ChoiceSource::Api
             ? "requested"
             : std::string("named by ") + backendEnvVar(role);
}

} // namespace

const char *backendEnvVar(BackendRole role) {
  return role == BackendRole::Prefill ? kPrefillBackendEnvVar
                                      : kAttentionBackendEnvVar;
}

bool PriorityRule::matches(const AttentionConfig &config) const {
  if (config.device != device)
    return false;
  if (device != DeviceKind::CUDA)
    return true;
  return !(config.capability < minCapability) &&
         !(maxCapability && config.capability > *maxCapability);
}

std::string Selection::str() const {
  std::string text = backend->name;
  if (source == ChoiceSource::Api)
    text += " (requested)";
  else if (source == ChoiceSource::Environment)
    text += std::string(" (from ") + backendEnvVar(backend->role) + ")";
  if (!skipped.empty())
    text += " (skipped " + rejectionList(skipped) + ")";
  return text;
}

//===----------------------------------------------------------------------===//
// BackendRegistry
//===----------------------------------------------------------------------===//

BackendRegistry::BackendRegistry(std::vector<Backend> backends,
                                 std::vector<PriorityRule> priorities,
                                 BackendRole role)
    : allBackends(std::move(backends)), rules(std::move(priorities)),
      backendRole(role) {
#ifndef NDEBUG
  for (size_t i = 0; i < allBackends.size(); ++i) {
    assert(allBackends[i].role == role && "a backend of another role");
    for (size_t j = 0; j < i; ++j)
      assert(allBackends[i].name != allBackends[j].name &&
             "duplicate backend name");
  }
  for (const PriorityRule &rule : rules)
    for (const std::string &name : rule.order)
      assert(find(name) && "priority list names an unknown backend");
#endif
}

BackendRegistry &BackendRegistry::builtin(BackendRole role) {
  static BackendRegistry decode(builtinBackends(), builtinPriorities(),
                                BackendRole::Decode);
  static BackendRegistry prefill(builtinPrefillBackends(),
                                 builtinPrefillPriorities(),
                                 BackendRole::Prefill);
  return role == BackendRole::Prefill ? prefill : decode;
}

const Backend *BackendRegistry::find(llvm::StringRef name) const {
  for (const Backend &backend : allBackends)
    if (backend.name == name)
      return &backend;
  return nullptr;
}

std::vector<const Backend *>
BackendRegistry::priorities(const AttentionConfig &config) const {
  std::vector<const Backend *> order;
  for (const PriorityRule &rule : rules) {
    if (!rule.matches(config))
      continue;
    for (const std::string &name : rule.order)
      if (const Backend *backend = find(name))
        order.push_back(backend);
    break;
  }
  return order;
}

std::string BackendRegistry::noun() const {
  return backendRole == BackendRole::Prefill ? "prefill backend"
                                             : "attention backend";
}

std::string BackendRegistry::validNames() const {
  std::string names;
  for (const Backend &backend : allBackends)
    names += (names.empty() ? "" : ", ") + backend.name;
  return names;
}

llvm::Expected<Selection>
BackendRegistry::select(const AttentionConfig &config,
                        llvm::StringRef choice) const {
  ChoiceSource source = ChoiceSource::Api;
  if (choice.empty()) {
    // Read on every call, not once, so the cache key follows the
    // environment.
    const char *env = std::getenv(backendEnvVar(backendRole));
    choice = env ? env : "";
    source =
        choice.empty() ? ChoiceSource::Priority : ChoiceSource::Environment;
  }

  CacheKey key{config, choice.str(), source};
  std::lock_guard<std::mutex> lock(cacheMutex);
  auto it = cache.find(key);
  if (it != cache.end())
    return it->second;
  llvm::Expected<Selection> selection = selectUncached(config, choice, source);
  if (selection)
    cache.emplace(std::move(key), *selection);
  return selection;
}

llvm::Expected<Selection>
BackendRegistry::selectUncached(const AttentionConfig &config,
                                llvm::StringRef choice,
                                ChoiceSource source) const {
  if (source != ChoiceSource::Priority) {
    const Backend *backend = find(choice);
    if (!backend)
      return error("unknown " + noun() + " '" + choice.str() + "' (" +
                   sourceName(source, backendRole) +
                   "); valid names: " + validNames());
    std::vector<std::string> reasons = backend->validate(config);
    if (!reasons.empty())
      return error(noun() + " " + backend->name + " (" +
                   sourceName(source, backendRole) + ") cannot run " +
                   config.str() + ": " + reasonList(reasons));
    return Selection{backend, {}, source};
  }

  std::vector<Rejection> skipped;
  for (const Backend *backend : priorities(config)) {
    std::vector<std::string> reasons = backend->validate(config);
    if (reasons.empty())
      return Selection{backend, std::move(skipped), source};
    skipped.push_back({backend, std::move(reasons)});
  }
  if (skipped.empty())
    return error("no " + noun() + " is listed for " + config.str());
  return error("no " + noun() + " fits " + config.str() +
               "; reasons: " + rejectionList(skipped));
}

void BackendRegistry::clearCache() {
  std::lock_guard<std::mutex> lock(cacheMutex);
  cache.clear();
}

size_t BackendRegistry::cacheSize() const {
  std::lock_guard<std::mutex> lock(cacheMutex);
  return cache.size();
}

bool BackendRegistry::CacheKey::operator==(const CacheKey &other) const {
  return config == other.config && choice == other.choice &&
         source == other.source;
}

size_t BackendRegistry::CacheKeyHash::operator()(const CacheKey &key) const {
  return llvm::hash_combine(key.config.hash(), key.choice, key.source);
}

} // namespace mla
