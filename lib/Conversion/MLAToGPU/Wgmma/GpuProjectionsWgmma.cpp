//===- GpuProjectionsWgmma.cpp - Hopper up-projections (wgmma) -----------===//
//
// The wgmma strategy's kernel for up-projections of prefill size (sm_90a;
// a PerHeadProduct marked prefillSized: the chunked prefill's kv_up_proj)
// with bf16 or f16 operands. A block computes a 128-token x 128-column
// tile of one head's product with two warpgroups (256 threads),
// warpgroup g owning tokens [64 g, 64 g + 64):
//
//  - x (128 x 64) and W_h (64 x 128) come in 64-deep slices through a
//    three-stage cp.async ring, straight into wgmma's 128-byte-swizzled
//    layout (mla/Target/WgmmaSwizzle.h): x K-major as two 64-row tiles,
//    W_h N-major as two 64-column blocks. 97 KiB of shared memory, so two
//    blocks share an SM and one's copies and products overlap the other's.
//    Token rows past the end are zero-filled, not read; where x or W is
//    not 16-byte aligned the slices are copied element by element.
//  - A slice is four wgmma m64n128k16 per warpgroup, both operands from
//    shared memory through descriptors, one committed group waited for
//    before the next slice's barrier (left in flight across the loop's back
//    edge, ptxas would serialize every wgmma).
//  - The accumulators (64 x 128 f32 a warpgroup, 64 registers a thread)
//    are staged as rows of the element type over the dead ring and leave
//    as the mma.sync kernel's do (ProductTile::store).
//
//===----------------------------------------------------------------------===//

#include "Tiles/PerHeadProduct.h"
#include "Emitters/WgmmaEmitter.h"
#include "mla/Target/WgmmaSwizzle.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"

using namespace mlir;

