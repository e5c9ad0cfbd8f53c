//===- WgmmaEmitter.cpp - Warpgroup tensor-core building blocks (sm_90a) --===//

#include "Emitters/WgmmaEmitter.h"
#include "Emitters/InlinePtx.h"
#include "mla/Target/WgmmaSwizzle.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

#include "llvm/Support/ErrorHandling.h"

using namespace mlir;
using mla::wgmma::kAtomBytes;

namespace mla::gpu {

namespace {
/// Swizzle-mode field of a descriptor: 128-byte swizzle.
constexpr uint64_t kSwizzle128 = uint64_t(1) << 62;
/// The address fields hold bytes / 16 in 14 bits.
constexpr uint64_t kFieldMask = 0x3FFF;
} // namespace

WgmmaEmitter::WarpgroupThread WgmmaEmitter::warpgroupThread() {
  WarpgroupThread t;
  t.tid = threadId();
  t.warp = divui(t.tid, kWarpSize);
  t.lane = remui(t.tid, kWarpSize);
  t.group = divui(t.tid, 128);
  t.groupWarp = remui(t.warp, 4);
  t.laneGroup = divui(t.lane, 4);
  t.quad = remui(t.lane, 4);
  return t;
}

Value WgmmaEmitter::sharedAddress(Value sharedMemref) {
  // The pointer of a workgroup memref is a shared-window address.
  return memref::ExtractAlignedPointerAsIndexOp::create(b, loc, sharedMemref);
}

WgmmaEmitter::AlignedShared WgmmaEmitter::alignedShared(Value raw) {
  Value rawAddress = sharedAddress(raw);
  Value pad = remui(sub(index(kAtomBytes), remui(rawAddress, kAtomBytes)),
                    kAtomBytes);
  return {pad, add(rawAddress, pad)};
}

Value WgmmaEmitter::swizzled(Value row, Value col, int64_t rows) {
  // Column block col / 64, row `row` of it (64 elements), 16-byte chunk
  // (col % 64) / 8 XOR row % 8, element col % 8.
  Value block = divui(col, 64), inBlock = remui(col, 64);
  Value chunk = arith::XOrIOp::create(b, loc, divui(inBlock, 8), remui(row, 8));
  return add(add(mul(block, index(rows * 64)), mul(row, index(64))),
             add(mul(chunk, index(8)), remui(inBlock, 8)));
}

Value WgmmaEmitter::descriptor(Value address, int64_t leadingBytes,
                               int64_t strideBytes) {
  Type i64 = b.getI64Type();
  if (leadingBytes % 16 || strideBytes % 16 ||
      (uint64_t(leadingBytes) >> 4) > kFieldMask ||
      (uint64_t(strideBytes) >> 4) > kFieldMask)
    llvm::report_fatal_error("wgmma descriptor byte offsets out of range");
  uint64_t fixed = kSwizzle128 |
                   ((uint64_t(leadingBytes) >> 4) & kFieldMask) << 16 |
                   ((uint64_t(strideBytes) >> 4) & kFieldMask) << 32;
  Value start = arith::IndexCastUIOp::create(b, loc, i64, address);
  start = arith::ShRUIOp::create(
      b, loc, start, arith::ConstantIntOp::create(b, loc, i64, 4));
  start = arith::AndIOp::create(
      b, loc, start, arith::ConstantIntOp::create(b, loc, i64, kFieldMask));
  return arith::OrIOp::create(
      b, loc, start, arith::ConstantIntOp::create(b, loc, i64, fixed));
}

Value WgmmaEmitter::advance(Value descriptor, int64_t bytes) {
  // The offsets are the kernels' constants: a bad one is a compiler bug,
  // which would otherwise be truncated silently.
  if (bytes % 16 || bytes < 0 || (uint64_t(bytes) >> 4) > kFieldMask)
    llvm::report_fatal_error("wgmma descriptor offset out of range");
  if (bytes == 0)
    return descriptor;
  return arith::AddIOp::create(
      b, loc, descriptor,
      arith::ConstantIntOp::create(b, loc, b.getI64Type(), bytes >> 4));
}

static Type accumulatorType(MLIRContext *ctx, int64_t n) {
  return LLVM::LLVMStructType::getLiteral(
      ctx, SmallVector<Type>(n, Float32Type::get(ctx)));
}

Value WgmmaEmitter::unsetAccumulator(int64_t n) {
  return LLVM::PoisonOp::create(b, loc, accumulatorType(b.getContext(), n));
}

Value WgmmaEmitter::toAccumulator(ArrayRef<Value> values) {
  Value acc = LLVM::PoisonOp::create(
      b, loc, accumulatorType(b.getContext(), values.size()));
  for (auto [i, v] : llvm::enumerate(values))
    acc = LLVM::InsertValueOp::create(b, loc, acc, v, i);
  return acc;
}

SmallVector<Value> WgmmaEmitter::fromAccumulator(Value acc, int64_t n) {
  SmallVector<Value> values;
  for (int64_t i = 0; i < n; ++i)
    values.push_back(LLVM::ExtractValueOp::create(b, loc, acc, i));
  return values;
}

Value WgmmaEmitter::mma(Value acc, Value descA, Value descB, int64_t n,
                        bool accumulate, bool transposeB) {
  MLIRContext *ctx = b.getContext();
  auto type = NVVM::WGMMATypesAttr::get(
      ctx, element.isBF16() ? NVVM::WGMMATypes::bf16 : NVVM::WGMMATypes::f16);
  auto one = NVVM::WGMMAScaleInAttr::get(ctx, NVVM::WGMMAScaleIn::one);
  // MMALayout row for A and col for B are K-major; B row is N-major.
  return NVVM::WgmmaMmaAsyncOp::create(
      b, loc, acc.getType(), acc, descA, descB,
      NVVM::MMAShapeAttr::get(ctx, 64, n, 16), type, type,
      NVVM::WGMMATypesAttr::get(ctx, NVVM::WGMMATypes::f32),
      NVVM::WGMMAScaleOutAttr::get(ctx, accumulate ? NVVM::WGMMAScaleOut::one
                                                   : NVVM::WGMMAScaleOut::zero),
      one, one, NVVM::MMALayoutAttr::get(ctx, NVVM::MMALayout::row),
      NVVM::MMALayoutAttr::get(ctx, transposeB ? NVVM::MMALayout::row
                                               : NVVM::MMALayout::col),
      NVVM::MMAIntOverflowAttr());
}

Value WgmmaEmitter::issueNMajorSteps(
    Value acc, Value descB, int64_t depth,
    llvm::function_ref<Value(Value acc, int64_t k, Value descB)> step) {
  fence();
  for (int64_t k = 0; k < depth / 16; ++k)
    acc = step(acc, k, advance(descB, 2 * kAtomBytes * k));
  commit();
  return acc;
}

Value WgmmaEmitter::issueProductNMajorB(Value acc, Value descA, Value descB,
                                        int64_t depth, int64_t n) {
  return issueNMajorSteps(acc, descB, depth, [&](Value acc, int64_t k,
                                                 Value descBk) {
    return mma(acc, advance(descA, 32 * k), descBk, n, /*accumulate=*/true,
               /*transposeB=*/true);
  });
}

Value WgmmaEmitter::mmaRegisterA(Value acc, ArrayRef<Value> a, Value descB,
                                 int64_t n, bool accumulate, bool transposeB) {
  return ptx::wgmmaRegisterA(b, loc, acc, a, descB, n, element, accumulate,
                             transposeB);
}

Value WgmmaEmitter::issueProductRegisterA(Value acc, ArrayRef<Value> a,
                                          Value descB, int64_t depth,
                                          int64_t n) {
  if (int64_t(a.size()) != depth / 4)
    llvm::report_fatal_error("register-A product: 4 registers a k16 step");
  return issueNMajorSteps(acc, descB, depth, [&](Value acc, int64_t k,
                                                 Value descBk) {
    return mmaRegisterA(acc, a.slice(4 * k, 4), descBk, n,
                        /*accumulate=*/true, /*transposeB=*/true);
  });
}

Value WgmmaEmitter::packRegister(Value lo, Value hi) {
  return LLVM::BitcastOp::create(b, loc, b.getI32Type(), pack(lo, hi));
}

void WgmmaEmitter::fence() { NVVM::WgmmaFenceAlignedOp::create(b, loc); }

void WgmmaEmitter::commit() { NVVM::WgmmaGroupSyncAlignedOp::create(b, loc); }

void WgmmaEmitter::wait(int64_t pending) {
  NVVM::WgmmaWaitGroupSyncOp::create(b, loc, b.getI64IntegerAttr(pending));
}

void WgmmaEmitter::warpgroupBarrier(Value group) {
  Type i32 = b.getI32Type();
  Value id = arith::IndexCastUIOp::create(b, loc, i32, add(group, index(1)));
  NVVM::BarrierOp::create(b, loc, Type(), id,
                          arith::ConstantIntOp::create(b, loc, 128, 32),
                          NVVM::BarrierReductionAttr(), Value());
}

void WgmmaEmitter::namedBarrier(int64_t id, int64_t threads, bool wait) {
  Value idValue = arith::ConstantIntOp::create(b, loc, id, 32);
  Value count = arith::ConstantIntOp::create(b, loc, threads, 32);
  if (wait)
    NVVM::BarrierOp::create(b, loc, Type(), idValue, count,
                            NVVM::BarrierReductionAttr(), Value());
  else
    NVVM::BarrierArriveOp::create(b, loc, idValue, count);
}

void WgmmaEmitter::sharedProxyFence() {
  NVVM::FenceProxyOp::create(
      b, loc,
      NVVM::ProxyKindAttr::get(b.getContext(), NVVM::ProxyKind::async_shared),
      NVVM::SharedSpaceAttr::get(b.getContext(),
                                 NVVM::SharedSpace::shared_cta));
}

/// An LLVM pointer in NVPTX address space `space` from an index address.
static Value pointerAt(OpBuilder &b, Location loc, Value address,
                       unsigned space) {
  Value i64 = arith::IndexCastUIOp::create(b, loc, b.getI64Type(), address);
  return LLVM::IntToPtrOp::create(
      b, loc, LLVM::LLVMPointerType::get(b.getContext(), space), i64);
}

/// Address space 3: shared memory (shared-window addresses).
static constexpr unsigned kSharedSpace = 3;
/// Address space 7: shared memory of any block of the cluster (tensor
/// copies write there). A block's own shared-window address is also its
/// shared::cluster address.
static constexpr unsigned kSharedClusterSpace = 7;

void WgmmaEmitter::initBarrier(Value address, int64_t count) {
  NVVM::MBarrierInitOp::create(b, loc, pointerAt(b, loc, address, kSharedSpace),
                               arith::ConstantIntOp::create(b, loc, count, 32),
                               Value());
}

void WgmmaEmitter::arriveWhenCopiesLand(Value address) {
  NVVM::CpAsyncMBarrierArriveOp::create(
      b, loc, pointerAt(b, loc, address, kSharedSpace), /*noinc=*/true);
}

void WgmmaEmitter::waitBarrierPhase(Value address, Value parity) {
  // A suspend-time hint; the op loops until the phase completes.
  constexpr int64_t kSuspendHintNs = 1000000;
  NVVM::MBarrierTryWaitParityOp::create(
      b, loc, pointerAt(b, loc, address, kSharedSpace), parity,
      arith::ConstantIntOp::create(b, loc, kSuspendHintNs, 32));
}

void WgmmaEmitter::arrive(Value address) {
  NVVM::MBarrierArriveOp::create(
      b, loc, Type(), pointerAt(b, loc, address, kSharedSpace), Value());
}

Value WgmmaEmitter::phaseParity(Value use) {
  return arith::IndexCastUIOp::create(b, loc, b.getI32Type(), remui(use, 2));
}

void WgmmaEmitter::setMaxRegisters(int64_t count, bool increase) {
  if (count < 24 || count > 256 || count % 8)
    llvm::report_fatal_error("setmaxnreg: " + llvm::Twine(count) +
                             " registers is not a multiple of 8 in [24, 256]");
  NVVM::SetMaxRegisterOp::create(b, loc, uint32_t(count),
                                 increase
                                     ? NVVM::SetMaxRegisterAction::increase
                                     : NVVM::SetMaxRegisterAction::decrease);
}

void WgmmaEmitter::arriveExpectingBytes(Value address, int64_t bytes) {
  NVVM::MBarrierArriveExpectTxOp::create(
      b, loc, Type(), pointerAt(b, loc, address, kSharedSpace),
      arith::ConstantIntOp::create(b, loc, bytes, 32), NVVM::MemScopeKind::CTA,
      /*relaxed=*/false, Value());
}

void WgmmaEmitter::copyBox(Value destination, Value tensorMap, Value column,
                           Value row, Value barrier) {
  // The shared::cluster form, addressing this block's own shared memory.
  NVVM::CpAsyncBulkTensorGlobalToSharedClusterOp::create(
      b, loc, pointerAt(b, loc, destination, kSharedClusterSpace), tensorMap,
      ValueRange{column, row}, pointerAt(b, loc, barrier, kSharedSpace),
      ValueRange{}, /*multicastMask=*/Value(), Value(), NVVM::TMALoadMode::TILE,
      /*isCTAOnly=*/false, NVVM::CTAGroupKindAttr(), Value());
}

} // namespace mla::gpu
