//===- GpuDecodeWgmma.cpp - Hopper decode split kernel (wgmma) ------------===//
//
// The `wgmma` strategy's split kernel of mla.decode_attention (sm_90a), for
// bf16 or f16 queries over a cache of the same type and 16 or more heads:
// one block reads a request's KV tiles for 64 of its rows (the 16-row
// mma.sync kernel pulls every tile from L2 once per 16 rows). A block
// handles a 64-row M tile of one request and one split (rows r = s * N + h
// in [64 tile, 64 tile + 64); rows past Sq * N are padding: zero queries,
// results dropped) with two warpgroups (256 threads); warpgroup g owns
// output columns [g Lkv/2, (g + 1) Lkv/2) (Lkv = 512: 128 f32 a thread).
// Shared memory, all tiles in the 128-byte-swizzled layout
// (mla/Target/WgmmaDecodeShape.h): Q 64 x (Lkv + R), KV stages of 64 tokens
// x (Lkv + R), a P tile, row maxima and sums. KV tiles come in with 16-byte
// cp.async (page lookups per row, as in the mma.sync kernel), or, at 128
// heads over whole 64-token pages, as tensor copies (TensorTiles);
// fence.proxy.async makes the copies and P visible to wgmma. The online
// softmax is in base 2.
//
// Seesaw schedule (two KV stages, every DeepSeek-like dims): tiles come in
// pairs, A = 2 j in stage 0 and B = 2 j + 1 in stage 1, and warpgroup 0
// scores A while warpgroup 1 scores B, each with the full Dqk contraction
// (Dqk / 16 wgmma m64n64k16: Q is read from shared memory once a tile, not
// once per warpgroup). Warpgroup 0 publishes A's row max m_A, its factor
// alpha_A and P_A; warpgroup 1 continues B's online softmax from m_A and
// publishes m_B, alpha_B and P_B. Each then adds P_A V_A and P_B V_B into
// its half of O (4 wgmma m64n(Lkv/2)k16 each, V read N-major from the
// tile), rescaled by alpha_A before the first and alpha_B before the
// second, so both halves end relative to m_B. P goes into its tile's first
// rope column block, dead once the tile is scored (the 8 KiB the shared
// memory has no room for). The handoffs are named barriers, one warpgroup
// arriving and the other waiting, so the two drift apart: both score at
// once, and warpgroup 0 adds P_A V_A during B's softmax, warpgroup 1 P_A
// V_A during warpgroup 0's P_B V_B. A stage is refilled in two parts, each
// as soon as its last reader is done: warpgroup 0 copies the V columns
// only it reads right after its own P V with the stage, warpgroup 1 the
// rest (its V columns and the rope blocks, which hold P) after its own
// and warpgroup 0's; so the next A tile is mostly in flight during the
// P_B V_B products. Each part has an mbarrier that counts its copies in
// (every copying thread arrives through cp.async.mbarrier.arrive when its
// copies land), and only the warpgroup that scores the stage next waits,
// part by part: the scores over the first part's columns are issued while
// the second part may still be landing. An odd tile count gets
// a zero-filled B tile (masked, P = 0). Both warpgroups run one program,
// branching only around barriers and copies: two per-warpgroup loops made
// ptxas spill.
//
// One-tile schedule (one KV stage, where two do not fit: qk dims past
// 576): warpgroup g scores tokens [32 g, 32 g + 32) of each tile, the row
// maxima meet in shared memory, P goes to the P tile, and both add P V;
// four barriers a tile, the copy overlapping nothing.
//
// Each wgmma group is waited for before its results are read, and never
// across the loop's back edge (ptxas then serializes every wgmma, C7514,
// which the ptxas lit test refuses). out = O / l (0 when l = 0) and lse =
// m ln 2 + log(l) (-inf when l = 0) go to out and lse for a request of one
// split, else to the split partials of the real rows, as every split
// kernel writes them: the rows staged once as f32 in shared memory, then
// copied out by the whole block in 16-byte pieces, or element by element
// where out or the partials are not vector-aligned (staging once and
// copying in a loop, where each destination had its own unrolled stores,
// took a fifth of the kernel's PTX and a quarter of ptxas's time away);
// lse element by element. Q and the
// cache are copied in 16-byte vectors only: the host launches the generic
// split kernel where either is not 16-byte aligned
// (element-by-element copies doubled this kernel's code and compile time).
//
//===----------------------------------------------------------------------===//

