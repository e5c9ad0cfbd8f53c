//===- mla-bench.cpp - Benchmarks of the generated GPU kernels ------------===//
//
// Times the mla kernels for DeepSeek shapes on the first CUDA device and
// prints, per shape, time, achieved GB/s and TFLOP/s, and their fractions of
// the copy bandwidth and bf16 matrix rate measured at the start of the run.
//
//===----------------------------------------------------------------------===//

#include "Ceilings.h"

#include "mla/Builders/KernelBuilders.h"
#include "mla/Runtime/GpuKernel.h"
#include "mla/Runtime/MetadataDecodeSplits.h"
#include "mla/Support/Float16.h"
#include "mla/Target/WgmmaDecodeShape.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <random>
#include <tuple>

using namespace mla;
using llvm::format;
using llvm::outs;

/// The tool's own options, the only ones --help lists (LLVM's are
/// still accepted).
static llvm::cl::OptionCategory benchOptions("mla-bench options");
static llvm::cl::opt<std::string> suite(
    "suite", llvm::cl::cat(benchOptions),
    llvm::cl::desc("decode, prefill, merge, gather, proj, chunked or all"),
    llvm::cl::init("all"));
static llvm::cl::opt<bool> quick("quick", llvm::cl::cat(benchOptions),
                                 llvm::cl::desc("a few shapes per suite"),
                                 llvm::cl::init(false));
static llvm::cl::opt<std::string>
    chip("chip", llvm::cl::cat(benchOptions),
         llvm::cl::desc("target chip (default: the device's)"),
         llvm::cl::init(""));
static llvm::cl::opt<std::string> strategies(
    "strategy", llvm::cl::cat(benchOptions),
    llvm::cl::desc("decode and prefill kernel strategies: a comma-separated "
                   "list of generic, mma-sync and wgmma, or both (generic "
                   "and mma-sync), or all (wgmma too on an sm_90 device)"),
    llvm::cl::init("all"));
static llvm::cl::opt<bool> graphs(
    "graphs", llvm::cl::cat(benchOptions),
    llvm::cl::desc("time each call as a CUDA graph replay (device time); "
                   "--graphs=false times direct calls"),
    llvm::cl::init(true));
static llvm::cl::opt<int>
    onlyBatch("batch", llvm::cl::cat(benchOptions),
              llvm::cl::desc("decode: run this batch size only (a profiler's "
                             "single shape)"),
              llvm::cl::init(0));
static llvm::cl::opt<int>
    onlyHeads("heads", llvm::cl::cat(benchOptions),
              llvm::cl::desc("decode and prefill: run this head count only "
                             "(1 to 128; 0: 16 and 128)"),
              llvm::cl::init(0));
static llvm::cl::opt<int>
    onlyContext("context", llvm::cl::cat(benchOptions),
                llvm::cl::desc("decode: run this context length only"),
                llvm::cl::init(0));
static llvm::cl::opt<int> minSplitTokens(
    "min-split-tokens", llvm::cl::cat(benchOptions),
    llvm::cl::desc("override the decode schedule's shortest split (tokens)"),
    llvm::cl::init(0));

