//===- GpuDecodeWgmma.cpp - Hopper decode split kernel (wgmma) ------------===//
//
// The `wgmma` strategy's split kernel of mla.decode_attention (sm_90a), for
// bf16 or f16 queries over a cache of the same type and 64 or more heads,
// where the 16-row mma.sync kernel is bound by pulling every KV tile from L2
// once per 16 rows. A block handles a 64-row M tile of one request and one
// split (rows r = s * N + h in [64 tile, 64 tile + 64); rows past Sq * N
// are padding: zero queries, results dropped) with two warpgroups (256
// threads) sharing each 64-token KV tile:
//  - S = Q K^T: warpgroup g scores tokens [32 g, 32 g + 32) against all 64
//    rows, (Lkv + R) / 16 wgmma m64n32k16 with Q and K read from shared
//    memory through descriptors;
//  - online softmax in base 2: row maxima of both halves meet in shared
//    memory, so both warpgroups hold the same running max; each keeps the
//    sums of its own tokens (added at the end);
//  - P = exp2(S - m) goes to shared memory (wgmma takes A from shared
//    memory only in MLIR 22's NVVM dialect), each warpgroup writing its 32
//    token columns;
//  - O += P V: warpgroup g owns output columns [g Lkv/2, (g + 1) Lkv/2)
//    (Lkv = 512: 128 f32 per thread), 4 wgmma m64n(Lkv/2)k16 with V read
//    N-major straight from the KV tile.
// Shared memory, all tiles in the 128-byte-swizzled layout
// (mla/Target/WgmmaDecodeShape.h): Q 64 x (Lkv + R), two KV stages of
// 64 x (Lkv + R) (one where they do not fit), P 64 x 64, row maxima and
// sums. KV tiles come in with 16-byte cp.async (page lookups per row, as
// in the mma.sync kernel); fence.proxy.async makes the copies and P
// visible to wgmma. Three block barriers a tile: (A) the tile has landed
// and every thread is past the previous tile, whose stage then takes the
// next tile's copy, in flight while this one is computed; (B) the row
// maxima are exchanged; (C) P is written. Each wgmma group is waited for
// before the next phase: keeping PV in flight across the loop's back edge
// makes ptxas serialize every wgmma (C7514), which the ptxas lit test
// refuses.
// out = O / l (0 when l = 0) and lse = m ln 2 + log(l) (-inf when l = 0)
// go to the split partials of the real rows, as every split kernel writes
// them: out staged as f32 rows in shared memory and written by one bulk
// copy (cp.async.bulk) a row, or element by element where the partials are
// not 16-byte aligned.
//
//===----------------------------------------------------------------------===//

#include "GpuDecode.h"
#include "WgmmaEmitter.h"
#include "mla/Target/WgmmaDecodeShape.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>

using namespace mlir;
using mlir::gpu::Dimension;

