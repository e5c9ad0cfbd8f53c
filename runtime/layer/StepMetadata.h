//===- StepMetadata.h - A step's metadata block and scratch ----*- C++ -*-===//
//
// What a step's kernels read besides the caller's buffers: the plan's
// metadata arrays, uploaded as one block, and the scratch the decode and
// prefill phases write. A plain forward keeps both in buffers it grows as
// batches grow; a captured decode step keeps them at fixed addresses, which
// its graph recorded. Both lay them out here, the same way.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_LAYER_STEPMETADATA_H
#define MLA_RUNTIME_LAYER_STEPMETADATA_H

#include "mla/Runtime/MlaLayer.h"

#include <array>
#include <cstddef>

namespace mla::runtime::detail {

/// The plan's arrays the kernels read, in the order they sit in the block.
enum MetadataArray : size_t {
  SlotMapping,
  DecodeSeqLens,
  DecodeBlockTable,
  DecodeNumSplits,
  PrefillCuSeqlensQ,
  PrefillBlockTable,
  ChunkCuSeqLens,
  ChunkStarts,
  /// Under DCP with context chunks (DcpContextPlan).
  DcpLocalCuSeqLens,
  DcpLocalStarts,
  DcpGatherOrder,
  DcpOrderStarts,
  NumMetadataArrays
};

/// Where each array sits in the block. Sections start on 256 bytes, so
/// every view the kernels take is aligned for any access width.
struct StepMetadataLayout {
  std::array<size_t, NumMetadataArrays> offsets{};
  size_t bytes = 0;

  static StepMetadataLayout of(const MlaStepPlan &plan);
  /// Copies the plan's arrays into `block` (at least `bytes` long), which
  /// must have been laid out for a plan of the same array sizes.
  void write(const MlaStepPlan &plan, char *block) const;
  /// Array `a` of the block at `block`, as a contiguous view.
  BufferView view(char *block, MetadataArray a, DType type,
                  std::vector<int64_t> shape) const {
    return BufferView::contiguous(block + offsets[a], type, std::move(shape));
  }
  bool operator==(const StepMetadataLayout &other) const {
    return offsets == other.offsets && bytes == other.bytes;
  }
};

/// The device scratch of one step, by what it holds.
enum ScratchBuffer : size_t {
  ContextWorkspace,
  PrefillLse,
  DecodeQuery,
  DecodeLatentOut,
  DecodeSplitOut,
  DecodeSplitLse,
  /// Only when the caller passes no decode_lse buffer.
  DecodeLse,
  /// Under DCP with context chunks: the rows a rank sends per chunk and
  /// the group's rows it receives.
  DcpSendRows,
  DcpGatheredRows,
  NumScratchBuffers
};

/// Bytes of each scratch buffer a step of `plan` needs (0: not used).
using ScratchBytes = std::array<size_t, NumScratchBuffers>;
/// The device address of each (null where not used).
struct ScratchPointers {
  std::array<void *, NumScratchBuffers> at{};
  void *operator[](ScratchBuffer b) const { return at[b]; }
};

ScratchBytes scratchBytes(const MlaLayerConfig &config, int64_t workspaceTokens,
                          const MlaStepPlan &plan, bool callerHasDecodeLse);

} // namespace mla::runtime::detail

#endif // MLA_RUNTIME_LAYER_STEPMETADATA_H
