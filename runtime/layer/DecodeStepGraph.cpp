//===- DecodeStepGraph.cpp - A decode step captured once, replayed --------===//
//
// A serving engine replays its decode steps as CUDA graphs so that a step
// costs the host one copy and one launch instead of a launch per kernel.
// A graph records addresses and shapes, so the step is planned at a fixed
// shape (planDecodeStep pads the batch and caps the splits), its metadata
// and scratch live at addresses the graph owns, and each replay only
// rewrites the metadata in place.
//
//===----------------------------------------------------------------------===//

#include "mla/Runtime/MlaLayer.h"

#include "MetadataStaging.h"
#include "StepMetadata.h"

#include "mla/Runtime/CudaDevice.h"
#include "mla/Runtime/CudaGraph.h"
#include "mla/Support/Diagnostics.h"

#include <algorithm>
#include <limits>

namespace mla::runtime {

std::string DecodeGraphShape::str() const {
  return std::to_string(maxDecodes) + " decodes x " + std::to_string(queryLen) +
         " tokens, " + std::to_string(maxBlocksPerRequest) +
         " pages a request, " + std::to_string(numCacheBlocks) +
         " cache pages, at most " + std::to_string(maxSplitsPerRequest) +
         " splits a request";
}

//===----------------------------------------------------------------------===//
// The graph and what it owns
//===----------------------------------------------------------------------===//

struct DecodeStepGraph::State {
  const MlaLayer *layer = nullptr;
  const Runtime *runtime = nullptr;
  DecodeGraphShape shape;
  detail::StepMetadataLayout layout;
  // What the kernels were queued with: the plan of an empty batch at the
  // full shape (their arguments depend on the shape alone), the caller's
  // tensors and the scratch, so that enqueue can queue them again.
  MlaStepPlan capturedPlan;
  MlaForwardArgs args;
  detail::ScratchPointers scratchPointers;
  // The addresses the graph recorded.
  DeviceAllocation metadata;
  std::vector<DeviceAllocation> scratch;
  // The metadata's way to `metadata`, for stageDecodeStep.
  detail::MetadataStaging staging;
  cuda::Stream captureStream;
  // Declared last, destroyed first: before what it refers to.
  cuda::CapturedGraph graph;
  int64_t replays = 0;
};

DecodeStepGraph::DecodeStepGraph(std::unique_ptr<State> state)
    : state(std::move(state)) {}

DecodeStepGraph::~DecodeStepGraph() {
  // A replay may still be reading the buffers about to be freed, on a
  // stream the caller may have destroyed since.
  if (state->replays > 0 || state->staging.used())
    llvm::consumeError(state->runtime->synchronizeDevice());
  if (const cuda::Device *gpu = state->runtime->gpu())
    llvm::consumeError(gpu->makeCurrent());
}

const DecodeGraphShape &DecodeStepGraph::shape() const { return state->shape; }
int64_t DecodeStepGraph::replays() const { return state->replays; }

//===----------------------------------------------------------------------===//
// Planning at a fixed shape
//===----------------------------------------------------------------------===//

int64_t MlaLayer::defaultSplitLimit(const DecodeGraphShape &shape) const {
  DecodeSplitConfig c = decodeSchedule(shape.queryLen);
  auto cdiv = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  int64_t parts = decodeSplitSlots(c);
  // A request never has more splits than its longest context allows.
  int64_t tokens = shape.maxBlocksPerRequest * layerConfig.blockSize;
  int64_t mostUseful =
      cdiv(cdiv(tokens, c.tokensPerBlock),
           std::max<int64_t>(1, cdiv(c.minTokensPerSplit, c.tokensPerBlock)));
  int64_t evenShare = cdiv(parts, shape.maxDecodes);
  return std::max<int64_t>(1, std::min({2 * evenShare, parts, mostUseful}));
}

llvm::Expected<MlaStepPlan>
MlaLayer::planDecodeStep(const CommonAttentionMetadata &m,
                         DecodeGraphShape shape) const {
  const MlaLayerConfig &c = layerConfig;
  if (shape.maxDecodes < 1 || shape.queryLen < 1 ||
      shape.maxBlocksPerRequest < 1 || shape.numCacheBlocks < 1 ||
      shape.maxSplitsPerRequest < 0)
    return makeArgumentError(
        "decode step shape: decodes, query length, pages a request and cache "
        "pages must be positive and the split limit not negative, got " +
        shape.str());
  // The metadata the kernels read holds token rows, block-table entries
  // and page ids as int32, as vLLM's tensors do; bounding them here also
  // keeps the products below inside int64 (found by the plan fuzzer).
  constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
  if (shape.maxDecodes > kInt32Max / shape.queryLen ||
      shape.maxBlocksPerRequest > kInt32Max / shape.maxDecodes ||
      shape.numCacheBlocks > kInt32Max + 1 ||
      shape.maxSplitsPerRequest > kInt32Max)
    return makeArgumentError(
        "decode step shape: its token rows (decodes x query length), block "
        "table (decodes x pages a request), cache pages and split limit must "
        "each fit int32, got " +
        shape.str());
  if (shape.queryLen > c.decodeThreshold)
    return makeArgumentError(
        "decode step shape: " + llvm::Twine(shape.queryLen) +
        " new tokens a request is above the layer's decodeThreshold (" +
        llvm::Twine(c.decodeThreshold) + "): such requests run as prefills");
  // The CPU computes each row in one pass: one split, whatever was asked.
  if (runtime.deviceKind() == DeviceKind::CPU)
    shape.maxSplitsPerRequest = 1;
  else if (shape.maxSplitsPerRequest == 0)
    shape.maxSplitsPerRequest = defaultSplitLimit(shape);

  if (llvm::Error error = validateStep(m, shape.numCacheBlocks))
    return std::move(error);
  auto split = splitDecodesAndPrefills(m, c.decodeThreshold);
  if (!split)
    return split.takeError();
  auto refuse = [&](const llvm::Twine &why) {
    return makeError("the batch does not fit the decode step of " +
                     shape.str() + ": " + why);
  };
  if (split->numPrefills > 0)
    return refuse("it holds prefills (" + llvm::Twine(split->numPrefills) +
                  " of its requests): a captured step runs decodes only, "
                  "plan and forward run mixed batches");
  if (split->numDecodes > shape.maxDecodes)
    return refuse(llvm::Twine(split->numDecodes) + " decodes");
  for (int64_t b = 0; b < split->numDecodes; ++b)
    if (m.queryLen(b) != shape.queryLen)
      return refuse("request " + llvm::Twine(b) + " has " +
                    llvm::Twine(m.queryLen(b)) + " new tokens");
  if (m.maxBlocks > shape.maxBlocksPerRequest)
    return refuse("the block table is " + llvm::Twine(m.maxBlocks) +
                  " pages wide");

  MlaStepPlan plan;
  int64_t tokens = shape.maxDecodes * shape.queryLen;
  plan.split = {shape.maxDecodes, 0, tokens, 0};
  plan.numActualTokens = tokens;
  plan.numCacheBlocks = shape.numCacheBlocks;
  plan.slotMapping.assign(tokens, kPaddingSlot);
  std::copy(m.slotMapping.begin(), m.slotMapping.begin() + m.numActualTokens,
            plan.slotMapping.begin());
  plan.decodeQueryLen = shape.queryLen;
  if (llvm::Error error = planDecodes(m, split->numDecodes, shape.maxDecodes,
                                      shape.maxBlocksPerRequest,
                                      shape.maxSplitsPerRequest, plan))
    return std::move(error);
  plan.paddedTo = shape;
  return plan;
}

//===----------------------------------------------------------------------===//
// Capture and replay
//===----------------------------------------------------------------------===//

llvm::Expected<std::unique_ptr<DecodeStepGraph>>
MlaLayer::captureDecodeStep(const DecodeGraphShape &shape,
                            const MlaForwardArgs &args) {
  const cuda::Device *gpu = runtime.gpu();
  if (!gpu)
    return makeError("capturing a decode step needs a GPU runtime (it is a "
                     "CUDA graph); on the CPU run steps with forward");
  CudaGraphSupport needed = shape.queryLen > 1
                                ? CudaGraphSupport::UNIFORM_BATCH
                                : CudaGraphSupport::UNIFORM_SINGLE_TOKEN_DECODE;
  if (chosen.backend->cudaGraphs < needed)
    return makeError("backend '" + chosen.backend->name +
                     "' cannot be captured for " + shape.str() +
                     " (it supports CUDA graphs for " +
                     std::string(name(chosen.backend->cudaGraphs)) + ")");

  // The step captured is that of an empty batch at the full shape: the
  // kernels' arguments depend on the shape alone, their work on the
  // metadata each replay writes.
  CommonAttentionMetadata empty;
  empty.queryStartLoc = {0};
  auto plan = planDecodeStep(empty, shape);
  if (!plan)
    return plan.takeError();
  if (llvm::Error error = checkArgs(*plan, args))
    return std::move(error);

  auto state = std::make_unique<DecodeStepGraph::State>();
  state->layer = this;
  state->runtime = &runtime;
  state->shape = *plan->paddedTo;
  state->layout = detail::StepMetadataLayout::of(*plan);
  state->args = args;
  auto metadataBlock = runtime.allocate(state->layout.bytes);
  if (!metadataBlock)
    return metadataBlock.takeError();
  state->metadata = std::move(*metadataBlock);
  detail::ScratchBytes bytes = detail::scratchBytes(
      layerConfig, workspaceTokens, *plan, args.decodeLse.data != nullptr);
  for (size_t i = 0; i < bytes.size(); ++i) {
    auto buffer = runtime.allocate(bytes[i]);
    if (!buffer)
      return buffer.takeError();
    state->scratchPointers.at[i] = buffer->data();
    state->scratch.push_back(std::move(*buffer));
  }
  if (llvm::Error error = gpu->makeCurrent())
    return std::move(error);
  if (llvm::Error error = state->staging.reserve(state->layout.bytes))
    return std::move(error);
  auto stream = cuda::Stream::create();
  if (!stream)
    return stream.takeError();
  state->captureStream = std::move(*stream);

  state->capturedPlan = std::move(*plan);
  std::unique_ptr<DecodeStepGraph> stepGraph(
      new DecodeStepGraph(std::move(state)));
  cuda::CUstream captureStream = stepGraph->state->captureStream.handle();
  auto graph = cuda::CapturedGraph::capture(captureStream, [&] {
    return queueCapturedKernels(*stepGraph, captureStream);
  });
  if (!graph)
    return makeError("capturing the decode step of " + shape.str() + ": " +
                     llvm::toString(graph.takeError()));
  stepGraph->state->graph = std::move(*graph);
  return stepGraph;
}

llvm::Error MlaLayer::queueCapturedKernels(DecodeStepGraph &graph,
                                           Stream stream) {
  DecodeStepGraph::State &g = *graph.state;
  // Phase timing waits on the stream, which a capture does not allow.
  bool timedPhases = std::exchange(timePhases, false);
  bool timedHost = std::exchange(timeHost, false);
  llvm::Error error =
      launchPhases(g.capturedPlan, g.args, static_cast<char *>(g.metadata.data()),
                   g.scratchPointers, stream);
  timePhases = timedPhases;
  timeHost = timedHost;
  return error;
}

llvm::Error MlaLayer::checkGraph(const DecodeStepGraph &graph) const {
  if (graph.state->layer != this)
    return makeArgumentError("the decode step graph was captured by another "
                             "layer");
  return llvm::Error::success();
}

llvm::Error MlaLayer::stageDecodeStep(DecodeStepGraph &graph,
                                      const MlaStepPlan &plan, Stream stream) {
  if (llvm::Error error = checkGraph(graph))
    return error;
  DecodeStepGraph::State &g = *graph.state;
  if (!plan.paddedTo || !(*plan.paddedTo == g.shape))
    return makeArgumentError(
        "the plan was not made for this graph: plan the batch with "
        "planDecodeStep(metadata, graph.shape()), the shape " +
        g.shape.str());
  auto layout = detail::StepMetadataLayout::of(plan);
  if (!(layout == g.layout))
    return makeArgumentError("the plan's metadata is not laid out as the "
                             "graph's (a plan changed after planDecodeStep)");
  if (llvm::Error error = runtime.gpu()->makeCurrent())
    return error;
  if (llvm::Error error = g.staging.upload(
          runtime, g.metadata.data(), layout.bytes,
          [&](char *slot) { layout.write(plan, slot); }, stream))
    return error;
  return llvm::Error::success();
}

llvm::Error MlaLayer::enqueueDecodeStep(DecodeStepGraph &graph,
                                        Stream stream) {
  if (llvm::Error error = checkGraph(graph))
    return error;
  if (llvm::Error error = runtime.gpu()->makeCurrent())
    return error;
  if (llvm::Error error = queueCapturedKernels(graph, stream))
    return error;
  ++graph.state->replays;
  return llvm::Error::success();
}

llvm::Error MlaLayer::replay(DecodeStepGraph &graph, const MlaStepPlan &plan,
                             Stream stream) {
  if (llvm::Error error = stageDecodeStep(graph, plan, stream))
    return error;
  DecodeStepGraph::State &g = *graph.state;
  if (llvm::Error error = g.graph.launch(static_cast<cuda::CUstream>(stream)))
    return error;
  ++g.replays;
  return llvm::Error::success();
}

} // namespace mla::runtime
