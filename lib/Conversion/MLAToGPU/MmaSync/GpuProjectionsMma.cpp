//===- GpuProjectionsMma.cpp - Tensor-core up-projections (mma.sync) -----===//
//
// The tensor-core strategies' kernel for the up-projections (a
// PerHeadProduct with bf16 or f16 operands), a tiled matrix product per
// head. A block computes a 64-token x `tileColumns` tile of one head's
// product, four warps in a 2 x 2 grid (32 tokens x tileColumns / 2 each,
// two m16 tiles by tileColumns / 16 n8 tiles of f32 accumulators):
//
//  - x and W_h come in 32-deep slices through a four-stage cp.async ring
//    (16-byte copies, L2 only; element copies where a base is not 16-byte
//    aligned): three slices are in flight while one is used, so the loads
//    of a short product (a decode step's few tokens) are not a chain of
//    round trips. Token rows past the end are zero-filled, not read.
//  - x through ldmatrix as A, W_h (rows of columns) through ldmatrix.trans
//    as B of m16n8k16 mma.sync; shared rows are padded by 16 bytes so that
//    ldmatrix's eight row addresses fall in different banks.
//  - The results are staged as rows of the element type and leave in
//    16-byte pieces (GpuEmitter::copyStagedRows) to the output holding the
//    tile's columns; the rope columns copied alongside go in 16-byte
//    vectors too (RowMove, 8 threads a token).
//
// The same kernel serves sm_80 to sm_90a. Dims it does not tile (depth not
// a multiple of 32, outputs not whole 64-column tiles) and other types go
// to the CUDA-core kernel.
//
//===----------------------------------------------------------------------===//

#include "Emitters/MmaEmitter.h"
#include "Tiles/PerHeadProduct.h"
#include "mla/Target/SharedRegions.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"

using namespace mlir;

namespace mla::gpu {

namespace {

/// Tokens of a block's tile, and of a warp's (two m16 tiles).
constexpr int64_t kTileTokens = 64;
constexpr int64_t kWarpTokens = kTileTokens / 2;
/// Depth of one ring slice (two k16 steps), and the ring's stages.
constexpr int64_t kSliceDepth = 32;
constexpr int64_t kStages = 4;
/// Padding after each shared row (16 bytes).
constexpr int64_t kRowPad = 8;

/// The block's dynamic shared memory (bytes): `kStages` slices, each the
/// x rows (64 x 32) then the W rows (32 x tileColumns), rows padded; the
/// staged results reuse it at the end.
struct ProductLayout {
  int64_t xStride, wStride; ///< elements per shared row
  int64_t wOffset, stageBytes, bytes;

