//===- WgmmaDecodeBody.h - The wgmma decode split kernel's block -*- C++ -*-===//
//
// What the two schedules of the wgmma split kernel (GpuDecodeWgmma.cpp,
// whose file comment describes the kernel; the seesaw schedule is in
// WgmmaDecodeSeesaw.cpp) share: the kernel's constants and SplitBody, one
// block's shared memory, tile copies, products, softmax steps and results.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_LIB_CONVERSION_MLATOGPU_WGMMADECODEBODY_H
#define MLA_LIB_CONVERSION_MLATOGPU_WGMMADECODEBODY_H

#include "Tiles/DecodeSplitBlock.h"
#include "Tiles/FragmentSoftmax.h"
#include "Emitters/Fp8Dequant.h"
#include "Emitters/WgmmaEmitter.h"
#include "mla/Target/WgmmaDecodeShape.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>
#include <functional>
#include <optional>

namespace mla::gpu::wgmma_decode_kernel {

using namespace mlir;
using namespace wgmma_decode;
/// Bytes of one 64-column block of a 64-row tile.
constexpr int64_t kBlockBytes = kTileRows * kRowBytes;
static_assert(kTileTokens == kTileRows,
              "Q and KV tiles share the column-block size");
static_assert(kWarpgroups == 2, "the schedules pair two warpgroups");
/// Tokens each warpgroup scores in the one-tile schedule.
constexpr int64_t kHalfTokens = kTileTokens / kWarpgroups;
/// Named barriers of the seesaw schedule (0 is the block's, 1 and 2 each
/// warpgroup's own: WgmmaEmitter::warpgroupBarrier). Each is arrived at by
/// one warpgroup and waited at by the other (256 threads).
constexpr int64_t kPublishedA = 3; ///< P_A, m_A and alpha_A are written
constexpr int64_t kPublishedB = 4; ///< P_B, m_B and alpha_B are written
constexpr int64_t kAReadBy0 = 5;   ///< warpgroup 0 is done reading stage A
constexpr int64_t kBReadBy0 = 6;   ///< warpgroup 0 is done reading stage B
constexpr int64_t kAllThreads = 7; ///< the results' barriers
/// With a converting producer (convertingSeesaw), warpgroup 1 is done
/// reading stage A / B (arrived at by warpgroup 1, waited at by the
/// producer; kAReadBy0 and kBReadBy0 are then waited at by the producer).
constexpr int64_t kAReadBy1 = 8;
constexpr int64_t kBReadBy1 = 9;
/// The producer warpgroup of the FP8 seesaw (convertingSeesaw), and the
/// registers setmaxnreg gives it and each consumer thread (their sum over
/// 384 threads within the SM's 64 Ki).
constexpr int64_t kProducerThreads = 128;
constexpr int64_t kProducerRegisters = 64;
constexpr int64_t kConsumerRegisters = 224;
static_assert(kProducerThreads * kProducerRegisters +
                      kThreads * kConsumerRegisters <=
                  65536,
              "the producer's and consumers' registers fit an SM");
/// What the seesaw schedule keeps in the P region (P itself goes into the
/// tiles' rope blocks): the exchanged row values (m and alpha of A's and
/// B's rows, f32), the Q and V descriptor slots, and the "part landed"
/// mbarriers, two a stage (8 bytes each).
constexpr int64_t kExchangeValues = 4 * kTileRows;
constexpr int64_t kDescriptorSlotsOffset = kExchangeValues * 4;
/// The producer threads' indices (convertingSeesaw), 4 bytes each.
constexpr int64_t kProducerIndexOffset = kDescriptorSlotsOffset + 2 * 8;
constexpr int64_t kPartBarriersOffset = 2048;
constexpr int64_t kPartsPerStage = 2;
constexpr int64_t kBarrierBytes = 8;
constexpr int64_t kPartBarriers = 2 * kPartsPerStage;
/// With tiles loaded by tensor copies (see TensorTiles), Q's mbarrier
/// follows the parts' ones.
constexpr int64_t kQBarrierOffset =
    kPartBarriersOffset + kPartBarriers * kBarrierBytes;
static_assert(kProducerIndexOffset + 128 * 4 <= kPartBarriersOffset &&
                  kQBarrierOffset + kBarrierBytes <=
                      kTileRows * kTileTokens * 2,
              "the seesaw's exchanges, descriptors and mbarriers fit the P "
              "region of 16-bit P");
/// Fewest heads for which KV tiles come in by tensor copies (TMA) rather
/// than cp.async: measured 2 to 4% faster at 128 heads on an H100, the
/// same within 1% at 16 and 64 heads, slightly slower at 16 heads and
/// batch 1 (benchmarks.md).
constexpr int64_t kMinHeadsForTensorCopies = 128;
/// Row stride of the output staging (f32): 8 elements of padding shift
/// each row by as many banks as a quad's two-element stores span, so the
/// rows a warp stores at once hit fewer banks twice; rows stay 32-byte
/// aligned for the vector reads of the copy out.
constexpr int64_t kStagingStride(int64_t latent) { return latent + 8; }
/// Whether a block runs the seesaw schedule: two KV stages, and a rope
/// column block in each to take its tile's P once scored (rope dims are
/// positive multiples of 64 here: takesDims).
inline bool usesSeesaw(const SharedLayout &layout, int64_t ropeDim) {
  return layout.stages == 2 && ropeDim >= kAtomColumns;
}


/// KV tiles loaded by tensor copies (TMA) instead of cp.async: one thread
/// of the warpgroup that refills a stage part (see seesawSchedule) issues
/// it as 64 x 64 boxes, one a column block, which the tensor map's
/// 128-byte swizzle writes in the layout wgmma reads, and announces the
/// part's bytes at the part's mbarrier, which the copies complete; 128
/// threads issuing 16-byte copies become one issuing 4 or 5 boxes. Q
/// still comes in by cp.async, on a barrier of its own. Needs the tiles to
/// be whole pages of the cache (a page size that is a multiple of 64,
/// splits on page boundaries: both schedules' are), and a tensor map of
/// the cache viewed as rows of Lkv + R elements (the host's, through
/// mlaTiledTensorMap). Rows past the split's tokens still arrive (from the
/// pages they are in); the warpgroup that scores a tile zeroes them in its
/// V columns afterwards, as the cp.async copies zero-fill them.
struct TensorTiles {
  Value tensorMap; ///< generic pointer to the cache's CUtensorMap
};

/// The body of one block of the wgmma split kernel: what both schedules
/// share (the Q tile, KV tile copies, scores, exponentials, P V, the
/// results) and the two schedules. A schedule returns the lane's state:
/// the running max of its two rows, its warpgroup's partial row sums (of
/// the tokens it exponentiated), and its O accumulators, all relative to
/// the same max in both warpgroups.
class SplitBody {
public:
  friend class Seesaw;
  SplitBody(WgmmaEmitter &e, DecodeSplitBlock &block, DecodeAttentionOp op,
            const SharedLayout &layout,
            std::optional<TensorTiles> tma = std::nullopt)
      : e(e), b(e.builder()), l(e.location()), block(block), layout(layout),
        tma(tma), converts(isa<Float8E4M3FNType, Float8E5M2Type>(
                               cast<MemRefType>(block.cache.getType())
                                   .getElementType()) &&
                           layout.codeStages == 0),
        page(op.getBlockSize()), heads(op.getNumHeads()),
        latent(op.getKvLoraRank()), qkDim(latent + op.getRopeDim()),
        halfColumns(latent / kWarpgroups), oRegs(kTileRows * halfColumns / 128),
        kSteps(qkDim / 16),
        scaleLog2(op.getSoftmaxScale().convertToDouble() * M_LOG2E),
        thread(e.warpgroupThread()) {
    zero = e.index(0);
    raw = e.dynamicShared();
    WgmmaEmitter::AlignedShared aligned1k = e.alignedShared(raw);
    pad = aligned1k.offset;
    base = aligned1k.address;
    tiles = e.sharedView(raw, pad, {layout.max / 2}, e.element);
    numTiles = e.ceilDiv(e.maxIndex(e.sub(block.kvEnd, block.first), zero),
                         kTileTokens);
    // The lane's two rows of the tile: 16 w + g and + 8.
    for (int64_t i = 0; i < 2; ++i)
      laneRows.push_back(block.laneRow(
          e.add(e.mul(thread.groupWarp, e.index(16)),
                e.add(thread.laneGroup, e.index(8 * i)))));
    leader = e.eqIndex(thread.quad, 0);
    descQ = e.descriptor(e.add(base, e.index(layout.q)), 16, kAtomBytes);
    scoreScale = block.scoresScale(scaleLog2);
  }