namespace {

struct Ceilings {
  double copyBytesPerSecond = 0, matmulFlops = 0;
};

Ceilings ceilings;
const cuda::Device *device = nullptr;
const cuda::Stream *stream = nullptr;

[[noreturn]] void fail(llvm::Error error, const char *what) {
  llvm::errs() << "mla-bench: " << what << ": "
               << llvm::toString(std::move(error)) << "\n";
  std::exit(1);
}

template <typename T> T check(llvm::Expected<T> value, const char *what) {
  if (!value)
    fail(value.takeError(), what);
  return std::move(*value);
}

void check(llvm::Error error, const char *what) {
  if (error)
    fail(std::move(error), what);
}

/// A device buffer of `count` elements of `dtype` filled with random values
/// in [-1, 1) (floats) or the given host data (integers).
struct Tensor {
  cuda::DeviceBuffer buffer;
  BufferView view;
};

Tensor randomTensor(DType dtype, std::vector<int64_t> shape) {
  int64_t count = 1;
  for (int64_t d : shape)
    count *= d;
  size_t bytes = size_t(count) * byteWidth(dtype);
  Tensor t{check(cuda::DeviceBuffer::allocate(bytes), "allocating"), {}};
  // A 16 MiB random block, repeated: random enough for timing, cheap to
  // make for multi-gigabyte caches.
  static std::vector<uint8_t> block = [] {
    std::vector<uint8_t> b(16 << 20);
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (size_t i = 0; i + 1 < b.size(); i += 2) {
      uint16_t v = floatToBF16(dist(rng));
      std::memcpy(&b[i], &v, 2);
    }
    return b;
  }();
  auto &driver = device->driver();
  for (size_t offset = 0; offset < bytes; offset += block.size()) {
    size_t n = std::min(block.size(), bytes - offset);
    check(driver.check(driver.fn.cuMemcpyHtoD(t.buffer.ptr() + offset,
                                              block.data(), n),
                       "cuMemcpyHtoD"),
          "filling");
  }
  t.view = BufferView::contiguous(reinterpret_cast<void *>(t.buffer.ptr()),
                                  dtype, std::move(shape));
  return t;
}

template <typename T>
Tensor hostTensor(DType dtype, std::vector<int64_t> shape,
                  const std::vector<T> &values) {
  size_t bytes = values.size() * sizeof(T);
  Tensor t{check(cuda::DeviceBuffer::allocate(bytes), "allocating"), {}};
  check(t.buffer.copyFromHost(values.data(), bytes), "copying");
  t.view = BufferView::contiguous(reinterpret_cast<void *>(t.buffer.ptr()),
                                  dtype, std::move(shape));
  return t;
}

std::unique_ptr<GpuKernel>
compile(mlir::OwningOpRef<mlir::ModuleOp> module, const char *what,
        KernelStrategy strategy = KernelStrategy::Generic) {
  GpuTarget target =
      chip.empty() ? check(GpuTarget::forCapability(device->capability().major,
                                                    device->capability().minor),
                           "target")
                   : check(GpuTarget::parse(chip), "--chip");
  target.strategy = strategy;
  auto start = std::chrono::steady_clock::now();
  auto kernel = check(GpuKernel::compile(std::move(module), kKernelEntry,
                                         *device, target),
                      what);
  double ms = std::chrono::duration<double, std::milli>(
                  std::chrono::steady_clock::now() - start)
                  .count();
  // Timed runs measure the kernels' best code, not the driver's quicker
  // linked code that stands in for it at first.
  waitForKernelUpgrades();
  double upgradedMs = std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - start)
                          .count();
  outs() << format("  compiled %s for %s in %.0f ms (%s; best code after "
                   "%.0f ms)\n",
                   what, kernel->target().chip().c_str(), ms,
                   kernel->compileEvent().describePhases().c_str(),
                   upgradedMs);
  if (std::string driver = kernel->compileEvent().describeDriverCompiles();
      !driver.empty())
    outs() << "    driver compiles: " << driver << "\n";
  return kernel;
}

/// The strategies the device runs, slowest first: wgmma needs sm_90a.
std::vector<KernelStrategy> strategiesOnDevice() {
  std::vector<KernelStrategy> all{KernelStrategy::Generic,
                                  KernelStrategy::TensorCore};
  if (device->capability().major == 9 && device->capability().minor == 0)
    all.push_back(KernelStrategy::Warpgroup);
  return all;
}

/// The decode every decode row times: DeepSeek dims, bf16, causal, with
/// the split plan's operands.
DecodeAttentionSpec decodeSpec(int64_t heads, int64_t page) {
  MlaDims dims;
  dims.numHeads = heads;
  DecodeAttentionSpec spec{dims,
                           DType::BF16,
                           DType::BF16,
                           page,
                           /*causal=*/true,
                           1.0f / std::sqrt(192.0f)};
  spec.withSplitPlan = true;
  return spec;
}

/// Operands of decodeSpec's kernel for `batch` requests of `context`
/// tokens each: random q and cache, the block table, the plan's split
/// counts, workspaces of `splits` splits and the outputs.
struct DecodeOperands {
  std::vector<Tensor> tensors;
  std::vector<BufferView> views() const {
    std::vector<BufferView> v;
    for (const Tensor &t : tensors)
      v.push_back(t.view);
    return v;
  }
};
DecodeOperands decodeOperands(int64_t heads, int64_t batch, int64_t context,
                              int64_t page, const std::vector<int32_t> &table,
                              const std::vector<int32_t> &numSplits,
                              int64_t splits) {
  int64_t blocksPerSeq = (context + page - 1) / page;
  DecodeOperands o;
  o.tensors.push_back(randomTensor(DType::BF16, {batch, 1, heads, 576}));
  o.tensors.push_back(
      randomTensor(DType::BF16, {batch * blocksPerSeq, page, 576}));
  o.tensors.push_back(hostTensor(DType::I32, {batch, blocksPerSeq}, table));
  o.tensors.push_back(hostTensor(
      DType::I32, {batch}, std::vector<int32_t>(batch, int32_t(context))));
  o.tensors.push_back(hostTensor(DType::I32, {batch}, numSplits));
  o.tensors.push_back(randomTensor(DType::F32, {batch, 1, heads, splits, 512}));
  o.tensors.push_back(randomTensor(DType::F32, {batch, 1, heads, splits}));
  o.tensors.push_back(randomTensor(DType::BF16, {batch, 1, heads, 512}));
  o.tensors.push_back(randomTensor(DType::F32, {batch, heads, 1}));
  return o;
}

