//===- GpuEmitter.cpp - Building blocks of the generic GPU kernels --------===//

#include "Emitters/GpuEmitter.h"

#include "Emitters/Fp8Dequant.h"
#include "../Common/Fp8Convert.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/Support/ErrorHandling.h"

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

void GpuEmitter::barrier() { mlir::gpu::BarrierOp::create(b, loc); }

Value GpuEmitter::dynamicShared() {
  auto workgroup = mlir::gpu::AddressSpaceAttr::get(
      b.getContext(), mlir::gpu::AddressSpace::Workgroup);
  auto rawType = MemRefType::get({ShapedType::kDynamic}, b.getI8Type(),
                                 MemRefLayoutAttrInterface(), workgroup);
  return mlir::gpu::DynamicSharedMemoryOp::create(b, loc, rawType);
}

Value GpuEmitter::sharedView(Value raw, Value offset, ArrayRef<int64_t> shape,
                             Type type) {
  auto viewType = MemRefType::get(shape, type, MemRefLayoutAttrInterface(),
                                  cast<MemRefType>(raw.getType()).getMemorySpace());
  return memref::ViewOp::create(b, loc, viewType, raw, offset, ValueRange{});
}

Value GpuEmitter::exp2(Value x) {
  return LLVM::CallIntrinsicOp::create(
             b, loc, b.getF32Type(),
             b.getStringAttr("llvm.nvvm.ex2.approx.ftz.f32"), ValueRange{x})
      .getResult(0);
}

Value GpuEmitter::log2(Value x) {
  return LLVM::CallIntrinsicOp::create(
             b, loc, b.getF32Type(),
             b.getStringAttr("llvm.nvvm.lg2.approx.ftz.f"), ValueRange{x})
      .getResult(0);
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

void GpuEmitter::ifThenElse(Value cond, const std::function<void()> &thenBody,
                            const std::function<void()> &elseBody) {
  auto ifOp = scf::IfOp::create(b, loc, cond, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  thenBody();
  b.setInsertionPointToStart(ifOp.elseBlock());
  elseBody();
}

SmallVector<Value> GpuEmitter::selectValues(
    Value cond, TypeRange types,
    const std::function<SmallVector<Value>()> &thenValues,
    const std::function<SmallVector<Value>()> &elseValues) {
  auto ifOp = scf::IfOp::create(b, loc, types, cond, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  scf::YieldOp::create(b, loc, thenValues());
  b.setInsertionPointToStart(ifOp.elseBlock());
  scf::YieldOp::create(b, loc, elseValues());
  return SmallVector<Value>(ifOp.getResults());
}

/// Bytes of one vector access of `memref`'s element type.
static int64_t vectorBytes(Value memref) {
  Type element = cast<MemRefType>(memref.getType()).getElementType();
  return GpuEmitter::kVectorWidth * element.getIntOrFloatBitWidth() / 8;
}

bool GpuEmitter::hasVectorRows(Value memref, bool dynamicStrides) {
  auto type = cast<MemRefType>(memref.getType());
  if (type.getRank() == 0)
    return false;
  int64_t inner = type.getShape().back();
  if (ShapedType::isDynamic(inner) || inner % kVectorWidth != 0)
    return false;
  if (type.getLayout().isIdentity())
    return true;
  // Views (a column range of wider rows, leading rows of a buffer, a
  // range of heads) qualify when their rows are contiguous and start whole
  // vectors apart; a dynamic offset, and where allowed a dynamic stride,
  // is part of the run-time alignment check.
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)) || strides.back() != 1)
    return false;
  for (int64_t stride : ArrayRef<int64_t>(strides).drop_back())
    if (ShapedType::isDynamic(stride) ? !dynamicStrides
                                      : stride % kVectorWidth != 0)
      return false;
  return true;
}

Value GpuEmitter::vectorAligned(ValueRange memrefs, int64_t elements) {
  Value all;
  for (Value memref : memrefs) {
    // The first element's address: the aligned base plus the view's
    // offset (0 for an identity layout).
    auto metadata = memref::ExtractStridedMetadataOp::create(b, loc, memref);
    int64_t elementBytes =
        cast<MemRefType>(memref.getType()).getElementTypeBitWidth() / 8;
    Value address =
        add(memref::ExtractAlignedPointerAsIndexOp::create(b, loc, memref),
            mul(metadata.getOffset(), index(elementBytes)));
    Value misaligned = arith::RemUIOp::create(
        b, loc, address, index(elements * elementBytes));
    Value aligned = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                          misaligned, index(0));
    all = all ? arith::AndIOp::create(b, loc, all, aligned).getResult()
              : aligned;
    // Rows start whole vectors apart: dynamic strides are checked here
    // (hasVectorRows checked the static ones).
    auto type = cast<MemRefType>(memref.getType());
    SmallVector<int64_t> strides;
    int64_t offset;
    if (type.getLayout().isIdentity() ||
        failed(type.getStridesAndOffset(strides, offset)))
      continue;
    for (auto [d, stride] : llvm::enumerate(strides)) {
      if (!ShapedType::isDynamic(stride))
        continue;
      Value rest = arith::RemUIOp::create(b, loc, metadata.getStrides()[d],
                                          index(elements));
      Value whole = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                          rest, index(0));
      all = arith::AndIOp::create(b, loc, all, whole);
    }
  }
  return all;
}

