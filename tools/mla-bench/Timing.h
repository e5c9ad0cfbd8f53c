//===- Timing.h - How mla-bench times a call --------------------*- C++ -*-===//
//
// A call is timed as a CUDA graph replay (or a direct call), after the L2
// flush that --l2-flush chooses, the median of 5 runs after a warm-up.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TOOLS_MLABENCH_TIMING_H
#define MLA_TOOLS_MLABENCH_TIMING_H

#include "Harness.h"

#include "mla/Runtime/GpuKernel.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <vector>

namespace mla::bench {

/// The read flush: a 16-head decode of 128 requests x 2048 tokens (302 MB
/// of cache, 6 times the H100's L2), one split each, on the device's
/// fastest strategy. It writes 2 MB of results, so that the L2 holds
/// clean lines when the timed run starts, as it does in a serving step
/// whose earlier kernels (projections at decode batch sizes) read weights
/// and write little. The write flush is the common benchmark practice;
/// its dirty lines are written back during the timed run, which adds up
/// to 50 MB of DRAM writes to it. The other way round, a timed kernel
/// whose own output fits in L2 ends with those writes still cached after
/// a read flush; the write flush is the conservative figure for it.
class ReadFlush {
public:
  explicit ReadFlush(mlir::MLIRContext &ctx);
  llvm::Error run() const;

private:
  std::unique_ptr<GpuKernel> kernel;
  DecodeOperands operands;
  std::vector<BufferView> args;
};
/// Owned by main, which releases it before the device.
extern ReadFlush *readFlush;

/// Takes the inputs of the next timed run out of the L2, as --l2-flush
/// says.
llvm::Error flushL2();

/// Milliseconds of one call of `kernel` on `args`: with --graphs, the call
/// captured once into a CUDA graph and replayed (device time, as a serving
/// engine replays its decode step), else a direct call (device time plus
/// the host launch path whenever the device waits for it). The L2 cache is
/// flushed before each timed run.
double timeKernel(const GpuKernel &kernel, const std::vector<BufferView> &args);

} // namespace mla::bench

#endif // MLA_TOOLS_MLABENCH_TIMING_H