namespace mla::gpu {

namespace {
using namespace wgmma_decode;
/// Bytes of one 64-column block of a 64-row tile.
constexpr int64_t kBlockBytes = kTileRows * kRowBytes;
static_assert(kTileTokens == kTileRows,
              "Q and KV tiles share the column-block size");
/// Tokens each warpgroup scores.
constexpr int64_t kHalfTokens = kTileTokens / kWarpgroups;
} // namespace

bool useWgmmaDecodeSplit(DecodeAttentionOp op, const GpuTarget &target) {
  if (target.strategy != KernelStrategy::Warpgroup)
    return false;
  Type element = cast<MemRefType>(op.getQ().getType()).getElementType();
  Type cacheElement =
      cast<MemRefType>(op.getKvCache().getType()).getElementType();
  bool sameTwoByteTypes =
      (element.isBF16() || element.isF16()) && cacheElement == element;
  return runsOn(sameTwoByteTypes, op.getNumHeads(), op.getKvLoraRank(),
                op.getRopeDim(), target.maxSharedBytesPerBlock()) &&
         GpuEmitter::hasVectorRows(op.getQ()) &&
         GpuEmitter::hasVectorRows(op.getKvCache());
}

void launchWgmmaDecodeSplit(DecodeAttentionOp op, KernelFactory &kernels,
                            const DecodeSchedule &schedule, OpBuilder &host,
                            ValueRange splitArgs, Value splits) {
  int64_t heads = op.getNumHeads(), latent = op.getKvLoraRank(),
          page = op.getBlockSize();
  int64_t qkDim = latent + op.getRopeDim();
  bool causal = op.getCausal();
  double scaleLog2 = op.getSoftmaxScale().convertToDouble() * M_LOG2E;
  Type element = cast<MemRefType>(op.getQ().getType()).getElementType();
  SharedLayout layout(qkDim, stagesFor(qkDim, kernels.target().maxSharedBytesPerBlock()));
  const int64_t vectorsPerRow = qkDim / kCopyElems;
  const int64_t halfColumns = latent / kWarpgroups; // O columns of a group
  const int64_t sRegs = kTileRows * kHalfTokens / 128;
  const int64_t oRegs = kTileRows * halfColumns / 128;
  const int64_t kSteps = qkDim / 16;
  // f32 row stride of the output staging: 16 bytes of padding keep the
  // eight rows of a store in different banks (and rows 16-byte aligned).
  const int64_t kStagingStride = latent + 4;
  static_assert(kTileRows <= kThreads, "one thread copies each row");
  // The staging reuses the tiles: Q and one KV stage alone are larger.
  if (kTileRows * kStagingStride * 4 > layout.max)
    llvm::report_fatal_error("wgmma decode: output staging exceeds the tiles");

  auto kernel = kernels.create(
      "decode_attention_split_wgmma", splitArgs.getTypes(),
      [&](GpuEmitter &base, ValueRange a) {
        WgmmaEmitter e(base.builder(), base.location(), element);
        OpBuilder &b = e.builder();
        Location l = e.location();
        Value q = a[0], cache = a[1], table = a[2], lens = a[3];
        Value numSplits = schedule.planned ? a[4] : Value();
        Value part = a[a.size() - 2], partLse = a[a.size() - 1];
        Value zero = e.index(0);

        Value tid = e.threadId();
        Value warp = e.divui(tid, kWarpSize), lane = e.remui(tid, kWarpSize);
        Value group = e.divui(tid, 128); // warpgroup
        Value groupWarp = e.remui(warp, 4);
        Value laneGroup = e.divui(lane, 4), quad = e.remui(lane, 4);
        Value req = e.blockId(Dimension::x);
        Value tileRow0 = e.mul(e.blockId(Dimension::y), e.index(kTileRows));
        Value split = e.blockId(Dimension::z);
        Value sq = e.dim(q, 1);
        Value rows = e.mul(sq, e.index(heads));
        Value capacity = e.pagedCapacity(table, cache, e.index(page));
        Value lastBlock = e.sub(e.dim(cache, 0), e.index(1));

        Value n;
        auto body = [&] {
          // Shared memory from its first 1024-byte boundary (swizzle
          // atoms are addressed by absolute address bits).
          Value raw = e.dynamicShared();
          Value rawAddress = e.sharedAddress(raw);
          Value pad = e.remui(
              e.sub(e.index(kAtomBytes), e.remui(rawAddress, kAtomBytes)),
              kAtomBytes);
          Value base = e.add(rawAddress, pad);
          Value tiles = e.sharedView(raw, pad, {layout.max / 2}, element);
          Value maxS = e.sharedView(raw, e.add(pad, e.index(layout.max)),
                                    {kWarpgroups * kTileRows}, b.getF32Type());
          Value sumS = e.sharedView(raw, e.add(pad, e.index(layout.sum)),
                                    {kWarpgroups * kTileRows}, b.getF32Type());

          Value seqLen = e.clampIndex(e.loadIndex(lens, {req}), zero, capacity);
          auto [first, last] = schedule.tokenRange(e, split, n, seqLen);
          Value kvEnd = e.clampIndex(last, zero, seqLen);
          Value aligned = e.vectorAligned({q, cache});
          Value numTiles = e.ceilDiv(e.maxIndex(e.sub(kvEnd, first), zero),
                                     kTileTokens);

          // The lane's two rows of the tile: 16 w + g and + 8.
          struct LaneRow {
            Value local, real, query, head, end;
          };
          SmallVector<LaneRow, 2> laneRows;
          for (int64_t i = 0; i < 2; ++i) {
            Value local = e.add(e.mul(groupWarp, e.index(16)),
                                e.add(laneGroup, e.index(8 * i)));
            Value r = e.add(tileRow0, local);
            Value query = e.divui(r, heads), head = e.remui(r, heads);
            Value visible = e.visibleKeys(causal, query, sq, seqLen);
            laneRows.push_back({local, e.lessThan(r, rows), query, head,
                                e.clampIndex(last, zero, visible)});
          }

          auto swizzledAt = [&](int64_t byteOffset, Value stageOffset) {
            return [&, byteOffset, stageOffset](Value row, Value col) {
              Value at = e.add(e.index(byteOffset / 2), e.swizzled(row, col, kTileRows));
              if (stageOffset)
                at = e.add(at, stageOffset);
              return SmallVector<Value, 2>{at};
            };
          };
          const int64_t warps = kThreads / kWarpSize;
          // The Q tile (padding rows zero).
          e.copyTile(
              aligned, tiles, q, kTileRows, vectorsPerRow, warp, lane,
              [&](Value row) {
                Value r = e.add(tileRow0, row);
                Value rc = e.minIndex(r, e.sub(rows, e.index(1)));
                return MmaEmitter::SourceRow{
                    e.lessThan(r, rows),
                    {req, e.divui(rc, heads), e.remui(rc, heads)}};
              },
              warps, swizzledAt(layout.q, Value()));
          // KV tile t into stage `stage`: token first + 64 t + row is row
          // j % page of page block_table[req, j / page].
          auto stageOf = [&](Value t) {
            return layout.stages == 2 ? e.remui(t, 2) : zero;
          };
          auto copyKv = [&](Value t) {
            Value tile = e.add(first, e.mul(t, e.index(kTileTokens)));
            Value stageOffset = e.mul(stageOf(t), e.index(layout.kvStage / 2));
            e.copyTile(
                aligned, tiles, cache, kTileTokens, vectorsPerRow, warp, lane,
                [&](Value row) {
                  Value j = e.add(tile, row);
                  Value jc = e.minIndex(j, e.sub(kvEnd, e.index(1)));
                  Value block = e.clampIndex(
                      e.loadIndex(table, {req, e.divui(jc, page)}), zero,
                      lastBlock);
                  return MmaEmitter::SourceRow{e.lessThan(j, kvEnd),
                                               {block, e.remui(jc, page)}};
                },
                warps, swizzledAt(layout.kv, stageOffset));
          };
          if (layout.stages == 2) {
            e.ifThen(e.lessThan(zero, numTiles), [&] { copyKv(zero); });
            e.commitCopies();
          }

          Value descQ = e.descriptor(e.add(base, e.index(layout.q)), 16,
                                     kAtomBytes);
          Value descP = e.descriptor(e.add(base, e.index(layout.p)), 16,
                                     kAtomBytes);
          Value negInf = e.negInf(), fzero = e.f32(0.0);
          SmallVector<Value> init{negInf, negInf, fzero, fzero};
          init.append(oRegs, fzero);
          SmallVector<Value> state = e.forLoop(
              zero, numTiles, e.index(1), init,
              [&](Value t, ValueRange it) -> SmallVector<Value> {
                Value tile = e.add(first, e.mul(t, e.index(kTileTokens)));
                // 1. This tile in shared memory (one stage: copied now).
                // Past the barrier every thread is done with the previous
                // tile, so its stage takes the next one while this one is
                // computed.
                if (layout.stages == 1) {
                  e.barrier();
                  copyKv(t);
                }
                e.waitAllCopies();
                e.sharedProxyFence();
                e.barrier();
                if (layout.stages == 2) {
                  Value next = e.add(t, e.index(1));
                  e.ifThen(e.lessThan(next, numTiles), [&] { copyKv(next); });
                }
                Value kvAddress =
                    e.add(base, e.add(e.index(layout.kv),
                                      e.mul(stageOf(t),
                                            e.index(layout.kvStage))));

                // 2. S = Q K^T over the group's 32 tokens.
                Value descK = e.descriptor(
                    e.add(kvAddress,
                          e.mul(group, e.index(kHalfTokens * kRowBytes))),
                    16, kAtomBytes);
                e.fence();
                Value acc =
                    e.toAccumulator(SmallVector<Value>(sRegs, fzero));
                for (int64_t k = 0; k < kSteps; ++k) {
                  int64_t offset = (k / 4) * kBlockBytes + (k % 4) * 32;
                  acc = e.mma(acc, e.advance(descQ, offset),
                              e.advance(descK, offset), kHalfTokens, k > 0,
                              false);
                }
                e.commit();
                e.wait(0);
                SmallVector<Value> s = e.fromAccumulator(acc, sRegs);

                // Scaled, masked scores: s[4 j + 2 i + c] is row i of the
                // lane, token 32 g + 8 j + 2 quad + c.
                Value tokenBase = e.add(
                    tile, e.add(e.mul(group, e.index(kHalfTokens)),
                                e.mul(quad, e.index(2))));
                Value scale = e.f32(scaleLog2);
                SmallVector<Value> localMax{negInf, negInf};
                for (int64_t j = 0; j < kHalfTokens / 8; ++j)
                  for (int64_t c = 0; c < 2; ++c) {
                    Value token = e.add(tokenBase, e.index(8 * j + c));
                    for (int64_t i = 0; i < 2; ++i) {
                      int64_t at = 4 * j + 2 * i + c;
                      s[at] = e.select(e.lessThan(token, laneRows[i].end),
                                       e.mulf(s[at], scale), negInf);
                      localMax[i] = e.maxf(localMax[i], s[at]);
                    }
                  }
                // 3. Row maxima of both halves.
                Value leader = e.eqIndex(quad, 0);
                SmallVector<Value> groupMax;
                for (int64_t i = 0; i < 2; ++i)
                  groupMax.push_back(e.quadMax(localMax[i]));
                e.ifThen(leader, [&] {
                  for (int64_t i = 0; i < 2; ++i)
                    memref::StoreOp::create(
                        b, l, groupMax[i], maxS,
                        ValueRange{e.add(e.mul(group, e.index(kTileRows)),
                                         laneRows[i].local)});
                });
                e.barrier();
                SmallVector<Value> next(it.begin(), it.end());
                SmallVector<Value> alpha, rowMax;
                for (int64_t i = 0; i < 2; ++i) {
                  Value m = it[i];
                  for (int64_t g = 0; g < kWarpgroups; ++g)
                    m = e.maxf(m, memref::LoadOp::create(
                                      b, l, maxS,
                                      ValueRange{e.add(
                                          e.index(g * kTileRows),
                                          laneRows[i].local)}));
                  // A row that has seen nothing yet keeps -inf; use 0 so
                  // that exp2(-inf - m) is 0, never NaN.
                  Value safe = e.select(e.isNegInf(m), fzero, m);
                  next[i] = m;
                  rowMax.push_back(safe);
                  alpha.push_back(e.exp2(e.subf(it[i], safe)));
                }
                // 4. P = exp2(S - m) to shared memory, the group's sums, O
                // rescaled.
                for (int64_t i = 0; i < 2; ++i) {
                  Value sum = e.mulf(it[2 + i], alpha[i]);
                  SmallVector<Value> p(2 * (kHalfTokens / 8));
                  for (int64_t j = 0; j < kHalfTokens / 8; ++j) {
                    for (int64_t c = 0; c < 2; ++c) {
                      p[2 * j + c] =
                          e.exp2(e.subf(s[4 * j + 2 * i + c], rowMax[i]));
                      sum = e.addf(sum, p[2 * j + c]);
                    }
                    Value col = e.add(e.mul(group, e.index(kHalfTokens)),
                                      e.add(e.index(8 * j),
                                            e.mul(quad, e.index(2))));
                    Value at = e.add(e.index(layout.p / 2),
                                     e.swizzled(laneRows[i].local, col,
                                                kTileRows));
                    vector::StoreOp::create(
                        b, l, e.pack(p[2 * j], p[2 * j + 1]), tiles,
                        ValueRange{at}, /*nontemporal=*/false,
                        llvm::MaybeAlign(4));
                  }
                  next[2 + i] = sum;
                }
                for (int64_t r = 0; r < oRegs; ++r)
                  next[4 + r] = e.mulf(it[4 + r], alpha[(r % 4) / 2]);
                e.sharedProxyFence();
                e.barrier();

                // 5. O += P V over the group's columns: V N-major, column
                // blocks 8 KiB apart, 8-token atoms 1 KiB apart.
                Value descV = e.descriptor(
                    e.add(kvAddress,
                          e.mul(group, e.index(halfColumns / kAtomColumns *
                                               kBlockBytes))),
                    kBlockBytes, kAtomBytes);
                e.fence();
                Value o = e.toAccumulator(ArrayRef<Value>(next).drop_front(4));
                for (int64_t k = 0; k < kTileTokens / 16; ++k)
                  o = e.mma(o, e.advance(descP, 32 * k),
                            e.advance(descV, 2 * kAtomBytes * k), halfColumns,
                            true, true);
                e.commit();
                e.wait(0);
                SmallVector<Value> out = e.fromAccumulator(o, oRegs);
                std::copy(out.begin(), out.end(), next.begin() + 4);
                return next;
              });
          // Copies still in flight when no tile ran (the Q tile).
          e.waitAllCopies();

          // Row sums of both halves.
          Value leader = e.eqIndex(quad, 0);
          SmallVector<Value> groupSum;
          for (int64_t i = 0; i < 2; ++i)
            groupSum.push_back(e.quadSum(state[2 + i]));
          e.ifThen(leader, [&] {
            for (int64_t i = 0; i < 2; ++i)
              memref::StoreOp::create(
                  b, l, groupSum[i], sumS,
                  ValueRange{e.add(e.mul(group, e.index(kTileRows)),
                                   laneRows[i].local)});
          });
          e.barrier();
          Value writesLse = e.andi(leader, e.eqIndex(group, 0));
          Value groupCol0 = e.mul(group, e.index(halfColumns));
          // out = O / l per lane row: (scale, O column of accumulator
          // 4 j + 2 i + c).
          SmallVector<Value, 2> inverses;
          for (int64_t i = 0; i < 2; ++i) {
            Value sum = fzero;
            for (int64_t g = 0; g < kWarpgroups; ++g)
              sum = e.addf(sum, memref::LoadOp::create(
                                    b, l, sumS,
                                    ValueRange{e.add(e.index(g * kTileRows),
                                                     laneRows[i].local)}));
            const LaneRow &row = laneRows[i];
            Value hasKeys = arith::CmpFOp::create(
                b, l, arith::CmpFPredicate::OGT, sum, fzero);
            inverses.push_back(e.select(
                hasKeys, arith::DivFOp::create(b, l, e.f32(1.0), sum), fzero));
            e.ifThen(e.andi(row.real, writesLse), [&] {
              Value lse = e.select(hasKeys,
                                   e.addf(e.mulf(state[i], e.f32(M_LN2)),
                                          math::LogOp::create(b, l, sum)),
                                   negInf);
              e.storeF32(lse, partLse, {req, row.query, row.head, split});
            });
          }
          auto column = [&](int64_t j, int64_t c) {
            return e.add(groupCol0,
                         e.add(e.index(8 * j + c), e.mul(quad, e.index(2))));
          };
          // Element by element into the partials.
          auto storeDirect = [&] {
            for (int64_t i = 0; i < 2; ++i)
              e.ifThen(laneRows[i].real, [&] {
                for (int64_t j = 0; j < halfColumns / 8; ++j)
                  for (int64_t c = 0; c < 2; ++c)
                    e.storeF32(
                        e.mulf(state[4 + 4 * j + 2 * i + c], inverses[i]),
                        part,
                        {req, laneRows[i].query, laneRows[i].head, split,
                         column(j, c)});
              });
          };
          // Staged as f32 rows in shared memory (the tiles are dead: every
          // thread is past the row-sum barrier), then one bulk copy a row
          // (cp.async.bulk, 16-byte multiples from 16-byte aligned
          // addresses: a partial row is Lkv f32 of a row-major buffer).
          auto storeBulk = [&] {
            Value staging = e.sharedView(raw, pad, {kTileRows, kStagingStride},
                                         b.getF32Type());
            for (int64_t i = 0; i < 2; ++i)
              for (int64_t j = 0; j < halfColumns / 8; ++j) {
                auto pair = VectorType::get({2}, b.getF32Type());
                Value v = vector::FromElementsOp::create(
                    b, l, pair,
                    ValueRange{
                        e.mulf(state[4 + 4 * j + 2 * i], inverses[i]),
                        e.mulf(state[4 + 4 * j + 2 * i + 1], inverses[i])});
                vector::StoreOp::create(
                    b, l, v, staging,
                    ValueRange{laneRows[i].local, column(j, 0)},
                    /*nontemporal=*/false, llvm::MaybeAlign(8));
              }
            e.sharedProxyFence();
            e.barrier();
            Value r = e.add(tileRow0, tid);
            e.ifThen(e.andi(e.lessThan(tid, e.index(kTileRows)),
                            e.lessThan(r, rows)),
                     [&] {
                       Value query = e.divui(r, heads),
                             head = e.remui(r, heads);
                       Value rowIndex = e.add(
                           e.mul(e.add(e.mul(e.add(e.mul(req, sq), query),
                                             e.index(heads)),
                                       head),
                                 e.dim(part, 3)),
                           split);
                       e.bulkCopyToGlobal(
                           e.add(e.sharedAddress(raw),
                                 e.add(pad, e.mul(tid, e.index(
                                                           kStagingStride * 4)))),
                           e.add(memref::ExtractAlignedPointerAsIndexOp::create(
                                     b, l, part),
                                 e.mul(rowIndex, e.index(latent * 4))),
                           latent * 4);
                     });
            e.waitBulkReads();
          };
          if (GpuEmitter::hasVectorRows(part))
            e.ifThenElse(e.vectorAligned({part}), storeBulk, storeDirect);
          else
            storeDirect();
        };
        if (schedule.planned) {
          // A split past the request's count writes nothing: the combine
          // reads only the first n partials.
          n = schedule.activeSplits(e, numSplits, req, e.dim(partLse, 3));
          e.ifThen(e.lessThan(split, n), body);
        } else {
          body();
        }
      },
      kThreads);

  Location loc = op.getLoc();
  LoopBuilder hb(host, loc);
  Value batch = hb.dim(op.getQ(), 0), queryLen = hb.dim(op.getQ(), 1);
  Value rows = hb.mul(queryLen, hb.index(heads));
  KernelFactory::launch(host, loc, kernel,
                        {batch, hb.ceilDiv(rows, kTileRows), splits}, splitArgs,
                        layout.bytes);
}

} // namespace mla::gpu