namespace mla::gpu {

namespace {
using namespace wgmma;

constexpr int64_t kTileTokens = 128, kTileColumns = 128;
constexpr int64_t kGroupTokens = 64;
constexpr int64_t kThreads = 256;
/// Depth of one ring slice (one 128-byte swizzle row of x), and stages.
constexpr int64_t kSliceDepth = kAtomColumns;
constexpr int64_t kStages = 3;
/// Bytes of a slice's x (two 64-row tiles) and W (two 64-column blocks of
/// 64 rows), of a 64-row column block, and of the ring with the slack
/// that lets it start at a 1024-byte boundary.
constexpr int64_t kXBytes = kTileTokens * kRowBytes;
constexpr int64_t kBlockBytes = kGroupTokens * kRowBytes;
constexpr int64_t kStageBytes = kXBytes + kSliceDepth * kTileColumns * 2;
constexpr int64_t kSharedBytes = kStages * kStageBytes + kAtomBytes;
/// The staged results: rows padded by 16 bytes.
constexpr int64_t kStagingStride = kTileColumns + 8;
static_assert(kTileTokens * kStagingStride * 2 <= kStages * kStageBytes,
              "the staged results fit the ring");
} // namespace

bool useWgmmaProduct(const PerHeadProduct &p, Operation *op,
                     const GpuTarget &target) {
  return target.strategy == KernelStrategy::Warpgroup && p.prefillSized &&
         hasTensorCoreProductOperands(p, op, kSliceDepth) &&
         productTileColumns(p) == kTileColumns &&
         kSharedBytes <= target.maxSharedBytesPerBlock();
}

void lowerWgmmaProduct(const PerHeadProduct &p, Operation *op,
                       KernelFactory &kernels, StringRef name) {
  Type element = cast<MemRefType>(op->getOperand(0).getType()).getElementType();
  const int64_t slices = p.depth / kSliceDepth;
  const int64_t accRegs = kGroupTokens * kTileColumns / 128;

  auto kernel = kernels.create(
      name, op->getOperandTypes(),
      [&](GpuEmitter &base, ValueRange a) {
        WgmmaEmitter e(base.builder(), base.location(), element);
        ProductTile tile(e, p, a, kTileTokens, kTileColumns);
        Value x = tile.x, w = tile.w;
        WgmmaEmitter::WarpgroupThread th = e.warpgroupThread();
        Value aligned = e.vectorAligned({x, w});
        const int64_t warps = kThreads / kWarpSize;

        Value raw = e.dynamicShared();
        WgmmaEmitter::AlignedShared aligned1k = e.alignedShared(raw);
        Value ring = e.sharedView(raw, aligned1k.offset,
                                  {kStages * kStageBytes / 2}, element);
        auto stageBytes = [&](Value stage) {
          return e.mul(stage, e.index(kStageBytes));
        };
        // Copies slice `slice` (depth [64 slice, 64 slice + 64)) into
        // `stage`, at the elements of the swizzled layout.
        auto copySlice = [&](Value slice, Value stage) {
          Value depth0 = e.mul(slice, e.index(kSliceDepth));
          Value xBase = e.divui(stageBytes(stage), 2);
          e.copyTile(
              aligned, ring, x, kTileTokens, kSliceDepth / kCopyElems, th.warp,
              th.lane, [&](Value row) { return tile.inputRow(row, depth0); },
              warps,
              [&](Value row, Value col) {
                Value half = e.divui(row, kGroupTokens);
                return SmallVector<Value, 2>{
                    e.add(xBase, e.add(e.mul(half, e.index(kBlockBytes / 2)),
                                       e.swizzled(e.remui(row, kGroupTokens),
                                                  col, kGroupTokens)))};
              });
          Value wBase = e.divui(e.add(stageBytes(stage), e.index(kXBytes)), 2);
          e.copyTile(
              aligned, ring, w, kSliceDepth, kTileColumns / kCopyElems, th.warp,
              th.lane, [&](Value row) { return tile.weightRow(row, depth0); },
              warps,
              [&](Value row, Value col) {
                return SmallVector<Value, 2>{
                    e.add(wBase, e.swizzled(row, col, kSliceDepth))};
              });
        };

        // The ring's first kStages - 1 slices, a group each (empty past the
        // depth, so the waits below count the same).
        e.forLoop(e.index(0), e.index(kStages - 1), 1, [&](Value s) {
          e.ifThen(e.lessThan(s, e.index(slices)), [&] { copySlice(s, s); });
          e.commitCopies();
        });

        SmallVector<Value> acc = e.forLoop(
            e.index(0), e.index(slices), 1,
            SmallVector<Value>(accRegs, e.f32(0.0)),
            [&](Value slice, ValueRange it) -> SmallVector<Value> {
              // This slice has landed for every thread, visible to wgmma,
              // and the products of the previous one are done (waited for
              // below), so its stage takes the copy kStages - 1 ahead.
              e.waitPendingCopies(kStages - 2);
              e.sharedProxyFence();
              e.barrier();
              Value ahead = e.add(slice, e.index(kStages - 1));
              e.ifThen(e.lessThan(ahead, e.index(slices)),
                       [&] { copySlice(ahead, e.remui(ahead, kStages)); });
              e.commitCopies();

              Value stage =
                  e.add(aligned1k.address, stageBytes(e.remui(slice, kStages)));
              // x: the warpgroup's 64-row tile, K-major; W: N-major, its
              // two 64-column blocks 8 KiB apart.
              Value descX = e.descriptor(
                  e.add(stage, e.mul(th.group, e.index(kBlockBytes))), 16,
                  kAtomBytes);
              Value descW = e.descriptor(e.add(stage, e.index(kXBytes)),
                                         kBlockBytes, kAtomBytes);
              Value next = e.issueProductNMajorB(
                  e.toAccumulator(SmallVector<Value>(it)), descX, descW,
                  kSliceDepth, kTileColumns);
              e.wait(0);
              return e.fromAccumulator(next, accRegs);
            });
        // The ring is dead once the trailing (empty) groups are waited for
        // and every thread is past its last slice.
        e.waitPendingCopies(0);
        e.barrier();

        // Thread (warp w of warpgroup g, lane 4 q' + q) holds acc[4 j + 2 i
        // + c] at row 64 g + 16 w + q' + 8 i, column 8 j + 2 q + c.
        Value staging =
            e.sharedView(raw, 0, {kTileTokens, kStagingStride}, element);
        for (int64_t i = 0; i < 2; ++i)
          e.stageFragmentRow(
              staging,
              e.add(e.add(e.mul(th.group, e.index(kGroupTokens)),
                          e.mul(th.groupWarp, e.index(16))),
                    e.add(th.laneGroup, e.index(8 * i))),
              e.index(0), th.quad, kTileColumns / 8,
              [&](int64_t j, int64_t c) { return acc[4 * j + 2 * i + c]; });
        e.barrier();
        tile.store(staging, th.tid, kThreads);
      },
      kThreads);
  launchProduct(p, op, kernel, kTileTokens, kTileColumns, kSharedBytes);
}

} // namespace mla::gpu
