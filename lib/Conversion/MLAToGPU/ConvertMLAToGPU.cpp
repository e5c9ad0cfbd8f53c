//===- ConvertMLAToGPU.cpp - The convert-mla-to-gpu pass ------------------===//

#include "GpuKernels.h"
#include "mla/Target/GpuTarget.h"
#include "mla/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"

#include <cmath>
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/TypeSwitch.h"

#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"

namespace mla {
#define GEN_PASS_DEF_CONVERTMLATOGPU
#include "mla/Transforms/Passes.h.inc"
} // namespace mla

using namespace mlir;

namespace mla {
namespace {

constexpr const char *kKernelModuleName = "mla_kernels";

/// The module's gpu.module for generated kernels, targeted at `target`.
mlir::gpu::GPUModuleOp kernelModule(ModuleOp module, const GpuTarget &target) {
  if (auto existing =
          module.lookupSymbol<mlir::gpu::GPUModuleOp>(kKernelModuleName))
    return existing;
  OpBuilder b(module.getBodyRegion());
  b.setInsertionPointToEnd(module.getBody());
  auto gpuModule =
      mlir::gpu::GPUModuleOp::create(b, module.getLoc(), kKernelModuleName);
  auto nvvm = NVVM::NVVMTargetAttr::get(
      module.getContext(), kKernelLlvmOptLevel, "nvptx64-nvidia-cuda",
      target.chip(), target.ptxFeature());
  gpuModule.setTargetsAttr(b.getArrayAttr({nvvm}));
  return gpuModule;
}

/// Host allocations in functions that launch kernels hold device data (the
/// scratch of the expanded chunked prefill): allocate them on the device.
void moveAllocationsToDevice(func::FuncOp func) {
  SmallVector<memref::AllocOp> allocs;
  func.walk([&](memref::AllocOp op) { allocs.push_back(op); });
  for (memref::AllocOp alloc : allocs) {
    OpBuilder b(alloc);
    auto device = mlir::gpu::AllocOp::create(
        b, alloc.getLoc(), alloc.getType(), Type(), ValueRange{},
        alloc.getDynamicSizes(), alloc.getSymbolOperands(), false);
    alloc.getMemref().replaceAllUsesWith(device.getMemref());
    alloc.erase();
  }
  SmallVector<memref::DeallocOp> deallocs;
  func.walk([&](memref::DeallocOp op) { deallocs.push_back(op); });
  for (memref::DeallocOp dealloc : deallocs) {
    OpBuilder b(dealloc);
    mlir::gpu::DeallocOp::create(b, dealloc.getLoc(), Type(), ValueRange{},
                                 dealloc.getMemref());
    dealloc.erase();
  }
}

/// Host code may read values that size launches (the expanded chunked
/// prefill reads each chunk's total from the plan). The plan is a device
/// buffer, so each such buffer is copied to the host once, at function
/// entry, and the loads (through the same views) read the copy.
void copyHostLoadsFromDevice(func::FuncOp func) {
  SmallVector<memref::LoadOp> loads;
  func.walk([&](memref::LoadOp op) { loads.push_back(op); });
  llvm::DenseMap<Value, Value> hostCopies;
  Block &entry = func.getBody().front();
  for (memref::LoadOp load : loads) {
    SmallVector<memref::SubViewOp> views;
    Value root = load.getMemref();
    while (auto view = root.getDefiningOp<memref::SubViewOp>()) {
      views.push_back(view);
      root = view.getSource();
    }
    auto arg = dyn_cast<BlockArgument>(root);
    if (!arg || arg.getOwner() != &entry)
      continue; // host memory
    Value &copy = hostCopies[root];
    if (!copy) {
      OpBuilder b = OpBuilder::atBlockBegin(&entry);
      Location loc = load.getLoc();
      auto type = cast<MemRefType>(root.getType());
      SmallVector<Value> sizes;
      for (int64_t d = 0; d < type.getRank(); ++d)
        if (type.isDynamicDim(d))
          sizes.push_back(memref::DimOp::create(b, loc, root, d));
      copy = memref::AllocOp::create(
          b, loc, MemRefType::get(type.getShape(), type.getElementType()),
          sizes);
      mlir::gpu::MemcpyOp::create(b, loc, Type(), ValueRange{}, copy, root);
      b.setInsertionPoint(entry.getTerminator());
      memref::DeallocOp::create(b, loc, copy);
    }
    OpBuilder b(load);
    IRMapping mapping;
    mapping.map(root, copy);
    for (memref::SubViewOp view : llvm::reverse(views))
      b.clone(*view, mapping);
    load.getMemrefMutable().assign(mapping.lookup(load.getMemref()));
  }
}

/// Device code uses the hardware's fma and approximate exp2/log2
/// (GpuEmitter::exp2 and log2: about 2 ulp, subnormals flushed) through
/// NVVM intrinsics: the default lowering of math ops calls libdevice
/// (__nv_fmaf, __nv_expf), which exists only where the CUDA toolkit is
/// installed at compile time.
void useNativeMath(mlir::gpu::GPUModuleOp kernels) {
  SmallVector<Operation *> ops;
  kernels.walk([&](Operation *op) {
    if (isa<math::ExpOp, math::LogOp, math::FmaOp>(op))
      ops.push_back(op);
  });
  for (Operation *op : ops) {
    OpBuilder b(op);
    Location loc = op->getLoc();
    gpu::GpuEmitter e(b, loc);
    Value x = op->getOperand(0);
    auto constant = [&](double c) -> Value {
      return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(c));
    };
    Value result;
    if (isa<math::FmaOp>(op))
      result = LLVM::CallIntrinsicOp::create(b, loc, x.getType(),
                                             b.getStringAttr("llvm.fma.f32"),
                                             op->getOperands())
                   .getResult(0);
    else if (isa<math::ExpOp>(op))
      result = e.exp2(arith::MulFOp::create(b, loc, x, constant(M_LOG2E)));
    else {
      Value ln2 = constant(M_LN2);
      result = arith::MulFOp::create(b, loc, e.log2(x), ln2);
    }
    op->getResult(0).replaceAllUsesWith(result);
    op->erase();
  }
}

struct ConvertMLAToGPU : public impl::ConvertMLAToGPUBase<ConvertMLAToGPU> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<Operation *> work;
    module.walk([&](Operation *op) {
      if (isa<MLADialect>(op->getDialect()))
        work.push_back(op);
    });
    if (work.empty())
      return;
    auto target = GpuTarget::fromAttr(module->getAttr(kTargetAttrName));
    if (!target) {
      emitError(module.getLoc()) << "convert-mla-to-gpu: "
                         << llvm::toString(target.takeError());
      return signalPassFailure();
    }
    for (Operation *op : work) {
      if (isa<ChunkedPrefillOp>(op)) {
        op->emitOpError()
            << "is a composite; run mla-expand-chunked-prefill first";
        return signalPassFailure();
      }
      if (!op->getParentOfType<func::FuncOp>()) {
        op->emitOpError() << "must be nested in a function";
        return signalPassFailure();
      }
    }

