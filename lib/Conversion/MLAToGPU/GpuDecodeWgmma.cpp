//===- GpuDecodeWgmma.cpp - Hopper decode split kernel (wgmma) ------------===//
//
// The `wgmma` strategy's split kernel of mla.decode_attention (sm_90a), for
// bf16 or f16 queries over a cache of the same type and 16 or more heads:
// one block reads a request's KV tiles for 64 of its rows (the 16-row
// mma.sync kernel pulls every tile from L2 once per 16 rows) and keeps
// two tiles in flight. A block handles a 64-row M tile of one request and one
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
// maxima are exchanged; (C) P is written. (With one stage, for qk dims past
// 576, a fourth barrier precedes each tile's copy, which then overlaps
// nothing.) Each wgmma group is waited for before the next phase: keeping
// PV in flight across the loop's back edge makes ptxas serialize every
// wgmma (C7514), which the ptxas lit test refuses.
// out = O / l (0 when l = 0) and lse = m ln 2 + log(l) (-inf when l = 0)
// go to out and lse for a request of one split, else to the split partials
// of the real rows, as every split kernel writes them: staged as f32 rows
// in shared memory and written by one bulk copy (cp.async.bulk) a row, or
// element by element where the partials are not 32-byte aligned (the
// vector alignment the lowering checks). Q and the cache are copied in
// 16-byte vectors only: the host launches the generic split kernel where
// either is not 16-byte aligned (element-by-element copies doubled this
// kernel's code and compile time).
//
//===----------------------------------------------------------------------===//

#include "DecodeSplitBlock.h"
#include "WgmmaEmitter.h"
#include "mla/Target/WgmmaDecodeShape.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>

using namespace mlir;

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
  return runsOn(hasSameTwoByteTypes(op), op.getNumHeads(), op.getKvLoraRank(),
                op.getRopeDim(), target.maxSharedBytesPerBlock()) &&
         GpuEmitter::hasVectorRows(op.getQ()) &&
         GpuEmitter::hasVectorRows(op.getKvCache());
}

