//===- Options.h - mla-bench's command line ---------------------*- C++ -*-===//
//
// The tool's own options (the only ones --help lists; LLVM's are still
// accepted), read by the suites, the timing and main.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TOOLS_MLABENCH_OPTIONS_H
#define MLA_TOOLS_MLABENCH_OPTIONS_H

#include "llvm/Support/CommandLine.h"

#include <string>

namespace mla::bench {

/// What runs before each timed run so that it reads its inputs from device
/// memory, not from the previous run's L2 lines (a batch-1 decode cache of
/// 32k tokens, 38 MB, would otherwise fit in the H100's 50 MB L2).
enum class L2Flush { Read, Write, None };

extern llvm::cl::OptionCategory benchOptions;
/// decode, prefill, merge, gather, proj, chunked or all.
extern llvm::cl::opt<std::string> suite;
/// A few shapes per suite.
extern llvm::cl::opt<bool> quick;
/// The target chip, "" for the device's.
extern llvm::cl::opt<std::string> chip;
/// The decode and prefill strategies: a list, "both" or "all".
extern llvm::cl::opt<std::string> strategies;
/// Calls timed as CUDA graph replays (else direct calls).
extern llvm::cl::opt<bool> graphs;
/// One decode batch size, head count or context length; 0 for every one.
extern llvm::cl::opt<int> onlyBatch, onlyHeads, onlyContext;
/// The decode schedule's shortest split, 0 for the schedule's own.
extern llvm::cl::opt<int> minSplitTokens;
extern llvm::cl::opt<L2Flush> l2Flush;
/// The decode's and the chunked prefill's latent cache format (bf16,
/// fp8_e4m3 or fp8_e5m2), read through cacheDType().
extern llvm::cl::opt<std::string> cacheDTypeName;

} // namespace mla::bench

#endif // MLA_TOOLS_MLABENCH_OPTIONS_H
