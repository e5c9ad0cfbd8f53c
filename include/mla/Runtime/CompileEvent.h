//===- CompileEvent.h - Where a compiled module came from -------*- C++ -*-===//
//
// What the runtime reports about each kernel module it compiled or loaded
// (Runtime::compileEvents, Kernel::compileEvent): plain data, no MLIR, so
// that the runtime's public API can hand it out.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_COMPILEEVENT_H
#define MLA_RUNTIME_COMPILEEVENT_H

#include "mla/Runtime/KernelCache.h"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mla {

/// Where one module's artifact came from, for logs and reports.
struct CompileEvent {
  /// The cache entry's readable name (KernelKey::entryName).
  std::string entryName;
  runtime::CacheOutcome outcome = runtime::CacheOutcome::Compiled;
  /// Wall time from the module to a loaded object (for GPU kernels: to
  /// kernels loaded on the device).
  double milliseconds = 0;
  /// Where that time went, in order: "lower" (MLIR pipeline, kernels to
  /// PTX), "host code" (LLVM to an object file) and, with a cache, "cache
  /// write"; or, on a cache hit, "cache read"; then "link" (in memory) and,
  /// for GPU kernels, "load" (the driver compiles their PTX, one module
  /// after another, and loads it).
  std::vector<std::pair<std::string, double>> phases;

  /// One kernel module's compile by the driver, started as soon as its PTX
  /// existed (GPU modules compiled here, not read from a cache).
  struct DriverCompile {
    std::string module;
    /// From the start of the compile, and until the module was loaded
    /// (the driver's module loads compile one at a time, so for those
    /// this includes the wait for the others).
    double startMs = 0, durationMs = 0;
    /// Compiled by the driver's JIT linker (at once with the others, as
    /// relocatable code) rather than by a module load.
    bool linked = false;
  };
  /// In the order the modules were announced.
  std::vector<DriverCompile> driverCompiles;

  /// "lower 812 ms, host code 64 ms, ...": the phases in words.
  std::string describePhases() const;
  /// "decode_attention_combine_3 at 180 + 95 ms linked, ...": the driver's
  /// compiles in words; empty when there were none.
  std::string describeDriverCompiles() const;

  /// "compiled", "memory cache" or "disk cache".
  std::string_view source() const;
};

} // namespace mla

#endif // MLA_RUNTIME_COMPILEEVENT_H
