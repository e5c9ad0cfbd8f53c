//===- MetadataStaging.h - A step's metadata on its way to the GPU -*- C++ -*-===//
//
// Every step copies its metadata block to the device on the caller's
// stream. From pageable memory that copy first waits for everything queued
// on the stream before it (the driver stages pageable copies itself), so
// the host could never run ahead of the GPU. From page-locked memory the
// copy is queued and the call returns; but the memory must not be refilled
// until the copy out of it has run. Slots used in turn give both: the host
// fills one while the copies out of the others may still wait in the
// stream, and refilling a slot waits only for the copy out of it, queued
// kSlots steps earlier. A host at most that far ahead never waits.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_LAYER_METADATASTAGING_H
#define MLA_RUNTIME_LAYER_METADATASTAGING_H

#include "mla/Runtime/CudaDevice.h"
#include "mla/Runtime/CudaGraph.h"
#include "mla/Runtime/Runtime.h"

#include "llvm/ADT/STLFunctionalExtras.h"

#include <array>

namespace mla::runtime::detail {

class MetadataStaging {
public:
  static constexpr size_t kSlots = 8;

  /// Queues on `stream` a copy of `bytes` that `fill` writes into a
  /// page-locked slot, to `device` (GPU runtimes; the GPU's context is
  /// current). The slots grow to fit, after the copies out of them ran.
  llvm::Error upload(const Runtime &runtime, void *device, size_t bytes,
                     llvm::function_ref<void(char *)> fill, Stream stream);
  /// Slots of at least `bytes` now, so that no later upload of that size
  /// allocates (an allocation fails while another thread captures a graph
  /// in global mode). Growing waits for the copies out of the old slots.
  llvm::Error reserve(size_t bytes);
  /// Whether any copy was queued (its stream may still be reading).
  bool used() const { return uploads > 0; }

private:
  cuda::PinnedHostBuffer memory;
  size_t slotBytes = 0;
  std::array<cuda::Event, kSlots> copied;
  std::array<bool, kSlots> queued{};
  int64_t uploads = 0;
};

} // namespace mla::runtime::detail

#endif // MLA_RUNTIME_LAYER_METADATASTAGING_H
