//===- CudaDriver.cpp - The CUDA driver, loaded at run time ---------------===//

#include "mla/Runtime/CudaDriver.h"

#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <dlfcn.h>

namespace mla::cuda {

char CudaError::ID = 0;

void CudaError::log(llvm::raw_ostream &os) const { os << message; }

std::error_code CudaError::convertToErrorCode() const {
  return llvm::inconvertibleErrorCode();
}

/// The library handle, or the loader's reason for not opening it.
static llvm::Expected<void *> openLibrary(llvm::StringRef path) {
  // RTLD_LOCAL: the driver's symbols must not satisfy other libraries'
  // references by accident; everything is reached through dlsym.
  void *handle = dlopen(path.str().c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle)
    return handle;
  const char *reason = dlerror();
  return llvm::createStringError("no CUDA driver: " + path +
                                 " could not be loaded (" +
                                 (reason ? reason : "unknown reason") + ")");
}

/// Points `slot` at `symbol`, or at `fallback` when the library lacks
/// `symbol` and a fallback exists.
template <typename Function>
static llvm::Error resolve(void *handle, llvm::StringRef path, Function *&slot,
                           const char *symbol, const char *fallback) {
  void *address = dlsym(handle, symbol);
  if (!address && fallback)
    address = dlsym(handle, fallback);
  if (!address) {
    std::string names = symbol;
    if (fallback)
      names += std::string(" or ") + fallback;
    return llvm::createStringError("CUDA driver has no symbol " + names +
                                   " (in " + path + ")");
  }
  slot = reinterpret_cast<Function *>(address);
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<Driver>>
Driver::initialize(void *handle, llvm::StringRef libraryPath) {
  std::unique_ptr<Driver> driver(new Driver());
  driver->path = libraryPath.str();

  llvm::Error missing = llvm::Error::success();
  // The first missing symbol is the one reported.
#define MLA_CUDA_SYMBOL_WITH_FALLBACK(name, symbol, fallback, params)         \
  if (!missing)                                                                \
    missing = resolve(handle, libraryPath, driver->fn.name, symbol, fallback);
#define MLA_CUDA_SYMBOL(name, symbol, params)                                  \
  MLA_CUDA_SYMBOL_WITH_FALLBACK(name, symbol, nullptr, params)
#include "mla/Runtime/CudaSymbols.def"
  if (missing) {
    // Not a driver, or one too old: none of its code ran, so it can go.
    dlclose(handle);
    return std::move(missing);
  }

  // From here on the library stays loaded whatever happens: cuInit may have
  // started driver threads even when it fails.
  if (llvm::Error err = driver->check(driver->fn.cuInit(0), "cuInit"))
    return std::move(err);
  if (llvm::Error err = driver->check(
          driver->fn.cuDriverGetVersion(&driver->driverVersion),
          "cuDriverGetVersion"))
    return std::move(err);
  return std::move(driver);
}

llvm::Expected<std::unique_ptr<Driver>>
Driver::load(llvm::StringRef libraryPath) {
  llvm::Expected<void *> handle = openLibrary(libraryPath);
  if (!handle)
    return handle.takeError();
  return initialize(*handle, libraryPath);
}

llvm::Expected<std::unique_ptr<Driver>> Driver::loadDefault() {
  if (const char *override = std::getenv("MLA_CUDA_DRIVER_PATH");
      override && *override)
    return load(override);

  // libcuda.so.1 is what the driver package installs; libcuda.so alone is
  // found in some containers and toolkit-only layouts. When neither opens,
  // the first reason is the one worth reading.
  llvm::Expected<void *> handle = openLibrary("libcuda.so.1");
  if (handle)
    return initialize(*handle, "libcuda.so.1");
  llvm::Expected<void *> secondHandle = openLibrary("libcuda.so");
  if (!secondHandle) {
    llvm::consumeError(secondHandle.takeError());
    return handle.takeError();
  }
  llvm::consumeError(handle.takeError());
  return initialize(*secondHandle, "libcuda.so");
}

namespace {
/// What the first Driver::get() found, replayed by every later call.
struct LoadOutcome {
  std::unique_ptr<Driver> driver;
  std::string error;
  /// The driver's status when the failure was a driver call, else success.
  CUresult result = CUDA_SUCCESS;
};
} // namespace

llvm::Expected<Driver &> Driver::get() {
  // Initialization of a function-local static runs once; concurrent callers
  // wait for it.
  static const LoadOutcome outcome = [] {
    LoadOutcome outcome;
    llvm::Expected<std::unique_ptr<Driver>> driver = loadDefault();
    if (driver) {
      outcome.driver = std::move(*driver);
      return outcome;
    }
    llvm::handleAllErrors(
        driver.takeError(),
        [&](const CudaError &error) {
          outcome.error = error.getMessage();
          outcome.result = error.result();
        },
        [&](const llvm::ErrorInfoBase &error) {
          outcome.error = error.message();
        });
    return outcome;
  }();

  if (outcome.driver)
    return *outcome.driver;
  if (outcome.result != CUDA_SUCCESS)
    return llvm::make_error<CudaError>(outcome.result, outcome.error);
  return llvm::createStringError(outcome.error);
}

std::string Driver::describe(CUresult result) const {
  const char *name = nullptr;
  const char *text = nullptr;
  // Both fail (and leave the strings unset) for codes the driver does not
  // know, e.g. ones newer than it.
  if (fn.cuGetErrorName(result, &name) != CUDA_SUCCESS || !name)
    return "CUDA error " + std::to_string(result);
  if (fn.cuGetErrorString(result, &text) != CUDA_SUCCESS || !text)
    return name;
  return std::string(name) + " (" + text + ")";
}

llvm::Error Driver::check(CUresult result, llvm::StringRef call) const {
  if (result == CUDA_SUCCESS)
    return llvm::Error::success();
  return llvm::make_error<CudaError>(
      result, (call + " failed: " + describe(result)).str());
}

} // namespace mla::cuda
