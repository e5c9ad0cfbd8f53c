//===- ConvertMLAToLoops.cpp - The convert-mla-to-loops pass --------------===//

#include "Lowerings.h"
#include "mla/Transforms/Passes.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mla {
#define GEN_PASS_DEF_CONVERTMLATOLOOPS
#include "mla/Transforms/Passes.h.inc"
} // namespace mla

using namespace mlir;

namespace mla {
namespace {

struct ConvertMLAToLoops
    : public impl::ConvertMLAToLoopsBase<ConvertMLAToLoops> {
  using Base::Base;

  void runOnOperation() override {
    if (vectorWidth < 1 || keyBlock < 1) {
      getOperation()->emitError()
          << "convert-mla-to-loops: vector-width and key-block must be "
             "positive, got "
          << static_cast<int64_t>(vectorWidth) << " and "
          << static_cast<int64_t>(keyBlock);
      return signalPassFailure();
    }
    loops::LoweringOptions options{vectorWidth, keyBlock};

    SmallVector<Operation *> work;
    getOperation()->walk([&](Operation *op) {
      if (isa<MLADialect>(op->getDialect()))
        work.push_back(op);
    });
    for (Operation *op : work)
      if (failed(lower(op, options)))
        return signalPassFailure();
  }

  LogicalResult lower(Operation *op, const loops::LoweringOptions &options) {
    if (isa<ChunkedPrefillOp>(op))
      return op->emitOpError()
             << "is a composite; run mla-expand-chunked-prefill first";

    // Scratch buffers are fixed-size stack allocations hoisted to the
    // enclosing function's entry block: made once per call even when the op
    // sits in a loop (scf.for is an allocation scope too, but an alloca in
    // its body would grow the stack on every iteration).
    auto function = op->getParentOfType<FunctionOpInterface>();
    if (!function || function.isExternal())
      return op->emitOpError() << "must be nested in a function";
    OpBuilder b(op);
    loops::KernelEmitter e(b, op->getLoc(), options.vectorWidth,
                           &function.getFunctionBody().front());
    llvm::TypeSwitch<Operation *>(op)
        .Case([&](PrefillAttentionOp o) {
          loops::lowerPrefillAttention(o, e, options);
        })
        .Case([&](DecodeAttentionOp o) {
          loops::lowerDecodeAttention(o, e, options);
        })
        .Case([&](MergeAttnStatesOp o) { loops::lowerMergeAttnStates(o, e); })
        .Case([&](MergeAttnStatesNOp o) { loops::lowerMergeAttnStatesN(o, e); })
        .Case([&](GatherCacheOp o) { loops::lowerGatherCache(o, e); })
        .Case([&](ConcatAndCacheOp o) { loops::lowerConcatAndCache(o, e); })
        .Case([&](KvUpProjOp o) { loops::lowerKvUpProj(o, e); })
        .Case([&](QAbsorbOp o) { loops::lowerQAbsorb(o, e); })
        .Case([&](VUpProjOp o) { loops::lowerVUpProj(o, e); });
    op->erase();
    return success();
  }
};

} // namespace
} // namespace mla
