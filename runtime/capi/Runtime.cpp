//===- Runtime.cpp - The C API's runtime and device memory ----------------===//

#include "CApi.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

using namespace mla;
using namespace mla::runtime;
using namespace mla::capi;

//===----------------------------------------------------------------------===//
// Runtime
//===----------------------------------------------------------------------===//

extern "C" mla_status_t
mla_runtime_options_default(mla_runtime_options_t *options) {
  return guarded("mla_runtime_options_default", [&](const char *fn) {
    MLA_REQUIRE(options);
    std::memset(options, 0, sizeof(*options));
    options->device = MLA_DEVICE_AUTO;
    options->gpu_ordinal = 0;
    return succeed();
  });
}

extern "C" mla_status_t mla_runtime_create(const mla_runtime_options_t *options,
                                           mla_runtime_t **runtime) {
  return guarded("mla_runtime_create", [&](const char *fn) {
    MLA_REQUIRE(runtime);
    mla_runtime_options_t given;
    mla_runtime_options_default(&given);
    if (options)
      given = *options;

    RuntimeOptions o;
    switch (given.device) {
    case MLA_DEVICE_AUTO:
      o.device = DevicePreference::Auto;
      break;
    case MLA_DEVICE_CPU:
      o.device = DevicePreference::Cpu;
      break;
    case MLA_DEVICE_GPU:
      o.device = DevicePreference::Gpu;
      break;
    default:
      return fail(MLA_ERROR_INVALID_ARGUMENT, fn,
                  "options->device is not an mla_device_preference_t (" +
                      str(static_cast<int64_t>(given.device)) + ")");
    }
    if (given.gpu_ordinal < 0)
      return fail(MLA_ERROR_INVALID_ARGUMENT, fn,
                  "options->gpu_ordinal must be non-negative, got " +
                      str(given.gpu_ordinal));
    o.gpuOrdinal = given.gpu_ordinal;
    o.cache = KernelCache::Config::fromEnvironment();
    if (given.cache_dir && given.cache_dir[0]) {
      o.cache.directory = given.cache_dir;
      const char *disabled = std::getenv("MLA_CACHE_DISABLE");
      o.cache.diskEnabled = !(disabled && std::strcmp(disabled, "1") == 0);
    }
    if (given.disable_disk_cache)
      o.cache.diskEnabled = false;
    if (given.force_recompile)
      o.cache.forceRecompile = true;
    if (given.log) {
      mla_log_fn log = given.log;
      void *user = given.log_user;
      o.log = [log, user](const std::string &line) { log(line.c_str(), user); };
    }

    auto created = Runtime::create(std::move(o));
    if (!created)
      return fail(given.device == MLA_DEVICE_GPU ? MLA_ERROR_NO_DEVICE
                                                 : MLA_ERROR_RUNTIME,
                  fn, created.takeError());
    auto handle = std::make_unique<mla_runtime>();
    handle->runtime = std::move(*created);
    handle->description = handle->runtime->deviceDescription();
    const KernelCache::Config &cache = handle->runtime->kernelCache().config();
    handle->cacheDirectory = cache.diskEnabled ? cache.directory : "";
    *runtime = handle.release();
    return succeed();
  });
}

extern "C" mla_status_t mla_runtime_destroy(mla_runtime_t *runtime) {
  return guarded("mla_runtime_destroy", [&](const char *fn) {
    if (!runtime)
      return succeed();
    size_t allocations;
    {
      std::lock_guard<std::mutex> lock(runtime->mutex);
      allocations = runtime->allocations.size();
    }
    int64_t layers = runtime->layers, kernels = runtime->kernels;
    if (layers || kernels || allocations)
      return fail(MLA_ERROR_INVALID_ARGUMENT, fn,
                  "the runtime still has " + str(layers) + " layer(s), " +
                      str(kernels) + " kernel(s) and " +
                      str(static_cast<int64_t>(allocations)) +
                      " allocation(s) alive; destroy or free them first "
                      "(nothing was released)");
    delete runtime;
    return succeed();
  });
}

extern "C" mla_status_t mla_runtime_device_kind(const mla_runtime_t *runtime,
                                                mla_device_kind_t *kind) {
  return guarded("mla_runtime_device_kind", [&](const char *fn) {
    MLA_REQUIRE(runtime);
    MLA_REQUIRE(kind);
    *kind = runtime->runtime->deviceKind() == DeviceKind::CUDA
                ? MLA_DEVICE_KIND_CUDA
                : MLA_DEVICE_KIND_CPU;
    return succeed();
  });
}

extern "C" mla_status_t
mla_runtime_device_description(const mla_runtime_t *runtime,
                               const char **description) {
  return guarded("mla_runtime_device_description", [&](const char *fn) {
    MLA_REQUIRE(runtime);
    MLA_REQUIRE(description);
    *description = runtime->description.c_str();
    return succeed();
  });
}