    module->setAttr(mlir::gpu::GPUDialect::getContainerModuleAttrName(),
                    UnitAttr::get(&getContext()));
    gpu::KernelFactory kernels(kernelModule(module, *target), *target);
    llvm::SetVector<func::FuncOp> hosts;
    for (Operation *op : work) {
      hosts.insert(op->getParentOfType<func::FuncOp>());
      llvm::TypeSwitch<Operation *>(op)
          .Case([&](PrefillAttentionOp o) {
            gpu::lowerPrefillAttention(o, kernels);
          })
          .Case([&](DecodeAttentionOp o) {
            gpu::lowerDecodeAttention(o, kernels);
          })
          .Case([&](MergeAttnStatesOp o) {
            gpu::lowerMergeAttnStates(o, kernels);
          })
          .Case([&](MergeAttnStatesNOp o) {
            gpu::lowerMergeAttnStatesN(o, kernels);
          })
          .Case([&](GatherCacheOp o) { gpu::lowerGatherCache(o, kernels); })
          .Case([&](ConcatAndCacheOp o) {
            gpu::lowerConcatAndCache(o, kernels);
          })
          .Case([&](KvUpProjOp o) { gpu::lowerKvUpProj(o, kernels); })
          .Case([&](QAbsorbOp o) { gpu::lowerQAbsorb(o, kernels); })
          .Case([&](VUpProjOp o) { gpu::lowerVUpProj(o, kernels); });
      op->erase();
    }
    for (func::FuncOp host : hosts) {
      moveAllocationsToDevice(host);
      copyHostLoadsFromDevice(host);
    }
    useNativeMath(kernels.module());
  }
};

} // namespace
} // namespace mla
