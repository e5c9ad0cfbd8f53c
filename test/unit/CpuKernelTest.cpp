//===- CpuKernelTest.cpp - JIT errors and argument checks -----------------===//
//
// Bad modules and bad buffers come back as errors that name the problem.
//
//===----------------------------------------------------------------------===//

#include "TestSupport.h"
#include "mla/Builders/KernelBuilders.h"

#include "mlir/Parser/Parser.h"

using namespace mla;
using namespace mla::test;
using mla::HostTensor;

namespace {

std::unique_ptr<CpuKernel> mergeKernel() {
  auto kernel = CpuKernel::compile(
      buildMergeAttnStates(testContext(), {2, 16, DType::F32, false}),
      kKernelEntry);
  if (!kernel) {
    ADD_FAILURE() << llvm::toString(kernel.takeError());
    return nullptr;
  }
  return std::move(*kernel);
}

std::string runError(const CpuKernel &kernel, std::vector<BufferView> args) {
  llvm::Error error = kernel.run(args);
  return error ? llvm::toString(std::move(error)) : "";
}

TEST(CpuKernel, RejectsWrongArgumentCount) {
  auto kernel = mergeKernel();
  ASSERT_TRUE(kernel);
  HostTensor o(DType::F32, {3, 2, 16});
  EXPECT_NE(runError(*kernel, {o.view()}).find("takes 5 buffers, got 1"),
            std::string::npos);
}

TEST(CpuKernel, RejectsWrongDTypeShapeAndStride) {
  auto kernel = mergeKernel();
  ASSERT_TRUE(kernel);
  HostTensor o(DType::F32, {3, 2, 16}), l(DType::F32, {2, 3});
  HostTensor wrongType(DType::BF16, {3, 2, 16});
  HostTensor wrongHeads(DType::F32, {3, 4, 16});
  EXPECT_NE(runError(*kernel, {wrongType.view(), l.view(), o.view(), l.view(),
                               o.view()})
                .find("expected element type f32"),
            std::string::npos);
  EXPECT_NE(runError(*kernel, {wrongHeads.view(), l.view(), o.view(),
                               l.view(), o.view()})
                .find("dimension 1 must be 2"),
            std::string::npos);
  BufferView strided = o.view();
  strided.strides = {32, 16, 2};
  EXPECT_NE(runError(*kernel, {strided, l.view(), o.view(), l.view(), o.view()})
                .find("stride of dimension 2 must be 1"),
            std::string::npos);
  BufferView nullData = o.view();
  nullData.data = nullptr;
  EXPECT_NE(runError(*kernel, {nullData, l.view(), o.view(), l.view(), o.view()})
                .find("NULL data pointer"),
            std::string::npos);
}

TEST(CpuKernel, InvalidModuleIsAnErrorNotACrash) {
  const char *source = R"mlir(
    func.func @kernel(%q: memref<?x8x192xf32>, %k: memref<?x8x192xf32>,
                      %v: memref<?x8x128xf32>, %cq: memref<?xi32>, %ck: memref<?xi32>,
                      %o: memref<?x8x128xf32>, %l: memref<8x?xf32>) {
      mla.prefill_attention ins(%q, %k, %v, %cq, %ck : memref<?x8x192xf32>, memref<?x8x192xf32>, memref<?x8x128xf32>, memref<?xi32>, memref<?xi32>)
          outs(%o, %l : memref<?x8x128xf32>, memref<8x?xf32>)
          {num_heads = 16 : i64, qk_head_dim = 192 : i64, v_head_dim = 128 : i64, softmax_scale = 0.1 : f32}
      return
    })mlir";
  // The parser verifies too; build it unverified through the generic path
  // by turning verification off, so the JIT's own check is what fails.
  mlir::ParserConfig config(&testContext(), /*verifyAfterParse=*/false);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(source, config);
  ASSERT_TRUE(module);
  auto kernel = CpuKernel::compile(std::move(module), "kernel");
  ASSERT_FALSE(kernel);
  std::string message = llvm::toString(kernel.takeError());
  EXPECT_NE(message.find("not valid"), std::string::npos) << message;
  EXPECT_NE(message.find("num_heads is 16"), std::string::npos) << message;
}

TEST(CpuKernel, MissingEntryIsAnError) {
  auto kernel = CpuKernel::compile(
      buildMergeAttnStates(testContext(), {2, 16, DType::F32, false}),
      "no_such_function");
  ASSERT_FALSE(kernel);
  EXPECT_NE(llvm::toString(kernel.takeError()).find("no func.func named"),
            std::string::npos);
}

} // namespace
