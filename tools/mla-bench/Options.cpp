//===- Options.cpp - mla-bench's command line -----------------------------===//

#include "Options.h"

namespace mla::bench {

/// The tool's own options, the only ones --help lists (LLVM's are
/// still accepted).
llvm::cl::OptionCategory benchOptions("mla-bench options");
llvm::cl::opt<std::string> suite(
    "suite", llvm::cl::cat(benchOptions),
    llvm::cl::desc("decode, prefill, merge, gather, proj, chunked or all"),
    llvm::cl::init("all"));
llvm::cl::opt<bool> quick("quick", llvm::cl::cat(benchOptions),
                          llvm::cl::desc("a few shapes per suite"),
                          llvm::cl::init(false));
llvm::cl::opt<std::string>
    chip("chip", llvm::cl::cat(benchOptions),
         llvm::cl::desc("target chip (default: the device's)"),
         llvm::cl::init(""));
llvm::cl::opt<std::string> strategies(
    "strategy", llvm::cl::cat(benchOptions),
    llvm::cl::desc("decode and prefill kernel strategies: a comma-separated "
                   "list of generic, mma-sync and wgmma, or both (generic "
                   "and mma-sync), or all (wgmma too on an sm_90 device)"),
    llvm::cl::init("all"));
llvm::cl::opt<bool> graphs(
    "graphs", llvm::cl::cat(benchOptions),
    llvm::cl::desc("time each call as a CUDA graph replay (device time); "
                   "--graphs=false times direct calls"),
    llvm::cl::init(true));
llvm::cl::opt<int>
    onlyBatch("batch", llvm::cl::cat(benchOptions),
              llvm::cl::desc("decode: run this batch size only (a profiler's "
                             "single shape)"),
              llvm::cl::init(0));
llvm::cl::opt<int>
    onlyHeads("heads", llvm::cl::cat(benchOptions),
              llvm::cl::desc("decode and prefill: run this head count only "
                             "(1 to 128; 0: 16 and 128)"),
              llvm::cl::init(0));
llvm::cl::opt<int>
    onlyContext("context", llvm::cl::cat(benchOptions),
                llvm::cl::desc("decode: run this context length only"),
                llvm::cl::init(0));
llvm::cl::opt<int> minSplitTokens(
    "min-split-tokens", llvm::cl::cat(benchOptions),
    llvm::cl::desc("override the decode schedule's shortest split (tokens)"),
    llvm::cl::init(0));

llvm::cl::opt<L2Flush> l2Flush(
    "l2-flush", llvm::cl::cat(benchOptions),
    llvm::cl::desc("what runs before each timed run to take its inputs out "
                   "of the L2 cache"),
    llvm::cl::values(
        clEnumValN(L2Flush::Read, "read",
                   "a decode over a 302 MB cache of its own: reads evict the "
                   "inputs and leave the L2 clean (the default)"),
        clEnumValN(L2Flush::Write, "write",
                   "a 256 MiB memset: evicts the inputs but leaves the L2 "
                   "full of dirty lines, whose write-back the timed run pays"),
        clEnumValN(L2Flush::None, "none", "nothing: inputs may hit in L2")),
    llvm::cl::init(L2Flush::Read));
llvm::cl::opt<std::string> cacheDTypeName(
    "cache-dtype", llvm::cl::cat(benchOptions),
    llvm::cl::desc("decode and chunked: the latent cache's format, bf16, "
                   "fp8_e4m3 or fp8_e5m2 (FP8 caches take a scale of "
                   "kBenchKvScale)"),
    llvm::cl::init("bf16"));

} // namespace mla::bench
