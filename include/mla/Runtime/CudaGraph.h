//===- CudaGraph.h - Captured streams, page-locked memory ---*- C++ -*-===//
//
// What replaying a step as a CUDA graph takes from the driver: the graph
// itself, captured from a stream once and launched again and again, and
// page-locked host memory, the only host memory an asynchronous copy reads
// after the call that queued it has returned (the copy of each replay's
// metadata). Both are made in the context current on the calling thread
// and must go before the Device.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_CUDAGRAPH_H
#define MLA_RUNTIME_CUDAGRAPH_H

#include "mla/Runtime/CudaDriver.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"

#include <cstddef>

namespace mla::cuda {

/// Page-locked host memory (cuMemHostAlloc), freed when the buffer goes
/// away. Move-only.
class PinnedHostBuffer {
public:
  /// `bytes` (at least 1) of page-locked memory in the current context.
  static llvm::Expected<PinnedHostBuffer> allocate(size_t bytes);

  PinnedHostBuffer() = default;
  PinnedHostBuffer(PinnedHostBuffer &&other) noexcept;
  PinnedHostBuffer &operator=(PinnedHostBuffer &&other) noexcept;
  PinnedHostBuffer(const PinnedHostBuffer &) = delete;
  PinnedHostBuffer &operator=(const PinnedHostBuffer &) = delete;
  ~PinnedHostBuffer();

  char *data() const { return pointer; }
  size_t size() const { return bytes; }

private:
  PinnedHostBuffer(Driver *driver, char *pointer, size_t bytes)
      : cudaDriver(driver), pointer(pointer), bytes(bytes) {}
  void release();

  Driver *cudaDriver = nullptr;
  char *pointer = nullptr;
  size_t bytes = 0;
};

/// A stream's work captured once and instantiated (a CUDA graph), launched
/// as many times as wanted. Move-only.
class CapturedGraph {
public:
  /// Captures what `record` queues on `stream`, which must not be the legacy
  /// default stream (that one cannot be captured). The capture is
  /// thread-local: a call made during it that a graph cannot hold (a
  /// synchronous copy or allocation, a wait for the stream) fails, and the
  /// capture with it, rather than running outside the graph unnoticed. The
  /// capture is always ended, also when `record` fails; its error then
  /// comes first.
  static llvm::Expected<CapturedGraph>
  capture(CUstream stream, llvm::function_ref<llvm::Error()> record);

  CapturedGraph() = default;
  CapturedGraph(CapturedGraph &&other) noexcept;
  CapturedGraph &operator=(CapturedGraph &&other) noexcept;
  CapturedGraph(const CapturedGraph &) = delete;
  CapturedGraph &operator=(const CapturedGraph &) = delete;
  ~CapturedGraph();

  /// Queues the whole graph on `stream` (any stream, the legacy default one
  /// included), after the work already queued there.
  llvm::Error launch(CUstream stream) const;

private:
  CapturedGraph(Driver *driver, CUgraph graph, CUgraphExec exec)
      : cudaDriver(driver), graph(graph), exec(exec) {}
  void release();

  Driver *cudaDriver = nullptr;
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
};

} // namespace mla::cuda

#endif // MLA_RUNTIME_CUDAGRAPH_H
