//===- CudaGraph.cpp - Captured stream work and page-locked memory --------===//

#include "mla/Runtime/CudaGraph.h"

#include "llvm/ADT/Twine.h"

#include <utility>

namespace mla::cuda {

//===----------------------------------------------------------------------===//
// PinnedHostBuffer
//===----------------------------------------------------------------------===//

llvm::Expected<PinnedHostBuffer> PinnedHostBuffer::allocate(size_t bytes) {
  llvm::Expected<Driver &> driver = Driver::get();
  if (!driver)
    return driver.takeError();
  void *pointer = nullptr;
  if (llvm::Error err = driver->check(
          driver->fn.cuMemHostAlloc(&pointer, bytes ? bytes : 1, 0),
          "cuMemHostAlloc"))
    return std::move(err);
  return PinnedHostBuffer(&*driver, static_cast<char *>(pointer), bytes);
}

PinnedHostBuffer::PinnedHostBuffer(PinnedHostBuffer &&other) noexcept
    : cudaDriver(other.cudaDriver),
      pointer(std::exchange(other.pointer, nullptr)),
      bytes(std::exchange(other.bytes, 0)) {}

PinnedHostBuffer &
PinnedHostBuffer::operator=(PinnedHostBuffer &&other) noexcept {
  if (this != &other) {
    release();
    cudaDriver = other.cudaDriver;
    pointer = std::exchange(other.pointer, nullptr);
    bytes = std::exchange(other.bytes, 0);
  }
  return *this;
}

PinnedHostBuffer::~PinnedHostBuffer() { release(); }

void PinnedHostBuffer::release() {
  if (pointer)
    (void)cudaDriver->fn.cuMemFreeHost(pointer);
  pointer = nullptr;
  bytes = 0;
}

//===----------------------------------------------------------------------===//
// CapturedGraph
//===----------------------------------------------------------------------===//

llvm::Expected<CapturedGraph>
CapturedGraph::capture(CUstream stream,
                       llvm::function_ref<llvm::Error()> record) {
  llvm::Expected<Driver &> driver = Driver::get();
  if (!driver)
    return driver.takeError();
  if (!stream)
    return llvm::createStringError(
        "a CUDA graph cannot be captured from the legacy default stream: "
        "capture on a stream of its own");
  if (llvm::Error err =
          driver->check(driver->fn.cuStreamBeginCapture(
                            stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                        "cuStreamBeginCapture"))
    return std::move(err);
  llvm::Error recorded = record();
  CUgraph graph = nullptr;
  llvm::Error ended = driver->check(
      driver->fn.cuStreamEndCapture(stream, &graph), "cuStreamEndCapture");
  // A failed capture may still hand back a graph: it is not used.
  CapturedGraph captured(&*driver, graph, nullptr);
  if (recorded) {
    llvm::consumeError(std::move(ended));
    return std::move(recorded);
  }
  if (ended)
    return std::move(ended);
  if (llvm::Error err = driver->check(
          driver->fn.cuGraphInstantiateWithFlags(&captured.exec, graph, 0),
          "cuGraphInstantiateWithFlags"))
    return std::move(err);
  return std::move(captured);
}

CapturedGraph::CapturedGraph(CapturedGraph &&other) noexcept
    : cudaDriver(other.cudaDriver), graph(std::exchange(other.graph, nullptr)),
      exec(std::exchange(other.exec, nullptr)) {}

CapturedGraph &CapturedGraph::operator=(CapturedGraph &&other) noexcept {
  if (this != &other) {
    release();
    cudaDriver = other.cudaDriver;
    graph = std::exchange(other.graph, nullptr);
    exec = std::exchange(other.exec, nullptr);
  }
  return *this;
}

CapturedGraph::~CapturedGraph() { release(); }

void CapturedGraph::release() {
  if (exec)
    (void)cudaDriver->fn.cuGraphExecDestroy(exec);
  if (graph)
    (void)cudaDriver->fn.cuGraphDestroy(graph);
  exec = nullptr;
  graph = nullptr;
}

llvm::Error CapturedGraph::launch(CUstream stream) const {
  if (!exec)
    return llvm::createStringError("use of an empty CapturedGraph");
  return cudaDriver->check(cudaDriver->fn.cuGraphLaunch(exec, stream),
                           "cuGraphLaunch");
}

} // namespace mla::cuda
