//===- ContextPool.cpp - MLIR contexts for concurrent compiles ------------===//

#include "mla/Runtime/ContextPool.h"

#include "mla/Builders/KernelBuilders.h"

namespace mla::runtime {

ContextPool::~ContextPool() {
  // The contexts go before the thread pool their passes ran on.
  idle.clear();
}

ContextPool::Lease::Lease(ContextPool &pool) : pool(pool) {
  {
    std::lock_guard<std::mutex> lock(pool.mutex);
    if (!pool.idle.empty()) {
      held = std::move(pool.idle.back());
      pool.idle.pop_back();
      return;
    }
  }
  held = std::make_unique<mlir::MLIRContext>(
      mlir::MLIRContext::Threading::DISABLED);
  held->setThreadPool(pool.threads);
  // Registers the mla dialects and their extensions, and loads every
  // dialect the kernels use.
  loadKernelDialects(*held);
}

ContextPool::Lease::~Lease() {
  std::lock_guard<std::mutex> lock(pool.mutex);
  pool.idle.push_back(std::move(held));
}

} // namespace mla::runtime