#include "DecodeSplitBlock.h"
#include "FragmentSoftmax.h"
#include "WgmmaEmitter.h"
#include "mla/Target/WgmmaDecodeShape.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>
#include <optional>

using namespace mlir;

namespace mla::gpu {

namespace {
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
/// What the seesaw schedule keeps in the P region (P itself goes into the
/// tiles' rope blocks): the exchanged row values (m and alpha of A's and
/// B's rows, f32), the Q and V descriptor slots, and the "part landed"
/// mbarriers, two a stage (8 bytes each).
constexpr int64_t kExchangeValues = 4 * kTileRows;
constexpr int64_t kDescriptorSlotsOffset = kExchangeValues * 4;
constexpr int64_t kPartBarriersOffset = 2048;
constexpr int64_t kPartsPerStage = 2;
constexpr int64_t kBarrierBytes = 8;
constexpr int64_t kPartBarriers = 2 * kPartsPerStage;
/// With tiles loaded by tensor copies (see TensorTiles), Q's mbarrier
/// follows the parts' ones.
constexpr int64_t kQBarrierOffset =
    kPartBarriersOffset + kPartBarriers * kBarrierBytes;
static_assert(kDescriptorSlotsOffset + 2 * 8 <= kPartBarriersOffset &&
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
bool usesSeesaw(const SharedLayout &layout, int64_t ropeDim) {
  return layout.stages == 2 && ropeDim >= kAtomColumns;
}
} // namespace

bool useWgmmaDecodeSplit(DecodeAttentionOp op, const GpuTarget &target) {
  if (target.strategy != KernelStrategy::Warpgroup)
    return false;
  return runsOn(hasSameTwoByteTypes(op), op.getNumHeads(), op.getKvLoraRank(),
                op.getRopeDim(), target.maxSharedBytesPerBlock()) &&
         GpuEmitter::hasVectorRows(op.getQ()) &&
         GpuEmitter::hasVectorRows(op.getKvCache());
}

namespace {

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
  SplitBody(WgmmaEmitter &e, DecodeSplitBlock &block, DecodeAttentionOp op,
            const SharedLayout &layout,
            std::optional<TensorTiles> tma = std::nullopt)
      : e(e), b(e.builder()), l(e.location()), block(block), layout(layout),
        tma(tma), page(op.getBlockSize()), heads(op.getNumHeads()),
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
  }

