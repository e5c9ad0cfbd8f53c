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
// and warpgroup 0's (it waits for warpgroup 0's signal while its own
// products run); so the next A tile is mostly in flight during the
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

#include "Wgmma/WgmmaDecodeBody.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

using namespace mlir;

namespace mla::gpu {

using namespace wgmma_decode_kernel;

bool useWgmmaDecodeSplit(DecodeAttentionOp op, const GpuTarget &target) {
  if (target.strategy != KernelStrategy::Warpgroup)
    return false;
  return runsOn(decodeOperandTypes(op), op.getNumHeads(), op.getKvLoraRank(),
                op.getRopeDim(), target.maxSharedBytesPerBlock()) &&
         GpuEmitter::hasVectorRows(op.getQ()) &&
         GpuEmitter::hasVectorRows(op.getKvCache());
}

namespace wgmma_decode_kernel {

SmallVector<Value> SplitBody::halfTileStep(Value t, ValueRange it, Value maxS,
                                           const HalfTileOperands &operands) {
  Value pTile = e.index(layout.p);
  // 1. S = Q K^T over the group's 32 tokens.
  SmallVector<Value> s = scores(operands.q, operands.k, kHalfTokens);
  Value column0 = e.mul(thread.group, e.index(kHalfTokens));
  FragmentSoftmax softmax = softmaxOf(kHalfTokens);
  SmallVector<Value> groupMax =
      maskedRowMax(softmax, s, e.add(tileStart(t), column0));
  // 2. Row maxima of both halves.
  SmallVector<Value> tileMax = acrossGroups(maxS, groupMax, true);
  RowMaxima rows = onlineMaxRows(softmax, {it[0], it[1]}, tileMax);
  // 3. P to shared memory, the group's sums, O rescaled.
  SmallVector<Value> sums =
      exponentials(softmax, s, rows, pTile, column0, {it[2], it[3]});
  SmallVector<Value> next{rows.max[0], rows.max[1], sums[0], sums[1]};
  SmallVector<Value> o = rescaleO(it.slice(4, oRegs), rows.alpha);
  e.sharedProxyFence();
  e.barrier();
  // 4. O += P V over the group's columns.
  next.append(pv(o, operands.p, operands.v));
  return next;
}

SmallVector<Value> SplitBody::oneTileSchedule() {
  Value maxS = f32View(layout.max, kWarpgroups * kTileRows);
  const int64_t warps = kThreads / kWarpSize;
  copyQ();
  Value kv = stageAddress(zero);
  return e.forLoop(
      zero, numTiles, e.index(1), initialState(),
      [&](Value t, ValueRange it) -> SmallVector<Value> {
        // This tile in shared memory, once every thread is done with the
        // previous one.
        e.barrier();
        copyKv(t, zero, thread.warp, warps);
        e.waitAllCopies();
        e.sharedProxyFence();
        e.barrier();
        return halfTileStep(t, it, maxS, halfTileOperands(kv));
      });
}

SmallVector<Value> SplitBody::fp8Schedule() {
  Value maxS = f32View(layout.max, kWarpgroups * kTileRows);
  const int64_t stages = layout.codeStages;
  // Q and the first tiles' codes in flight, a commit group each tile (Q
  // joins the first).
  copyQ();
  for (int64_t stage = 0; stage < stages; ++stage) {
    e.ifThen(e.lessThan(e.index(stage), numTiles),
             [&] { copyCodes(e.index(stage), e.index(stage)); });
    e.commitCopies();
  }
  // The loop's wgmma operands are invariant: LLVM would hoist all their
  // advanced 64-bit descriptors out of it (dozens of registers, spilled),
  // so the loop reads them back from shared memory, as the seesaw does.
  Value slots = e.sharedView(raw, e.add(pad, e.index(layout.descriptors)),
                             {SharedLayout::kDescriptorSlots},
                             b.getI64Type());
  HalfTileOperands direct = halfTileOperands(stageAddress(zero));
  // Slots: Q, P, then each warpgroup's K and V.
  auto slotOf = [&](int64_t which) {
    return which < 2 ? e.index(which)
                     : e.add(e.index(2 + 2 * (which - 2)), thread.group);
  };
  const SmallVector<Value, 4> stored{direct.q, direct.p, direct.k, direct.v};
  e.ifThen(e.eqIndex(e.remui(thread.tid, 128), 0), [&] {
    for (int64_t which = 0; which < 4; ++which) {
      Value slot = slotOf(which);
      memref::StoreOp::create(b, l, stored[which], slots, ValueRange{slot});
    }
  });
  auto readBack = [&] {
    SmallVector<Value, 4> v;
    for (int64_t which = 0; which < 4; ++which) {
      Value slot = slotOf(which);
      v.push_back(memref::LoadOp::create(b, l, slots, ValueRange{slot}));
    }
    return HalfTileOperands{v[0], v[2], v[3], v[1]};
  };
  return e.forLoop(
      zero, numTiles, e.index(1), initialState(),
      [&](Value t, ValueRange it) -> SmallVector<Value> {
        // Tile t's codes have landed (the later groups may be in flight)
        // and every thread is done with the previous tile: dequantize
        // them, then refill their stage with tile t + stages.
        Value stage = e.remui(t, stages);
        e.waitPendingCopies(stages - 1);
        e.barrier();
        dequantizeCodes(stage);
        e.sharedProxyFence();
        e.barrier();
        Value refill = e.add(t, e.index(stages));
        e.ifThen(e.lessThan(refill, numTiles),
                 [&] { copyCodes(refill, stage); });
        e.commitCopies();
        return halfTileStep(t, it, maxS, readBack());
      });
}

void SplitBody::writeResults(ArrayRef<Value> state) {
  Value sumS = f32View(layout.sum, kWarpgroups * kTileRows);
  // Row sums of both halves.
  SmallVector<Value> groupSum;
  for (int64_t i = 0; i < 2; ++i)
    groupSum.push_back(e.quadSum(state[2 + i]));
  SmallVector<Value> sums = acrossGroups(sumS, groupSum, /*max=*/false);
  SmallVector<FragmentRowEnd, 2> ends;
  for (int64_t i = 0; i < 2; ++i) {
    ends.push_back(FragmentSoftmax::finishRow(e, state[i], sums[i]));
    block.scaleOutput(ends.back());
  }
  // O / l staged as f32 rows in shared memory (the tiles are dead: every
  // thread is past the row-sum barrier, and the staging ends before the
  // sums), once for either destination; the block then copies the rows
  // out (DecodeSplitBlock::writeStagedRows), real rows only. Accumulator 4 j + 2 i + c is lane
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
  block.writeStagedRows(laneRows, ends, writesLse, staging, latent, thread.tid,
                        kThreads);
}

} // namespace wgmma_decode_kernel

namespace {

/// The decode's shared-memory layout on `target`.
SharedLayout layoutFor(DecodeAttentionOp op, const GpuTarget &target) {
  return wgmma_decode::layoutFor(decodeOperandTypes(op), op.getKvLoraRank(),
                                 op.getRopeDim(),
                                 target.maxSharedBytesPerBlock());
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
  return layout.codeStages == 0 && usesSeesaw(layout, op.getRopeDim()) &&
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
  // FP8: the seesaw with a converting producer warpgroup where its two
  // KV stages fit (SharedLayout), else the one-tile schedule over code
  // stages.
  const bool fp8 = decodeOperandTypes(op) == DecodeOperandTypes::Fp8Cache;
  const bool seesaw = usesSeesaw(layout, op.getRopeDim());
  const bool converting = fp8 && seesaw;
  const bool tensorCopies = loadsTilesByTensorCopies(op, layout);

  // With tensor copies the kernel takes the cache's tensor map last.
  SmallVector<Value> args(splitArgs);
  if (tensorCopies) {
    GpuEmitter h(host, op.getLoc());
    args.push_back(cacheTensorMap(h, op));
  }
  auto kernel = kernels.create(
      fp8            ? "decode_attention_split_wgmma_fp8"
      : tensorCopies ? "decode_attention_split_wgmma_tma"
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
          auto finish = [&](ArrayRef<Value> state) {
            // The Q tile's copies, when no tile ran (the results reuse its
            // shared memory).
            e.waitAllCopies();
            body.writeResults(state);
          };
          if (converting)
            return body.convertingSeesaw(finish);
          finish(fp8      ? body.fp8Schedule()
                 : seesaw ? body.seesawSchedule()
                          : body.oneTileSchedule());
        });
      },
      converting ? kThreads + kProducerThreads : kThreads);
  launchSplitGrid(op, host, kernel, args, splits, kTileRows, layout.bytes);
}

} // namespace mla::gpu
