//===- KernelDispatch.cpp - Which strategy's kernel an op gets ------------===//

#include "KernelDispatch.h"

using namespace mlir;

namespace mla::gpu {

void launchFirstTaking(OpBuilder &host, Location loc, KernelFactory &kernels,
                       ArrayRef<KernelEntry> entries) {
  const KernelEntry &generic = entries.back();
  if (generic.strategy != "generic" || !generic.takes ||
      !generic.vectorOperands.empty())
    llvm::report_fatal_error("launchFirstTaking: a kernel list must end in "
                             "the generic kernel, which takes every op");
  for (const KernelEntry &entry : entries) {
    if (!entry.takes)
      continue;
    if (entry.vectorOperands.empty())
      return entry.launch();
    GpuEmitter h(host, loc);
    return h.ifThenElse(h.vectorAligned(entry.vectorOperands), entry.launch,
                        [&] {
                          KernelFactory::RarelyLaunched rare(kernels);
                          generic.launch();
                        });
  }
  llvm::report_fatal_error("launchFirstTaking: unreachable, the generic "
                           "kernel takes every op");
}

void lowerPrefillAttention(PrefillAttentionOp op, KernelFactory &kernels) {
  OpBuilder host(op);
  const GpuTarget &target = kernels.target();
  launchFirstTaking(
      host, op.getLoc(), kernels,
      {// Hopper, warp-specialized. It copies q, k and v in 16-byte vectors
       // only: an element-by-element path inside the kernel doubled its
       // code and compile time.
       {"wgmma", useWgmmaPrefill(op, target),
        [&] { lowerWgmmaPrefill(op, kernels, host); },
        {op.getQ(), op.getK(), op.getV()}},
       // The mma.sync kernel keeps its element-by-element path: without
       // it ptxas's allocation of its 255 registers spills on sm_90a.
       {"mma-sync", useMmaPrefill(op, target),
        [&] { lowerMmaPrefill(op, kernels, host); }},
       {"generic", true, [&] { lowerGenericPrefill(op, kernels, host); }}});
}

void launchDecodeSplit(DecodeAttentionOp op, KernelFactory &kernels,
                       const DecodeSchedule &schedule, OpBuilder &host,
                       ValueRange splitArgs, Value splits) {
  const GpuTarget &target = kernels.target();
  launchFirstTaking(
      host, op.getLoc(), kernels,
      {// Hopper: 64 head rows of a request share each KV tile, copied in
       // 16-byte vectors or tensor copies only. The generic kernel follows
       // the same schedule and writes the same partials.
       {"wgmma", useWgmmaDecodeSplit(op, target),
        [&] {
          launchWgmmaDecodeSplit(op, kernels, schedule, host, splitArgs,
                                 splits);
        },
        {op.getQ(), op.getKvCache()}},
       // Tensor cores: the head rows of a request share each KV tile.
       {"mma-sync", useMmaDecodeSplit(op, target),
        [&] {
          launchMmaDecodeSplit(op, kernels, schedule, host, splitArgs, splits);
        }},
       {"generic", true, [&] {
          launchGenericDecodeSplit(op, kernels, schedule, host, splitArgs,
                                   splits);
        }}});
}

void lowerProduct(Operation *op, const PerHeadProduct &p,
                  KernelFactory &kernels, StringRef name) {
  OpBuilder host(op);
  const GpuTarget &target = kernels.target();
  launchFirstTaking(
      host, op->getLoc(), kernels,
      {{"wgmma", useWgmmaProduct(p, op, target),
        [&] { lowerWgmmaProduct(p, op, kernels, (name + "_wgmma").str()); }},
       {"mma-sync", useMmaProduct(p, op, target),
        [&] { lowerMmaProduct(p, op, kernels, (name + "_mma").str()); }},
       {"generic", true, [&] { emitCudaCoreProduct(op, p, kernels, name); }}});
}

} // namespace mla::gpu
