//===- AsyncEntryReturn.cpp - The mla-async-entry-return pass -------------===//

#include "mla/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
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

/// Drops the synchronous waits of `block` after which the host reads
/// nothing: not later in the block nor, `readsAfter`, after the op holding
/// it. Recurses into the branches of scf.if (a launch chosen on the host
/// sits in one), which run at most once; not into loops, whose earlier ops
/// run again after a wait in the body.
static void dropWaitsBeforeReturn(Block &block, bool readsAfter) {
  bool hostReadsLater = readsAfter;
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block))) {
    auto wait = dyn_cast<gpu::WaitOp>(op);
    // A wait with a result is itself asynchronous (it only joins tokens);
    // the host blocks only in the synchronous form.
    if (wait && !wait.getAsyncToken()) {
      if (!hostReadsLater)
        wait.erase();
      continue;
    }
    if (isa<scf::IfOp>(op))
      for (Region &region : op.getRegions())
        for (Block &nested : region)
          dropWaitsBeforeReturn(nested, hostReadsLater);
    if (!op.hasTrait<OpTrait::IsTerminator>())
      hostReadsLater = hostReadsLater || readsOnHost(&op);
  }
}

struct AsyncEntryReturn
    : public impl::AsyncEntryReturnBase<AsyncEntryReturn> {
  void runOnOperation() override {
    // From the end backwards: a synchronous wait with no host read after
    // it only delays the return.
    for (Block &block : getOperation().getBody())
      dropWaitsBeforeReturn(block, /*readsAfter=*/false);
  }
};

} // namespace
} // namespace mla