/// What runs before each timed run so that it reads its inputs from device
/// memory, not from the previous run's L2 lines (a batch-1 decode cache of
/// 32k tokens, 38 MB, would otherwise fit in the H100's 50 MB L2).
enum class L2Flush { Read, Write, None };
static llvm::cl::opt<L2Flush> l2Flush(
    "l2-flush", llvm::cl::cat(benchOptions),
    llvm::cl::desc("what runs before each timed run to take its inputs out "
                   "of the L2 cache"),
    llvm::cl::values(
        clEnumValN(L2Flush::Read, "read",
                   "a decode over a 302 MB cache of its own: reads evict the "
                   "inputs and leave the L2 clean (the default)"),
        clEnumValN(L2Flush::Write, "write",
                   "a 256 MiB memset: evicts the inputs but leaves the L2 "
                   "full of dirty lines, whose write-back the timed run pays"),
        clEnumValN(L2Flush::None, "none", "nothing: inputs may hit in L2")),
    llvm::cl::init(L2Flush::Read));

/// The read flush: a 16-head decode of 128 requests x 2048 tokens (302 MB
/// of cache, 6 times the H100's L2), one split each, on the device's
/// fastest strategy. It writes 2 MB of results, so that the L2 holds
/// clean lines when the timed run starts, as it does in a serving step
/// whose earlier kernels (projections at decode batch sizes) read weights
/// and write little. The write flush is the common benchmark practice;
/// its dirty lines are written back during the timed run, which adds up
/// to 50 MB of DRAM writes to it. The other way round, a timed kernel
/// whose own output fits in L2 ends with those writes still cached after
/// a read flush; the write flush is the conservative figure for it.
class ReadFlush {
public:
  explicit ReadFlush(mlir::MLIRContext &ctx) {
    const int64_t heads = 16, batch = 128, context = 2048, page = 64;
    kernel = compile(buildDecodeAttention(ctx, decodeSpec(heads, page)),
                     "the L2 read flush", strategiesOnDevice().back());
    std::vector<int32_t> table(batch * context / page);
    std::iota(table.begin(), table.end(), 0);
    operands = decodeOperands(heads, batch, context, page, table,
                              std::vector<int32_t>(batch, 1), 1);
    args = operands.views();
  }
  llvm::Error run() const { return kernel->run(args, stream->handle()); }

private:
  std::unique_ptr<GpuKernel> kernel;
  DecodeOperands operands;
  std::vector<BufferView> args;
};
/// Owned by main, which releases it before the device.
ReadFlush *readFlush = nullptr;

llvm::Error flushL2() {
  switch (l2Flush) {
  case L2Flush::None:
    return llvm::Error::success();
  case L2Flush::Read:
    return readFlush->run();
  case L2Flush::Write:
    break;
  }
  static cuda::DeviceBuffer scratch =
      check(cuda::DeviceBuffer::allocate(size_t(256) << 20), "L2 flush buffer");
  auto &driver = device->driver();
  return driver.check(driver.fn.cuMemsetD8Async(scratch.ptr(), 0,
                                                scratch.size(),
                                                stream->handle()),
                      "cuMemsetD8Async");
}

/// Milliseconds of one call of `kernel` on `args`: with --graphs, the call
/// captured once into a CUDA graph and replayed (device time, as a serving
/// engine replays its decode step), else a direct call (device time plus
/// the host launch path whenever the device waits for it). The L2 cache is
/// flushed before each timed run.
double timeKernel(const GpuKernel &kernel, const std::vector<BufferView> &args) {
  auto call = [&]() { return kernel.run(args, stream->handle()); };
  if (!graphs)
    return check(bench::timeOnDevice(*stream, call, 1, 5, flushL2), "timing");
  auto &driver = device->driver();
  check(driver.check(driver.fn.cuStreamBeginCapture(
                         stream->handle(), cuda::CU_STREAM_CAPTURE_MODE_RELAXED),
                     "cuStreamBeginCapture"),
        "capturing");
  llvm::Error captured = call();
  cuda::CUgraph graph = nullptr;
  check(driver.check(driver.fn.cuStreamEndCapture(stream->handle(), &graph),
                     "cuStreamEndCapture"),
        "capturing");
  check(std::move(captured), "capturing the call");
  cuda::CUgraphExec exec = nullptr;
  check(driver.check(driver.fn.cuGraphInstantiateWithFlags(&exec, graph, 0),
                     "cuGraphInstantiateWithFlags"),
        "instantiating");
  double ms = check(bench::timeOnDevice(
                        *stream,
                        [&]() {
                          return driver.check(
                              driver.fn.cuGraphLaunch(exec, stream->handle()),
                              "cuGraphLaunch");
                        },
                        1, 5, flushL2),
                    "timing");
  driver.fn.cuGraphExecDestroy(exec);
  driver.fn.cuGraphDestroy(graph);
  return ms;
}

