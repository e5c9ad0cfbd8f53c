//===- mla-bench.cpp - Benchmarks of the generated GPU kernels ------------===//
//
// Times the mla kernels for DeepSeek shapes on the first CUDA device and
// prints, per shape, time, achieved GB/s and TFLOP/s, and their fractions of
// the copy bandwidth and bf16 matrix rate measured at the start of the run.
//
//===----------------------------------------------------------------------===//

#include "Harness.h"
#include "Options.h"
#include "Report.h"
#include "Suites.h"
#include "Timing.h"

#include "mla/Builders/KernelBuilders.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <tuple>

using namespace mla;
using namespace mla::bench;

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  llvm::cl::HideUnrelatedOptions(benchOptions);
  llvm::cl::ParseCommandLineOptions(argc, argv, "benchmark the mla kernels\n");
  for (auto [option, value] : {std::pair<const char *, int>{"--heads", onlyHeads},
                                {"--batch", onlyBatch},
                                {"--context", onlyContext}})
    if (value < 0) {
      llvm::errs() << "mla-bench: " << option
                   << " must be 0 (every shape) or positive, not " << value
                   << "\n";
      return 2;
    }
  for (auto [option, value, most] :
       {std::tuple<const char *, int, int>{"--heads", onlyHeads, 128},
        {"--batch", onlyBatch, 1024},
        {"--context", onlyContext, 1 << 20}})
    if (value > most) {
      llvm::errs() << "mla-bench: " << option << " is at most " << most
                   << ", not " << value << "\n";
      return 2;
    }
  if (minSplitTokens < 0) {
    llvm::errs() << "mla-bench: --min-split-tokens must be 0 (the schedule's "
                    "default) or positive\n";
    return 2;
  }
  auto opened = cuda::Device::open(0);
  if (!opened)
    fail(opened.takeError(), "mla-bench needs a CUDA device");
  std::unique_ptr<cuda::Device> dev = std::move(*opened);
  device = dev.get();
  // A bad --strategy fails before any measurement.
  chosenStrategies();
  cuda::Stream s = check(cuda::Stream::create(), "creating a stream");
  stream = &s;

  measureCeilings();

  // Threaded, as the runtime's: the compile times printed are the ones an
  // engine sees (a module's kernels lowered and serialized in parallel).
  mlir::MLIRContext ctx(mlir::MLIRContext::Threading::ENABLED);
  loadKernelDialects(ctx);
  std::unique_ptr<ReadFlush> flush;
  if (l2Flush == L2Flush::Read) {
    flush = std::make_unique<ReadFlush>(ctx);
    readFlush = flush.get();
  }
  if (suite == "all" || suite == "decode")
    benchDecode(ctx);
  if (suite == "all" || suite == "prefill")
    benchPrefill(ctx);
  if (suite == "all" || suite == "merge")
    benchMerge(ctx);
  if (suite == "all" || suite == "gather")
    benchGather(ctx);
  if (suite == "all" || suite == "proj")
    benchProjections(ctx);
  if (suite == "all" || suite == "chunked")
    benchChunkedPrefill(ctx);
  return 0;
}
