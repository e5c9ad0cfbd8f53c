//===- StepMetadata.cpp - A step's metadata block and scratch -------------===//

#include "StepMetadata.h"

#include <cstring>

namespace mla::runtime::detail {

namespace {
struct ArrayBytes {
  const void *data;
  size_t bytes;
};

template <typename T> ArrayBytes bytesOf(const std::vector<T> &values) {
  return {values.data(), values.size() * sizeof(T)};
}

/// The plan's arrays in MetadataArray order.
std::array<ArrayBytes, NumMetadataArrays> arraysOf(const MlaStepPlan &plan) {
  const ChunkedPrefillMetadata &pf = plan.prefill;
  return {bytesOf(plan.slotMapping),
          bytesOf(plan.decodeSeqLens),
          bytesOf(plan.decodeBlockTable),
          bytesOf(plan.decodeSplits.numSplits),
          bytesOf(pf.cuSeqlensQ),
          bytesOf(pf.blockTable),
          bytesOf(pf.chunks.chunkCuSeqLens),
          bytesOf(pf.chunks.chunkStarts),
          bytesOf(plan.dcpContext.localCuSeqLens),
          bytesOf(plan.dcpContext.localStarts),
          bytesOf(plan.dcpContext.gatherOrder),
          bytesOf(plan.dcpContext.orderStarts)};
}
} // namespace

StepMetadataLayout StepMetadataLayout::of(const MlaStepPlan &plan) {
  StepMetadataLayout layout;
  size_t end = 0;
  std::array<ArrayBytes, NumMetadataArrays> arrays = arraysOf(plan);
  for (size_t i = 0; i < arrays.size(); ++i) {
    layout.offsets[i] = (end + 255) / 256 * 256;
    end = layout.offsets[i] + arrays[i].bytes;
  }
  layout.bytes = end;
  return layout;
}

void StepMetadataLayout::write(const MlaStepPlan &plan, char *block) const {
  std::array<ArrayBytes, NumMetadataArrays> arrays = arraysOf(plan);
  for (size_t i = 0; i < arrays.size(); ++i)
    if (arrays[i].bytes)
      std::memcpy(block + offsets[i], arrays[i].data, arrays[i].bytes);
}

ScratchBytes scratchBytes(const MlaLayerConfig &config, int64_t workspaceTokens,
                          const MlaStepPlan &plan, bool callerHasDecodeLse) {
  const MlaDims &d = config.dims;
  const size_t width = byteWidth(config.activation), f32 = sizeof(float);
  const size_t n = size_t(d.numHeads);
  ScratchBytes bytes{};
  if (plan.split.numPrefills > 0) {
    bytes[ContextWorkspace] = size_t(workspaceTokens) * d.cacheEntry() * width;
    bytes[PrefillLse] = n * size_t(plan.split.numPrefillTokens) * f32;
    size_t rowBytes = d.cacheEntry() * width;
    size_t sent = size_t(plan.dcpContext.rowsPerRank) * rowBytes;
    bytes[DcpSendRows] = sent;
    bytes[DcpGatheredRows] = size_t(config.dcp.worldSize) * sent;
  }
  if (plan.split.numDecodes > 0) {
    size_t rows = size_t(plan.split.numDecodeTokens) * n;
    size_t splits = size_t(plan.splitCapacity), latent = size_t(d.kvLoraRank);
    bytes[DecodeQuery] = rows * d.cacheEntry() * width;
    bytes[DecodeLatentOut] = rows * latent * width;
    bytes[DecodeSplitOut] = rows * splits * latent * f32;
    bytes[DecodeSplitLse] = rows * splits * f32;
    if (!callerHasDecodeLse)
      bytes[DecodeLse] = rows * f32;
  }
  return bytes;
}

} // namespace mla::runtime::detail
