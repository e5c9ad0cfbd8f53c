//===- WgmmaDecodeSeesaw.cpp - The wgmma decode's seesaw schedule ---------===//
//
// SplitBody::seesawSchedule (GpuDecodeWgmma.cpp's file comment describes
// it): stage 0 holds tile A = 2 j, stage 1 tile B = 2 j + 1 of pair j;
// warpgroup 0 scores A while warpgroup 1 scores B, the two hand their row
// maxima and P to each other through named barriers, and each refills its
// part of a stage as soon as the stage's last reader is done. P_A and P_B
// go into their tiles' first rope block once the scores have read it. An
// odd tile count gets a last B tile past the split's tokens, copied as
// zeros (rows past kvEnd are zero-filled, nothing is read): its scores are
// masked, its P is zero, so no step depends on whether a pair is whole.
//
//===----------------------------------------------------------------------===//

#include "Wgmma/WgmmaDecodeBody.h"

namespace mla::gpu::wgmma_decode_kernel {

namespace {
constexpr int64_t kGroupWarps = 4;
/// The most 16-byte loads a producer thread has in flight (each holds four
/// registers until converted): a stage part goes in batches of at most
/// this many.
constexpr int64_t kMaxLoadsInFlight = 5;
} // namespace

/// The seesaw schedule of one block, its values created in the order the
/// steps run.
class Seesaw {
public:
  explicit Seesaw(SplitBody &body);
  SmallVector<Value> run();
  void runConverting(const std::function<void(ArrayRef<Value>)> &finish);

private:
  SplitBody &s;
  WgmmaEmitter &e;
  OpBuilder &b;
  Location l;
  const int64_t ropeBlock, halfBlocks, qkBlocks;
  Value stageA, pA, pB, numPairs, paddedTiles, isA, groupThread,
      electedInGroup, qBarrier, descriptorSlots;

