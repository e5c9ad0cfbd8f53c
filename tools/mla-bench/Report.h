//===- Report.h - mla-bench's tables ----------------------------*- C++ -*-===//
//
// The ceilings of the run, measured on the device at its start, and the
// rows every suite prints: time, achieved GB/s and TFLOP/s, and their
// fractions of the copy bandwidth and the bf16 matrix rate.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TOOLS_MLABENCH_REPORT_H
#define MLA_TOOLS_MLABENCH_REPORT_H

#include <string>

namespace mla::bench {

/// Prints the device and measures and prints the two ceilings (the matrix
/// rate only where cuBLAS is there), which printRow's fractions are of.
void measureCeilings();

/// The header of a table whose rows are `shape`.
void printHeader(const char *shape);

/// A row: `shape`, its time, and the bytes and FLOPs of one call.
void printRow(const std::string &shape, double ms, double bytes,
              double flops);

} // namespace mla::bench

#endif // MLA_TOOLS_MLABENCH_REPORT_H