  /// The one-tile schedule (one KV stage): both warpgroups score half of
  /// each tile's tokens, exchange row maxima, write P, and add P V into
  /// their output halves; four barriers a tile.
  SmallVector<Value> oneTileSchedule();
  /// The seesaw schedule (two stages and a rope block to hold P; see the
  /// file comment), returning the lane's state as oneTileSchedule does.
  SmallVector<Value> seesawSchedule();
  /// out = O / l and lse, final or partial (see DecodeSplitBlock).
  void writeResults(ArrayRef<Value> state);

private:
  WgmmaEmitter &e;
  OpBuilder &b;
  Location l;
  DecodeSplitBlock &block;
  const SharedLayout &layout;
  const std::optional<TensorTiles> tma;
  const int64_t page;
  const int64_t heads, latent, qkDim, halfColumns, oRegs, kSteps;
  const double scaleLog2;
  WgmmaEmitter::WarpgroupThread thread;
  Value zero, raw, pad, base, tiles, numTiles, leader, descQ;
  SmallVector<DecodeSplitBlock::LaneRow, 2> laneRows;

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
    return FragmentSoftmax(e, {1, tokens / 8}, scaleLog2, thread.quad);
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

SmallVector<Value> SplitBody::oneTileSchedule() {
  Value maxS = f32View(layout.max, kWarpgroups * kTileRows);
  const int64_t warps = kThreads / kWarpSize;
  copyQ();
  Value pTile = e.index(layout.p), kv = stageAddress(zero);
  return e.forLoop(
      zero, numTiles, e.index(1), initialState(),
      [&](Value t, ValueRange it) -> SmallVector<Value> {
        // 1. This tile in shared memory, once every thread is done with
        // the previous one.
        e.barrier();
        copyKv(t, zero, thread.warp, warps);
        e.waitAllCopies();
        e.sharedProxyFence();
        e.barrier();
        // 2. S = Q K^T over the group's 32 tokens.
        SmallVector<Value> s = scores(
            descQ,
            kMajor(e.add(
                kv, e.mul(thread.group, e.index(kHalfTokens * kRowBytes)))),
            kHalfTokens);
        Value column0 = e.mul(thread.group, e.index(kHalfTokens));
        FragmentSoftmax softmax = softmaxOf(kHalfTokens);
        SmallVector<Value> groupMax =
            maskedRowMax(softmax, s, e.add(tileStart(t), column0));
        // 3. Row maxima of both halves.
        SmallVector<Value> tileMax = acrossGroups(maxS, groupMax, true);
        RowMaxima rows = onlineMaxRows(softmax, {it[0], it[1]}, tileMax);
        // 4. P to shared memory, the group's sums, O rescaled.
        SmallVector<Value> sums =
            exponentials(softmax, s, rows, pTile, column0, {it[2], it[3]});
        SmallVector<Value> next{rows.max[0], rows.max[1], sums[0], sums[1]};
        SmallVector<Value> o = rescaleO(it.slice(4, oRegs), rows.alpha);
        e.sharedProxyFence();
        e.barrier();
        // 5. O += P V over the group's columns.
        next.append(pv(o, kMajor(e.add(base, pTile)), groupV(kv)));
        return next;
      });
}

SmallVector<Value> SplitBody::seesawSchedule() {
  // Stage 0 holds tile A = 2 j, stage 1 tile B = 2 j + 1 of pair j. P_A and
  // P_B go into their tiles' first rope block once the scores have read
  // it. An odd tile count gets a last B tile past the split's tokens,
  // copied as zeros (rows past kvEnd are zero-filled, nothing is read):
  // its scores are masked, its P is zero, so no step depends on whether a
  // pair is whole.
  Value stageA = stageAddress(zero);
  int64_t ropeBlock = latent / kAtomColumns * kBlockBytes;
  Value pA = e.index(layout.kv + ropeBlock);
  Value pB = e.index(layout.kv + layout.kvStage + ropeBlock);
  const int64_t groupWarps = 4;
  Value numPairs = e.ceilDiv(numTiles, 2);
  Value paddedTiles = e.mul(numPairs, e.index(2));
  auto pairTile = [&](Value j, int64_t k) {
    return e.add(e.mul(j, e.index(2)), e.index(k));
  };
  Value isA = e.eqIndex(thread.group, 0);
  // In the loop a stage is refilled in two parts, each as soon as its
  // readers are done: warpgroup 0 copies part 0, the V columns only it
  // reads (the first half of the latent blocks), right after its own P V
  // with the stage; warpgroup 1 part 1, the rest (its V half, the rope
  // blocks that hold P, read by both), once warpgroup 0 has signalled
  // `readBy0` too. Each part has an mbarrier (128 arrivals) that completes
  // a phase once the copying warpgroup's copies have landed: each thread's
  // cp.async.mbarrier.arrive.noinc arrives when its copies complete, so
  // no thread waits for its own.
  auto partBarrier = [&](Value stage, int64_t part) {
    return e.add(
        base,
        e.add(e.index(layout.p + kPartBarriersOffset + kBarrierBytes * part),
              e.mul(stage, e.index(kBarrierBytes * kPartsPerStage))));
  };
  const int64_t halfBlocks = latent / kAtomColumns / 2;
  const int64_t qkBlocks = qkDim / kAtomColumns;
  // Part `part` of tile t into stage `stage` by tensor copies: its bytes
  // announced for the part barrier's next phase, then its boxes issued.
  auto copyPartByTensorCopies = [&](Value t, int64_t stage, int64_t part) {
    int64_t firstBlock = part == 0 ? 0 : halfBlocks;
    int64_t endBlock = part == 0 ? halfBlocks : qkBlocks;
    Value landed = partBarrier(e.index(stage), part);
    e.arriveExpectingBytes(landed, (endBlock - firstBlock) * kBlockBytes);
    issueTensorTile(t, stage, firstBlock, endBlock, landed);
  };
  Value groupThread = e.remui(thread.tid, 128);
  Value electedInGroup = e.eqIndex(groupThread, 0);
  // A refill by tensor copies: by one thread of the refilling warpgroup.
  auto refillByTensorCopies = [&](Value t, int64_t stage, int64_t part) {
    e.ifThen(electedInGroup, [&] { copyPartByTensorCopies(t, stage, part); });
  };
  auto refillPart = [&](Value t, int64_t stage, int64_t readBy0) {
    if (tma) {
      e.ifThenElse(
          isA,
          [&] {
            arriveNamed(readBy0);
            refillByTensorCopies(t, stage, 0);
          },
          [&] {
            syncNamed(readBy0);
            refillByTensorCopies(t, stage, 1);
          });
      return;
    }
    e.ifThenElse(
        isA,
        [&] {
          arriveNamed(readBy0);
          copyKv(t, e.index(stage), thread.groupWarp, groupWarps, 0,
                 halfBlocks);
          e.arriveWhenCopiesLand(partBarrier(e.index(stage), 0));
        },
        [&] {
          syncNamed(readBy0);
          copyKv(t, e.index(stage), thread.groupWarp, groupWarps, halfBlocks,
                 qkDim / kAtomColumns);
          e.arriveWhenCopiesLand(partBarrier(e.index(stage), 1));
        });
  };
  // Part `part` of the group's stage landed for pair j, then made visible
  // to wgmma: the copies before the loop complete phase 0 of every
  // barrier, pair j's refills phase j + 1, so pair j waits for phase j
  // (parity j & 1).
  Value qBarrier = e.add(base, e.index(layout.p + kQBarrierOffset));
  auto partLanded = [&](Value j, int64_t part) {
    // With tensor copies Q comes in by cp.async on a barrier of its own,
    // complete after the first pair (waiting for it again returns at once).
    if (tma && part == 0)
      e.waitBarrierPhase(qBarrier, e.phaseParity(zero));
    e.waitBarrierPhase(partBarrier(thread.group, part), e.phaseParity(j));
    e.sharedProxyFence();
  };

  // The descriptors of Q and of stage A's first V columns, read back from
  // shared memory at each pair, the others derived from them there: the
  // operands of each wgmma are loop-invariant, and LLVM would hoist their
  // dozens of 64-bit descriptors out of the loop (spilling).
  Value descriptorSlots = e.sharedView(
      raw, e.add(pad, e.index(layout.p + kDescriptorSlotsOffset)), {2},
      b.getI64Type());
  e.ifThen(e.eqIndex(thread.tid, 0), [&] {
    memref::StoreOp::create(b, l, descQ, descriptorSlots, ValueRange{zero});
    memref::StoreOp::create(
        b, l,
        e.descriptor(stageA, kBlockBytes, kAtomBytes),
        descriptorSlots, ValueRange{e.index(1)});
  });
  // The parts' mbarriers, initialized before any copy can arrive at them.
  e.ifThen(e.eqIndex(thread.tid, 0), [&] {
    for (int64_t stage = 0; stage < 2; ++stage)
      for (int64_t part = 0; part < 2; ++part)
        // Tensor copies: one arrival (the bytes' announcement) a phase.
        e.initBarrier(partBarrier(e.index(stage), part),
                      tma ? 1 : kThreads / 2);
    if (tma)
      e.initBarrier(qBarrier, kThreads);
  });
  e.barrier();
  // Before the loop each warpgroup copies its part of Q and of tiles 0
  // and 1 (the column blocks it refills in the loop), arriving at a
  // stage's part barrier after that stage's copies: an arrival fires once
  // all the thread's earlier copies have landed, its part of Q included,
  // so the first pair's waits cover Q, and a warpgroup starts scoring on
  // the first part of Q and of its tile while the rest is in flight
  // (instead of the whole block waiting for all of Q and both tiles).
  auto copyFirstTiles = [&](int64_t part, int64_t firstBlock,
                            int64_t endBlock) {
    copyQ(thread.groupWarp, groupWarps, firstBlock, endBlock);
    // The tiles' rows go to the group's warps rotated by one: with the
    // loop's refill assignment, LLVM shares the two copies' address
    // arithmetic and keeps it live across the loop (20 more registers a
    // thread, 251).
    Value rotatedWarp =
        e.remui(e.add(thread.groupWarp, e.index(1)), groupWarps);
    for (int64_t stage = 0; stage < 2; ++stage) {
      e.ifThen(e.lessThan(zero, numTiles), [&] {
        copyKv(e.index(stage), e.index(stage), rotatedWarp, groupWarps,
               firstBlock, endBlock);
      });
      e.arriveWhenCopiesLand(partBarrier(e.index(stage), part));
    }
  };
  // With tensor copies: Q by every thread (on its own barrier), and each
  // warpgroup's thread issues its part of both first tiles.
  auto firstTilesByTensorCopies = [&](int64_t part) {
    e.ifThen(e.andi(electedInGroup, e.lessThan(zero, numTiles)), [&] {
      for (int64_t stage = 0; stage < 2; ++stage)
        copyPartByTensorCopies(e.index(stage), stage, part);
    });
  };
  if (tma) {
    copyQ();
    e.arriveWhenCopiesLand(qBarrier);
    e.ifThenElse(
        isA, [&] { firstTilesByTensorCopies(0); },
        [&] { firstTilesByTensorCopies(1); });
  } else {
    e.ifThenElse(
        isA, [&] { copyFirstTiles(0, 0, halfBlocks); },
        [&] { copyFirstTiles(1, halfBlocks, qkBlocks); });
  }

  // One program for both warpgroups (g = 0 scores A, g = 1 scores B), so
  // that the accumulators flow through converged code; only barriers and
  // copies are in branches. (Two branches, one a warpgroup, made ptxas
  // spill some 600 bytes a thread: LLVM sinks their common tails into one
  // block, merging 132 values a lane.)
  Value qAt = e.add(base, e.index(layout.q));
  Value ownStage = stageAddress(thread.group);
  Value ownP = e.add(e.index(layout.kv + ropeBlock),
                     e.mul(thread.group, e.index(layout.kvStage)));
  // m and alpha of A's rows (slots 0, 1) and B's (2, 3), 64 f32 each, in
  // the P region of the one-tile schedule; the descriptors follow.
  Value exchanges = f32View(layout.p, kExchangeValues);
  auto pick = [&](Value cond, ArrayRef<Value> t, ArrayRef<Value> f) {
    SmallVector<Value> out;
    for (size_t i = 0; i < t.size(); ++i)
      out.push_back(e.select(cond, t[i], f[i]));
    return out;
  };
  SmallVector<Value> finalState = e.forLoop(
      zero, numPairs, e.index(1), initialState(),
      [&](Value j, ValueRange it) -> SmallVector<Value> {
        Value refills = e.lessThan(pairTile(j, 2), paddedTiles);
        // 1. This group's tile scored.
        Value q = memref::LoadOp::create(b, l, descriptorSlots,
                                         ValueRange{zero});
        Value v = memref::LoadOp::create(b, l, descriptorSlots,
                                         ValueRange{e.index(1)});
        // Byte distances from Q's start and stage A's.
        auto fromQ = [&](Value at) { return moved(q, e.sub(at, qAt)); };
        Value groupColumns =
            e.mul(thread.group,
                  e.index(halfColumns / kAtomColumns * kBlockBytes));
        Value vA = moved(v, groupColumns);
        Value vB = moved(v, e.add(groupColumns, e.index(layout.kvStage)));
        SmallVector<Value> s =
            scores(q, fromQ(ownStage), kTileTokens,
                   [&](int64_t part) { partLanded(j, part); }, halfBlocks);
        if (tma) {
          // Rows past the split's tokens, scored (masked) but not to be
          // multiplied: zeroed before P V reads them (ours after the
          // warpgroup's barrier, the other warpgroup's after the handoff
          // of P).
          Value validRows = e.clampIndex(
              e.sub(block.kvEnd,
                    tileStart(e.add(e.mul(j, e.index(2)), thread.group))),
              zero, e.index(kTileTokens));
          e.ifThen(e.lessThan(validRows, e.index(kTileTokens)), [&] {
            zeroRowsPast(ownStage, validRows, groupThread);
            e.warpgroupBarrier(thread.group);
          });
        }
        // 2. B's rows continue from A's max: m_A, alpha_A published.
        // (Only the group that uses them reads them: four values a lane
        // through the branch.)
        SmallVector<Type> four(4, b.getF32Type());
        SmallVector<Value> one{e.f32(1.0), e.f32(1.0)};
        auto published = [&](int64_t id, int64_t slot) {
          syncNamed(id);
          SmallVector<Value> v = readRows(exchanges, slot);
          v.append(readRows(exchanges, slot + 1));
          return v;
        };
        SmallVector<Value> fromA = e.selectValues(
            isA, four,
            [&] { return SmallVector<Value>{it[0], it[1], one[0], one[1]}; },
            [&] { return published(kPublishedA, 0); });
        SmallVector<Value> prevMax{fromA[0], fromA[1]};
        SmallVector<Value> prevAlpha{fromA[2], fromA[3]};
        SmallVector<Value> alphaA = prevAlpha;
        // 3. Online softmax of the tile, P into its rope block.
        FragmentSoftmax softmax = softmaxOf(kTileTokens);
        SmallVector<Value> tileMax = maskedRowMax(
            softmax, s, tileStart(e.add(e.mul(j, e.index(2)), thread.group)));
        RowMaxima rows = onlineMaxRows(softmax, prevMax, tileMax);
        const SmallVector<Value> &max = rows.max, &alpha = rows.alpha;
        SmallVector<Value> sums = exponentials(
            softmax, s, rows, ownP, zero,
            {e.mulf(it[2], prevAlpha[0]), e.mulf(it[3], prevAlpha[1])});
        e.ifThenElse(
            isA,
            [&] {
              publishRows(exchanges, e.index(0), max);
              publishRows(exchanges, e.index(1), alpha);
              e.sharedProxyFence();
              arriveNamed(kPublishedA);
            },
            [&] {
              publishRows(exchanges, e.index(2), max);
              publishRows(exchanges, e.index(3), alpha);
              e.sharedProxyFence();
              arriveNamed(kPublishedB);
            });
        // 4. O += P_A V_A, O scaled to A's max first; then this group's
        // part of the next A tile (see refillPart).
        SmallVector<Value> o =
            pv(rescaleO(it.slice(4, oRegs), pick(isA, alpha, alphaA)),
               fromQ(e.add(base, pA)), vA);
        e.ifThen(refills, [&] { refillPart(pairTile(j, 2), 0, kAReadBy0); });
        // 5. Group 0 waits for P_B.
        SmallVector<Value> fromB = e.selectValues(
            isA, four, [&] { return published(kPublishedB, 2); },
            [&] {
              return SmallVector<Value>{max[0], max[1], alpha[0], alpha[1]};
            });
        SmallVector<Value> maxB{fromB[0], fromB[1]};
        SmallVector<Value> alphaB{fromB[2], fromB[3]};
        SmallVector<Value> lastAlpha = pick(isA, alphaB, one);
        // 6. O += P_B V_B, O scaled to B's max first; then this group's
        // part of the next B tile.
        o = pv(rescaleO(o, pick(isA, alphaB, alpha)),
               fromQ(e.add(base, pB)), vB);
        e.ifThen(refills, [&] { refillPart(pairTile(j, 3), 1, kBReadBy0); });
        SmallVector<Value> next{maxB[0], maxB[1],
                                e.mulf(sums[0], lastAlpha[0]),
                                e.mulf(sums[1], lastAlpha[1])};
        next.append(o);
        return next;
      });
  return finalState;
}

void SplitBody::writeResults(ArrayRef<Value> state) {
  Value sumS = f32View(layout.sum, kWarpgroups * kTileRows);
  // Row sums of both halves.
  SmallVector<Value> groupSum;
  for (int64_t i = 0; i < 2; ++i)
    groupSum.push_back(e.quadSum(state[2 + i]));
  SmallVector<Value> sums = acrossGroups(sumS, groupSum, /*max=*/false);
  SmallVector<FragmentRowEnd, 2> ends;
  for (int64_t i = 0; i < 2; ++i)
    ends.push_back(FragmentSoftmax::finishRow(e, state[i], sums[i]));
  // O / l staged as f32 rows in shared memory (the tiles are dead: every
  // thread is past the row-sum barrier, and the staging ends before the
  // sums), once for either destination; the block then copies the rows
  // out (copyStagedRows), real rows only. Accumulator 4 j + 2 i + c is lane
  // row i, column 8 j + 2 quad + c of the warpgroup's half. Where tiles
  // can hold padding rows (heads not a multiple of 64), those are not
  // staged: at 16 heads three warps of four hold only padding, and their
  // 96 KiB of stores lengthen every block's tail. Elsewhere the branch is
  // left out (it cost the 128-head kernel 1 to 2%).
  Value staging = e.sharedView(raw, pad, {kTileRows, kStagingStride(latent)},
                               b.getF32Type());
  Value groupCol0 = e.mul(thread.group, e.index(halfColumns));
  const bool tilesMayPad = heads % kTileRows != 0;
  for (int64_t i = 0; i < 2; ++i) {
    auto stageRow = [&] {
      e.stageFragmentRow(staging, laneRows[i].local, groupCol0, thread.quad,
                         halfColumns / 8, [&](int64_t j, int64_t c) {
                           return e.mulf(state[4 + 4 * j + 2 * i + c],
                                         ends[i].inverse);
                         });
    };
    if (tilesMayPad)
      e.ifThen(laneRows[i].real, stageRow);
    else
      stageRow();
  }
  allThreadsBarrier();
  Value writesLse = e.andi(leader, e.eqIndex(thread.group, 0));
  block.writeResults([&](const SplitResults &to) {
    for (int64_t i = 0; i < 2; ++i) {
      const DecodeSplitBlock::LaneRow &row = laneRows[i];
      e.ifThen(e.andi(row.real, writesLse), [&] {
        e.storeF32(ends[i].lse, to.lse, to.lseIndex(row.query, row.head));
      });
    }
    e.copyStagedRows(
        staging, kTileRows, latent, thread.tid, kThreads,
        [&](Value r) { return block.laneRow(r).real; },
        [&](Value r) {
          DecodeSplitBlock::LaneRow row = block.laneRow(r);
          return to.rowIndex(row.query, row.head);
        },
        to.values);
  });
}

} // namespace

namespace {

/// The decode's shared-memory layout on `target`.
SharedLayout layoutFor(DecodeAttentionOp op, const GpuTarget &target) {
  int64_t qkDim = op.getKvLoraRank() + op.getRopeDim();
  return SharedLayout(qkDim, stagesFor(qkDim, target.maxSharedBytesPerBlock()));
}

/// Whether the cache's pages follow each other in memory, so that a
/// tensor map can view it as rows of one stride. Known from its type: the
/// kernel takes identity layouts, or views with static strides
/// (GpuEmitter::hasVectorRows).
bool pagesFollowEachOther(Value cache) {
  auto type = cast<MemRefType>(cache.getType());
  if (type.getLayout().isIdentity())
    return true;
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)))
    return false;
  int64_t pageRows = type.getShape()[1];
  return !ShapedType::isDynamic(strides[0]) &&
         !ShapedType::isDynamic(strides[1]) && strides[2] == 1 &&
         strides[0] == pageRows * strides[1];
}

