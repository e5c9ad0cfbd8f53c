//===- PreloadedModulesTest.cpp - Modules loaded ahead of the host code ---===//
//
// PreloadedModules (runtime/gpu/PreloadedModules.h) hands each kernel
// module to the driver as soon as the pipeline announces its PTX; the host
// code's constructors then take the loaded modules. Runs on the GPU only.
//
//===----------------------------------------------------------------------===//

#include "PreloadedModules.h"
#include "LaunchShims.h"
#include "GpuTestSupport.h"
#include "TestSupport.h"

#include "mla/Builders/KernelBuilders.h"
#include "mla/Runtime/CompiledModule.h"
#include "mla/Runtime/GpuKernel.h"
#include "mla/Target/KernelLoading.h"

#include "llvm/ExecutionEngine/Orc/Core.h"
#include "llvm/ExecutionEngine/Orc/SelfExecutorProcessControl.h"
#include "llvm/IR/DataLayout.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

using namespace mla;

namespace {

/// Device 0, or a skip saying why there is none.
class PreloadedModulesTest : public ::testing::Test {
protected:
  void SetUp() override {
    llvm::Expected<int> count = cuda::deviceCount();
    if (!count) {
      std::string why = llvm::toString(count.takeError());
      GTEST_SKIP() << why;
    }
    if (*count == 0)
      GTEST_SKIP() << "the CUDA driver sees no device";
    auto opened = cuda::Device::open(0);
    ASSERT_TRUE(bool(opened)) << llvm::toString(opened.takeError());
    device = std::move(*opened);
    ASSERT_FALSE(bool(device->makeCurrent()));
  }

  /// The kernel PTX of a merge module compiled for the device.
  std::vector<std::string> mergeKernelPtx() {
    auto target = GpuTarget::forCapability(device->capability().major,
                                           device->capability().minor);
    EXPECT_TRUE(bool(target)) << llvm::toString(target.takeError());
    if (!target)
      return {};
    std::vector<std::string> announced;
    auto recipe =
        gpuCompileRecipe(*target, [&](llvm::StringRef, llvm::StringRef ptx) {
          announced.push_back(ptx.str());
        });
    mlir::OwningOpRef<mlir::ModuleOp> module =
        buildMergeAttnStates(test::testContext(), {4, 128, DType::BF16, true});
    mlir::PassManager pm(module->getContext());
    recipe.buildPipeline(pm);
    EXPECT_TRUE(succeeded(pm.run(*module)));
    return announced;
  }

  static void loadAll(gpu::PreloadedModules &preloaded,
                      const std::vector<std::string> &ptx) {
    for (size_t i = 0; i < ptx.size(); ++i)
      preloaded.load("module_" + std::to_string(i), ptx[i]);
  }

  std::unique_ptr<cuda::Device> device;
};

TEST_F(PreloadedModulesTest, TakesEachLoadedModuleOnce) {
  std::vector<std::string> ptx = mergeKernelPtx();
  ASSERT_FALSE(ptx.empty());
  gpu::PreloadedModules preloaded(*device, std::chrono::steady_clock::now());
  loadAll(preloaded, ptx);
  for (const std::string &text : ptx) {
    std::optional<gpu::LoadedModule> taken = preloaded.take(text.c_str());
    ASSERT_TRUE(taken.has_value());
    EXPECT_EQ(taken->error, "");
    ASSERT_NE(taken->module.handle(), nullptr);
    // The kernel is there (the entry is the module's name).
    size_t entry = text.find(".entry ");
    ASSERT_NE(entry, std::string::npos);
    std::string name =
        text.substr(entry + 7, text.find('(', entry) - entry - 7);
    auto function = taken->module.function(name);
    EXPECT_TRUE(bool(function)) << llvm::toString(function.takeError());
    // Taken once: a second take finds nothing (the shim would then load
    // the text itself).
    EXPECT_FALSE(preloaded.take(text.c_str()).has_value());
  }
  EXPECT_FALSE(preloaded.take(".version 8.0\n").has_value());

  // Each load is on the timeline, named, in announcement order, ended.
  std::vector<CompileEvent::DriverCompile> timeline = preloaded.timeline();
  ASSERT_EQ(timeline.size(), ptx.size());
  for (size_t i = 0; i < timeline.size(); ++i) {
    EXPECT_EQ(timeline[i].module, "module_" + std::to_string(i));
    EXPECT_GE(timeline[i].startMs, 0);
    EXPECT_GT(timeline[i].durationMs, 0);
  }
}

/// PTX the driver refuses, with its reason in the log.
constexpr const char *kBrokenPtx =
    ".version 8.0\n.target sm_80\n.address_size 64\n"
    ".visible .entry broken() { not_an_instruction; }\n";

TEST_F(PreloadedModulesTest, AFailedLoadIsTakenWithTheDriversLog) {
  gpu::PreloadedModules preloaded(*device, std::chrono::steady_clock::now());
  const char *broken = kBrokenPtx;
  preloaded.load("broken", broken);
  std::optional<gpu::LoadedModule> taken = preloaded.take(broken);
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->module.handle(), nullptr);
  EXPECT_NE(taken->error.find("cuModuleLoadDataEx failed"), std::string::npos)
      << taken->error;
  EXPECT_NE(taken->error.find("not_an_instruction"), std::string::npos)
      << taken->error;
}

