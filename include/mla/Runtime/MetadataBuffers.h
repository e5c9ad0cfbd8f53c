//===- MetadataBuffers.h - Fixed-capacity decode metadata -------*- C++ -*-===//
//
// A CUDA graph records the addresses its kernels read, so the metadata a
// captured decode reads must live at the same address on every replay, and
// a smaller batch must fill the captured shape with padding that is safe
// to compute on. These buffers are allocated once at capture capacity and
// rewritten in place per step (vLLM's graph-capture buffers do the same).
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_METADATABUFFERS_H
#define MLA_RUNTIME_METADATABUFFERS_H

#include "mla/Runtime/BufferView.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <vector>

namespace mla::runtime {

/// mla.decode_attention's seq_lens [maxBatch] and block_table [maxBatch,
/// maxBlocks] (i32) at a fixed capacity. The storage is allocated by
/// `create` and never reallocated: `update` only overwrites it, so the
/// pointers (and views) taken once stay valid for the object's lifetime
/// and move with it when it is moved. Rows past the batch are padding:
/// seq_len 0, every page id 0. A zero length makes the kernel read nothing
/// for the row (out 0, lse -inf); page 0 exists in every cache, so even a
/// read of the padding stays inside the cache. Columns past a row's given
/// width are 0 too.
class DecodeMetadataBuffers {
public:
  /// Allocates buffers for up to `maxBatch` requests of up to `maxBlocks`
  /// pages, all padding. Errors when a capacity is not positive.
  static llvm::Expected<DecodeMetadataBuffers> create(int64_t maxBatch,
                                                      int64_t maxBlocks);

  // Moving keeps the storage (and so the addresses); a copy or an
  // assignment would leave a graph reading addresses that no longer hold
  // this batch's metadata.
  DecodeMetadataBuffers(DecodeMetadataBuffers &&) = default;
  DecodeMetadataBuffers &operator=(DecodeMetadataBuffers &&) = delete;
  DecodeMetadataBuffers(const DecodeMetadataBuffers &) = delete;
  DecodeMetadataBuffers &operator=(const DecodeMetadataBuffers &) = delete;

  /// Writes a batch of seqLens.size() requests in place: their lengths and
  /// block table rows (row-major [seqLens.size(), tableWidth]), and padding
  /// everywhere else. Errors, leaving the buffers unchanged, when the batch
  /// exceeds maxBatch, tableWidth exceeds maxBlocks, blockTable does not
  /// have seqLens.size() * tableWidth entries, or a length is negative.
  llvm::Error update(llvm::ArrayRef<int32_t> seqLens,
                     llvm::ArrayRef<int32_t> blockTable, int64_t tableWidth);

  int64_t maxBatch() const { return capacityBatch; }
  int64_t maxBlocks() const { return capacityBlocks; }
  /// Requests written by the last update (0 before any).
  int64_t batchSize() const { return activeBatch; }

  /// [maxBatch] sequence lengths.
  int32_t *seqLensData() { return seqLensStorage.data(); }
  const int32_t *seqLensData() const { return seqLensStorage.data(); }
  /// [maxBatch, maxBlocks] page ids, row-major.
  int32_t *blockTableData() { return blockTableStorage.data(); }
  const int32_t *blockTableData() const { return blockTableStorage.data(); }

  /// The buffers as the captured kernel sees them: full capacity.
  BufferView seqLensView();
  BufferView blockTableView();

private:
  DecodeMetadataBuffers(int64_t maxBatch, int64_t maxBlocks);

  int64_t capacityBatch = 0;
  int64_t capacityBlocks = 0;
  int64_t activeBatch = 0;
  // Sized once in the constructor; never resized, so data() is stable (a
  // moved vector keeps its heap storage).
  std::vector<int32_t> seqLensStorage;
  std::vector<int32_t> blockTableStorage;
};

} // namespace mla::runtime

#endif // MLA_RUNTIME_METADATABUFFERS_H
