//===- ContextPool.h - MLIR contexts for concurrent compiles ----*- C++ -*-===//
//
// Compiles that run at the same time each need an MLIR context of their
// own: a context's diagnostic handlers and dialect registry belong to
// whoever builds and lowers in it. A pool hands out one context per compile
// running, made on demand (with every dialect the kernels use loaded) and
// kept for the next. All of them run their parallel passes (a module's
// kernels through their device pipelines and LLVM's NVPTX backend) on the
// pool's one thread pool, so concurrent compiles do not multiply threads.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_CONTEXTPOOL_H
#define MLA_RUNTIME_CONTEXTPOOL_H

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/ThreadPool.h"

#include <memory>
#include <mutex>
#include <vector>

namespace mla::runtime {

class ContextPool {
public:
  ContextPool() = default;
  ~ContextPool();
  ContextPool(const ContextPool &) = delete;
  ContextPool &operator=(const ContextPool &) = delete;

  /// A context for one compile, held until the Lease goes away.
  class Lease {
  public:
    explicit Lease(ContextPool &pool);
    ~Lease();
    Lease(const Lease &) = delete;
    Lease &operator=(const Lease &) = delete;
    mlir::MLIRContext &context() { return *held; }

  private:
    ContextPool &pool;
    std::unique_ptr<mlir::MLIRContext> held;
  };

private:
  llvm::DefaultThreadPool threads;
  std::mutex mutex;
  std::vector<std::unique_ptr<mlir::MLIRContext>> idle;
};

} // namespace mla::runtime

#endif // MLA_RUNTIME_CONTEXTPOOL_H