void printHeader(const char *shape) {
  outs() << format("%-28s %10s %9s %7s %9s %7s\n", shape, "ms", "GB/s",
                   "%copy", "TFLOP/s", "%mm");
}

void printRow(const std::string &shape, double ms, double bytes,
              double flops) {
  double gbs = bytes / (ms * 1e-3) / 1e9;
  double tflops = flops / (ms * 1e-3) / 1e12;
  outs() << format("%-28s %10.3f %9.1f %6.1f%% %9.1f %6.1f%%\n", shape.c_str(),
                   ms, gbs, 100 * gbs * 1e9 / ceilings.copyBytesPerSecond,
                   tflops,
                   ceilings.matmulFlops > 0
                       ? 100 * tflops * 1e12 / ceilings.matmulFlops
                       : 0.0);
  outs().flush();
}

/// The head counts --heads chooses.
std::vector<int64_t> headCounts() {
  if (onlyHeads > 0)
    return {onlyHeads};
  return {16, 128};
}

/// The strategies --strategy chooses, or an error naming the bad one.
llvm::Expected<std::vector<KernelStrategy>> parseStrategies() {
  std::string list = strategies;
  if (list == "both")
    list = "generic,mma-sync";
  if (list == "all")
    return strategiesOnDevice();
  llvm::SmallVector<llvm::StringRef> names;
  llvm::StringRef(list).split(names, ',');
  std::vector<KernelStrategy> chosen;
  for (llvm::StringRef n : names) {
    auto strategy = parseStrategy(n.trim());
    if (!strategy)
      return strategy.takeError();
    chosen.push_back(*strategy);
  }
  return chosen;
}

std::vector<KernelStrategy> chosenStrategies() {
  return check(parseStrategies(), "--strategy");
}

void benchDecode(mlir::MLIRContext &ctx) {
  outs() << "\n== decode: DeepSeek dims (576/512), bf16, page 64, Sq 1, "
            "split-KV by the runtime's decode schedule ==\n";
  const int64_t page = 64;
  std::vector<int64_t> batches =
      onlyBatch > 0 ? std::vector<int64_t>{onlyBatch}
      : quick       ? std::vector<int64_t>{1, 64}
                    : std::vector<int64_t>{1, 4, 64, 128};
  // Small batches also run the long contexts (up to 128k) the small-batch
  // target names.
  auto contextsFor = [](int64_t batch) {
    if (onlyContext > 0)
      return std::vector<int64_t>{onlyContext};
    if (quick)
      return std::vector<int64_t>{4096};
    std::vector<int64_t> contexts{1024, 4096, 16384, 32768};
    if (batch <= 4)
      contexts.insert(contexts.end(), {65536, 131072});
    return contexts;
  };
  const int64_t sharedPerSm = check(
      device->attribute(
          cuda::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),
      "shared memory per SM");
  for (KernelStrategy strategy : chosenStrategies())
  for (int64_t heads : headCounts()) {
    if (strategy == KernelStrategy::Warpgroup &&
        heads < wgmma_decode::kMinHeads) {
      outs() << "  decode (" << heads << " heads, wgmma): the mma-sync "
             << "kernel (the wgmma one takes " << wgmma_decode::kMinHeads
             << " heads or more)\n";
      continue;
    }
    DecodeAttentionSpec spec = decodeSpec(heads, page);
    std::string what = "decode (" + std::to_string(heads) + " heads, " +
                       name(strategy) + ")";
    auto kernel =
        compile(buildDecodeAttention(ctx, spec), what.c_str(), strategy);
    printHeader("heads x batch x context /S");
    for (int64_t batch : batches)
      for (int64_t context : contextsFor(batch)) {
        int64_t blocksPerSeq = (context + page - 1) / page;
        int64_t numBlocks = batch * blocksPerSeq;
        std::vector<int32_t> table(numBlocks);
        std::iota(table.begin(), table.end(), 0);
        std::shuffle(table.begin(), table.end(), std::mt19937(3));
        std::vector<int32_t> seqLens(batch, int32_t(context));
        runtime::DecodeKernelShape shape;
        shape.strategy = strategy;
        shape.sameTwoByteTypes = true;
        shape.numHeads = heads;
        shape.kvLoraRank = spec.dims.kvLoraRank;
        shape.ropeDim = spec.dims.ropeDim;
        shape.blockSize = page;
        shape.numSms = device->multiprocessorCount();
        shape.sharedBytesPerSm = sharedPerSm;
        shape.maxSharedBytesPerBlock = kernel->target().maxSharedBytesPerBlock();
        runtime::DecodeSplitConfig schedule = runtime::decodeScheduleFor(shape);
        if (minSplitTokens > 0)
          schedule.minTokensPerSplit = minSplitTokens;
        auto plan = check(runtime::planDecodeSplits(seqLens, schedule),
                          "decode schedule");
        int64_t splits = *std::max_element(plan.numSplits.begin(),
                                           plan.numSplits.end());
        DecodeOperands operands = decodeOperands(heads, batch, context, page,
                                                 table, plan.numSplits, splits);
        double ms = timeKernel(*kernel, operands.views());
        double tokens = double(batch) * context;
        double bytes = (tokens * 576 + batch * heads * 576.0 +
                        batch * heads * 512.0) * 2;
        double flops = 2.0 * tokens * heads * (576 + 512);
        printRow(std::to_string(heads) + " x " + std::to_string(batch) +
                     " x " + std::to_string(context) + " /" +
                     std::to_string(splits),
                 ms, bytes, flops);
      }
  }
}