  Value pairTile(Value j, int64_t k) {
    return e.add(e.mul(j, e.index(2)), e.index(k));
  }
  /// The "part landed" mbarrier of part `part` of stage `stage`. A stage
  /// is refilled in two parts, each as soon as its readers are done:
  /// warpgroup 0 copies part 0, the V columns only it reads (the first
  /// half of the latent blocks), right after its own P V with the stage;
  /// warpgroup 1 part 1, the rest (its V half, the rope blocks that hold
  /// P, read by both), once warpgroup 0 has signalled `readBy0` too. Each
  /// part's mbarrier (128 arrivals) completes a phase once the copying
  /// warpgroup's copies have landed: each thread's
  /// cp.async.mbarrier.arrive.noinc arrives when its copies complete, so
  /// no thread waits for its own.
  Value partBarrier(Value stage, int64_t part) {
    return e.add(
        s.base,
        e.add(e.index(s.layout.p + kPartBarriersOffset + kBarrierBytes * part),
              e.mul(stage, e.index(kBarrierBytes * kPartsPerStage))));
  }
  /// The column blocks [first, end) of part `part` of a stage.
  std::pair<int64_t, int64_t> partBlocks(int64_t part) const {
    return part == 0 ? std::pair<int64_t, int64_t>{0, halfBlocks}
                     : std::pair<int64_t, int64_t>{halfBlocks, qkBlocks};
  }
  void copyPartByTensorCopies(Value t, int64_t stage, int64_t part);
  void refillPart(Value t, int64_t stage, int64_t readBy0);
  /// Warpgroup 1, where the stage is refilled: waits until warpgroup 0 is
  /// done reading it (`readBy0`), while its own products with the stage
  /// may still run (it waits for them before it copies).
  void awaitGroup0Reads(Value refills, int64_t readBy0) {
    if (s.converts)
      return; // the producer waits instead
    e.ifThen(refills, [&] { s.syncNamed(readBy0); });
  }
  /// The named barriers at which warpgroup 0 and warpgroup 1 say they are
  /// done reading stage `stage`.
  static int64_t readBy0(int64_t stage) {
    return stage == 0 ? kAReadBy0 : kBReadBy0;
  }
  static int64_t readBy1(int64_t stage) {
    return stage == 0 ? kAReadBy1 : kBReadBy1;
  }
  void produce();
  /// The codes of part `part` of tile t, 16 a load, loaded by the producer
  /// thread (zeros for rows past the split's tokens), and those codes
  /// converted into stage `stage` (then made visible to wgmma and counted
  /// at the part's mbarrier). Load k of producer thread i is 16-byte chunk
  /// (128 k + i) of the part's rows, so a warp reads whole lines.
  SmallVector<Value> loadPartCodes(Value t, int64_t part, int64_t first,
                                   int64_t end);
  void storePartCodes(ArrayRef<Value> codes, int64_t stage, int64_t part,
                      int64_t first);
  /// Row and column of the part's chunk `load` of the producer thread.
  std::pair<Value, Value> partChunk(int64_t part, int64_t load);
  int64_t partChunkLoads(int64_t part) const;
  SmallVector<Value> consume();
  void partLanded(Value j, int64_t part);
  void storeDescriptors();
  void initPartBarriers();
  void copyFirstTiles(int64_t part, int64_t firstBlock, int64_t endBlock);
  void loadFirstTiles();
  SmallVector<Value> pairStep(Value j, ValueRange it, Value qAt,
                              Value ownStage, Value ownP, Value exchanges);
};

Seesaw::Seesaw(SplitBody &body)
    : s(body), e(body.e), b(body.b), l(body.l),
      ropeBlock(body.latent / kAtomColumns * kBlockBytes),
      halfBlocks(body.latent / kAtomColumns / 2),
      qkBlocks(body.qkDim / kAtomColumns) {
  stageA = s.stageAddress(s.zero);
  pA = e.index(s.layout.kv + ropeBlock);
  pB = e.index(s.layout.kv + s.layout.kvStage + ropeBlock);
  numPairs = e.ceilDiv(s.numTiles, 2);
  paddedTiles = e.mul(numPairs, e.index(2));
  isA = e.eqIndex(s.thread.group, 0);
  groupThread = e.remui(s.thread.tid, 128);
  electedInGroup = e.eqIndex(groupThread, 0);
  qBarrier = e.add(s.base, e.index(s.layout.p + kQBarrierOffset));
}

/// Part `part` of tile t into stage `stage` by tensor copies: its bytes
/// announced for the part barrier's next phase, then its boxes issued.
void Seesaw::copyPartByTensorCopies(Value t, int64_t stage, int64_t part) {
  auto [firstBlock, endBlock] = partBlocks(part);
  Value landed = partBarrier(e.index(stage), part);
  e.arriveExpectingBytes(landed, (endBlock - firstBlock) * kBlockBytes);
  s.issueTensorTile(t, stage, firstBlock, endBlock, landed);
}

/// This warpgroup's part of tile t into `stage` (see partBarrier): by
/// cp.async, or by one thread's tensor copies. Warpgroup 0 first signals
/// `readBy0`; warpgroup 1 must have waited for that signal already
/// (awaitGroup0Reads). Each warp's wgmma wait covers only its own share
/// of the products, and every warp of the group reads the whole V half
/// (and, in warpgroup 1, the P it overwrites), so the group's barrier
/// comes between the waits and the first copy into the part.
void Seesaw::refillPart(Value t, int64_t stage, int64_t readBy0) {
  if (s.converts) {
    // The producer refills; each warpgroup says it is done with the stage
    // (each thread after its own warp's wait: the barrier completes once
    // all 128 have arrived).
    e.ifThenElse(
        isA, [&] { s.arriveNamed(readBy0); },
        [&] { s.arriveNamed(readBy1(stage)); });
    return;
  }
  auto copyPart = [&](int64_t part) {
    e.warpgroupBarrier(s.thread.group);
    if (s.tma) {
      e.ifThen(electedInGroup,
               [&] { copyPartByTensorCopies(t, stage, part); });
      return;
    }
    auto [firstBlock, endBlock] = partBlocks(part);
    s.copyKv(t, e.index(stage), s.thread.groupWarp, kGroupWarps, firstBlock,
             endBlock);
    e.arriveWhenCopiesLand(partBarrier(e.index(stage), part));
  };
  e.ifThenElse(
      isA,
      [&] {
        s.arriveNamed(readBy0);
        copyPart(0);
      },
      [&] { copyPart(1); });
}

/// Part `part` of the group's stage landed for pair j, then made visible
/// to wgmma: the copies before the loop complete phase 0 of every
/// barrier, pair j's refills phase j + 1, so pair j waits for phase j
/// (parity j & 1).
void Seesaw::partLanded(Value j, int64_t part) {
  // With tensor copies Q comes in by cp.async on a barrier of its own,
  // complete after the first pair (waiting for it again returns at once).
  if ((s.tma || s.converts) && part == 0)
    e.waitBarrierPhase(qBarrier, e.phaseParity(s.zero));
  e.waitBarrierPhase(partBarrier(s.thread.group, part), e.phaseParity(j));
  e.sharedProxyFence();
}

/// The descriptors of Q and of stage A's first V columns, read back from
/// shared memory at each pair, the others derived from them there: the
/// operands of each wgmma are loop-invariant, and LLVM would hoist their
/// dozens of 64-bit descriptors out of the loop (spilling).
void Seesaw::storeDescriptors() {
  descriptorSlots = e.sharedView(
      s.raw, e.add(s.pad, e.index(s.layout.p + kDescriptorSlotsOffset)), {2},
      b.getI64Type());
  e.ifThen(e.eqIndex(s.thread.tid, 0), [&] {
    memref::StoreOp::create(b, l, s.descQ, descriptorSlots,
                            ValueRange{s.zero});
    memref::StoreOp::create(b, l,
                            e.descriptor(stageA, kBlockBytes, kAtomBytes),
                            descriptorSlots, ValueRange{e.index(1)});
  });
}

/// The parts' mbarriers, initialized before any copy can arrive at them.
void Seesaw::initPartBarriers() {
  e.ifThen(e.eqIndex(s.thread.tid, 0), [&] {
    for (int64_t stage = 0; stage < 2; ++stage)
      for (int64_t part = 0; part < 2; ++part)
        // Tensor copies: one arrival (the bytes' announcement) a phase;
        // cp.async: a warpgroup's threads; converted: the producer's.
        e.initBarrier(partBarrier(e.index(stage), part),
                      s.tma ? 1 : kThreads / 2);
    if (s.tma || s.converts)
      e.initBarrier(qBarrier, kThreads);
  });
  e.barrier();
}

/// Before the loop each warpgroup copies its part of Q and of tiles 0 and
/// 1 (the column blocks it refills in the loop), arriving at a stage's
/// part barrier after that stage's copies: an arrival fires once all the
/// thread's earlier copies have landed, its part of Q included, so the
/// first pair's waits cover Q, and a warpgroup starts scoring on the first
/// part of Q and of its tile while the rest is in flight (instead of the
/// whole block waiting for all of Q and both tiles).
void Seesaw::copyFirstTiles(int64_t part, int64_t firstBlock,
                            int64_t endBlock) {
  s.copyQ(s.thread.groupWarp, kGroupWarps, firstBlock, endBlock);
  // The tiles' rows go to the group's warps rotated by one: with the
  // loop's refill assignment, LLVM shares the two copies' address
  // arithmetic and keeps it live across the loop (20 more registers a
  // thread, 251).
  Value rotatedWarp =
      e.remui(e.add(s.thread.groupWarp, e.index(1)), kGroupWarps);
  for (int64_t stage = 0; stage < 2; ++stage) {
    e.ifThen(e.lessThan(s.zero, s.numTiles), [&] {
      s.copyKv(e.index(stage), e.index(stage), rotatedWarp, kGroupWarps,
               firstBlock, endBlock);
    });
    e.arriveWhenCopiesLand(partBarrier(e.index(stage), part));
  }
}

/// Q and the first two tiles. With tensor copies: Q by every thread (on
/// its own barrier), and each warpgroup's thread issues its part of both
/// first tiles.
void Seesaw::loadFirstTiles() {
  auto firstTilesByTensorCopies = [&](int64_t part) {
    e.ifThen(e.andi(electedInGroup, e.lessThan(s.zero, s.numTiles)), [&] {
      for (int64_t stage = 0; stage < 2; ++stage)
        copyPartByTensorCopies(e.index(stage), stage, part);
    });
  };
  if (s.converts) {
    s.copyQ();
    e.arriveWhenCopiesLand(qBarrier);
    return;
  }
  if (s.tma) {
    s.copyQ();
    e.arriveWhenCopiesLand(qBarrier);
    e.ifThenElse(
        isA, [&] { firstTilesByTensorCopies(0); },
        [&] { firstTilesByTensorCopies(1); });
  } else {
    e.ifThenElse(
        isA, [&] { copyFirstTiles(0, 0, halfBlocks); },
        [&] { copyFirstTiles(1, halfBlocks, qkBlocks); });
  }
}

SmallVector<Value> Seesaw::run() {
  storeDescriptors();
  initPartBarriers();
  return consume();
}

void Seesaw::runConverting(
    const std::function<void(ArrayRef<Value>)> &finish) {
  storeDescriptors();
  initPartBarriers();
  e.ifThenElse(
      e.lessThan(s.thread.tid, e.index(kThreads)),
      [&] {
        e.setMaxRegisters(kConsumerRegisters, /*increase=*/true);
        finish(consume());
      },
      [&] {
        e.setMaxRegisters(kProducerRegisters, /*increase=*/false);
        produce();
      });
}

/// Q and the first tiles, then the pairs (run by the consumers).
SmallVector<Value> Seesaw::consume() {
  loadFirstTiles();
  // One program for both warpgroups (g = 0 scores A, g = 1 scores B), so
  // that the accumulators flow through converged code; only barriers and
  // copies are in branches. (Two branches, one a warpgroup, made ptxas
  // spill some 600 bytes a thread: LLVM sinks their common tails into one
  // block, merging 132 values a lane.)
  Value qAt = e.add(s.base, e.index(s.layout.q));
  Value ownStage = s.stageAddress(s.thread.group);
  Value ownP = e.add(e.index(s.layout.kv + ropeBlock),
                     e.mul(s.thread.group, e.index(s.layout.kvStage)));
  // m and alpha of A's rows (slots 0, 1) and B's (2, 3), 64 f32 each, in
  // the P region of the one-tile schedule; the descriptors follow.
  Value exchanges = s.f32View(s.layout.p, kExchangeValues);
  return e.forLoop(s.zero, numPairs, e.index(1), s.initialState(),
                   [&](Value j, ValueRange it) {
                     return pairStep(j, it, qAt, ownStage, ownP, exchanges);
                   });
}

/// Pair j: this group's tile scored, A's row state handed to B, P_A V_A
/// and P_B V_B into the group's half of O, the stages refilled.
SmallVector<Value> Seesaw::pairStep(Value j, ValueRange it, Value qAt,
                                    Value ownStage, Value ownP,
                                    Value exchanges) {
  auto pick = [&](Value cond, ArrayRef<Value> t, ArrayRef<Value> f) {
    SmallVector<Value> out;
    for (size_t i = 0; i < t.size(); ++i)
      out.push_back(e.select(cond, t[i], f[i]));
    return out;
  };
  Value refills = e.lessThan(pairTile(j, 2), paddedTiles);
  // 1. This group's tile scored.
  Value q = memref::LoadOp::create(b, l, descriptorSlots, ValueRange{s.zero});
  Value v =
      memref::LoadOp::create(b, l, descriptorSlots, ValueRange{e.index(1)});
  // Byte distances from Q's start and stage A's.
  auto fromQ = [&](Value at) { return s.moved(q, e.sub(at, qAt)); };
  Value groupColumns =
      e.mul(s.thread.group,
            e.index(s.halfColumns / kAtomColumns * kBlockBytes));
  Value vA = s.moved(v, groupColumns);
  Value vB = s.moved(v, e.add(groupColumns, e.index(s.layout.kvStage)));
  SmallVector<Value> scores =
      s.scores(q, fromQ(ownStage), kTileTokens,
               [&](int64_t part) { partLanded(j, part); }, halfBlocks);
  if (s.tma) {
    // Rows past the split's tokens, scored (masked) but not to be
    // multiplied: zeroed before P V reads them (ours after the warpgroup's
    // barrier, the other warpgroup's after the handoff of P).
    Value validRows = e.clampIndex(
        e.sub(s.block.kvEnd,
              s.tileStart(e.add(e.mul(j, e.index(2)), s.thread.group))),
        s.zero, e.index(kTileTokens));
    e.ifThen(e.lessThan(validRows, e.index(kTileTokens)), [&] {
      s.zeroRowsPast(ownStage, validRows, groupThread);
      e.warpgroupBarrier(s.thread.group);
    });
  }
  // 2. B's rows continue from A's max: m_A, alpha_A published. (Only the
  // group that uses them reads them: four values a lane through the
  // branch.)
  SmallVector<Type> four(4, b.getF32Type());
  SmallVector<Value> one{e.f32(1.0), e.f32(1.0)};
  auto published = [&](int64_t id, int64_t slot) {
    s.syncNamed(id);
    SmallVector<Value> values = s.readRows(exchanges, slot);
    values.append(s.readRows(exchanges, slot + 1));
    return values;
  };
  SmallVector<Value> fromA = e.selectValues(
      isA, four,
      [&] { return SmallVector<Value>{it[0], it[1], one[0], one[1]}; },
      [&] { return published(kPublishedA, 0); });
  SmallVector<Value> prevMax{fromA[0], fromA[1]};
  SmallVector<Value> prevAlpha{fromA[2], fromA[3]};
  SmallVector<Value> alphaA = prevAlpha;
  // 3. Online softmax of the tile, P into its rope block.
  FragmentSoftmax softmax = s.softmaxOf(kTileTokens);
  SmallVector<Value> tileMax = s.maskedRowMax(
      softmax, scores,
      s.tileStart(e.add(e.mul(j, e.index(2)), s.thread.group)));
  SplitBody::RowMaxima rows = s.onlineMaxRows(softmax, prevMax, tileMax);
  const SmallVector<Value> &max = rows.max, &alpha = rows.alpha;
  SmallVector<Value> sums = s.exponentials(
      softmax, scores, rows, ownP, s.zero,
      {e.mulf(it[2], prevAlpha[0]), e.mulf(it[3], prevAlpha[1])});
  auto publish = [&](int64_t firstSlot, int64_t id) {
    s.publishRows(exchanges, e.index(firstSlot), max);
    s.publishRows(exchanges, e.index(firstSlot + 1), alpha);
    e.sharedProxyFence();
    s.arriveNamed(id);
  };
  e.ifThenElse(
      isA, [&] { publish(0, kPublishedA); }, [&] { publish(2, kPublishedB); });
  // 4. O += P_A V_A, O scaled to A's max first, issued; group 1 waits for
  // group 0's reads of stage A while those products run; then they are
  // waited for, and this group's part of the next A tile is copied (see
  // refillPart). (Moving group 0's wait for P_B before its wait too gained
  // less, 0.4% slower to 1.3% faster at 16k and 32k against 1 to 2.6%
  // faster: it delays group 0's refill.)
  Value accA = s.issuePv(
      s.rescaleO(it.slice(4, s.oRegs), pick(isA, alpha, alphaA)),
      fromQ(e.add(s.base, pA)), vA);
  Value group1 = e.eqIndex(s.thread.group, 1);
  e.ifThen(group1, [&] { awaitGroup0Reads(refills, kAReadBy0); });
  e.wait(0);
  SmallVector<Value> o = e.fromAccumulator(accA, s.oRegs);
  e.ifThen(refills, [&] { refillPart(pairTile(j, 2), 0, kAReadBy0); });
  // 5. Group 0 waits for P_B.
  SmallVector<Value> fromB = e.selectValues(
      isA, four, [&] { return published(kPublishedB, 2); },
      [&] { return SmallVector<Value>{max[0], max[1], alpha[0], alpha[1]}; });
  SmallVector<Value> maxB{fromB[0], fromB[1]};
  SmallVector<Value> alphaB{fromB[2], fromB[3]};
  SmallVector<Value> lastAlpha = pick(isA, alphaB, one);
  // 6. O += P_B V_B, O scaled to B's max first, issued; group 1 waits
  // for group 0's reads of stage B meanwhile; then this group's part of
  // the next B tile.
  Value accB = s.issuePv(s.rescaleO(o, pick(isA, alphaB, alpha)),
                         fromQ(e.add(s.base, pB)), vB);
  e.ifThen(group1, [&] { awaitGroup0Reads(refills, kBReadBy0); });
  e.wait(0);
  o = e.fromAccumulator(accB, s.oRegs);
  e.ifThen(refills, [&] { refillPart(pairTile(j, 3), 1, kBReadBy0); });
  SmallVector<Value> next{maxB[0], maxB[1], e.mulf(sums[0], lastAlpha[0]),
                          e.mulf(sums[1], lastAlpha[1])};
  next.append(o);
  return next;
}

/// The producer: pair j's tiles, part by part, each part's codes loaded
/// before it waits for the stage's readers (after pair j - 1: warpgroup 0
/// for part 0, warpgroup 1 for part 1, which warpgroup 0 has left by then
/// too), so the loads are in flight while it waits.
void Seesaw::produce() {
  // Each part reads the thread's index back from shared memory: every
  // load's and store's offsets derive from it alone, and LLVM would
  // otherwise compute them once and keep them live from one stage's part
  // to the next stage's (some 70 registers, spilled).
  Value slots = e.sharedView(
      s.raw, e.add(s.pad, e.index(s.layout.p + kProducerIndexOffset)),
      {kProducerThreads}, b.getI32Type());
  Value index = groupThread;
  memref::StoreOp::create(
      b, l, arith::IndexCastUIOp::create(b, l, b.getI32Type(), index), slots,
      ValueRange{index});
  e.forLoop(s.zero, numPairs, 1, [&](Value j) {
    Value refill = e.lessThan(s.zero, j);
    for (int64_t stage = 0; stage < 2; ++stage) {
      Value t = pairTile(j, stage);
      for (int64_t part = 0; part < 2; ++part) {
        groupThread = arith::IndexCastUIOp::create(
            b, l, b.getIndexType(),
            memref::LoadOp::create(b, l, slots, ValueRange{index}));
        const int64_t loads = partChunkLoads(part);
        const int64_t batches =
            (loads + kMaxLoadsInFlight - 1) / kMaxLoadsInFlight;
        for (int64_t batch = 0; batch < batches; ++batch) {
          int64_t first = batch * loads / batches;
          int64_t end = (batch + 1) * loads / batches;
          SmallVector<Value> codes = loadPartCodes(t, part, first, end);
          if (batch == 0) {
            int64_t readers = part == 0 ? readBy0(stage) : readBy1(stage);
            e.ifThen(refill, [&] { s.syncNamed(readers); });
          }
          storePartCodes(codes, stage, part, first);
        }
        e.sharedProxyFence();
        e.arrive(partBarrier(e.index(stage), part));
      }
    }
  });
}

namespace {
/// Codes a producer load moves (16 bytes).
constexpr int64_t kCodeChunk = 16;
} // namespace

int64_t Seesaw::partChunkLoads(int64_t part) const {
  auto [first, end] = partBlocks(part);
  const int64_t chunks = kTileTokens * (end - first) * kAtomColumns / kCodeChunk;
  if (chunks % kProducerThreads != 0)
    llvm::report_fatal_error("wgmma decode: a stage part does not split into "
                             "16-byte loads of every producer thread");
  return chunks / kProducerThreads;
}

std::pair<Value, Value> Seesaw::partChunk(int64_t part, int64_t load) {
  auto [first, end] = partBlocks(part);
  const int64_t perRow = (end - first) * kAtomColumns / kCodeChunk;
  Value chunk = e.add(e.index(load * kProducerThreads), groupThread);
  Value column = e.add(e.index(first * kAtomColumns),
                       e.mul(e.remui(chunk, perRow), e.index(kCodeChunk)));
  return {e.divui(chunk, perRow), column};
}

SmallVector<Value> Seesaw::loadPartCodes(Value t, int64_t part,
                                         int64_t first, int64_t end) {
  Type code = cast<MemRefType>(s.block.cache.getType()).getElementType();
  auto chunkType = VectorType::get({kCodeChunk}, code);
  Value zeros = arith::ConstantOp::create(
      b, l, DenseElementsAttr::get(chunkType, b.getFloatAttr(code, 0.0)));
  Value start = s.tileStart(t);
  SmallVector<Value> codes;
  for (int64_t load = first; load < end; ++load) {
    auto [row, column] = partChunk(part, load);
    // The row's token clamped to the split's last: always a real page.
    MmaEmitter::SourceRow from = s.block.cacheRow(start, row);
    Value loaded = vector::LoadOp::create(
        b, l, chunkType, s.block.cache,
        ValueRange{from.prefix[0], from.prefix[1], column},
        /*nontemporal=*/false, llvm::MaybeAlign(kCodeChunk));
    codes.push_back(arith::SelectOp::create(b, l, from.valid, loaded, zeros));
  }
  return codes;
}

void Seesaw::storePartCodes(ArrayRef<Value> codes, int64_t stage,
                            int64_t part, int64_t first) {
  MmaEmitter::SharedIndex at =
      s.swizzledAt(e.index(s.layout.kv + stage * s.layout.kvStage));
  constexpr int64_t kStoreElems = 8; // 16 bytes of q's type
  for (auto [load, chunk] : llvm::enumerate(codes)) {
    auto [row, column] = partChunk(part, first + load);
    // Eight codes at a time: dequantizeFp8's rare exact path then needs
    // half the registers.
    for (int64_t piece = 0; piece < kCodeChunk / kStoreElems; ++piece) {
      SmallVector<int64_t, kStoreElems> mask;
      for (int64_t i = 0; i < kStoreElems; ++i)
        mask.push_back(piece * kStoreElems + i);
      Value half = dequantizeFp8(
          b, l, vector::ShuffleOp::create(b, l, chunk, chunk, mask), e.element);
      Value to = at(row, e.add(column, e.index(piece * kStoreElems)))[0];
      vector::StoreOp::create(b, l, half, s.tiles, ValueRange{to},
                              /*nontemporal=*/false, llvm::MaybeAlign(16));
    }
  }
}

SmallVector<Value> SplitBody::seesawSchedule() { return Seesaw(*this).run(); }

void SplitBody::convertingSeesaw(
    const std::function<void(ArrayRef<Value>)> &finish) {
  Seesaw(*this).runConverting(finish);
}

} // namespace mla::gpu::wgmma_decode_kernel
