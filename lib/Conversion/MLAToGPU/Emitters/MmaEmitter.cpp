//===- MmaEmitter.cpp - Tensor-core building blocks for mma-sync kernels --===//

#include "Emitters/MmaEmitter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include "llvm/Support/ErrorHandling.h"

#include <cmath>

using namespace mlir;

namespace mla::gpu {

Value MmaEmitter::shuffleXor(Value v, int64_t offset) {
  Value delta = arith::ConstantIntOp::create(b, loc, offset, 32);
  Value width = arith::ConstantIntOp::create(b, loc, kWarpSize, 32);
  return mlir::gpu::ShuffleOp::create(b, loc, v, delta, width,
                                      mlir::gpu::ShuffleMode::XOR)
      .getShuffleResult();
}

Value MmaEmitter::quadMax(Value v) {
  for (int64_t o : {1, 2})
    v = arith::MaximumFOp::create(b, loc, v, shuffleXor(v, o));
  return v;
}

Value MmaEmitter::quadSum(Value v) {
  for (int64_t o : {1, 2})
    v = arith::AddFOp::create(b, loc, v, shuffleXor(v, o));
  return v;
}

Value MmaEmitter::select(Value c, Value t, Value f) {
  return arith::SelectOp::create(b, loc, c, t, f);
}
Value MmaEmitter::divui(Value a, int64_t d) {
  return arith::DivUIOp::create(b, loc, a, index(d));
}
Value MmaEmitter::remui(Value a, int64_t d) {
  return arith::RemUIOp::create(b, loc, a, index(d));
}
Value MmaEmitter::mulf(Value a, Value c) {
  return arith::MulFOp::create(b, loc, a, c);
}
Value MmaEmitter::addf(Value a, Value c) {
  return arith::AddFOp::create(b, loc, a, c);
}
Value MmaEmitter::subf(Value a, Value c) {
  return arith::SubFOp::create(b, loc, a, c);
}
Value MmaEmitter::maxf(Value a, Value c) {
  return arith::MaximumFOp::create(b, loc, a, c);
}
Value MmaEmitter::andi(Value a, Value c) {
  return arith::AndIOp::create(b, loc, a, c);
}
Value MmaEmitter::isNegInf(Value x) {
  return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, x, negInf());
}

void MmaEmitter::copyTile(Value aligned, Value dst, Value src, int64_t rowCount,
                          int64_t vectors, Value warp, Value lane,
                          const std::function<SourceRow(Value row)> &source,
                          int64_t warps, const SharedIndex &at,
                          int64_t firstVector, int64_t elementsPerCopy) {
  // Each warp copies rows four at a time (8 lanes a row).
  if (rowCount % (4 * warps))
    llvm::report_fatal_error("copyTile: a tile of " + llvm::Twine(rowCount) +
                             " rows does not split into four-row groups of "
                             "each warp");
  int64_t rowsPerWarp = rowCount / warps;
  auto dstAt = [&](Value row, Value col) -> SmallVector<Value, 2> {
    if (at)
      return at(row, col);
    return {row, col};
  };
  Value laneGroup = divui(lane, 8), lane8 = remui(lane, 8);
  SmallVector<std::pair<Value, SourceRow>> rows;
  for (int64_t i = 0; i < rowsPerWarp / 4; ++i) {
    Value row =
        add(mul(warp, index(rowsPerWarp)), add(laneGroup, index(4 * i)));
    rows.push_back({row, source(row)});
  }
  auto srcAt = [&](const SourceRow &r, Value col) {
    SmallVector<Value> idx(r.prefix.begin(), r.prefix.end());
    idx.push_back(r.column0 ? add(r.column0, col) : col);
    return idx;
  };
  int64_t chunks = (vectors + 7) / 8;
  // 16-byte copies bypass L1 (cp.async.cg); 8-byte ones (FP8 codes
  // eight at a time) cannot (cp.async.ca).
  Type dstElement = cast<MemRefType>(dst.getType()).getElementType();
  UnitAttr bypassL1 = dstElement.getIntOrFloatBitWidth() * elementsPerCopy == 128
                          ? b.getUnitAttr()
                          : UnitAttr();
  auto vectorCopies = [&] {
    for (auto &[row, from] : rows) {
      Value count = select(from.valid, index(elementsPerCopy), index(0));
      for (int64_t k = 0; k < chunks; ++k) {
        Value vec = add(lane8, index(firstVector + 8 * k));
        Value col = mul(vec, index(elementsPerCopy));
        auto copy = [&, row = row, &from = from] {
          nvgpu::DeviceAsyncCopyOp::create(
              b, loc, nvgpu::DeviceAsyncTokenType::get(b.getContext()),
              dst, dstAt(row, col), src, srcAt(from, col),
              b.getIndexAttr(elementsPerCopy), count, bypassL1);
        };
        if (8 * (k + 1) <= vectors)
          copy();
        else
          ifThen(lessThan(vec, index(firstVector + vectors)), copy);
      }
    }
  };
  if (!aligned)
    return vectorCopies();
  ifThenElse(
      aligned, vectorCopies,
      [&] {
        Value zero =
            arith::ConstantOp::create(b, loc, b.getZeroAttr(dstElement));
        for (auto &[row, from] : rows)
          forLoop(add(lane8, index(firstVector)), index(firstVector + vectors),
                  8, [&, row = row, &from = from](Value vec) {
                    Value col = mul(vec, index(elementsPerCopy));
                    for (int64_t e = 0; e < elementsPerCopy; ++e) {
                      Value c = add(col, index(e));
                      Value v =
                          memref::LoadOp::create(b, loc, src, srcAt(from, c));
                      memref::StoreOp::create(b, loc,
                                              select(from.valid, v, zero), dst,
                                              dstAt(row, c));
                    }
                  });
      });
}

