//===- AsyncEntryReturn.cpp - The mla-async-entry-return pass -------------===//

#include "mla/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mla {
#define GEN_PASS_DEF_ASYNCENTRYRETURN
#include "mla/Transforms/Passes.h.inc"
} // namespace mla

using namespace mlir;

namespace mla {
namespace {

/// Whether `op` (or anything nested in it) reads memory on the host: a
/// host wait before it must stay. Device-side ops (the gpu dialect's
/// launches, copies and allocations) are ordered by the stream instead.
static bool readsOnHost(Operation *op) {
  bool reads = false;
  op->walk([&](Operation *nested) {
    if (isa<gpu::GPUDialect>(nested->getDialect()))
      return WalkResult::skip();
    auto effects = dyn_cast<MemoryEffectOpInterface>(nested);
    if ((effects && effects.hasEffect<MemoryEffects::Read>()) ||
        (!effects && !nested->hasTrait<OpTrait::HasRecursiveMemoryEffects>() &&
         !isMemoryEffectFree(nested))) {
      reads = true;
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return reads;
}

struct AsyncEntryReturn
    : public impl::AsyncEntryReturnBase<AsyncEntryReturn> {
  void runOnOperation() override {
    for (Block &block : getOperation().getBody()) {
      // From the end backwards: a synchronous wait with no host read after
      // it only delays the return.
      bool hostReadsLater = false;
      for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block))) {
        auto wait = dyn_cast<gpu::WaitOp>(op);
        // A wait with a result is itself asynchronous (it only joins
        // tokens); the host blocks only in the synchronous form.
        if (wait && !wait.getAsyncToken()) {
          if (!hostReadsLater)
            wait.erase();
          continue;
        }
        if (!op.hasTrait<OpTrait::IsTerminator>())
          hostReadsLater = hostReadsLater || readsOnHost(&op);
      }
    }
  }
};

} // namespace
} // namespace mla