/// Whether KV tiles come in by tensor copies (TensorTiles): the seesaw
/// schedule, at least kMinHeadsForTensorCopies heads, tiles that are whole
/// pages, and pages one stride apart.
bool loadsTilesByTensorCopies(DecodeAttentionOp op,
                              const SharedLayout &layout) {
  return usesSeesaw(layout, op.getRopeDim()) &&
         op.getNumHeads() >= kMinHeadsForTensorCopies &&
         op.getBlockSize() % kTileTokens == 0 &&
         pagesFollowEachOther(op.getKvCache());
}

/// Host code: the device address (i64) of the tensor map of the cache
/// viewed as [pages * page, Lkv + R] rows, boxes of 64 x 64, from the
/// runtime's mlaTiledTensorMap (which keeps one per cache buffer); 0 for
/// a cache of no pages, from which no tile is read.
Value cacheTensorMap(GpuEmitter &h, DecodeAttentionOp op) {
  OpBuilder &b = h.builder();
  Location loc = h.location();
  auto module = op->getParentOfType<ModuleOp>();
  constexpr const char *kName = "mlaTiledTensorMap";
  Type i64 = b.getI64Type();
  auto signature = b.getFunctionType(SmallVector<Type>(6, i64), {i64});
  if (!SymbolTable::lookupSymbolIn(module, kName)) {
    auto top = OpBuilder::atBlockEnd(module.getBody());
    auto declaration = func::FuncOp::create(top, loc, kName, signature);
    declaration.setPrivate();
  }
  auto metadata =
      memref::ExtractStridedMetadataOp::create(b, loc, op.getKvCache());
  Value base = h.add(
      memref::ExtractAlignedPointerAsIndexOp::create(b, loc, op.getKvCache()),
      h.mul(metadata.getOffset(), h.index(2)));
  Value rows = h.mul(metadata.getSizes()[0], metadata.getSizes()[1]);
  int64_t qkDim = op.getKvLoraRank() + op.getRopeDim();
  auto toI64 = [&](Value v) {
    return arith::IndexCastOp::create(b, loc, i64, v).getResult();
  };
  SmallVector<Type> result{i64};
  SmallVector<Value> found = h.selectValues(
      h.lessThan(h.index(0), rows), result,
      [&]() -> SmallVector<Value> {
        SmallVector<Value> operands{
            toI64(base),
            toI64(rows),
            toI64(h.index(qkDim)),
            toI64(h.mul(metadata.getStrides()[1], h.index(2))),
            toI64(h.index(kTileTokens)),
            toI64(h.index(kAtomColumns))};
        return {func::CallOp::create(b, loc, kName, TypeRange{i64}, operands)
                    .getResult(0)};
      },
      [&]() -> SmallVector<Value> {
        return {arith::ConstantIntOp::create(b, loc, 0, 64)};
      });
  return found.front();
}

} // namespace