Value MmaEmitter::fma(Value a, Value c, Value d) {
  return math::FmaOp::create(b, loc, a, c, d);
}

/// Combines `values` pairwise, level by level.
static Value reduceTree(SmallVector<Value> values,
                        llvm::function_ref<Value(Value, Value)> combine) {
  while (values.size() > 1) {
    SmallVector<Value> next;
    for (size_t i = 0; i + 1 < values.size(); i += 2)
      next.push_back(combine(values[i], values[i + 1]));
    if (values.size() % 2)
      next.push_back(values.back());
    values = std::move(next);
  }
  return values.front();
}

Value MmaEmitter::maxTree(ArrayRef<Value> values) {
  return reduceTree(SmallVector<Value>(values),
                    [&](Value x, Value y) { return maxf(x, y); });
}

Value MmaEmitter::sumTree(ArrayRef<Value> values) {
  return reduceTree(SmallVector<Value>(values),
                    [&](Value x, Value y) { return addf(x, y); });
}

Value MmaEmitter::warpAny(Value pred) {
  Value all = arith::ConstantIntOp::create(b, loc, -1, 32);
  return NVVM::VoteSyncOp::create(
      b, loc, b.getI1Type(), all, pred,
      NVVM::VoteSyncKindAttr::get(b.getContext(), NVVM::VoteSyncKind::any));
}

Value MmaEmitter::commitCopies() {
  return nvgpu::DeviceAsyncCreateGroupOp::create(
      b, loc, nvgpu::DeviceAsyncTokenType::get(b.getContext()), ValueRange{});
}

void MmaEmitter::waitCopies(Value group, int64_t pending) {
  // Lowers to cp.async.wait_group `pending`; the token only orders the ops.
  nvgpu::DeviceAsyncWaitOp::create(b, loc, group,
                                   b.getI32IntegerAttr(pending));
}

void MmaEmitter::waitPendingCopies(int64_t pending) {
  NVVM::CpAsyncWaitGroupOp::create(b, loc, b.getI32IntegerAttr(pending));
}

SmallVector<Value> MmaEmitter::ldmatrix(Value smem, ValueRange idx,
                                        int64_t tiles, bool transpose) {
  auto type = VectorType::get({tiles, 2}, element);
  Value m = nvgpu::LdMatrixOp::create(b, loc, type, smem, idx,
                                      b.getBoolAttr(transpose),
                                      b.getI32IntegerAttr(tiles));
  SmallVector<Value> pieces;
  for (int64_t i = 0; i < tiles; ++i)
    pieces.push_back(vector::ExtractOp::create(b, loc, m, i));
  return pieces;
}

Value MmaEmitter::pack(Value lo, Value hi) {
  auto pairType = VectorType::get({2}, element);
  return vector::FromElementsOp::create(
      b, loc, pairType,
      ValueRange{arith::TruncFOp::create(b, loc, element, lo),
                 arith::TruncFOp::create(b, loc, element, hi)});
}

void MmaEmitter::stageFragmentRow(
    Value staging, Value row, Value column0, Value quad, int64_t tiles,
    const std::function<Value(int64_t, int64_t)> &value) {
  Type staged = cast<MemRefType>(staging.getType()).getElementType();
  int64_t pairBytes = 2 * staged.getIntOrFloatBitWidth() / 8;
  for (int64_t j = 0; j < tiles; ++j) {
    Value pair = staged.isF32() ? vector::FromElementsOp::create(
                                      b, loc, VectorType::get({2}, staged),
                                      ValueRange{value(j, 0), value(j, 1)})
                                      .getResult()
                                : pack(value(j, 0), value(j, 1));
    Value column = add(column0, add(index(8 * j), mul(quad, index(2))));
    vector::StoreOp::create(b, loc, pair, staging, ValueRange{row, column},
                            /*nontemporal=*/false, llvm::MaybeAlign(pairBytes));
  }
}

Value MmaEmitter::operand(Value piece) {
  if (element.isF16())
    return piece;
  return LLVM::BitcastOp::create(b, loc, b.getI32Type(), piece);
}

void MmaEmitter::mma(ArrayRef<Value> a, Value b0, Value b1,
                     MutableArrayRef<Value> c) {
  Type f32 = b.getF32Type();
  auto resultType =
      LLVM::LLVMStructType::getLiteral(b.getContext(), {f32, f32, f32, f32});
  SmallVector<Value> as;
  for (Value v : a)
    as.push_back(operand(v));
  std::optional<std::array<NVVM::MMATypes, 2>> types;
  if (element.isBF16())
    types = std::array<NVVM::MMATypes, 2>{NVVM::MMATypes::bf16,
                                          NVVM::MMATypes::bf16};
  Value d = NVVM::MmaOp::create(
      b, loc, resultType, as, ValueRange{operand(b0), operand(b1)},
      ValueRange(c), ArrayRef<int64_t>{16, 8, 16}, std::nullopt, std::nullopt,
      types,
      std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                     NVVM::MMALayout::col});
  for (int64_t i = 0; i < 4; ++i)
    c[i] = LLVM::ExtractValueOp::create(b, loc, d, i);
}

} // namespace mla::gpu