  explicit ProductLayout(int64_t tileColumns)
      : xStride(kSliceDepth + kRowPad), wStride(tileColumns + kRowPad) {
    // A stage: the x rows, then the W rows.
    SharedRegions stage;
    stage.tiles(1, kTileTokens, xStride, 2);
    wOffset = stage.tiles(1, kSliceDepth, wStride, 2);
    stageBytes = stage.total();
    // The staged results lie over the stages at the end.
    SharedRegions r;
    r.bytes(kStages * stageBytes);
    r.overlay(SharedRegions::tileBytes(kTileTokens, wStride, 2));
    bytes = r.total();
  }
};

} // namespace

bool useMmaProduct(const PerHeadProduct &p, Operation *op,
                   const GpuTarget &target) {
  return target.usesMmaSync() &&
         hasTensorCoreProductOperands(p, op, kSliceDepth) &&
         ProductLayout(productTileColumns(p)).bytes <=
             target.maxSharedBytesPerBlock();
}

void lowerMmaProduct(const PerHeadProduct &p, Operation *op,
                     KernelFactory &kernels, StringRef name) {
  Type element = cast<MemRefType>(op->getOperand(0).getType()).getElementType();
  const int64_t tileColumns = productTileColumns(p);
  const int64_t warpColumns = tileColumns / 2;
  const int64_t nTiles = warpColumns / 8; // n8 tiles a warp
  const int64_t slices = p.depth / kSliceDepth;
  const ProductLayout layout(tileColumns);

  auto kernel = kernels.create(
      name, op->getOperandTypes(), [&](GpuEmitter &base, ValueRange a) {
        MmaEmitter e(base.builder(), base.location(), element);
        ProductTile tile(e, p, a, kTileTokens, tileColumns);
        Value x = tile.x, w = tile.w;
        Value tid = e.threadId();
        Value lane = e.remui(tid, kWarpSize), warp = e.divui(tid, kWarpSize);
        Value warpRow = e.divui(warp, 2), warpColumn = e.remui(warp, 2);
        Value group = e.divui(lane, 4), quad = e.remui(lane, 4);
        Value aligned = e.vectorAligned({x, w});

        Value raw = e.dynamicShared();
        auto stageAt = [&](Value stage) {
          return e.mul(stage, e.index(layout.stageBytes));
        };
        auto xSlice = [&](Value stage) {
          return e.sharedView(raw, stageAt(stage),
                              {kTileTokens, layout.xStride}, element);
        };
        auto wSlice = [&](Value stage) {
          return e.sharedView(raw,
                              e.add(stageAt(stage), e.index(layout.wOffset)),
                              {kSliceDepth, layout.wStride}, element);
        };
        // Copies slice `slice` (depth [32 slice, 32 slice + 32)) into
        // `stage`.
        auto copySlice = [&](Value slice, Value stage) {
          Value depth0 = e.mul(slice, e.index(kSliceDepth));
          e.copyTile(aligned, xSlice(stage), x, kTileTokens,
                     kSliceDepth / kCopyElems, warp, lane,
                     [&](Value row) { return tile.inputRow(row, depth0); });
          e.copyTile(aligned, wSlice(stage), w, kSliceDepth,
                     tileColumns / kCopyElems, warp, lane,
                     [&](Value row) { return tile.weightRow(row, depth0); });
        };

        // The ring's first kStages - 1 slices, a group each (empty past
        // the depth, so the waits below count the same). A loop, so that
        // the copy code (with its element fallback) is emitted twice in
        // the kernel, not four times.
        e.forLoop(e.index(0), e.index(kStages - 1), 1, [&](Value s) {
          e.ifThen(e.lessThan(s, e.index(slices)), [&] { copySlice(s, s); });
          e.commitCopies();
        });

        // ldmatrix lane addresses. A (x): row lane % 16 of the m16 tile,
        // depth (lane / 16) * 8 of the k16 step. B (W, transposed): depth
        // ((lane / 8) % 2) * 8 + lane % 8 of the k16 step, column
        // (lane / 16) * 8 of each pair of n8 tiles.
        Value lane8 = e.remui(lane, 8);
        Value half = e.mul(e.divui(lane, 16), e.index(8));
        Value odd = e.mul(e.remui(e.divui(lane, 8), 2), e.index(8));
        Value xRow =
            e.add(e.mul(warpRow, e.index(kWarpTokens)), e.remui(lane, 16));
        Value wRow = e.add(odd, lane8);
        Value wColumn = e.add(e.mul(warpColumn, e.index(warpColumns)), half);

        // acc[accAt(m, j, c)]: lane row group + 8 (c / 2) of m16 tile m,
        // column 8 j + 2 quad + c % 2 of the warp's.
        auto accAt = [&](int64_t m, int64_t j, int64_t c) {
          return (m * nTiles + j) * 4 + c;
        };
        SmallVector<Value> acc = e.forLoop(
            e.index(0), e.index(slices), 1,
            SmallVector<Value>(2 * nTiles * 4, e.f32(0.0)),
            [&](Value slice, ValueRange it) -> SmallVector<Value> {
              // This slice has landed (the kStages - 2 newer groups may
              // not have) and every warp is past the previous one, whose
              // stage the next copy refills.
              e.waitPendingCopies(kStages - 2);
              e.barrier();
              Value ahead = e.add(slice, e.index(kStages - 1));
              e.ifThen(e.lessThan(ahead, e.index(slices)),
                       [&] { copySlice(ahead, e.remui(ahead, kStages)); });
              e.commitCopies();

              Value stage = e.remui(slice, kStages);
              Value xS = xSlice(stage), wS = wSlice(stage);
              SmallVector<Value> next(it.begin(), it.end());
              MutableArrayRef<Value> all(next);
              for (int64_t k = 0; k < kSliceDepth; k += 16) {
                SmallVector<SmallVector<Value>> xa;
                for (int64_t m = 0; m < 2; ++m)
                  xa.push_back(e.ldmatrix(
                      xS,
                      {e.add(xRow, e.index(16 * m)), e.add(half, e.index(k))},
                      4, false));
                for (int64_t j = 0; j < nTiles; j += 2) {
                  SmallVector<Value> wb = e.ldmatrix(
                      wS,
                      {e.add(wRow, e.index(k)), e.add(wColumn, e.index(8 * j))},
                      4, true);
                  for (int64_t m = 0; m < 2; ++m) {
                    e.mma(xa[m], wb[0], wb[1], all.slice(accAt(m, j, 0), 4));
                    e.mma(xa[m], wb[2], wb[3],
                          all.slice(accAt(m, j + 1, 0), 4));
                  }
                }
              }
              return next;
            });
        // The ring is dead once the trailing (empty) groups are waited for
        // and every warp is past its last slice.
        e.waitPendingCopies(0);
        e.barrier();

        Value staging =
            e.sharedView(raw, 0, {kTileTokens, layout.wStride}, element);
        for (int64_t m = 0; m < 2; ++m)
          for (int64_t i = 0; i < 2; ++i)
            e.stageFragmentRow(staging,
                               e.add(e.mul(warpRow, e.index(kWarpTokens)),
                                     e.add(group, e.index(16 * m + 8 * i))),
                               e.mul(warpColumn, e.index(warpColumns)), quad,
                               nTiles, [&](int64_t j, int64_t c) {
                                 return acc[accAt(m, j, 2 * i + c)];
                               });
        e.barrier();
        tile.store(staging, tid, kBlockThreads);
      });

  launchProduct(p, op, kernel, kTileTokens, tileColumns, layout.bytes);
}

} // namespace mla::gpu
