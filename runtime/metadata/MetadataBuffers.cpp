//===- MetadataBuffers.cpp - Fixed-capacity decode metadata ---------------===//

#include "MetadataSupport.h"

#include "mla/Runtime/MetadataBuffers.h"

#include <algorithm>

namespace mla::runtime {

using detail::fail;
using llvm::Twine;

DecodeMetadataBuffers::DecodeMetadataBuffers(int64_t maxBatch,
                                             int64_t maxBlocks)
    : capacityBatch(maxBatch), capacityBlocks(maxBlocks),
      seqLensStorage(maxBatch, 0), blockTableStorage(maxBatch * maxBlocks, 0) {}

llvm::Expected<DecodeMetadataBuffers>
DecodeMetadataBuffers::create(int64_t maxBatch, int64_t maxBlocks) {
  if (maxBatch <= 0 || maxBlocks <= 0)
    return fail("decode metadata buffers need a positive capacity, got "
                "maxBatch = " +
                Twine(maxBatch) + ", max_blocks = " + Twine(maxBlocks));
  return DecodeMetadataBuffers(maxBatch, maxBlocks);
}

llvm::Error DecodeMetadataBuffers::update(llvm::ArrayRef<int32_t> seqLens,
                                          llvm::ArrayRef<int32_t> blockTable,
                                          int64_t tableWidth) {
  auto batch = static_cast<int64_t>(seqLens.size());
  // Every check comes before the first write, so a refused batch leaves the
  // previous one intact for a graph that might still replay it.
  if (batch > capacityBatch)
    return fail("decode batch of " + Twine(batch) +
                " requests exceeds the captured capacity maxBatch = " +
                Twine(capacityBatch));
  if (tableWidth < 0)
    return fail("block table width " + Twine(tableWidth) +
                ", must be non-negative");
  if (tableWidth > capacityBlocks)
    return fail(
        "block table width " + Twine(tableWidth) +
        " exceeds the captured capacity max_blocks = " + Twine(capacityBlocks));
  if (static_cast<int64_t>(blockTable.size()) != batch * tableWidth)
    return fail("block table has " + Twine(blockTable.size()) +
                " entries, expected " + Twine(batch) + " requests * " +
                Twine(tableWidth) + " columns = " + Twine(batch * tableWidth));
  for (int64_t b = 0; b < batch; ++b)
    if (seqLens[b] < 0)
      return fail("seq_lens[" + Twine(b) + "] is " + Twine(seqLens[b]) +
                  ", must be non-negative");

  std::copy(seqLens.begin(), seqLens.end(), seqLensStorage.begin());
  std::fill(seqLensStorage.begin() + batch, seqLensStorage.end(), 0);
  for (int64_t b = 0; b < batch; ++b) {
    auto row = blockTableStorage.begin() + b * capacityBlocks;
    auto given = blockTable.begin() + b * tableWidth;
    std::copy(given, given + tableWidth, row);
    std::fill(row + tableWidth, row + capacityBlocks, 0);
  }
  std::fill(blockTableStorage.begin() + batch * capacityBlocks,
            blockTableStorage.end(), 0);
  activeBatch = batch;
  return llvm::Error::success();
}

BufferView DecodeMetadataBuffers::seqLensView() {
  return BufferView::contiguous(seqLensStorage.data(), DType::I32,
                                {capacityBatch});
}

BufferView DecodeMetadataBuffers::blockTableView() {
  return BufferView::contiguous(blockTableStorage.data(), DType::I32,
                                {capacityBatch, capacityBlocks});
}

} // namespace mla::runtime