extern "C" mla_status_t mla_runtime_parallelism(const mla_runtime_t *runtime,
                                                int64_t *parallelism) {
  return guarded("mla_runtime_parallelism", [&](const char *fn) {
    MLA_REQUIRE(runtime);
    MLA_REQUIRE(parallelism);
    *parallelism = runtime->runtime->parallelism();
    return succeed();
  });
}

extern "C" mla_status_t mla_runtime_cache_dir(const mla_runtime_t *runtime,
                                              const char **directory) {
  return guarded("mla_runtime_cache_dir", [&](const char *fn) {
    MLA_REQUIRE(runtime);
    MLA_REQUIRE(directory);
    *directory = runtime->cacheDirectory.c_str();
    return succeed();
  });
}

extern "C" mla_status_t mla_runtime_cache_stats(const mla_runtime_t *runtime,
                                                mla_cache_stats_t *stats) {
  return guarded("mla_runtime_cache_stats", [&](const char *fn) {
    MLA_REQUIRE(runtime);
    MLA_REQUIRE(stats);
    KernelCacheStats s = runtime->runtime->cacheStats();
    stats->memory_hits = s.memoryHits;
    stats->disk_hits = s.diskHits;
    stats->misses = s.misses;
    stats->compiles = s.compiles;
    stats->corrupt_entries = s.corruptEntries;
    stats->store_failures = s.storeFailures;
    return succeed();
  });
}

//===----------------------------------------------------------------------===//
// Device memory
//===----------------------------------------------------------------------===//

extern "C" mla_status_t mla_runtime_allocate(mla_runtime_t *runtime,
                                             size_t bytes, void **pointer) {
  return guarded("mla_runtime_allocate", [&](const char *fn) {
    MLA_REQUIRE(runtime);
    MLA_REQUIRE(pointer);
    if (bytes == 0) {
      *pointer = nullptr;
      return succeed();
    }
    auto allocation = runtime->runtime->allocate(bytes);
    if (!allocation)
      return fail(MLA_ERROR_OUT_OF_MEMORY, fn,
                  std::to_string(bytes) + " bytes: " +
                      llvm::toString(allocation.takeError()));
    void *data = allocation->data();
    {
      std::lock_guard<std::mutex> lock(runtime->mutex);
      runtime->allocations.emplace(data, std::move(*allocation));
    }
    *pointer = data;
    return succeed();
  });
}

extern "C" mla_status_t mla_runtime_free(mla_runtime_t *runtime,
                                         void *pointer) {
  return guarded("mla_runtime_free", [&](const char *fn) {
    MLA_REQUIRE(runtime);
    if (!pointer)
      return succeed();
    DeviceAllocation released;
    {
      std::lock_guard<std::mutex> lock(runtime->mutex);
      auto found = runtime->allocations.find(pointer);
      if (found == runtime->allocations.end()) {
        char text[32];
        std::snprintf(text, sizeof(text), "%p", pointer);
        return fail(MLA_ERROR_INVALID_ARGUMENT, fn,
                    std::string("pointer ") + text +
                        " was not allocated by this runtime (or was freed "
                        "already)");
      }
      released = std::move(found->second);
      runtime->allocations.erase(found);
    }
    // `released` goes away here, outside the lock.
    return succeed();
  });
}

extern "C" mla_status_t mla_runtime_upload(mla_runtime_t *runtime,
                                           void *device, const void *host,
                                           size_t bytes, void *stream) {
  return guarded("mla_runtime_upload", [&](const char *fn) {
    MLA_REQUIRE(runtime);
    if (bytes) {
      MLA_REQUIRE(device);
      MLA_REQUIRE(host);
    }
    if (llvm::Error error =
            runtime->runtime->upload(device, host, bytes, stream))
      return fail(MLA_ERROR_RUNTIME, fn, std::move(error));
    return succeed();
  });
}

extern "C" mla_status_t mla_runtime_download(mla_runtime_t *runtime,
                                             void *host, const void *device,
                                             size_t bytes, void *stream) {
  return guarded("mla_runtime_download", [&](const char *fn) {
    MLA_REQUIRE(runtime);
    if (bytes) {
      MLA_REQUIRE(host);
      MLA_REQUIRE(device);
    }
    if (llvm::Error error =
            runtime->runtime->download(host, device, bytes, stream))
      return fail(MLA_ERROR_RUNTIME, fn, std::move(error));
    return succeed();
  });
}

extern "C" mla_status_t
mla_runtime_wait_for_kernel_upgrades(mla_runtime_t *runtime) {
  return guarded("mla_runtime_wait_for_kernel_upgrades", [&](const char *fn) {
    MLA_REQUIRE(runtime);
    runtime->runtime->waitForKernelUpgrades();
    return succeed();
  });
}

extern "C" mla_status_t mla_runtime_synchronize(mla_runtime_t *runtime,
                                                void *stream) {
  return guarded("mla_runtime_synchronize", [&](const char *fn) {
    MLA_REQUIRE(runtime);
    if (llvm::Error error = runtime->runtime->synchronize(stream))
      return fail(MLA_ERROR_RUNTIME, fn, std::move(error));
    return succeed();
  });
}