Value GpuEmitter::loadVector(Value memref, ValueRange indices) {
  Type element = cast<MemRefType>(memref.getType()).getElementType();
  return vector::LoadOp::create(b, loc, VectorType::get({kVectorWidth}, element),
                                memref, indices, /*nontemporal=*/false,
                                llvm::MaybeAlign(vectorBytes(memref)));
}

Value GpuEmitter::loadVectorF32(Value memref, ValueRange indices) {
  return vectorF32(loadVector(memref, indices));
}

Value GpuEmitter::vectorF32(Value v) {
  auto f32 = VectorType::get({kVectorWidth}, b.getF32Type());
  // FP8 codes through f16, which holds both formats' values exactly.
  if (isFp8Type(v.getType()))
    v = dequantizeFp8(b, loc, v, b.getF16Type());
  if (v.getType() != f32)
    v = arith::ExtFOp::create(b, loc, f32, v);
  return v;
}

Value GpuEmitter::convertFloat(Value value, Type element) {
  Type type = element;
  if (auto vector = dyn_cast<VectorType>(value.getType()))
    type = VectorType::get(vector.getShape(), element);
  Type source = getElementTypeOrSelf(value);
  if (source == element)
    return value;
  if (isFp8Type(element))
    return fromF32(convertFloat(value, b.getF32Type()), element);
  unsigned from = source.getIntOrFloatBitWidth(),
           to = element.getIntOrFloatBitWidth();
  if (from == to) {
    // bf16 <-> f16: neither an extension nor a truncation; through f32.
    Type f32 = b.getF32Type();
    if (auto vector = dyn_cast<VectorType>(value.getType()))
      f32 = VectorType::get(vector.getShape(), f32);
    value = arith::ExtFOp::create(b, loc, f32, value);
    from = 32;
  }
  if (from > to)
    return arith::TruncFOp::create(b, loc, type, value);
  return arith::ExtFOp::create(b, loc, type, value);
}

void GpuEmitter::storeVector(Value value, Value memref, ValueRange indices) {
  Type element = cast<MemRefType>(memref.getType()).getElementType();
  vector::StoreOp::create(b, loc, convertFloat(value, element), memref, indices,
                          /*nontemporal=*/false,
                          llvm::MaybeAlign(vectorBytes(memref)));
}

Value GpuEmitter::mergeIntoEntryOutput(Value own, Value entry, Value weight) {
  Value entryEmpty = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ,
                                           weight, f32(0.0));
  Value scale = weight;
  if (auto vector = dyn_cast<VectorType>(own.getType()))
    scale = vector::BroadcastOp::create(b, loc, vector, weight);
  return arith::SelectOp::create(
      b, loc, entryEmpty, own,
      arith::AddFOp::create(b, loc, own,
                            arith::MulFOp::create(b, loc, entry, scale)));
}

GpuEmitter::StagedPiece GpuEmitter::stagedPiece(
    Value piece, int64_t piecesPerRow,
    const std::function<SmallVector<Value, 4>(Value)> &destRow,
    Value destColumn0) {
  StagedPiece p;
  p.row = arith::DivUIOp::create(b, loc, piece, index(piecesPerRow));
  p.column = mul(arith::RemUIOp::create(b, loc, piece, index(piecesPerRow)),
                 index(kVectorWidth));
  p.at = destRow(p.row);
  p.at.push_back(destColumn0 ? add(destColumn0, p.column) : p.column);
  return p;
}

/// Pieces each thread copies when merging (the copy is unrolled then).
static int64_t piecesPerThread(int64_t rows, int64_t piecesPerRow,
                               int64_t threads) {
  if ((rows * piecesPerRow) % threads != 0)
    llvm::report_fatal_error("copyStagedRows: a merging copy needs the same "
                             "number of pieces for every thread");
  return rows * piecesPerRow / threads;
}

