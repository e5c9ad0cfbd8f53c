//===- KernelAssembly.cpp - Kernels' PTX to the device's machine code -----===//

#include "KernelAssembly.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

#include <algorithm>
#include <atomic>
#include <optional>
#include <thread>
#include <vector>

using namespace mlir;

namespace mla::gpu {

namespace {
/// One PTX object to assemble: where it is, and what became of it.
struct Assembly {
  mlir::gpu::BinaryOp binary;
  unsigned objectIndex;
  mlir::gpu::ObjectAttr object;
  std::string cubin;
  std::optional<std::string> error;
};
} // namespace

llvm::Error assembleKernelBinaries(ModuleOp module,
                                   const cuda::Device &device) {
  std::vector<Assembly> work;
  module.walk([&](mlir::gpu::BinaryOp binary) {
    for (auto [index, attr] : llvm::enumerate(binary.getObjects()))
      if (auto object = dyn_cast<mlir::gpu::ObjectAttr>(attr);
          object &&
          object.getFormat() == mlir::gpu::CompilationTarget::Assembly)
        work.push_back({binary, static_cast<unsigned>(index), object, {}, {}});
  });
  if (work.empty())
    return llvm::Error::success();

  // Workers take the next object until none is left. The driver's JIT runs
  // on the calling thread, so the modules compile at the same time.
  std::atomic<size_t> next{0};
  auto worker = [&] {
    if (llvm::Error error = device.makeCurrent()) {
      std::string message = llvm::toString(std::move(error));
      for (size_t i; (i = next++) < work.size();)
        work[i].error = message;
      return;
    }
    for (size_t i; (i = next++) < work.size();) {
      llvm::Expected<std::string> cubin =
          cuda::assemblePtx(work[i].object.getObject().getValue());
      if (cubin)
        work[i].cubin = std::move(*cubin);
      else
        work[i].error = llvm::toString(cubin.takeError());
    }
  };
  size_t threads = std::min<size_t>(
      work.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> helpers;
  for (size_t t = 1; t < threads; ++t)
    helpers.emplace_back(worker);
  worker();
  for (std::thread &helper : helpers)
    helper.join();

  for (Assembly &a : work)
    if (a.error)
      return llvm::createStringError("assembling the kernels of @" +
                                     a.binary.getName().str() + " for " +
                                     device.name() + ": " + *a.error);

  for (Assembly &a : work) {
    SmallVector<Attribute> objects(a.binary.getObjects().getValue());
    objects[a.objectIndex] = mlir::gpu::ObjectAttr::get(
        module.getContext(), a.object.getTarget(),
        mlir::gpu::CompilationTarget::Binary,
        StringAttr::get(module.getContext(), a.cubin), a.object.getProperties(),
        a.object.getKernels());
    a.binary.setObjectsAttr(ArrayAttr::get(module.getContext(), objects));
  }
  return llvm::Error::success();
}

} // namespace mla::gpu
