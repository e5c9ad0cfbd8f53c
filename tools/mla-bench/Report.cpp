//===- Report.cpp - mla-bench's tables ------------------------------------===//

#include "Report.h"

#include "Ceilings.h"
#include "Harness.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

namespace mla::bench {

using llvm::format;
using llvm::outs;

namespace {
struct Ceilings {
  double copyBytesPerSecond = 0, matmulFlops = 0;
};

Ceilings ceilings;
} // namespace

void measureCeilings() {
  outs() << "device: " << device->name() << " (sm_"
         << device->capability().major << device->capability().minor << ", "
         << device->multiprocessorCount() << " SMs, "
         << device->totalMemoryBytes() / (1 << 30) << " GiB)\n";
  ceilings.copyBytesPerSecond = check(
      measureCopyBandwidth(*stream, size_t(2) << 30), "copy ceiling");
  outs() << format("ceiling: device-to-device copy %.0f GB/s (2 GiB, read + write)\n",
                   ceilings.copyBytesPerSecond / 1e9);
  if (auto rate = measureBf16MatmulRate(*stream, 8192)) {
    ceilings.matmulFlops = *rate;
    outs() << format("ceiling: bf16 matmul %.0f TFLOP/s (cuBLAS, 8192^3)\n",
                     *rate / 1e12);
  } else {
    outs() << "ceiling: bf16 matmul not measured: "
           << llvm::toString(rate.takeError()) << "\n";
  }
}

void printHeader(const char *shape) {
  outs() << format("%-28s %10s %9s %7s %9s %7s\n", shape, "ms", "GB/s",
                   "%copy", "TFLOP/s", "%mm");
}

void printRow(const std::string &shape, double ms, double bytes,
              double flops) {
  double gbs = bytes / (ms * 1e-3) / 1e9;
  double tflops = flops / (ms * 1e-3) / 1e12;
  outs() << format("%-28s %10.3f %9.1f %6.1f%% %9.1f %6.1f%%\n", shape.c_str(),
                   ms, gbs, 100 * gbs * 1e9 / ceilings.copyBytesPerSecond,
                   tflops,
                   ceilings.matmulFlops > 0
                       ? 100 * tflops * 1e12 / ceilings.matmulFlops
                       : 0.0);
  outs().flush();
}

} // namespace mla::bench