SmallVector<Value> GpuEmitter::loadEntryPieces(
    int64_t rows, int64_t columns, Value tid, int64_t threads,
    const std::function<Value(Value)> &real,
    const std::function<SmallVector<Value, 4>(Value)> &destRow, Value dest,
    Value destColumn0) {
  const int64_t piecesPerRow = columns / kVectorWidth;
  Type element = cast<MemRefType>(dest.getType()).getElementType();
  auto pieceType = VectorType::get({kVectorWidth}, element);
  Value aligned = hasVectorRows(dest) ? vectorAligned({dest}) : Value();
  SmallVector<Value> pieces;
  for (int64_t k = 0; k < piecesPerThread(rows, piecesPerRow, threads); ++k) {
    StagedPiece p = stagedPiece(add(tid, index(k * threads)), piecesPerRow,
                                destRow, destColumn0);
    auto elementwise = [&]() -> SmallVector<Value> {
      SmallVector<Value> values;
      SmallVector<Value, 4> at = p.at;
      for (int64_t c = 0; c < kVectorWidth; ++c) {
        at.back() = add(p.at.back(), index(c));
        values.push_back(memref::LoadOp::create(b, loc, dest, at));
      }
      return {vector::FromElementsOp::create(b, loc, pieceType, values)};
    };
    auto load = [&]() -> SmallVector<Value> {
      if (!aligned)
        return elementwise();
      return selectValues(
          aligned, {pieceType},
          [&]() -> SmallVector<Value> { return {loadVector(dest, p.at)}; },
          elementwise);
    };
    // Rows past the real ones are not read (nor copied).
    pieces.push_back(selectValues(real(p.row), {pieceType}, load, [&] {
      return SmallVector<Value>{arith::ConstantOp::create(
          b, loc, pieceType,
          DenseElementsAttr::get(pieceType, b.getFloatAttr(element, 0.0)))};
    })[0]);
  }
  return pieces;
}

void GpuEmitter::copyStagedRows(
    Value staging, int64_t rows, int64_t columns, Value tid, int64_t threads,
    const std::function<Value(Value)> &real,
    const std::function<SmallVector<Value, 4>(Value)> &destRow, Value dest,
    Value destColumn0, const EntryState *entry) {
  auto stagingType = cast<MemRefType>(staging.getType());
  Type staged = stagingType.getElementType();
  int64_t strideBytes =
      stagingType.getDimSize(1) * staged.getIntOrFloatBitWidth() / 8;
  // The kernels' own layouts: a violation is a bug in the caller.
  if (columns % kVectorWidth != 0 || strideBytes % 16 != 0 ||
      columns > stagingType.getDimSize(1))
    llvm::report_fatal_error("copyStagedRows: staged rows are not whole "
                             "16-byte pieces");
  const int64_t piecesPerRow = columns / kVectorWidth;
  Type element = cast<MemRefType>(dest.getType()).getElementType();
  // Uniform over the block: the branch below never diverges.
  Value aligned = hasVectorRows(dest) ? vectorAligned({dest}) : Value();
  auto copyPiece = [&](Value piece, Value entryPiece) {
    StagedPiece p = stagedPiece(piece, piecesPerRow, destRow, destColumn0);
    ifThen(real(p.row), [&] {
      // 16-byte aligned (the rows' stride and start are multiples of 16
      // bytes): what a piece's 16-byte reads need.
      Value values = vector::LoadOp::create(
          b, loc, VectorType::get({kVectorWidth}, staged), staging,
          ValueRange{p.row, p.column}, /*nontemporal=*/false,
          llvm::MaybeAlign(16));
      if (entryPiece)
        values = mergeIntoEntryOutput(
            convertFloat(values, b.getF32Type()),
            convertFloat(entryPiece, b.getF32Type()),
            memref::LoadOp::create(b, loc, entry->weights, ValueRange{p.row}));
      auto elementwise = [&] {
        SmallVector<Value, 4> at = p.at;
        for (int64_t k = 0; k < kVectorWidth; ++k) {
          at.back() = add(p.at.back(), index(k));
          memref::StoreOp::create(
              b, loc,
              convertFloat(vector::ExtractOp::create(b, loc, values, k),
                           element),
              dest, at);
        }
      };
      if (aligned)
        ifThenElse(
            aligned, [&] { storeVector(values, dest, p.at); }, elementwise);
      else
        elementwise();
    });
  };
  if (!entry) {
    forLoop(tid, index(rows * piecesPerRow), threads,
            [&](Value piece) { copyPiece(piece, Value()); });
    return;
  }
  int64_t perThread = piecesPerThread(rows, piecesPerRow, threads);
  if ((int64_t)entry->pieces.size() != perThread)
    llvm::report_fatal_error("copyStagedRows: entry pieces not loaded by "
                             "loadEntryPieces for this copy");
  for (int64_t k = 0; k < perThread; ++k)
    copyPiece(add(tid, index(k * threads)), entry->pieces[k]);
}

} // namespace mla::gpu
