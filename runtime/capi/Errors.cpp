//===- Errors.cpp - Status, last error and version of the C API -----------===//

#include "CApi.h"

#include "mla/Runtime/JitObject.h"
#include "mla/Target/GpuTarget.h"

using namespace mla;
using namespace mla::runtime;
using namespace mla::capi;

//===----------------------------------------------------------------------===//
// Status and errors
//===----------------------------------------------------------------------===//

extern "C" const char *mla_status_string(mla_status_t status) {
  switch (status) {
  case MLA_OK:
    return "MLA_OK";
  case MLA_ERROR_INVALID_ARGUMENT:
    return "MLA_ERROR_INVALID_ARGUMENT";
  case MLA_ERROR_NO_DEVICE:
    return "MLA_ERROR_NO_DEVICE";
  case MLA_ERROR_COMPILE:
    return "MLA_ERROR_COMPILE";
  case MLA_ERROR_BACKEND_REJECTED:
    return "MLA_ERROR_BACKEND_REJECTED";
  case MLA_ERROR_INVALID_METADATA:
    return "MLA_ERROR_INVALID_METADATA";
  case MLA_ERROR_RUNTIME:
    return "MLA_ERROR_RUNTIME";
  case MLA_ERROR_OUT_OF_MEMORY:
    return "MLA_ERROR_OUT_OF_MEMORY";
  case MLA_ERROR_INTERNAL:
    return "MLA_ERROR_INTERNAL";
  }
  return "unknown status";
}

extern "C" const char *mla_last_error(void) { return lastErrorText(); }

//===----------------------------------------------------------------------===//
// Version
//===----------------------------------------------------------------------===//

extern "C" mla_status_t mla_version(mla_version_info_t *info) {
  return guarded("mla_version", [&](const char *fn) {
    MLA_REQUIRE(info);
    // Built once, on the first call; function-local statics are
    // initialized thread-safely.
    static const std::string version = std::to_string(MLA_VERSION_MAJOR) +
                                       "." + std::to_string(MLA_VERSION_MINOR) +
                                       "." + std::to_string(MLA_VERSION_PATCH);
    static const std::string chips = GpuTarget::allChips(",");
    info->major = MLA_VERSION_MAJOR;
    info->minor = MLA_VERSION_MINOR;
    info->patch = MLA_VERSION_PATCH;
    info->version = version.c_str();
    info->build_identity = compilerBuildIdentity().c_str();
    info->gpu_chips = chips.c_str();
    info->host_target = hostTargetDescription().c_str();
    return succeed();
  });
}
