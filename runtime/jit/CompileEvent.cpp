//===- CompileEvent.cpp - Where a compiled module came from ---------------===//

#include "mla/Runtime/CompileEvent.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

namespace mla {

std::string_view CompileEvent::source() const {
  switch (outcome) {
  case runtime::CacheOutcome::MemoryHit:
    return "memory cache";
  case runtime::CacheOutcome::DiskHit:
    return "disk cache";
  case runtime::CacheOutcome::Compiled:
    break;
  }
  return "compiled";
}

std::string CompileEvent::describePhases() const {
  std::string text;
  llvm::raw_string_ostream os(text);
  for (const auto &[phase, ms] : phases)
    os << (text.empty() ? "" : ", ") << phase << llvm::format(" %.0f ms", ms);
  return text;
}

std::string CompileEvent::describeDriverCompiles() const {
  std::string text;
  llvm::raw_string_ostream os(text);
  for (const DriverCompile &compile : driverCompiles)
    os << (text.empty() ? "" : ", ") << compile.module
       << llvm::format(" at %.0f + %.0f ms", compile.startMs,
                       compile.durationMs)
       << (compile.linked ? " linked" : "");
  return text;
}

} // namespace mla