  /// The one-tile schedule (one KV stage): both warpgroups score half of
  /// each tile's tokens, exchange row maxima, write P, and add P V into
  /// their output halves; four barriers a tile.
  SmallVector<Value> oneTileSchedule();
  /// The seesaw schedule (two stages and a rope block to hold P; see the
  /// file comment), returning the lane's state as oneTileSchedule does.
  SmallVector<Value> seesawSchedule();
  /// The seesaw over an FP8 cache: the consumers (warpgroups 0 and 1) run
  /// seesawSchedule and then `finish` with its state, while a producer
  /// warpgroup (threads 256 to 383) fills the KV stages with the codes it
  /// loads and converts in registers (see Seesaw::produce).
  void convertingSeesaw(
      const std::function<void(ArrayRef<Value>)> &finish);
  /// The FP8 schedule: the one-tile schedule over a KV tile dequantized
  /// from code stages that the next tiles land in meanwhile.
  SmallVector<Value> fp8Schedule();
  /// out = O / l and lse, final or partial (see DecodeSplitBlock).
  void writeResults(ArrayRef<Value> state);

private:
  WgmmaEmitter &e;
  OpBuilder &b;
  Location l;
  DecodeSplitBlock &block;
  const SharedLayout &layout;
  const std::optional<TensorTiles> tma;
  /// Whether a producer warpgroup fills the KV stages with converted FP8
  /// codes (convertingSeesaw).
  const bool converts;
  const int64_t page;
  const int64_t heads, latent, qkDim, halfColumns, oRegs, kSteps;
  const double scaleLog2;
  WgmmaEmitter::WarpgroupThread thread;
  Value zero, raw, pad, base, tiles, numTiles, leader, descQ;
  /// DecodeSplitBlock::scoresScale.
  Value scoreScale;
  SmallVector<DecodeSplitBlock::LaneRow, 2> laneRows;

