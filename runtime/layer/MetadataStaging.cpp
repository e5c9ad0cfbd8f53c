//===- MetadataStaging.cpp - A step's metadata on its way to the GPU ------===//

#include "MetadataStaging.h"

#include "llvm/Support/MathExtras.h"

namespace mla::runtime::detail {

llvm::Error MetadataStaging::reserve(size_t bytes) {
  if (bytes <= slotBytes)
    return llvm::Error::success();
  for (size_t i = 0; i < kSlots; ++i) {
    if (queued[i])
      if (llvm::Error error = copied[i].synchronize())
        return error;
    queued[i] = false;
  }
  // Powers of two from 4 KiB: a batch that grows a little does not
  // reallocate at every step.
  size_t slot = llvm::PowerOf2Ceil(std::max<size_t>(bytes, 4096));
  auto pinned = cuda::PinnedHostBuffer::allocate(slot * kSlots);
  if (!pinned)
    return pinned.takeError();
  memory = std::move(*pinned);
  slotBytes = slot;
  for (cuda::Event &event : copied) {
    if (event.handle())
      continue;
    auto created = cuda::Event::create(cuda::CU_EVENT_DISABLE_TIMING);
    if (!created)
      return created.takeError();
    event = std::move(*created);
  }
  return llvm::Error::success();
}

llvm::Error MetadataStaging::upload(const Runtime &runtime, void *device,
                                    size_t bytes,
                                    llvm::function_ref<void(char *)> fill,
                                    Stream stream) {
  if (llvm::Error error = reserve(bytes))
    return error;
  size_t i = size_t(uploads) % kSlots;
  if (queued[i])
    if (llvm::Error error = copied[i].synchronize())
      return error;
  char *slot = memory.data() + i * slotBytes;
  fill(slot);
  if (llvm::Error error = runtime.upload(device, slot, bytes, stream))
    return error;
  if (llvm::Error error = copied[i].record(static_cast<cuda::CUstream>(stream)))
    return error;
  queued[i] = true;
  ++uploads;
  return llvm::Error::success();
}

} // namespace mla::runtime::detail