void launchWgmmaDecodeSplit(DecodeAttentionOp op, KernelFactory &kernels,
                            const DecodeSchedule &schedule, OpBuilder &host,
                            ValueRange splitArgs, Value splits) {
  int64_t latent = op.getKvLoraRank();
  Type element = cast<MemRefType>(op.getQ().getType()).getElementType();
  SharedLayout layout = layoutFor(op, kernels.target());
  // The staging reuses the tile region (Q, the KV stages and P), which
  // always holds it for the dims the kernel takes; checked all the same.
  if (kTileRows * kStagingStride(latent) * 4 > layout.max)
    llvm::report_fatal_error("wgmma decode: output staging exceeds the tiles");
  bool seesaw = usesSeesaw(layout, op.getRopeDim());
  bool tensorCopies = loadsTilesByTensorCopies(op, layout);

  // With tensor copies the kernel takes the cache's tensor map last.
  SmallVector<Value> args(splitArgs);
  if (tensorCopies) {
    GpuEmitter h(host, op.getLoc());
    args.push_back(cacheTensorMap(h, op));
  }
  auto kernel = kernels.create(
      tensorCopies ? "decode_attention_split_wgmma_tma"
                   : "decode_attention_split_wgmma",
      ValueRange(args).getTypes(),
      [&](GpuEmitter &base, ValueRange a) {
        WgmmaEmitter e(base.builder(), base.location(), element);
        DecodeSplitBlock block(e, op, schedule,
                               tensorCopies ? a.drop_back() : a, kTileRows);
        block.run([&] {
          std::optional<TensorTiles> tma;
          if (tensorCopies)
            tma = TensorTiles{LLVM::IntToPtrOp::create(
                e.builder(), e.location(),
                LLVM::LLVMPointerType::get(e.builder().getContext()),
                a.back())};
          SplitBody body(e, block, op, layout, tma);
          SmallVector<Value> state =
              seesaw ? body.seesawSchedule() : body.oneTileSchedule();
          // The Q tile's copies, when no tile ran (the results reuse its
          // shared memory).
          e.waitAllCopies();
          body.writeResults(state);
        });
      },
      kThreads);
  launchDecodeSplit(op, host, kernel, args, splits, kTileRows, layout.bytes);
}

} // namespace mla::gpu
