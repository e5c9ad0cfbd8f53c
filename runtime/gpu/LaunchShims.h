//===- LaunchShims.h - mgpu* entry points of JIT host code ------*- C++ -*-===//
//
// Host code lowered from gpu.launch_func, gpu.alloc and gpu.memcpy calls
// mgpuModuleLoadJIT, mgpuLaunchKernel, mgpuMemAlloc and friends. These are
// their implementations over the run-time-loaded CUDA driver, handed to the
// JIT as a symbol map (no CUDA runtime library is involved). They cannot
// return errors through that ABI, so the first failure of a call is kept in
// the thread's active GpuCall and reported when the call returns; later
// launches of that call are skipped.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_GPU_LAUNCHSHIMS_H
#define MLA_RUNTIME_GPU_LAUNCHSHIMS_H

#include "mla/Runtime/CudaDriver.h"

#include "llvm/ExecutionEngine/Orc/Core.h"
#include "llvm/ExecutionEngine/Orc/Mangling.h"
#include "llvm/Support/Error.h"

#include <string>

namespace mla::gpu {

/// The driver and stream the shims use on this thread while alive.
class GpuCall {
public:
  GpuCall(const cuda::Driver &driver, cuda::CUstream stream);
  ~GpuCall();

  /// The first failure recorded during the call, if any.
  llvm::Error takeError();

  const cuda::Driver &driver;
  cuda::CUstream stream;
  std::string error;
  /// The kernel the launch code looked up last (the one it launches next),
  /// named in launch errors.
  const char *kernel = nullptr;

private:
  GpuCall *previous;
};

/// The mgpu* symbols for ExecutionEngine::registerSymbols.
llvm::orc::SymbolMap launchShimSymbols(llvm::orc::MangleAndInterner interner);

} // namespace mla::gpu

#endif // MLA_RUNTIME_GPU_LAUNCHSHIMS_H