void launchWgmmaDecodeSplit(DecodeAttentionOp op, KernelFactory &kernels,
                            const DecodeSchedule &schedule, OpBuilder &host,
                            ValueRange splitArgs, Value splits) {
  int64_t heads = op.getNumHeads(), latent = op.getKvLoraRank();
  int64_t qkDim = latent + op.getRopeDim();
  double scaleLog2 = op.getSoftmaxScale().convertToDouble() * M_LOG2E;
  Type element = cast<MemRefType>(op.getQ().getType()).getElementType();
  SharedLayout layout(
      qkDim, stagesFor(qkDim, kernels.target().maxSharedBytesPerBlock()));
  const int64_t vectorsPerRow = qkDim / kCopyElems;
  const int64_t halfColumns = latent / kWarpgroups; // O columns of a group
  const int64_t sRegs = kTileRows * kHalfTokens / 128;
  const int64_t oRegs = kTileRows * halfColumns / 128;
  const int64_t kSteps = qkDim / 16;
  // f32 row stride of the output staging: 32 bytes of padding shift each
  // row by 8 banks, so the four rows of a half-warp's 8-byte stores hit
  // distinct banks (and rows stay 16-byte aligned for the bulk copies).
  const int64_t kStagingStride = latent + 8;
  static_assert(kTileRows <= kThreads, "one thread copies each row");
  // The staging reuses the tile region (Q, the KV stages and P), which
  // always holds it for the dims the kernel takes; checked all the same.
  if (kTileRows * kStagingStride * 4 > layout.max)
    llvm::report_fatal_error("wgmma decode: output staging exceeds the tiles");

  auto kernel = kernels.create(
      "decode_attention_split_wgmma", splitArgs.getTypes(),
      [&](GpuEmitter &base, ValueRange a) {
        WgmmaEmitter e(base.builder(), base.location(), element);
        OpBuilder &b = e.builder();
        Location l = e.location();
        DecodeSplitBlock block(e, op, schedule, a, kTileRows);
        Value part = block.part;
        Value req = block.req, tileRow0 = block.tileRow0, split = block.split;
        Value zero = e.index(0);

        WgmmaEmitter::WarpgroupThread thread = e.warpgroupThread();
        Value tid = thread.tid, warp = thread.warp, lane = thread.lane,
              group = thread.group, groupWarp = thread.groupWarp,
              laneGroup = thread.laneGroup, quad = thread.quad;

        block.run([&] {
          Value raw = e.dynamicShared();
          // Values, not structured bindings: lambdas capture them (C++17).
          WgmmaEmitter::AlignedShared aligned1k = e.alignedShared(raw);
          Value pad = aligned1k.offset, base = aligned1k.address;
          Value tiles = e.sharedView(raw, pad, {layout.max / 2}, element);
          Value maxS = e.sharedView(raw, e.add(pad, e.index(layout.max)),
                                    {kWarpgroups * kTileRows}, b.getF32Type());
          Value sumS = e.sharedView(raw, e.add(pad, e.index(layout.sum)),
                                    {kWarpgroups * kTileRows}, b.getF32Type());

          Value first = block.first, kvEnd = block.kvEnd;
          Value numTiles = e.ceilDiv(e.maxIndex(e.sub(kvEnd, first), zero),
                                     kTileTokens);

          // The lane's two rows of the tile: 16 w + g and + 8.
          SmallVector<DecodeSplitBlock::LaneRow, 2> laneRows;
          for (int64_t i = 0; i < 2; ++i)
            laneRows.push_back(block.laneRow(
                e.add(e.mul(groupWarp, e.index(16)),
                      e.add(laneGroup, e.index(8 * i)))));

          // A value per lane row, reduced over the two warpgroups through
          // `buffer` (one slot per group and tile row): the quad leaders
          // store their group's, a barrier, every lane combines both.
          Value leader = e.eqIndex(quad, 0);
          auto acrossGroups = [&](Value buffer, ArrayRef<Value> perRow,
                                  Value start, bool max) {
            e.ifThen(leader, [&] {
              for (int64_t i = 0; i < 2; ++i)
                memref::StoreOp::create(
                    b, l, perRow[i], buffer,
                    ValueRange{e.add(e.mul(group, e.index(kTileRows)),
                                     laneRows[i].local)});
            });
            e.barrier();
            SmallVector<Value, 2> combined;
            for (int64_t i = 0; i < 2; ++i) {
              Value v = start;
              for (int64_t g = 0; g < kWarpgroups; ++g) {
                Value other = memref::LoadOp::create(
                    b, l, buffer,
                    ValueRange{e.add(e.index(g * kTileRows),
                                     laneRows[i].local)});
                v = max ? e.maxf(v, other) : e.addf(v, other);
              }
              combined.push_back(v);
            }
            return combined;
          };

          auto swizzledAt = [&](int64_t byteOffset, Value stageOffset) {
            return [&, byteOffset, stageOffset](Value row, Value col) {
              Value at = e.add(e.index(byteOffset / 2),
                               e.swizzled(row, col, kTileRows));
              if (stageOffset)
                at = e.add(at, stageOffset);
              return SmallVector<Value, 2>{at};
            };
          };
          const int64_t warps = kThreads / kWarpSize;
          // The Q tile (padding rows zero).
          // 16-byte copies only (no `aligned` branch): see the file comment.
          e.copyTile(
              Value(), tiles, block.q, kTileRows, vectorsPerRow, warp, lane,
              [&](Value row) { return block.queryRow(row); }, warps,
              swizzledAt(layout.q, Value()));
          // KV tile t (tokens from first + 64 t) into its stage.
          auto stageOf = [&](Value t) {
            return layout.stages == 2 ? e.remui(t, 2) : zero;
          };
          auto copyKv = [&](Value t) {
            Value tile = e.add(first, e.mul(t, e.index(kTileTokens)));
            Value stageOffset = e.mul(stageOf(t), e.index(layout.kvStage / 2));
            e.copyTile(
                Value(), tiles, block.cache, kTileTokens, vectorsPerRow, warp,
                lane, [&](Value row) { return block.cacheRow(tile, row); },
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
                // Built before the fence: no register of a wgmma operand is
                // written between the fence and the wgmma.
                Value acc =
                    e.toAccumulator(SmallVector<Value>(sRegs, fzero));
                e.fence();
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
                SmallVector<Value> groupMax;
                for (int64_t i = 0; i < 2; ++i)
                  groupMax.push_back(e.quadMax(localMax[i]));
                SmallVector<Value, 2> tileMax =
                    acrossGroups(maxS, groupMax, negInf, /*max=*/true);
                SmallVector<Value> next(it.begin(), it.end());
                SmallVector<Value> alpha, rowMax;
                for (int64_t i = 0; i < 2; ++i) {
                  MmaEmitter::OnlineMax step = e.onlineMax(it[i], tileMax[i]);
                  next[i] = step.max;
                  rowMax.push_back(step.safe);
                  alpha.push_back(step.alpha);
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
                SmallVector<Value> scaledO =
                    e.rescaleRows(ValueRange(it).slice(4, oRegs), alpha);
                std::copy(scaledO.begin(), scaledO.end(), next.begin() + 4);
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
          SmallVector<Value> groupSum;
          for (int64_t i = 0; i < 2; ++i)
            groupSum.push_back(e.quadSum(state[2 + i]));
          SmallVector<Value, 2> sums =
              acrossGroups(sumS, groupSum, fzero, /*max=*/false);
          Value writesLse = e.andi(leader, e.eqIndex(group, 0));
          Value groupCol0 = e.mul(group, e.index(halfColumns));
          // out = O / l per lane row: (scale, O column of accumulator
          // 4 j + 2 i + c).
          SmallVector<MmaEmitter::RowEnd, 2> ends;
          for (int64_t i = 0; i < 2; ++i)
            ends.push_back(e.finishRow(state[i], sums[i]));
          auto column = [&](int64_t j, int64_t c) {
            return e.add(groupCol0,
                         e.add(e.index(8 * j + c), e.mul(quad, e.index(2))));
          };
          // Element by element into the results (final or partial).
          auto storeDirect = [&](const SplitResults &to) {
            for (int64_t i = 0; i < 2; ++i) {
              const DecodeSplitBlock::LaneRow &row = laneRows[i];
              e.ifThen(row.real, [&] {
                for (int64_t j = 0; j < halfColumns / 8; ++j)
                  for (int64_t c = 0; c < 2; ++c) {
                    SmallVector<Value, 5> at = to.rowIndex(row.query, row.head);
                    at.push_back(column(j, c));
                    e.storeF32(
                        e.mulf(state[4 + 4 * j + 2 * i + c], ends[i].inverse),
                        to.values, at);
                  }
              });
            }
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
                        e.mulf(state[4 + 4 * j + 2 * i], ends[i].inverse),
                        e.mulf(state[4 + 4 * j + 2 * i + 1], ends[i].inverse)});
                vector::StoreOp::create(
                    b, l, v, staging,
                    ValueRange{laneRows[i].local, column(j, 0)},
                    /*nontemporal=*/false, llvm::MaybeAlign(8));
              }
            e.sharedProxyFence();
            e.barrier();
            // Thread r < 64 copies tile row r = s * N + h, partial row
            // ((req * Sq + s) * N + h) * S + split = (req * Sq * N + r) * S
            // + split.
            Value r = e.add(tileRow0, tid);
            e.ifThen(e.andi(e.lessThan(tid, e.index(kTileRows)),
                            e.lessThan(r, block.rows)),
                     [&] {
                       Value requestRows =
                           e.mul(e.dim(part, 1), e.index(heads));
                       Value partRow = e.add(
                           e.mul(e.add(e.mul(req, requestRows), r),
                                 e.dim(part, 3)),
                           split);
                       Value partBase =
                           memref::ExtractAlignedPointerAsIndexOp::create(
                               b, l, part);
                       e.bulkCopyToGlobal(
                           e.add(base, e.mul(tid, e.index(kStagingStride * 4))),
                           e.add(partBase, e.mul(partRow, e.index(latent * 4))),
                           latent * 4);
                     });
            e.waitBulkReads();
          };
          block.writeResults([&](const SplitResults &to) {
            for (int64_t i = 0; i < 2; ++i) {
              const DecodeSplitBlock::LaneRow &row = laneRows[i];
              e.ifThen(e.andi(row.real, writesLse), [&] {
                e.storeF32(ends[i].lse, to.lse,
                           to.lseIndex(row.query, row.head));
              });
            }
            if (to.partial && GpuEmitter::hasVectorRows(part))
              e.ifThenElse(e.vectorAligned({part}), storeBulk,
                           [&] { storeDirect(to); });
            else
              storeDirect(to);
          });
        });
      },
      kThreads);
  launchDecodeSplit(op, host, kernel, splitArgs, splits, kTileRows,
                    layout.bytes);
}

} // namespace mla::gpu
