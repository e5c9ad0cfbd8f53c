//===- Kernel.cpp - Single kernels from MLIR source, in C -----------------===//

#include "CApi.h"

using namespace mla;
using namespace mla::runtime;
using namespace mla::capi;

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

extern "C" mla_status_t mla_kernel_compile_source(mla_runtime_t *runtime,
                                                  const char *source,
                                                  const char *entry,
                                                  mla_kernel_t **kernel) {
  return guarded("mla_kernel_compile_source", [&](const char *fn) {
    MLA_REQUIRE(runtime);
    MLA_REQUIRE(source);
    MLA_REQUIRE(entry);
    MLA_REQUIRE(kernel);
    if (!entry[0])
      return fail(MLA_ERROR_INVALID_ARGUMENT, fn, "argument 'entry' is empty");
    auto compiled = runtime->runtime->compileSource(source, entry);
    if (!compiled)
      return fail(MLA_ERROR_COMPILE, fn, compiled.takeError());
    auto handle = std::make_unique<mla_kernel>();
    handle->owner = runtime;
    handle->kernel = std::move(*compiled);
    handle->cacheEntry = handle->kernel->compileEvent().entryName;
    ++runtime->kernels;
    *kernel = handle.release();
    return succeed();
  });
}

extern "C" mla_status_t mla_kernel_destroy(mla_kernel_t *kernel) {
  return guarded("mla_kernel_destroy", [&](const char *) {
    if (!kernel)
      return succeed();
    mla_runtime *owner = kernel->owner;
    delete kernel;
    --owner->kernels;
    return succeed();
  });
}

extern "C" mla_status_t mla_kernel_get_info(const mla_kernel_t *kernel,
                                            mla_kernel_info_t *info) {
  return guarded("mla_kernel_get_info", [&](const char *fn) {
    MLA_REQUIRE(kernel);
    MLA_REQUIRE(info);
    const CompileEvent &event = kernel->kernel->compileEvent();
    info->num_args = static_cast<int32_t>(kernel->kernel->signature().size());
    info->origin = event.outcome == CacheOutcome::DiskHit ? MLA_KERNEL_DISK_CACHE
                   : event.outcome == CacheOutcome::MemoryHit
                       ? MLA_KERNEL_MEMORY_CACHE
                       : MLA_KERNEL_COMPILED;
    info->milliseconds = event.milliseconds;
    info->cache_entry = kernel->cacheEntry.c_str();
    return succeed();
  });
}

extern "C" mla_status_t mla_kernel_argument(const mla_kernel_t *kernel,
                                            int32_t index, mla_tensor_t *spec) {
  return guarded("mla_kernel_argument", [&](const char *fn) {
    MLA_REQUIRE(kernel);
    MLA_REQUIRE(spec);
    const std::vector<ArgumentSpec> &signature = kernel->kernel->signature();
    if (index < 0 || size_t(index) >= signature.size())
      return fail(MLA_ERROR_INVALID_ARGUMENT, fn,
                  "index " + str(index) + " is outside the entry's " +
                      str(static_cast<int64_t>(signature.size())) +
                      " arguments");
    const ArgumentSpec &arg = signature[index];
    if (arg.shape.size() > MLA_MAX_RANK)
      return fail(MLA_ERROR_INVALID_ARGUMENT, fn,
                  "argument " + str(index) + " has rank " +
                      str(static_cast<int64_t>(arg.shape.size())) +
                      ", more than MLA_MAX_RANK");
    mla_tensor_t result;
    std::memset(&result, 0, sizeof(result));
    result.dtype = fromDType(arg.dtype);
    result.rank = static_cast<int32_t>(arg.shape.size());
    for (size_t d = 0; d < arg.shape.size(); ++d)
      result.shape[d] = arg.shape[d];
    *spec = result;
    return succeed();
  });
}

extern "C" mla_status_t mla_kernel_run(const mla_kernel_t *kernel,
                                       const mla_tensor_t *args,
                                       size_t num_args, void *stream) {
  return guarded("mla_kernel_run", [&](const char *fn) {
    MLA_REQUIRE(kernel);
    if (num_args)
      MLA_REQUIRE(args);
    // The kernel checks the tensors against its entry's signature.
    std::vector<BufferView> views(num_args);
    for (size_t i = 0; i < num_args; ++i)
      if (mla_status_t s = toView(fn, "argument " + str(static_cast<int64_t>(i)),
                                  args[i], views[i]))
        return s;
    if (llvm::Error error = kernel->kernel->run(views, stream))
      return failCall(MLA_ERROR_RUNTIME, fn, std::move(error));
    return succeed();
  });
}
