//===- GpuEmitter.cpp - Building blocks of the generic GPU kernels --------===//

#include "GpuEmitter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;

namespace mla::gpu {

Value GpuEmitter::threadId(mlir::gpu::Dimension d) {
  return mlir::gpu::ThreadIdOp::create(b, loc, d);
}
Value GpuEmitter::blockId(mlir::gpu::Dimension d) {
  return mlir::gpu::BlockIdOp::create(b, loc, d);
}
Value GpuEmitter::blockDim(mlir::gpu::Dimension d) {
  return mlir::gpu::BlockDimOp::create(b, loc, d);
}
Value GpuEmitter::gridDim(mlir::gpu::Dimension d) {
  return mlir::gpu::GridDimOp::create(b, loc, d);
}
Value GpuEmitter::laneId() {
  return arith::RemUIOp::create(b, loc, threadId(), index(kWarpSize));
}
Value GpuEmitter::warpId() {
  return arith::DivUIOp::create(b, loc, threadId(), index(kWarpSize));
}

void GpuEmitter::blockStridedLoop(Value lb, Value ub,
                                  const std::function<void(Value)> &body) {
  forLoop(add(lb, threadId()), ub, blockDim(), body);
}

Value GpuEmitter::warpReduce(Value value, bool max) {
  Value width = arith::ConstantIntOp::create(b, loc, kWarpSize, 32);
  for (int64_t offset = kWarpSize / 2; offset > 0; offset /= 2) {
    Value delta = arith::ConstantIntOp::create(b, loc, offset, 32);
    Value other = mlir::gpu::ShuffleOp::create(b, loc, value, delta, width,
                                               mlir::gpu::ShuffleMode::XOR)
                      .getShuffleResult();
    value = max ? arith::MaximumFOp::create(b, loc, value, other).getResult()
                : arith::AddFOp::create(b, loc, value, other).getResult();
  }
  return value;
}

Value GpuEmitter::warpSum(Value value) { return warpReduce(value, false); }
Value GpuEmitter::warpMax(Value value) { return warpReduce(value, true); }

std::pair<Value, Value> GpuEmitter::laneColumn(Value lane, int64_t k,
                                               int64_t length) {
  Value column = add(lane, index(k * kWarpSize));
  if ((k + 1) * kWarpSize <= length)
    return {column, Value()}; // always inside: no mask needed
  Value inside = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                       column, index(length));
  return {column, inside};
}

Value GpuEmitter::loadColumn(Value memref, ValueRange prefix, Value column,
                             Value inside, int64_t length,
                             int64_t firstColumn) {
  SmallVector<Value> idx(prefix.begin(), prefix.end());
  Value c = inside ? minIndex(column, index(length - 1)) : column;
  idx.push_back(firstColumn ? add(c, index(firstColumn)) : c);
  Value v = loadF32(memref, idx);
  if (!inside)
    return v;
  return arith::SelectOp::create(b, loc, inside, v, f32(0.0));
}

void GpuEmitter::storeColumn(Value value, Value memref, ValueRange prefix,
                             Value column, Value inside,
                             int64_t firstColumn) {
  auto store = [&] {
    SmallVector<Value> idx(prefix.begin(), prefix.end());
    idx.push_back(firstColumn ? add(column, index(firstColumn)) : column);
    storeF32(value, memref, idx);
  };
  if (inside)
    ifThen(inside, store);
  else
    store();
}

} // namespace mla::gpu
