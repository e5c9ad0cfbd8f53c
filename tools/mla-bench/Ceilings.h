//===- Ceilings.h - Device ceilings measured in the same run ----*- C++ -*-===//
//
// The two numbers every benchmark row is compared with, measured on the
// device at hand rather than taken from a datasheet: device-to-device copy
// bandwidth (bytes read plus written) and the bf16 matrix-product rate of
// the vendor library (cuBLAS, loaded at run time when present).
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TOOLS_MLABENCH_CEILINGS_H
#define MLA_TOOLS_MLABENCH_CEILINGS_H

#include "mla/Runtime/CudaDevice.h"

#include "llvm/Support/Error.h"

#include <functional>
#include <string>

namespace mla::bench {

/// Median milliseconds of `work` (enqueued on `stream`) over `repeats`
/// runs after `warmup` runs, timed with device events. `beforeEach`, when
/// given, is enqueued before each timed run, outside the timed region.
llvm::Expected<double>
timeOnDevice(const cuda::Stream &stream,
             const std::function<llvm::Error()> &work, int warmup = 2,
             int repeats = 10,
             const std::function<llvm::Error()> &beforeEach = nullptr);

/// Copy bandwidth in bytes/s over a `bytes`-sized buffer (2 x bytes moved).
llvm::Expected<double> measureCopyBandwidth(const cuda::Stream &stream,
                                            size_t bytes);

/// bf16 GEMM rate in FLOP/s for an n x n x n product through cuBLAS, or an
/// error saying why it could not be measured.
llvm::Expected<double> measureBf16MatmulRate(const cuda::Stream &stream,
                                             int n);

} // namespace mla::bench

#endif // MLA_TOOLS_MLABENCH_CEILINGS_H
