//===- DriverCompiles.cpp - Linked kernels now, loaded ones later ---------===//

#include "DriverCompiles.h"

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <thread>

using namespace mla::cuda;

namespace mla::gpu {

DriverCompileMode driverCompileMode() {
  static const DriverCompileMode mode = [] {
    const char *value = std::getenv("MLA_DRIVER_COMPILE");
    llvm::StringRef text = value ? value : "";
    if (text == "load")
      return DriverCompileMode::Load;
    if (text == "link")
      return DriverCompileMode::Link;
    if (!text.empty() && text != "tiered")
      std::fprintf(stderr,
                   "mla: MLA_DRIVER_COMPILE=%s is not tiered, load or link; "
                   "using tiered\n",
                   value);
    return DriverCompileMode::Tiered;
  }();
  return mode;
}

LoadedModule ModuleUpgrade::take() {
  std::unique_lock<std::mutex> lock(mutex);
  finished.wait(lock, [&] { return ready.load(); });
  if (taken)
    return {cuda::Module(), "the upgraded module was already taken"};
  taken = true;
  return std::move(result);
}

void ModuleUpgrade::finish(LoadedModule loaded) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    result = std::move(loaded);
    ready.store(true);
  }
  finished.notify_all();
}

/// The module loads of tiered compiles, one after another on a thread of
/// their own (the driver would compile them one at a time anyway), in the
/// order they were queued. At exit the load in flight ends; the others
/// are dropped.
class UpgradeQueue {
public:
  static UpgradeQueue &get() {
    static UpgradeQueue queue;
    return queue;
  }

  std::shared_ptr<ModuleUpgrade> submit(CUdevice device, const char *ptx) {
    auto upgrade = std::make_shared<ModuleUpgrade>();
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (stopping)
        return nullptr;
      jobs.push_back({device, ptx, upgrade});
      if (!worker.joinable())
        worker = std::thread([this] { run(); });
    }
    changed.notify_all();
    return upgrade;
  }

  void waitUntilIdle() {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [&] { return jobs.empty() && !busy; });
  }

  ~UpgradeQueue() {
    std::deque<Job> dropped;
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
      dropped.swap(jobs);
    }
    changed.notify_all();
    if (worker.joinable())
      worker.join();
    for (Job &job : dropped)
      if (auto upgrade = job.upgrade.lock())
        upgrade->finish({cuda::Module(), "the process is exiting"});
  }

private:
  struct Job {
    CUdevice device;
    std::string ptx;
    /// Skipped when nothing holds it any more (its kernel is gone).
    std::weak_ptr<ModuleUpgrade> upgrade;
  };

  void run() {
    std::unique_lock<std::mutex> lock(mutex);
    while (true) {
      changed.wait(lock, [&] { return stopping || !jobs.empty(); });
      if (stopping)
        return;
      Job job = std::move(jobs.front());
      jobs.pop_front();
      busy = true;
      lock.unlock();
      compile(job);
      lock.lock();
      busy = false;
      changed.notify_all();
    }
  }

  /// Loads the job's PTX on its device's primary context, held meanwhile
  /// (the runtime that queued it may release its own hold).
  static void compile(Job &job) {
    std::shared_ptr<ModuleUpgrade> upgrade = job.upgrade.lock();
    if (!upgrade)
      return;
    llvm::Expected<Driver &> driver = Driver::get();
    if (!driver) {
      upgrade->finish({cuda::Module(), llvm::toString(driver.takeError())});
      return;
    }
    CUcontext context = nullptr;
    if (llvm::Error error = driver->check(
            driver->fn.cuDevicePrimaryCtxRetain(&context, job.device),
            "cuDevicePrimaryCtxRetain")) {
      upgrade->finish({cuda::Module(), llvm::toString(std::move(error))});
      return;
    }
    LoadedModule loaded;
    if (llvm::Error error = driver->check(driver->fn.cuCtxSetCurrent(context),
                                          "cuCtxSetCurrent"))
      loaded.error = llvm::toString(std::move(error));
    else if (llvm::Expected<cuda::Module> module =
                 cuda::Module::loadPtx(job.ptx))
      loaded.module = std::move(*module);
    else
      loaded.error = llvm::toString(module.takeError());
    upgrade->finish(std::move(loaded));
    // Unloads the module here, on its context, if its kernel went away.
    upgrade.reset();
    (void)driver->fn.cuDevicePrimaryCtxRelease(job.device);
  }

  std::mutex mutex;
  std::condition_variable changed;
  std::deque<Job> jobs;
  bool busy = false;
  bool stopping = false;
  std::thread worker;
};

/// The upgrade of `ptx`, queued for the current context's device; null
/// when that cannot be told.
static std::shared_ptr<ModuleUpgrade> queueUpgrade(const char *ptx) {
  llvm::Expected<Driver &> driver = Driver::get();
  if (!driver) {
    llvm::consumeError(driver.takeError());
    return nullptr;
  }
  CUdevice device = 0;
  if (driver->fn.cuCtxGetDevice(&device) != CUDA_SUCCESS)
    return nullptr;
  return UpgradeQueue::get().submit(device, ptx);
}

LoadedModule loadPtxModule(const char *ptx) {
  // The driver's default optimization level (ptxas -O3) is the one wanted.
  DriverCompileMode mode = driverCompileMode();
  if (mode != DriverCompileMode::Load) {
    llvm::Expected<cuda::Module> linked = cuda::Module::linkPtx(ptx);
    if (linked) {
      LoadedModule loaded{std::move(*linked), "", true, nullptr};
      if (mode == DriverCompileMode::Tiered)
        loaded.upgrade = queueUpgrade(ptx);
      return loaded;
    }
    // A driver whose linker refuses (an option it does not know, a bad
    // PTX) gets the module load, whose error, if any, is the one told.
    llvm::consumeError(linked.takeError());
  }
  llvm::Expected<cuda::Module> module = cuda::Module::loadPtx(ptx);
  if (!module)
    return {cuda::Module(), llvm::toString(module.takeError())};
  return {std::move(*module), ""};
}

void waitForModuleUpgrades() { UpgradeQueue::get().waitUntilIdle(); }

} // namespace mla::gpu