void benchPrefill(mlir::MLIRContext &ctx) {
  outs() << "\n== prefill: qk 192 / v 128, bf16, one sequence ==\n";
  for (KernelStrategy strategy : chosenStrategies()) {
    // The generic (CUDA-core) kernel takes seconds at 16k tokens: it gets
    // the short shapes only.
    std::vector<int64_t> lengths =
        quick ? std::vector<int64_t>{4096}
        : strategy == KernelStrategy::Generic
            ? std::vector<int64_t>{1024, 4096}
            : std::vector<int64_t>{4096, 8192, 16384};
    for (bool causal : {true, false})
      for (int64_t heads : headCounts()) {
        std::string what = "prefill (" + std::to_string(heads) + " heads, " +
                           (causal ? "causal, " : "non-causal, ") +
                           name(strategy) + ")";
        auto kernel = compile(
            buildPrefillAttention(ctx, {heads, 192, 128, DType::BF16, causal,
                                        1.0f / std::sqrt(192.0f)}),
            what.c_str(), strategy);
        printHeader("heads x tokens");
        for (int64_t tokens : lengths) {
          Tensor q = randomTensor(DType::BF16, {tokens, heads, 192});
          Tensor k = randomTensor(DType::BF16, {tokens, heads, 192});
          Tensor v = randomTensor(DType::BF16, {tokens, heads, 128});
          std::vector<int32_t> cu{0, int32_t(tokens)};
          Tensor cuQ = hostTensor(DType::I32, {2}, cu);
          Tensor cuK = hostTensor(DType::I32, {2}, cu);
          Tensor out = randomTensor(DType::BF16, {tokens, heads, 128});
          Tensor lse = randomTensor(DType::F32, {heads, tokens});
          double ms = timeKernel(*kernel, {q.view, k.view, v.view, cuQ.view,
                                           cuK.view, out.view, lse.view});
          // Query-key pairs computed: the lower triangle with the
          // diagonal when causal.
          double pairs = causal ? double(tokens) * (tokens + 1) / 2
                                : double(tokens) * tokens;
          double flops = 2.0 * heads * (192 + 128) * pairs;
          double bytes = double(tokens) * heads * (192 * 2 + 128 * 2) * 2;
          printRow(std::to_string(heads) + " x " + std::to_string(tokens), ms,
                   bytes, flops);
        }
      }
  }
}

