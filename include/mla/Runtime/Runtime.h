//===- Runtime.h - The runtime a serving engine embeds ----------*- C++ -*-===//
//
// One object per device that a host engine creates once: it owns the device
// (a CUDA GPU, or the host CPU), the kernel cache (memory and disk), and the
// compiled kernels of this process. Everything else asks it for kernels:
//
//   Runtime::create  -> the device (GPU when present, else CPU, or as asked)
//   selectBackend    -> which attention backend runs a configuration (its
//                       decode, or its prefill), and why each one above it
//                       in priority does not
//   compileSource    -> a kernel for a module of mla ops given as text:
//                       from this process's kernels, the disk cache, or the
//                       compiler (modules built in MLIR: RuntimeCompile.h)
//   allocate/upload  -> memory on the runtime's device, for engines and
//                       layers that have none of their own
//
// The MLA attention layer built on it is in MlaLayer.h; the C interface over
// both in mla/mla.h. This header and MlaLayer.h include no MLIR header; the
// compile of modules built in MLIR (for compiler-side users: tools, tests,
// the layer's own kernels) is in RuntimeCompile.h.
//
// Thread safety: every member function may be called from several threads.
// Compiles run concurrently, each in an MLIR context of its own; two
// requests for the same module compile it once.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_RUNTIME_H
#define MLA_RUNTIME_RUNTIME_H

#include "mla/Runtime/ArgumentSpec.h"
#include "mla/Runtime/BackendRegistry.h"
#include "mla/Runtime/BufferView.h"
#include "mla/Runtime/CompileEvent.h"
#include "mla/Runtime/KernelCache.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace mla {
namespace cuda {
class Device;
} // namespace cuda

namespace runtime {

namespace detail {
struct RuntimeAccess;
} // namespace detail

/// Where a runtime runs its kernels.
enum class DevicePreference : uint8_t {
  /// The GPU when one is usable, else the CPU.
  Auto,
  Cpu,
  /// A CUDA GPU; creating the runtime fails without one.
  Gpu,
};

/// A CUDA stream (CUstream) on a GPU runtime; ignored on the CPU, where
/// kernels run on the calling thread. Null is the legacy default stream.
using Stream = void *;

struct RuntimeOptions {
  DevicePreference device = DevicePreference::Auto;
  /// Which GPU, for Auto and Gpu.
  int gpuOrdinal = 0;
  /// The kernel cache's setup; by default from the environment
  /// (MLA_CACHE_DIR, MLA_CACHE_DISABLE, MLA_CACHE_FORCE_RECOMPILE).
  KernelCache::Config cache = KernelCache::Config::fromEnvironment();
  /// Receives one line per event worth a log line: device chosen, backend
  /// selected, kernel compiled or loaded from the cache (with its time).
  /// Empty: events are dropped. It may be called from any thread that
  /// compiles, with the kernel cache's entry lock held: it must not compile
  /// through the same runtime.
  std::function<void(const std::string &)> log;
};

/// A compiled module on the runtime's device.
class Kernel {
public:
  virtual ~Kernel();
  /// Runs the entry on `args` (device memory on a GPU runtime, host memory
  /// on a CPU one). On a GPU the work is queued on `stream` and the call
  /// returns without waiting for it; on the CPU it runs to completion.
  virtual llvm::Error run(const std::vector<BufferView> &args,
                          Stream stream = nullptr) const = 0;
  virtual const std::vector<ArgumentSpec> &signature() const = 0;
  /// How this kernel was obtained when it was first asked for.
  virtual const CompileEvent &compileEvent() const = 0;
};

/// Memory on the runtime's device, released when the object goes away. It
/// refers to its runtime, which must outlive it.
class DeviceAllocation {
public:
  DeviceAllocation() = default;
  DeviceAllocation(DeviceAllocation &&other) noexcept;
  DeviceAllocation &operator=(DeviceAllocation &&other) noexcept;
  DeviceAllocation(const DeviceAllocation &) = delete;
  DeviceAllocation &operator=(const DeviceAllocation &) = delete;
  ~DeviceAllocation();