TEST_F(PreloadedModulesTest, AModuleMarkedForItsFirstLaunchIsNotPreloaded) {
  gpu::PreloadedModules preloaded(*device, std::chrono::steady_clock::now());
  std::string marked = kLoadAtFirstLaunchLine.str() + kBrokenPtx;
  preloaded.load("marked", marked);
  EXPECT_FALSE(preloaded.take(marked.c_str()).has_value());
  EXPECT_TRUE(preloaded.timeline().empty());
}

TEST_F(PreloadedModulesTest, AModuleThatFailsToLoadIsAnErrorOfTheLaunch) {
  // The launch shims, as the JIT'd host code calls them.
  auto control = llvm::orc::SelfExecutorProcessControl::Create();
  ASSERT_TRUE(bool(control)) << llvm::toString(control.takeError());
  llvm::orc::ExecutionSession session(std::move(*control));
  llvm::DataLayout layout("");
  llvm::orc::MangleAndInterner mangle(session, layout);
  llvm::orc::SymbolMap shims = gpu::launchShimSymbols(mangle);
  auto address = [&](const char *name) {
    return shims.at(mangle(name)).getAddress();
  };
  auto loadJit = address("mgpuModuleLoadJIT").toPtr<void *(*)(void *, int)>();
  auto getFunction =
      address("mgpuModuleGetFunction").toPtr<void *(*)(void *, const char *)>();
  auto unload = address("mgpuModuleUnload").toPtr<void (*)(void *)>();
  auto errorOf = [](gpu::GpuCall &call) {
    return llvm::toString(call.takeError());
  };

  // Marked for its first launch: nothing is compiled until the launch's
  // lookup, which fails naming the kernel with the driver's log; the next
  // launch tries again.
  std::string marked = kLoadAtFirstLaunchLine.str() + kBrokenPtx;
  {
    gpu::GpuCall call(device->driver(), nullptr);
    void *module = loadJit(marked.data(), 0);
    ASSERT_NE(module, nullptr);
    EXPECT_EQ(errorOf(call), "");
    for (int attempt = 0; attempt < 2; ++attempt) {
      EXPECT_EQ(getFunction(module, "broken"), nullptr);
      std::string error = errorOf(call);
      EXPECT_NE(error.find("loading the module of kernel 'broken' at its "
                           "first launch"),
                std::string::npos)
          << error;
      EXPECT_NE(error.find("not_an_instruction"), std::string::npos) << error;
    }
    unload(module);
  }

  // Loaded with the others: the load reports the failure, and a later
  // launch of its kernel is an error too, not a launch silently skipped.
  std::string eager = kBrokenPtx;
  void *module = nullptr;
  {
    gpu::GpuCall call(device->driver(), nullptr);
    module = loadJit(eager.data(), 0);
    EXPECT_NE(errorOf(call).find("not_an_instruction"), std::string::npos);
  }
  {
    gpu::GpuCall call(device->driver(), nullptr);
    EXPECT_EQ(getFunction(module, "broken"), nullptr);
    std::string error = errorOf(call);
    EXPECT_NE(error.find("the module of kernel 'broken' is not loaded"),
              std::string::npos)
        << error;
  }
  unload(module);
  llvm::consumeError(session.endSession());
}

