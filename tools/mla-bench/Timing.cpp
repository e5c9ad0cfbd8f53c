//===- Timing.cpp - How mla-bench times a call ----------------------------===//

#include "Timing.h"

#include "Ceilings.h"
#include "Options.h"

#include <numeric>

namespace mla::bench {

ReadFlush::ReadFlush(mlir::MLIRContext &ctx) {
  const int64_t heads = 16, batch = 128, context = 2048, page = 64;
  kernel = compile(buildDecodeAttention(ctx, decodeSpec(heads, page)),
                   "the L2 read flush", strategiesOnDevice().back());
  std::vector<int32_t> table(batch * context / page);
  std::iota(table.begin(), table.end(), 0);
  operands = decodeOperands(heads, batch, context, page, table,
                            std::vector<int32_t>(batch, 1), 1);
  args = operands.views();
}

llvm::Error ReadFlush::run() const {
  return kernel->run(args, stream->handle());
}

ReadFlush *readFlush = nullptr;

llvm::Error flushL2() {
  switch (l2Flush) {
  case L2Flush::None:
    return llvm::Error::success();
  case L2Flush::Read:
    return readFlush->run();
  case L2Flush::Write:
    break;
  }
  static cuda::DeviceBuffer scratch =
      check(cuda::DeviceBuffer::allocate(size_t(256) << 20), "L2 flush buffer");
  auto &driver = device->driver();
  return driver.check(driver.fn.cuMemsetD8Async(scratch.ptr(), 0,
                                                scratch.size(),
                                                stream->handle()),
                      "cuMemsetD8Async");
}

double timeKernel(const GpuKernel &kernel, const std::vector<BufferView> &args) {
  auto call = [&]() { return kernel.run(args, stream->handle()); };
  if (!graphs)
    return check(timeOnDevice(*stream, call, 1, 5, flushL2), "timing");
  auto &driver = device->driver();
  check(driver.check(driver.fn.cuStreamBeginCapture(
                         stream->handle(), cuda::CU_STREAM_CAPTURE_MODE_RELAXED),
                     "cuStreamBeginCapture"),
        "capturing");
  llvm::Error captured = call();
  cuda::CUgraph graph = nullptr;
  check(driver.check(driver.fn.cuStreamEndCapture(stream->handle(), &graph),
                     "cuStreamEndCapture"),
        "capturing");
  check(std::move(captured), "capturing the call");
  cuda::CUgraphExec exec = nullptr;
  check(driver.check(driver.fn.cuGraphInstantiateWithFlags(&exec, graph, 0),
                     "cuGraphInstantiateWithFlags"),
        "instantiating");
  double ms = check(timeOnDevice(
                        *stream,
                        [&]() {
                          return driver.check(
                              driver.fn.cuGraphLaunch(exec, stream->handle()),
                              "cuGraphLaunch");
                        },
                        1, 5, flushL2),
                    "timing");
  driver.fn.cuGraphExecDestroy(exec);
  driver.fn.cuGraphDestroy(graph);
  return ms;
}

} // namespace mla::bench
