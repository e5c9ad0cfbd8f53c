//===- KernelAssembly.h - Kernels' PTX to the device's machine code -*- C++
//-*-===//
//
// The GPU pipeline leaves each kernel as PTX in a gpu.binary of its own.
// Before the host code is emitted, the runtime has the driver assemble each
// of them into machine code for the device at hand, the binaries in
// parallel, and the host code then embeds that code: loading it is a copy,
// not a compilation, and the kernel cache keeps it, so a disk-cache hit
// compiles nothing (the driver's own JIT cache is not relied on).
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_GPU_KERNELASSEMBLY_H
#define MLA_RUNTIME_GPU_KERNELASSEMBLY_H

#include "mla/Runtime/CudaDevice.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

namespace mla::gpu {

/// Replaces every PTX object of the module's gpu.binary ops with the cubin
/// the driver assembles from it for `device`. Up to one thread per binary
/// (at most the machine's hardware threads), each with the device's context
/// current. The first failure is returned, naming its module, with the JIT's
/// log; the module is then unchanged.
llvm::Error assembleKernelBinaries(mlir::ModuleOp module,
                                   const cuda::Device &device);

} // namespace mla::gpu

#endif // MLA_RUNTIME_GPU_KERNELASSEMBLY_H