void benchMerge(mlir::MLIRContext &ctx) {
  outs() << "\n== merge_attn_states: bf16, head dim 128, with output LSE ==\n";
  auto kernel = compile(buildMergeAttnStates(ctx, {128, 128, DType::BF16, true}),
                        "merge (128 heads)");
  printHeader("tokens x heads");
  for (int64_t tokens : {4096, 16384}) {
    Tensor po = randomTensor(DType::BF16, {tokens, 128, 128});
    Tensor so = randomTensor(DType::BF16, {tokens, 128, 128});
    Tensor o = randomTensor(DType::BF16, {tokens, 128, 128});
    Tensor pl = randomTensor(DType::F32, {128, tokens});
    Tensor sl = randomTensor(DType::F32, {128, tokens});
    Tensor ol = randomTensor(DType::F32, {128, tokens});
    double ms = timeKernel(*kernel, {po.view, pl.view, so.view, sl.view,
                                     o.view, ol.view});
    double bytes = 3.0 * tokens * 128 * 128 * 2 + 3.0 * 128 * tokens * 4;
    printRow(std::to_string(tokens) + " x 128", ms, bytes, 0);
  }
}

void benchGather(mlir::MLIRContext &ctx) {
  outs() << "\n== gather_cache: 576-wide bf16 entries, page 64 ==\n";
  auto kernel = compile(buildGatherCache(ctx, {576, 64, DType::BF16, DType::BF16}),
                        "gather");
  printHeader("requests x tokens");
  // Many requests (a decode batch's context), and one request's long
  // chunk (the chunked prefill's gather).
  const std::pair<int64_t, int64_t> shapes[] = {
      {64, 1024}, {64, 8192}, {1, 4096}, {1, 32768}};
  for (auto [requests, perRequest] : shapes) {
    int64_t blocks = perRequest / 64;
    std::vector<int32_t> table(requests * blocks);
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), std::mt19937(5));
    Tensor cache = randomTensor(DType::BF16, {requests * blocks, 64, 576});
    Tensor bt = hostTensor(DType::I32, {requests, blocks}, table);
    std::vector<int32_t> cu(requests + 1);
    for (int64_t r = 0; r <= requests; ++r)
      cu[r] = r * perRequest;
    Tensor cuT = hostTensor(DType::I32, {requests + 1}, cu);
    Tensor starts = hostTensor(DType::I32, {requests},
                               std::vector<int32_t>(requests, 0));
    Tensor ws = randomTensor(DType::BF16, {requests * perRequest, 576});
    double ms = timeKernel(*kernel, {cache.view, bt.view, cuT.view,
                                     starts.view, ws.view});
    double bytes = 2.0 * requests * perRequest * 576 * 2;
    printRow(std::to_string(requests) + " x " + std::to_string(perRequest), ms,
             bytes, 0);
  }
}

/// The up-projections of a decode step (the decode query from q_absorb,
/// v_up_proj of its latent output) and of a chunked-context prefill
/// (kv_up_proj of a workspace chunk), per strategy: their kernels are the
/// CUDA-core product (generic) or the tensor-core one (mma-sync, wgmma).
void benchProjections(mlir::MLIRContext &ctx) {
  outs() << "\n== up-projections: DeepSeek dims, bf16 (FLOPs: 2 x tokens x "
            "heads x depth x width; bytes: weights, inputs, outputs once) ==\n";
  const MlaDims base;
  const int64_t latent = base.kvLoraRank, nope = base.qkNopeHeadDim,
                rope = base.ropeDim, vDim = base.vHeadDim;
  struct Case {
    const char *op;
    std::vector<int64_t> tokens;
  };
  std::vector<Case> cases = {
      {"decode query (q_absorb)",
       quick ? std::vector<int64_t>{64} : std::vector<int64_t>{1, 64, 128}},
      {"v_up_proj", quick ? std::vector<int64_t>{64}
                          : std::vector<int64_t>{1, 64, 128, 4096}},
      {"kv_up_proj",
       quick ? std::vector<int64_t>{4096} : std::vector<int64_t>{4096, 16384}}};
  for (KernelStrategy strategy : chosenStrategies())
    for (const Case &c : cases)
      for (int64_t heads : headCounts()) {
        MlaDims dims;
        dims.numHeads = heads;
        ProjectionSpec spec{dims, DType::BF16};
        std::string op = c.op;
        std::string what = op + " (" + std::to_string(heads) + " heads, " +
                           name(strategy) + ")";
        auto module = op == "kv_up_proj"  ? buildKvUpProj(ctx, spec)
                      : op == "v_up_proj" ? buildVUpProj(ctx, spec)
                                          : buildDecodeQuery(ctx, spec);
        auto kernel = compile(std::move(module), what.c_str(), strategy);
        printHeader("heads x tokens");
        for (int64_t t : c.tokens) {
          std::vector<Tensor> tensors;
          double flops = 0, bytes = 0;
          if (op == "kv_up_proj") {
            tensors.push_back(randomTensor(DType::BF16, {t, latent}));
            tensors.push_back(randomTensor(DType::BF16, {t, rope}));
            tensors.push_back(
                randomTensor(DType::BF16, {latent, heads, nope + vDim}));
            tensors.push_back(
                randomTensor(DType::BF16, {t, heads, nope + rope}));
            tensors.push_back(randomTensor(DType::BF16, {t, heads, vDim}));
            flops = 2.0 * t * heads * latent * (nope + vDim);
            bytes =
                2.0 * (latent * heads * (nope + vDim) + t * (latent + rope) +
                       double(t) * heads * (nope + rope + vDim));
          } else if (op == "v_up_proj") {
            tensors.push_back(randomTensor(DType::BF16, {t, heads, latent}));
            tensors.push_back(randomTensor(DType::BF16, {heads, latent, vDim}));
            tensors.push_back(randomTensor(DType::BF16, {t, heads, vDim}));
            flops = 2.0 * t * heads * latent * vDim;
            bytes = 2.0 * (heads * latent * vDim +
                           double(t) * heads * (latent + vDim));
          } else {
            tensors.push_back(
                randomTensor(DType::BF16, {t, heads, nope + rope}));
            tensors.push_back(randomTensor(DType::BF16, {heads, nope, latent}));
            tensors.push_back(
                randomTensor(DType::BF16, {t, heads, latent + rope}));
            flops = 2.0 * t * heads * nope * latent;
            bytes = 2.0 * (heads * nope * latent +
                           double(t) * heads * (nope + rope + latent + rope));
          }
          std::vector<BufferView> args;
          for (const Tensor &tensor : tensors)
            args.push_back(tensor.view);
          double ms = timeKernel(*kernel, args);
          printRow(std::to_string(heads) + " x " + std::to_string(t), ms, bytes,
                   flops);
        }
      }
}

