//===- KernelAssemblyTest.cpp - Kernels assembled into device code --------===//
//
// The GPU pipeline leaves a gpu.binary of PTX per kernel; the runtime has
// the driver assemble each into the device's machine code
// (runtime/gpu/KernelAssembly.h). Needs a CUDA device; skipped without one.
//
//===----------------------------------------------------------------------===//

#include "KernelAssembly.h"
#include "TestSupport.h"

#include "mla/Builders/KernelBuilders.h"
#include "mla/Pipelines/Pipelines.h"
#include "mla/Runtime/CudaDevice.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

using namespace mla;
using namespace mla::test;

namespace {

std::unique_ptr<cuda::Device> openDevice(std::string &why) {
  llvm::Expected<int> count = cuda::deviceCount();
  if (!count) {
    why = llvm::toString(count.takeError());
    return nullptr;
  }
  if (*count == 0) {
    why = "the CUDA driver sees no device";
    return nullptr;
  }
  llvm::Expected<std::unique_ptr<cuda::Device>> device = cuda::Device::open(0);
  if (!device) {
    why = llvm::toString(device.takeError());
    return nullptr;
  }
  return std::move(*device);
}

/// A decode module lowered for `device`: a gpu.binary of PTX per kernel.
mlir::OwningOpRef<mlir::ModuleOp> lowerDecode(const cuda::Device &device) {
  MlaDims dims;
  dims.numHeads = 16;
  auto module = buildDecodeAttention(
      testContext(), {dims, DType::BF16, DType::BF16, 64, true, 0.07f});
  auto target = GpuTarget::forCapability(device.capability().major,
                                         device.capability().minor);
  EXPECT_TRUE(bool(target)) << llvm::toString(target.takeError());
  mlir::PassManager pm(module->getContext());
  buildGpuLoweringPipeline(pm, *target);
  EXPECT_TRUE(mlir::succeeded(pm.run(*module)));
  return module;
}

TEST(CudaKernelAssembly, EveryKernelBecomesLoadableMachineCode) {
  std::string why;
  std::unique_ptr<cuda::Device> device = openDevice(why);
  if (!device)
    GTEST_SKIP() << why;
  auto module = lowerDecode(*device);
  // The split kernel and both combines, each in a binary of its own.
  llvm::SmallVector<mlir::gpu::BinaryOp> binaries(
      module->getOps<mlir::gpu::BinaryOp>());
  ASSERT_EQ(binaries.size(), 3u);

  llvm::Error error = gpu::assembleKernelBinaries(*module, *device);
  ASSERT_FALSE(error) << llvm::toString(std::move(error));
  for (mlir::gpu::BinaryOp binary : binaries) {
    ASSERT_EQ(binary.getObjects().size(), 1u);
    auto object = mlir::cast<mlir::gpu::ObjectAttr>(binary.getObjects()[0]);
    EXPECT_EQ(object.getFormat(), mlir::gpu::CompilationTarget::Binary);
    std::string cubin = object.getObject().getValue().str();
    ASSERT_GT(cubin.size(), 4u);
    EXPECT_EQ(cubin.substr(0, 4), "\x7f"
                                  "ELF");
    // The kernel is named like its module.
    llvm::Expected<cuda::Module> loaded = cuda::Module::loadImage(cubin.data());
    ASSERT_TRUE(bool(loaded)) << llvm::toString(loaded.takeError());
    llvm::Expected<cuda::CUfunction> kernel =
        loaded->function(binary.getName());
    EXPECT_TRUE(bool(kernel)) << llvm::toString(kernel.takeError());
  }
}

TEST(CudaKernelAssembly, BrokenPtxIsReportedWithItsModuleAndLeftAlone) {
  std::string why;
  std::unique_ptr<cuda::Device> device = openDevice(why);
  if (!device)
    GTEST_SKIP() << why;
  auto module = lowerDecode(*device);
  llvm::SmallVector<mlir::gpu::BinaryOp> binaries(
      module->getOps<mlir::gpu::BinaryOp>());
  ASSERT_FALSE(binaries.empty());
  // The last kernel's PTX gets an instruction that does not exist.
  mlir::gpu::BinaryOp broken = binaries.back();
  auto object = mlir::cast<mlir::gpu::ObjectAttr>(broken.getObjects()[0]);
  std::string ptx = object.getObject().getValue().str();
  size_t body = ptx.rfind("ret;");
  ASSERT_NE(body, std::string::npos);
  ptx.insert(body, "not_an_instruction.u32 %r1;\n");
  mlir::MLIRContext *ctx = module->getContext();
  broken.setObjectsAttr(mlir::ArrayAttr::get(
      ctx, {mlir::gpu::ObjectAttr::get(
               ctx, object.getTarget(), object.getFormat(),
               mlir::StringAttr::get(ctx, ptx), object.getProperties(),
               object.getKernels())}));

  llvm::Error error = gpu::assembleKernelBinaries(*module, *device);
  ASSERT_TRUE(bool(error));
  std::string message = llvm::toString(std::move(error));
  EXPECT_NE(message.find("@" + broken.getName().str()), std::string::npos)
      << message;
  EXPECT_NE(message.find("not_an_instruction"), std::string::npos) << message;
  // Nothing was replaced: every object is still PTX.
  for (mlir::gpu::BinaryOp binary : binaries)
    EXPECT_EQ(
        mlir::cast<mlir::gpu::ObjectAttr>(binary.getObjects()[0]).getFormat(),
        mlir::gpu::CompilationTarget::Assembly);
}

} // namespace
