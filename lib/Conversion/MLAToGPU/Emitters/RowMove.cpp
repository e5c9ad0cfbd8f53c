//===- RowMove.cpp - Moving one row by a group of threads -----------------===//

#include "Emitters/RowMove.h"

using namespace mlir;

namespace mla::gpu {

static constexpr int64_t kWidth = GpuEmitter::kVectorWidth;

bool RowMove::vectorizable() const {
  if (length % kWidth || dstFirstColumn % kWidth || srcFirstColumn % kWidth ||
      !GpuEmitter::hasVectorRows(dst, /*dynamicStrides=*/true))
    return false;
  for (auto &[memref, prefix] : sources)
    if (!GpuEmitter::hasVectorRows(memref, /*dynamicStrides=*/true))
      return false;
  return true;
}

void RowMove::emit(GpuEmitter &e, Value lane, int64_t lanes,
                   Value vectorOk) const {
  auto columns = [&](bool vector) {
    int64_t step = vector ? kWidth : 1;
    Value first = vector ? e.mul(lane, e.index(kWidth)) : lane;
    e.forLoop(first, e.index(length), lanes * step, [&](Value c) {
      SmallVector<Value> values;
      for (auto &[memref, prefix] : sources) {
        SmallVector<Value> idx(prefix.begin(), prefix.end());
        idx.push_back(srcFirstColumn ? e.add(c, e.index(srcFirstColumn)) : c);
        // A plain copy moves vectors as they are (converted on store only
        // if the types differ); arithmetic works in f32.
        values.push_back(vector ? (combine ? e.loadVectorF32(memref, idx)
                                           : e.loadVector(memref, idx))
                                : e.loadF32(memref, idx));
      }
      Value v = combine ? combine(e, values) : values.front();
      SmallVector<Value> idx(dstPrefix.begin(), dstPrefix.end());
      idx.push_back(dstFirstColumn ? e.add(c, e.index(dstFirstColumn)) : c);
      if (vector)
        e.storeVector(v, dst, idx);
      else
        e.storeF32(v, dst, idx);
    });
  };
  if (vectorOk && vectorizable())
    e.ifThenElse(
        vectorOk, [&] { columns(true); }, [&] { columns(false); });
  else
    columns(false);
}

Value vectorPathFlag(GpuEmitter &e, ValueRange memrefs) {
  for (Value m : memrefs)
    if (!GpuEmitter::hasVectorRows(m, /*dynamicStrides=*/true))
      return Value();
  return e.vectorAligned(memrefs);
}

} // namespace mla::gpu
