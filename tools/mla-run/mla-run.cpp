//===- mla-run.cpp - Run one DeepSeek-shaped MLA serving step -------------===//
//
// The main job: builds a mixed batch (decodes over a paged latent cache,
// prefills with cached context), JIT-compiles the mla kernels for the host,
// runs them, checks them against the float64 reference and reports what it
// did and how long each phase took. The work itself lives in the library
// (mla/Workload/ServingStep.h).
//
//===----------------------------------------------------------------------===//

#include "mla/Workload/ServingStep.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>

using namespace llvm;

static cl::opt<int> heads("heads", cl::desc("attention heads on this device"),
                          cl::init(16));
static cl::opt<std::string> dtype("dtype", cl::desc("activations: f32, f16 or bf16"),
                                  cl::init("bf16"));
static cl::opt<std::string> cacheDtype("cache-dtype",
                                       cl::desc("KV cache: f32, f16 or bf16"),
                                       cl::init("bf16"));
static cl::opt<int> blockSize("block-size", cl::desc("tokens per cache page"),
                              cl::init(64));
static cl::list<int> decodeContexts(
    "decode-contexts", cl::CommaSeparated,
    cl::desc("cached tokens of each decode request (default 1500,700,64,2100)"));
static cl::list<int> prefillContexts(
    "prefill-contexts", cl::CommaSeparated,
    cl::desc("cached tokens of each prefill request (default 900,0)"));
static cl::list<int> prefillNew("prefill-new-tokens", cl::CommaSeparated,
                                cl::desc("new tokens of each prefill (default 96,40)"));
static cl::opt<int> workspace(
    "workspace", cl::desc("context-gather workspace rows (0: vLLM's sizing)"),
    cl::init(256));
static cl::opt<unsigned> seed("seed", cl::desc("random seed"), cl::init(1));
static cl::opt<std::string> deviceChoice(
    "device", cl::desc("auto (the GPU if there is one), gpu or cpu"),
    cl::init("auto"));

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv, "run one MLA serving step\n");

  mla::ServingStepConfig config;
  auto act = mla::parseDType(dtype), cache = mla::parseDType(cacheDtype);
  if (!act || !mla::isFloat(*act) || !cache || !mla::isFloat(*cache)) {
    errs() << "mla-run: --dtype and --cache-dtype take f32, f16 or bf16\n";
    return 2;
  }
  if (heads < 1 || heads > 128 || blockSize < 1) {
    errs() << "mla-run: --heads must be 1..128 and --block-size positive\n";
    return 2;
  }
  config.dims.numHeads = heads;
  config.activation = *act;
  config.cache = *cache;
  config.blockSize = blockSize;
  config.workspaceTokens = workspace;
  config.seed = seed;
  if (!decodeContexts.empty())
    config.decodeContexts.assign(decodeContexts.begin(), decodeContexts.end());
  if (!prefillContexts.empty() || !prefillNew.empty()) {
    config.prefillContexts.assign(prefillContexts.begin(), prefillContexts.end());
    config.prefillNewTokens.assign(prefillNew.begin(), prefillNew.end());
  }

  // The GPU when there is one (or when asked for), else the host CPU.
  std::unique_ptr<mla::cuda::Device> gpu;
  std::string where = "host CPU through the LLVM JIT";
  if (deviceChoice != "cpu") {
    auto opened = mla::cuda::Device::open(0);
    if (opened) {
      gpu = std::move(*opened);
      where = gpu->name() + " (kernels JIT-compiled to PTX, host code "
                            "through the LLVM JIT)";
    } else if (deviceChoice == "gpu") {
      errs() << "mla-run: --device=gpu: " << toString(opened.takeError())
             << "\n";
      return 1;
    } else {
      where += " (no GPU: " + toString(opened.takeError()) + ")";
    }
  }

  const mla::MlaDims &d = config.dims;
  outs() << "MLA serving step (DeepSeek-V3 dims: kv_lora_rank " << d.kvLoraRank
         << ", rope " << d.ropeDim << ", qk_nope " << d.qkNopeHeadDim << ", v "
         << d.vHeadDim << "; " << d.numHeads << " heads)\n"
         << "device: " << where << "\n"
         << "activations " << mla::name(config.activation) << ", cache "
         << mla::name(config.cache) << ", page " << config.blockSize
         << " tokens\n";
  outs().flush();

  auto report = mla::runServingStep(config, gpu.get(), [](const std::string &line) {
    outs() << "  ... " << line << "\n";
    outs().flush();
  });
  if (!report) {
    errs() << "mla-run: " << toString(report.takeError()) << "\n";
    return 1;
  }

  outs() << "\n";
  outs() << format("%-18s %12s %12s  %s\n", "phase", "compile ms", "run ms",
                   "what");
  double compile = 0, run = 0;
  for (const auto &phase : report->phases) {
    outs() << format("%-18s %12.1f %12.1f  %s\n", phase.name.c_str(),
                     phase.compileMs, phase.runMs, phase.detail.c_str());
    compile += phase.compileMs;
    run += phase.runMs;
  }
  outs() << format("%-18s %12.1f %12.1f\n", "total", compile, run);
  outs() << format("\ncontext workspace %lld tokens, %lld chunk(s)\n",
                   (long long)report->workspaceTokens,
                   (long long)report->contextChunks);
  outs() << format("check vs float64 reference: prefill rel. L2 %.2e, "
                   "prefill max |dLSE| %.2e, decode rel. L2 %.2e "
                   "(tolerance %.1e): %s\n",
                   report->prefillError, report->prefillLseError,
                   report->decodeError, report->tolerance,
                   report->passed ? "PASS" : "FAIL");
  return report->passed ? 0 : 1;
}