  /// The wgmma descriptors of one tile of the one-tile schedules: Q, the
  /// warpgroup's half of the K tokens and of the V columns, and P.
  struct HalfTileOperands {
    Value q, k, v, p;
  };
  /// Those of the KV tile at shared address `kv`.
  HalfTileOperands halfTileOperands(Value kv) {
    return {descQ,
            kMajor(e.add(kv, e.mul(thread.group,
                                   e.index(kHalfTokens * kRowBytes)))),
            groupV(kv), kMajor(e.add(base, e.index(layout.p)))};
  }
  /// One tile of the one-tile schedules, once KV tile t is in the tile of
  /// `operands` and visible to wgmma: both warpgroups score their half of
  /// its tokens, exchange row maxima through `maxS`, write P to the P tile
  /// and add P V to their output halves. Returns the state after the tile.
  SmallVector<Value> halfTileStep(Value t, ValueRange state, Value maxS,
                                  const HalfTileOperands &operands);
  /// The initial state: max -inf, sums 0, O 0.
  SmallVector<Value> initialState() {
    SmallVector<Value> init{e.negInf(), e.negInf(), e.f32(0.0), e.f32(0.0)};
    init.append(oRegs, e.f32(0.0));
    return init;
  }
  /// The first token of KV tile t.
  Value tileStart(Value t) {
    return e.add(block.first, e.mul(t, e.index(kTileTokens)));
  }
  /// The shared address and element offset of KV stage `stage`.
  Value stageAddress(Value stage) {
    return e.add(base, e.add(e.index(layout.kv),
                             e.mul(stage, e.index(layout.kvStage))));
  }
  /// Element offsets of (row, col) in the swizzled tile at byte offset
  /// `byteOffset` (+ `stageOffset` elements) of the tile region.
  MmaEmitter::SharedIndex swizzledAt(Value byteOffset) {
    return [this, byteOffset](Value row, Value col) {
      return SmallVector<Value, 2>{
          e.add(e.divui(byteOffset, 2), e.swizzled(row, col, kTileRows))};
    };
  }
  /// The Q tile (padding rows zero), copied by every thread; or its
  /// 64-column blocks [firstBlock, endBlock) by `warps` warps, `warp`
  /// numbering the thread's warp among them.
  void copyQ() {
    copyQ(thread.warp, kThreads / kWarpSize, 0, qkDim / kAtomColumns);
  }
  void copyQ(Value warp, int64_t warps, int64_t firstBlock, int64_t endBlock) {
    const int64_t vectorsPerBlock = kAtomColumns / kCopyElems;
    e.copyTile(
        Value(), tiles, block.q, kTileRows,
        (endBlock - firstBlock) * vectorsPerBlock, warp, thread.lane,
        [&](Value row) { return block.queryRow(row); }, warps,
        swizzledAt(e.index(layout.q)), firstBlock * vectorsPerBlock);
  }
  /// KV tile t into stage `stage`, copied by `warps` warps (the block's or
  /// one warpgroup's, `warp` numbering the thread's warp among them): its
  /// 64-column blocks [firstBlock, endBlock), all by default.
  void copyKv(Value t, Value stage, Value warp, int64_t warps,
              int64_t firstBlock = 0, int64_t endBlock = 0) {
    Value start = tileStart(t);
    const int64_t vectorsPerBlock = kAtomColumns / kCopyElems;
    if (endBlock == 0)
      endBlock = qkDim / kAtomColumns;
    e.copyTile(
        Value(), tiles, block.cache, kTileTokens,
        (endBlock - firstBlock) * vectorsPerBlock, warp, thread.lane,
        [&](Value row) { return block.cacheRow(start, row); }, warps,
        swizzledAt(
            e.add(e.index(layout.kv), e.mul(stage, e.index(layout.kvStage)))),
        firstBlock * vectorsPerBlock);
  }
  /// The codes of FP8 KV tile t into code stage `stage` (see SharedLayout),
  /// copied by the block's warps as 8-byte cp.async: each code at the
  /// offset its two-byte element has in a KV tile, halved.
  void copyCodes(Value t, Value stage) {
    Value start = tileStart(t);
    Value stageAt = e.mul(stage, e.index(layout.codeStage));
    e.copyTile(
        Value(), codeTiles(), block.cache, kTileTokens, qkDim / kCopyElems,
        thread.warp, thread.lane,
        [&](Value row) { return block.cacheRow(start, row); },
        kThreads / kWarpSize, [&](Value row, Value col) {
          return SmallVector<Value, 2>{
              e.add(stageAt, e.swizzled(row, col, kTileRows))};
        });
  }
  /// The code stages, one byte an element.
  Value codeTiles() {
    Type code = cast<MemRefType>(block.cache.getType()).getElementType();
    return e.sharedView(raw, e.add(pad, e.index(layout.codes)),
                        {layout.codeStages * layout.codeStage}, code);
  }
  /// Code stage `stage` dequantized into the KV tile (stage 0) by the
  /// block's threads, 16 codes at a time: the stage's bytes and the tile's
  /// elements in the same order, so each thread reads 16 consecutive bytes
  /// and writes 32. A loop, not unrolled: the output accumulators leave
  /// registers for one chunk in flight, not nine.
  void dequantizeCodes(Value stage) {
    Value codes = codeTiles();
    Type code = cast<MemRefType>(codes.getType()).getElementType();
    constexpr int64_t kChunk = 16;
    const int64_t chunks = layout.codeStage / kChunk;
    if (chunks % kThreads != 0)
      llvm::report_fatal_error("wgmma decode: a code stage does not split "
                               "into 16-byte chunks of every thread");
    Value from = e.add(e.mul(stage, e.index(layout.codeStage)),
                       e.mul(thread.tid, e.index(kChunk)));
    Value to = e.add(e.index(layout.kv / 2), e.mul(thread.tid, e.index(kChunk)));
    e.forLoop(zero, e.index(layout.codeStage), kThreads * kChunk,
              [&](Value step) {
                Value loaded = vector::LoadOp::create(
                    b, l, VectorType::get({kChunk}, code), codes,
                    ValueRange{e.add(from, step)});
                Value values = dequantizeFp8(b, l, loaded, e.element);
                vector::StoreOp::create(b, l, values, tiles,
                                        ValueRange{e.add(to, step)},
                                        /*nontemporal=*/false,
                                        llvm::MaybeAlign(16));
              });
  }
  /// Column blocks [firstBlock, endBlock) of KV tile t, as tensor copies
  /// from the cache's tensor map into stage `stage`, counted by the
  /// mbarrier at `landed` (see TensorTiles). The tile is 64 rows of one
  /// page (64 | page), found as the cp.async copies find their first row
  /// (DecodeSplitBlock::cacheRow: the token clamped to the split's last,
  /// for the zero-filled tile past it, and the page number clamped), then
  /// rounded down to the tile's start in the page.
  void issueTensorTile(Value t, int64_t stage, int64_t firstBlock,
                       int64_t endBlock, Value landed) {
    MmaEmitter::SourceRow first = block.cacheRow(tileStart(t), zero);
    Value cachePage = first.prefix[0], inPage = first.prefix[1];
    inPage = e.sub(inPage, e.remui(inPage, kTileTokens));
    Value row = e.add(e.mul(cachePage, e.index(page)), inPage);
    Type i32 = b.getI32Type();
    Value row32 = arith::IndexCastUIOp::create(b, l, i32, row);
    Value stageAt = e.add(base, e.index(layout.kv + stage * layout.kvStage));
    for (int64_t column = firstBlock; column < endBlock; ++column)
      e.copyBox(e.add(stageAt, e.index(column * kBlockBytes)), tma->tensorMap,
                arith::ConstantIntOp::create(b, l, column * kAtomColumns, 32),
                row32, landed);
  }
  /// Zeroes the V columns (the latent blocks) of rows [validRows, 64) of
  /// the tile at shared address `stageAt`: rows past the split's tokens
  /// that a tensor copy brought in with their page, which may hold
  /// anything (NaN included), and which P V multiplies by P = 0. Run by
  /// one warpgroup (its thread `groupThread`), made visible to wgmma and
  /// to the warpgroup's threads.
  void zeroRowsPast(Value stageAt, Value validRows, Value groupThread) {
    const int64_t chunksPerRow = latent / kAtomColumns * (kRowBytes / 16);
    Value zeros = arith::ConstantOp::create(
        b, l,
        DenseElementsAttr::get(VectorType::get({8}, e.element),
                               b.getZeroAttr(e.element)));
    Value first = e.mul(validRows, e.index(chunksPerRow));
    Value end = e.index(kTileTokens * chunksPerRow);
    e.forLoop(e.add(first, groupThread), end, 128, [&](Value chunk) {
      Value row = e.divui(chunk, chunksPerRow);
      Value inRow = e.remui(chunk, chunksPerRow);
      Value column = e.divui(inRow, kRowBytes / 16);
      Value byte = e.add(e.add(e.mul(column, e.index(kBlockBytes)),
                               e.mul(row, e.index(kRowBytes))),
                         e.mul(e.remui(inRow, kRowBytes / 16), e.index(16)));
      Value at = e.divui(e.add(e.sub(stageAt, base), byte), 2);
      vector::StoreOp::create(b, l, zeros, tiles, ValueRange{at},
                              /*nontemporal=*/false, llvm::MaybeAlign(16));
    });
    e.sharedProxyFence();
  }
  /// S = Q K^T over `tokens` tokens of the K tile of descriptor `descK`
  /// (K-major, rows 128 bytes apart in 8-row atoms): Dqk / 16 wgmma,
  /// waited for. With `partLanded`, the contraction runs in two groups,
  /// over the first `splitBlock` column blocks and over the rest, each
  /// issued once `partLanded(part)` has returned: the second part of the
  /// tile may still be landing while the first is multiplied. (A wait
  /// between two committed groups, each opened by its own wgmma.fence,
  /// keeps ptxas's wgmma pipeline; one inside a group serializes it,
  /// C7520.)
  SmallVector<Value> scores(Value descQ, Value descK, int64_t tokens,
                            const std::function<void(int64_t)> &partLanded =
                                nullptr,
                            int64_t splitBlock = 0) {
    int64_t regs = kTileRows * tokens / 128;
    Value acc = e.unsetAccumulator(regs);
    if (partLanded)
      partLanded(0);
    e.fence();
    for (int64_t step = 0; step < kSteps; ++step) {
      if (partLanded && step == splitBlock * 4) {
        e.commit();
        partLanded(1);
        e.fence();
      }
      int64_t offset = (step / 4) * kBlockBytes + (step % 4) * 32;
      acc = e.mma(acc, e.advance(descQ, offset), e.advance(descK, offset),
                  tokens, step > 0, false);
    }
    e.commit();
    e.wait(0);
    return e.fromAccumulator(acc, regs);
  }
  /// The descriptor of a K-major operand (Q, K, P) at shared address
  /// `address`.
  Value kMajor(Value address) {
    return e.descriptor(address, 16, kAtomBytes);
  }
  /// The descriptor of the warpgroup's V columns in the KV stage at shared
  /// address `kv`: N-major, column blocks 8 KiB apart, 8-token atoms 1 KiB
  /// apart.
  Value groupV(Value kv) {
    return e.descriptor(
        e.add(kv, e.mul(thread.group,
                        e.index(halfColumns / kAtomColumns * kBlockBytes))),
        kBlockBytes, kAtomBytes);
  }
  /// `descriptor` moved by `bytes` (index, a multiple of 16).
  Value moved(Value descriptor, Value bytes) {
    return arith::AddIOp::create(
        b, l, descriptor,
        arith::IndexCastUIOp::create(b, l, b.getI64Type(),
                                     e.divui(bytes, 16)));
  }
  /// The online softmax of a tile of `tokens` scores a row (the
  /// warpgroup's 64 rows, a warp's 16).
  FragmentSoftmax softmaxOf(int64_t tokens) const {
    return FragmentSoftmax(e, {1, tokens / 8}, scoreScale, thread.quad);
  }
  /// Masks the tokens past a row's end in place (column 8 j + 2 quad + c
  /// of the fragment is token `first` + 8 j + 2 quad + c); returns the two
  /// rows' maxima over the quad (scaled, base 2).
  SmallVector<Value> maskedRowMax(const FragmentSoftmax &softmax,
                                  MutableArrayRef<Value> s, Value first) {
    softmax.mask(s, first, {laneRows[0].end, laneRows[1].end});
    return {softmax.rowMax(s, 0), softmax.rowMax(s, 1)};
  }
  /// FragmentSoftmax::advance for the lane's two rows.
  struct RowMaxima {
    SmallVector<Value> max, safe, alpha;
  };
  RowMaxima onlineMaxRows(const FragmentSoftmax &softmax, ArrayRef<Value> old,
                          ArrayRef<Value> tileMax) {
    RowMaxima rows;
    for (int64_t i = 0; i < 2; ++i) {
      OnlineMax step = softmax.advance(old[i], tileMax[i]);
      rows.max.push_back(step.max);
      rows.safe.push_back(step.safe);
      rows.alpha.push_back(step.alpha);
    }
    return rows;
  }
  /// P as bf16/f16 into the swizzled 64 x 64 tile at byte offset `pTile`
  /// of the tile region, at columns `column0` + 8 j + 2 quad + c; returns
  /// the two rows' partial sums continued from `sums`.
  SmallVector<Value> exponentials(const FragmentSoftmax &softmax,
                                  ArrayRef<Value> s, const RowMaxima &rows,
                                  Value pTile, Value column0,
                                  ArrayRef<Value> sums) {
    SmallVector<Value> out;
    for (int64_t i = 0; i < 2; ++i) {
      auto storeP = [&](int64_t, int64_t j, Value p0, Value p1) {
        Value col = e.add(column0, e.add(e.index(8 * j),
                                         e.mul(thread.quad, e.index(2))));
        Value at = e.add(e.divui(pTile, 2),
                         e.swizzled(laneRows[i].local, col, kTileRows));
        vector::StoreOp::create(b, l, e.pack(p0, p1), tiles, ValueRange{at},
                                /*nontemporal=*/false, llvm::MaybeAlign(4));
      };
      OnlineMax step{rows.max[i], rows.safe[i], rows.alpha[i]};
      out.push_back(softmax.exponentiate(s, i, step, sums[i], storeP));
    }
    return out;
  }
  /// The warpgroup's output accumulators rescaled by their rows' alpha
  /// (only where some row max of the warp moved).
  SmallVector<Value> rescaleO(ValueRange o, ArrayRef<Value> alpha) {
    return FragmentSoftmax::rescale(e, o, {1, halfColumns / 8}, alpha,
                                    /*onlyIfMoved=*/true);
  }
  /// O += P V over the warpgroup's output columns: P (64 x 64) K-major,
  /// V N-major (descriptors from kMajor and groupV). Issued and committed;
  /// the caller waits (e.wait) before reading the result.
  Value issuePv(ArrayRef<Value> o, Value descP, Value descV) {
    return e.issueProductNMajorB(e.toAccumulator(o), descP, descV, kTileTokens,
                                 halfColumns);
  }
  SmallVector<Value> pv(ArrayRef<Value> o, Value descP, Value descV) {
    Value acc = issuePv(o, descP, descV);
    e.wait(0);
    return e.fromAccumulator(acc, oRegs);
  }
  /// The lane rows' values `perRow` to `buffer` (f32 at `slot` * 64 +
  /// row), written by the quad leaders; and back.
  void publishRows(Value buffer, Value slot, ArrayRef<Value> perRow) {
    e.ifThen(leader, [&] {
      for (int64_t i = 0; i < 2; ++i)
        memref::StoreOp::create(
            b, l, perRow[i], buffer,
            ValueRange{e.add(e.mul(slot, e.index(kTileRows)),
                             laneRows[i].local)});
    });
  }
  SmallVector<Value> readRows(Value buffer, int64_t slot) {
    SmallVector<Value> v;
    for (int64_t i = 0; i < 2; ++i)
      v.push_back(memref::LoadOp::create(
          b, l, buffer,
          ValueRange{e.add(e.index(slot * kTileRows), laneRows[i].local)}));
    return v;
  }
  /// A value per lane row reduced over the two warpgroups through `buffer`
  /// (one slot per group): each group publishes, a block barrier, every
  /// lane combines both.
  SmallVector<Value> acrossGroups(Value buffer, ArrayRef<Value> perRow,
                                  bool max) {
    publishRows(buffer, thread.group, perRow);
    allThreadsBarrier();
    SmallVector<Value> first = readRows(buffer, 0), second = readRows(buffer, 1);
    SmallVector<Value> combined;
    for (int64_t i = 0; i < 2; ++i)
      combined.push_back(max ? e.maxf(first[i], second[i])
                             : e.addf(first[i], second[i]));
    return combined;
  }
  Value f32View(int64_t byteOffset, int64_t count) {
    return e.sharedView(raw, e.add(pad, e.index(byteOffset)), {count},
                        b.getF32Type());
  }
  /// Named barrier `id` of both warpgroups: this one waits at it (sync)
  /// or only arrives.
  void syncNamed(int64_t id) { e.namedBarrier(id, kThreads, /*wait=*/true); }
  void arriveNamed(int64_t id) {
    e.namedBarrier(id, kThreads, /*wait=*/false);
  }
  /// A barrier of all the block's threads that the two warpgroups may
  /// reach from their own branches of the seesaw schedule (a named barrier
  /// with a thread count; the block's barrier 0 is for converged code).
  void allThreadsBarrier() { e.namedBarrier(kAllThreads, kThreads, true); }
};

} // namespace mla::gpu::wgmma_decode_kernel

#endif // MLA_LIB_CONVERSION_MLATOGPU_WGMMADECODEBODY_H