/// The chunked-context prefill (mla.chunked_prefill) of one request: its
/// new tokens' causal attention, then per context chunk a gather, the
/// up-projection of the chunk's latent rows, the attention of the new
/// tokens over them and a merge. Timed as direct calls: the op's host code
/// reads the chunk plan from the device, which a graph cannot capture.
void benchChunkedPrefill(mlir::MLIRContext &ctx) {
  outs() << "\n== chunked prefill: one request, bf16, page 64, 4096-token "
            "chunks (FLOPs: attention 2 x heads x 320 x pairs + "
            "up-projections 2 x tokens x heads x 512 x 256) ==\n";
  const MlaDims base;
  const int64_t page = 64, chunk = 4096, latent = base.kvLoraRank,
                rope = base.ropeDim, entry = latent + rope,
                nopeV = base.qkNopeHeadDim + base.vHeadDim;
  std::vector<std::pair<int64_t, int64_t>> shapes =
      quick ? std::vector<std::pair<int64_t, int64_t>>{{1024, 8192}}
            : std::vector<std::pair<int64_t, int64_t>>{
                  {1024, 8192}, {1024, 32768}, {4096, 16384}};
  for (KernelStrategy strategy : chosenStrategies())
    for (int64_t heads : headCounts()) {
      MlaDims dims;
      dims.numHeads = heads;
      std::string what = "chunked prefill (" + std::to_string(heads) +
                         " heads, " + name(strategy) + ")";
      auto kernel =
          compile(buildChunkedPrefill(ctx, {dims, DType::BF16, DType::BF16,
                                            page, 1.0f / std::sqrt(192.0f)}),
                  what.c_str(), strategy);
      printHeader("heads x new + context");
      for (auto [tokens, context] : shapes) {
        int64_t blocks = context / page, chunks = context / chunk;
        std::vector<int32_t> table(blocks);
        std::iota(table.begin(), table.end(), 0);
        std::shuffle(table.begin(), table.end(), std::mt19937(7));
        std::vector<int32_t> chunkCu, chunkStarts;
        for (int64_t c = 0; c < chunks; ++c) {
          chunkCu.insert(chunkCu.end(), {0, int32_t(chunk)});
          chunkStarts.push_back(int32_t(c * chunk));
        }
        std::vector<int32_t> cuQ{0, int32_t(tokens)};
        Tensor q = randomTensor(DType::BF16, {tokens, heads, 192});
        Tensor kvc = randomTensor(DType::BF16, {tokens, latent});
        Tensor kpe = randomTensor(DType::BF16, {tokens, rope});
        Tensor cuQT = hostTensor(DType::I32, {2}, cuQ);
        Tensor cache = randomTensor(DType::BF16, {blocks, page, entry});
        Tensor bt = hostTensor(DType::I32, {1, blocks}, table);
        Tensor cuC = hostTensor(DType::I32, {chunks, 2}, chunkCu);
        Tensor starts = hostTensor(DType::I32, {chunks, 1}, chunkStarts);
        Tensor w = randomTensor(DType::BF16, {latent, heads, nopeV});
        Tensor ws = randomTensor(DType::BF16, {chunk, entry});
        Tensor out = randomTensor(DType::BF16, {tokens, heads, 128});
        Tensor lse = randomTensor(DType::F32, {heads, tokens});
        std::vector<BufferView> args{
            q.view,   kvc.view,    kpe.view, cuQT.view, cache.view, bt.view,
            cuC.view, starts.view, w.view,   ws.view,   out.view,   lse.view};
        double ms = check(
            bench::timeOnDevice(
                *stream, [&]() { return kernel->run(args, stream->handle()); },
                1, 5, flushL2),
            "timing");
        double pairs =
            double(tokens) * (tokens + 1) / 2 + double(tokens) * context;
        double flops = 2.0 * heads * 320 * pairs +
                       2.0 * (tokens + context) * heads * latent * nopeV;
        double bytes = 2.0 * (double(context) * entry +
                              double(tokens) * heads * (192 + 128));
        printRow(std::to_string(heads) + " x " + std::to_string(tokens) +
                     " + " + std::to_string(context),
                 ms, bytes, flops);
      }
    }
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  llvm::cl::HideUnrelatedOptions(benchOptions);
  llvm::cl::ParseCommandLineOptions(argc, argv, "benchmark the mla kernels\n");
  for (auto [option, value] : {std::pair<const char *, int>{"--heads", onlyHeads},
                                {"--batch", onlyBatch},
                                {"--context", onlyContext}})
    if (value < 0) {
      llvm::errs() << "mla-bench: " << option
                   << " must be 0 (every shape) or positive, not " << value
                   << "\n";
      return 2;
    }
  for (auto [option, value, most] :
       {std::tuple<const char *, int, int>{"--heads", onlyHeads, 128},
        {"--batch", onlyBatch, 1024},
        {"--context", onlyContext, 1 << 20}})
    if (value > most) {
      llvm::errs() << "mla-bench: " << option << " is at most " << most
                   << ", not " << value << "\n";
      return 2;
    }
  if (minSplitTokens < 0) {
    llvm::errs() << "mla-bench: --min-split-tokens must be 0 (the schedule's "
                    "default) or positive\n";
    return 2;
  }
  auto opened = cuda::Device::open(0);
  if (!opened)
    fail(opened.takeError(), "mla-bench needs a CUDA device");
  std::unique_ptr<cuda::Device> dev = std::move(*opened);
  device = dev.get();
  // A bad --strategy fails before any measurement.
  chosenStrategies();
  cuda::Stream s = check(cuda::Stream::create(), "creating a stream");
  stream = &s;

  outs() << "device: " << device->name() << " (sm_"
         << device->capability().major << device->capability().minor << ", "
         << device->multiprocessorCount() << " SMs, "
         << device->totalMemoryBytes() / (1 << 30) << " GiB)\n";
  ceilings.copyBytesPerSecond = check(
      bench::measureCopyBandwidth(*stream, size_t(2) << 30), "copy ceiling");
  outs() << format("ceiling: device-to-device copy %.0f GB/s (2 GiB, read + write)\n",
                   ceilings.copyBytesPerSecond / 1e9);
  if (auto rate = bench::measureBf16MatmulRate(*stream, 8192)) {
    ceilings.matmulFlops = *rate;
    outs() << format("ceiling: bf16 matmul %.0f TFLOP/s (cuBLAS, 8192^3)\n",
                     *rate / 1e12);
  } else {
    outs() << "ceiling: bf16 matmul not measured: "
           << llvm::toString(rate.takeError()) << "\n";
  }

  // Threaded, as the runtime's: the compile times printed are the ones an
  // engine sees (a module's kernels lowered and serialized in parallel).
  mlir::MLIRContext ctx(mlir::MLIRContext::Threading::ENABLED);
  loadKernelDialects(ctx);
  std::unique_ptr<ReadFlush> flush;
  if (l2Flush == L2Flush::Read) {
    flush = std::make_unique<ReadFlush>(ctx);
    readFlush = flush.get();
  }
  if (suite == "all" || suite == "decode")
    benchDecode(ctx);
  if (suite == "all" || suite == "prefill")
    benchPrefill(ctx);
  if (suite == "all" || suite == "merge")
    benchMerge(ctx);
  if (suite == "all" || suite == "gather")
    benchGather(ctx);
  if (suite == "all" || suite == "proj")
    benchProjections(ctx);
  if (suite == "all" || suite == "chunked")
    benchChunkedPrefill(ctx);
  return 0;
}
