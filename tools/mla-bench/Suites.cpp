//===- Suites.cpp - The kernels mla-bench times, shape by shape -----------===//

#include "Suites.h"

#include "Ceilings.h"
#include "Harness.h"
#include "Options.h"
#include "Report.h"
#include "Timing.h"

#include "mla/Builders/KernelBuilders.h"
#include "mla/Runtime/MetadataDecodeSplits.h"
#include "mla/Target/WgmmaDecodeShape.h"

#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

namespace mla::bench {

using llvm::outs;

void benchDecode(mlir::MLIRContext &ctx) {
  const DType cache = cacheDType();
  outs() << "\n== decode: DeepSeek dims (576/512), bf16 q, " << name(cache)
         << " cache, page 64, Sq 1, split-KV by the runtime's decode "
            "schedule ==\n";
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
  const int64_t wgmmaMinHeads = isFp8(cache) ? wgmma_decode::kMinHeadsFp8
                                              : wgmma_decode::kMinHeads;
  for (KernelStrategy strategy : chosenStrategies())
  for (int64_t heads : headCounts()) {
    if (strategy == KernelStrategy::Warpgroup && heads < wgmmaMinHeads) {
      outs() << "  decode (" << heads << " heads, wgmma): the mma-sync "
             << "kernel (the wgmma one takes " << wgmmaMinHeads
             << " heads or more over this cache)\n";
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
        shape.operandTypes = decodeOperandTypes(DType::BF16, cache);
        shape.dims = spec.dims;
        shape.dims.numHeads = heads;
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
        double bytes = tokens * 576 * byteWidth(cache) +
                       (batch * heads * 576.0 + batch * heads * 512.0) * 2;
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


void benchChunkedPrefill(mlir::MLIRContext &ctx) {
  const DType cacheType = cacheDType();
  outs() << "\n== chunked prefill: one request, bf16 activations, "
         << name(cacheType)
         << " cache, page 64, 4096-token chunks (FLOPs: attention 2 x heads "
            "x 320 x pairs + up-projections 2 x tokens x heads x 512 x 256) "
            "==\n";
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
          compile(buildChunkedPrefill(ctx, {dims, DType::BF16, cacheType,
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
        Tensor cache = randomTensor(cacheType, {blocks, page, entry});
        Tensor scale = scaleTensor();
        Tensor bt = hostTensor(DType::I32, {1, blocks}, table);
        Tensor cuC = hostTensor(DType::I32, {chunks, 2}, chunkCu);
        Tensor starts = hostTensor(DType::I32, {chunks, 1}, chunkStarts);
        Tensor w = randomTensor(DType::BF16, {latent, heads, nopeV});
        Tensor ws = randomTensor(DType::BF16, {chunk, entry});
        Tensor out = randomTensor(DType::BF16, {tokens, heads, 128});
        Tensor lse = randomTensor(DType::F32, {heads, tokens});
        std::vector<BufferView> args{q.view,   kvc.view, kpe.view,
                                     cuQT.view, cache.view, bt.view};
        if (isFp8(cacheType))
          args.push_back(scale.view);
        args.insert(args.end(), {cuC.view, starts.view, w.view, ws.view,
                                 out.view, lse.view});
        double ms = check(
            timeOnDevice(
                *stream, [&]() { return kernel->run(args, stream->handle()); },
                1, 5, flushL2),
            "timing");
        double pairs =
            double(tokens) * (tokens + 1) / 2 + double(tokens) * context;
        double flops = 2.0 * heads * 320 * pairs +
                       2.0 * (tokens + context) * heads * latent * nopeV;
        double bytes = double(context) * entry * byteWidth(cacheType) +
                       2.0 * double(tokens) * heads * (192 + 128);
        printRow(std::to_string(heads) + " x " + std::to_string(tokens) +
                     " + " + std::to_string(context),
                 ms, bytes, flops);
      }
    }
}

} // namespace mla::bench