  void *data() const { return pointer; }
  size_t size() const { return bytes; }

private:
  friend class Runtime;
  const class Runtime *owner = nullptr;
  void *pointer = nullptr;
  size_t bytes = 0;
};

class Runtime {
public:
  /// Opens the device `options` asks for. With Auto, a missing driver or GPU
  /// is not an error: the runtime runs on the CPU and logs why.
  static llvm::Expected<std::unique_ptr<Runtime>>
  create(RuntimeOptions options = {});
  ~Runtime();
  Runtime(const Runtime &) = delete;
  Runtime &operator=(const Runtime &) = delete;

  DeviceKind deviceKind() const;
  /// The GPU, or null on a CPU runtime.
  const cuda::Device *gpu() const;
  /// "NVIDIA H100 80GB HBM3 (sm_90a, 132 SMs)" or "host CPU (<target>)".
  std::string deviceDescription() const;
  /// Streaming multiprocessors of the GPU; the CPU's hardware threads.
  int64_t parallelism() const;
  /// Shared memory of one SM in bytes (0 on the CPU): with a kernel's
  /// per-block use, how many of its blocks an SM holds. Read once from the
  /// device when the runtime is created.
  int64_t sharedMemoryPerSm() const;
  /// Dynamic shared memory one block may use on the GPU's chip (0 on the
  /// CPU): GpuTarget::maxSharedBytesPerBlock.
  int64_t maxSharedBytesPerBlock() const;

  /// `config` with the device fields (kind, capability) of this runtime.
  AttentionConfig onThisDevice(AttentionConfig config) const;
  /// The backend of `role` for `config` (see BackendRegistry::select);
  /// logged ("backend: ...", "prefill backend: ...").
  llvm::Expected<Selection>
  selectBackend(const AttentionConfig &config, llvm::StringRef choice = {},
                BackendRole role = BackendRole::Decode) const;
  /// The registry of the backends of `role`.
  const BackendRegistry &backends(BackendRole role = BackendRole::Decode) const;

  /// A kernel for a module written in MLIR's textual form, entry `entry`:
  /// as compile (RuntimeCompile.h) with a module parsed from `source`.
  llvm::Expected<std::shared_ptr<Kernel>> compileSource(llvm::StringRef source,
                                                        llvm::StringRef entry);

  KernelCache &kernelCache() const;
  /// The kernel cache's counters, with requests answered by a kernel this
  /// runtime already holds counted as memory hits.
  KernelCacheStats cacheStats() const;
  /// Every compile event since the runtime was created, in order.
  std::vector<CompileEvent> compileEvents() const;

  /// `bytes` of device memory (host memory on a CPU runtime), 256-byte
  /// aligned. Zero bytes gives an empty allocation.
  llvm::Expected<DeviceAllocation> allocate(size_t bytes) const;
  /// Copies host memory to the device, ordered on `stream`. Pageable
  /// source memory may be reused as soon as the call returns (the driver
  /// has staged it); page-locked memory is read when the copy runs.
  llvm::Error upload(void *device, const void *host, size_t bytes,
                     Stream stream = nullptr) const;
  /// Copies device memory to the host and waits for it (and for the work
  /// queued before it on `stream`).
  llvm::Error download(void *host, const void *device, size_t bytes,
                       Stream stream = nullptr) const;
  /// Waits for the work queued on `stream`; nothing on the CPU.
  llvm::Error synchronize(Stream stream = nullptr) const;
  /// Waits for the work queued on every stream of the device: what an
  /// object that queued work on its callers' streams waits for before it
  /// frees what that work uses (those streams may be gone by then).
  llvm::Error synchronizeDevice() const;
  /// Waits until the GPU kernels compiled so far run their best code: a
  /// cold compile first gives the driver's linked code, which is ready
  /// sooner but slower, and replaces it in the background
  /// (runtime/gpu/DriverCompiles.h). Graph captures wait by themselves;
  /// benchmarks and engines that want full speed from the first step call
  /// this. Nothing to wait for on the CPU.
  void waitForKernelUpgrades() const;

  /// Sends `line` to the log sink.
  void log(const std::string &line) const;

private:
  friend class DeviceAllocation;
  /// The compile path (RuntimeCompile.h) reaches the state through it.
  friend struct detail::RuntimeAccess;
  struct State;
  explicit Runtime(std::unique_ptr<State> state);
  void release(void *pointer) const;

  std::unique_ptr<State> state;
};

} // namespace runtime
} // namespace mla

#endif // MLA_RUNTIME_RUNTIME_H