TEST_F(PreloadedModulesTest, ModulesNeverTakenAreUnloadedWithoutWaitingForUse) {
  std::vector<std::string> ptx = mergeKernelPtx();
  ASSERT_FALSE(ptx.empty());
  {
    gpu::PreloadedModules preloaded(*device, std::chrono::steady_clock::now());
    loadAll(preloaded, ptx);
    // Destroyed with every load possibly in flight: it waits for them and
    // unloads what they made.
  }
  // The context is still usable afterwards.
  auto buffer = cuda::DeviceBuffer::allocate(256);
  ASSERT_TRUE(bool(buffer)) << llvm::toString(buffer.takeError());
}

} // namespace

TEST_F(PreloadedModulesTest, ACompileRecordsEachKernelsDriverCompile) {
  auto kernel = GpuKernel::compile(
      buildMergeAttnStates(test::testContext(), {4, 128, DType::BF16, true}),
      kKernelEntry, *device);
  ASSERT_TRUE(bool(kernel)) << llvm::toString(kernel.takeError());
  const CompileEvent &event = (*kernel)->compileEvent();
  // One merge kernel, hence one module, named after it; its load started
  // within the compile and ended before the compile did.
  ASSERT_EQ(event.driverCompiles.size(), 1u) << event.describeDriverCompiles();
  const CompileEvent::DriverCompile &compile = event.driverCompiles.front();
  EXPECT_EQ(compile.module.rfind("merge_attn_states", 0), 0u) << compile.module;
  EXPECT_GE(compile.startMs, 0);
  EXPECT_GT(compile.durationMs, 0);
  EXPECT_LE(compile.startMs + compile.durationMs, event.milliseconds + 1);
  EXPECT_NE(event.describeDriverCompiles().find(compile.module),
            std::string::npos);
}

// Tiered driver compiles (DriverCompiles.h): the compile loads the linked
// code; after the background module load, the next launch switches to it,
// and both compute the same merge.
TEST_F(PreloadedModulesTest, ALinkedKernelSwitchesToItsModuleLoadCode) {
  auto kernel = GpuKernel::compile(
      buildMergeAttnStates(test::testContext(), {4, 32, DType::F32, true}),
      kKernelEntry, *device);
  ASSERT_TRUE(bool(kernel)) << llvm::toString(kernel.takeError());
  const CompileEvent &event = (*kernel)->compileEvent();
  ASSERT_EQ(event.driverCompiles.size(), 1u) << event.describeDriverCompiles();
  EXPECT_EQ(event.driverCompiles.front().linked,
            gpu::driverCompileMode() != gpu::DriverCompileMode::Load)
      << event.describeDriverCompiles();

  HostTensor po(DType::F32, {3, 4, 32}), so(DType::F32, {3, 4, 32});
  HostTensor pl(DType::F32, {4, 3}), sl(DType::F32, {4, 3});
  std::mt19937 random(11);
  for (HostTensor *t : {&po, &so, &pl, &sl})
    t->fillRandom(random);
  auto run = [&] {
    HostTensor out(DType::F32, {3, 4, 32}), outLse(DType::F32, {4, 3});
    out.poison();
    outLse.poison();
    test::DeviceTensor dpo = test::DeviceTensor::of(po),
                       dpl = test::DeviceTensor::of(pl),
                       dso = test::DeviceTensor::of(so),
                       dsl = test::DeviceTensor::of(sl),
                       dout = test::DeviceTensor::of(out),
                       dlse = test::DeviceTensor::of(outLse);
    llvm::Error error = (*kernel)->run(
        {dpo.view, dpl.view, dso.view, dsl.view, dout.view, dlse.view});
    EXPECT_FALSE(bool(error)) << llvm::toString(std::move(error));
    dout.copyTo(out);
    dlse.copyTo(outLse);
    std::vector<double> result = out.toDouble(), lse = outLse.toDouble();
    result.insert(result.end(), lse.begin(), lse.end());
    return result;
  };
  std::vector<double> first = run();
  waitForKernelUpgrades();
  std::vector<double> upgraded = run();
  ASSERT_EQ(first.size(), upgraded.size());
  for (size_t i = 0; i < first.size(); ++i) {
    ASSERT_FALSE(std::isnan(first[i])) << "at " << i;
    // The two compiles may contract differently (fma): equal to rounding.
    EXPECT_NEAR(first[i], upgraded[i], 1e-5 * (1 + std::abs(first[i])))
        << "at " << i;
  }
}
