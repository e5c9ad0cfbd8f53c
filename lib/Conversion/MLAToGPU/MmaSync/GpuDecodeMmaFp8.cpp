//===- GpuDecodeMmaFp8.cpp - mma.sync decode split kernel over FP8 codes --===//
//
// The `mma-sync` split kernel of mla.decode_attention over an FP8 cache
// (e4m3 or e5m2, bf16 or f16 queries). It has the blocks, rows and softmax
// of the two-byte kernel (GpuDecodeMma.cpp, MmaDecodeRows.h): 16 (query,
// head) rows a block, four warps, 64-token tiles, each warp scoring 16
// tokens and then adding P V over a quarter of the output columns. What
// differs is how the tiles reach the tensor cores: a tile stays in shared
// memory as codes, one byte an element, and each lane converts the codes
// of its own mma operands in registers. Nothing is dequantized into
// shared memory, so no barrier waits for a conversion and the tiles take
// half the space, which buys a second stage: tile t + 1's codes are in
// flight (16-byte cp.async.cg, L1 bypassed) while tile t is multiplied.
//
// The products are f16 (m16n8k16, f32 accumulators): sm_89 and later
// convert two codes to two f16 in one instruction (cvt.rn.f16x2.e4m3x2 or
// .e5m2x2, exact, NaN kept), older chips go through the shift-and-multiply
// decoding of Fp8Dequant.h. Q is staged once a block as f16 times 2^-k,
// k chosen from the block's largest |q| so that it lands in [2^15, 2^16)
// (bf16 queries fit f16's range and keep all of their bits); 2^k joins
// the scores' scale, with the cache's scale. P is f16 too.
//
// Which codes a lane needs: a dot product does not care in which order it
// sums, so the k16 steps are free to take their 16 columns in any order as
// long as both operands agree. The scores' steps pair up over 32 columns:
// lane (group g, quad q) loads 8 bytes of its token's codes at column
// 8q of the 32 (one 8-byte load, no ldmatrix) and 16 bytes of Q rows g
// and g + 8 at the same columns; bytes 4s .. 4s + 3 feed step s as the
// fragment columns 2q, 2q + 1, 2q + 8, 2q + 9. P V sums over tokens: step
// kk gives fragment column pair (2q, 2q + 1) to tokens q and q + 4 of its
// 16 and (2q + 8, 2q + 9) to q + 8 and q + 12, so a lane reads four token
// rows, 4 bytes each (columns 4g .. 4g + 3 of a 32-column group), and
// byte-permutes them into the four n8 tiles' operands (output column
// 4 g' + j of the group is n8 tile j's column g'); the P tile is stored
// with its tokens in that order. The output fragment's columns are
// permuted the same way when it is staged.
//
// Per tile: wait for its codes, a barrier (every warp is past the
// previous tile, whose stage the refill overwrites), the next tile's
// copy issued, scores, the row maxima across the warps (a barrier), P to
// shared memory (a barrier), P V.
//
//===----------------------------------------------------------------------===//

#include "Emitters/Fp8Dequant.h"
#include "MmaSync/MmaDecodeRows.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>

using namespace mlir;

namespace mla::gpu {

namespace {

using mma_decode::Fp8SharedLayout;
using mma_decode::kFp8Stages;
using mma_decode::kRowPad;
using mma_decode::kTileRows;
using mma_decode::kTileTokens;
using mma_decode::kWarps;
constexpr int64_t kWarpTokens = kTileTokens / kWarps;
constexpr int64_t kThreads = kWarps * kWarpSize;
/// Columns of a pair of scores steps, and of a warp's output column group.
constexpr int64_t kColumnGroup = 32;
/// The most 32-column chunks of the scores one loop iteration unrolls
/// (at DeepSeek's 576 columns, half of them).
constexpr int64_t kMaxChunksPerIteration = 9;
/// Q staged in [2^15, 2^16): the largest |q|'s exponent less this.
constexpr int64_t kQExponent = 15;
/// Codes in one 16-byte cp.async (cp.async.cg: whole 128-byte lines, L1
/// bypassed; 8-byte copies through L1 held the kernel at 64% of the copy
/// ceiling, benchmarks.md "FP8 caches").
constexpr int64_t kCodesPerCopy = 16;
/// The bound on |k|: 2^k and 2^-k stay normal f32.
constexpr int64_t kMaxQShift = 100;

/// Two-byte float pairs from FP8 codes, in registers.
class CodeConverter {
public:
  CodeConverter(MmaEmitter &e, Type codeType, bool hardware)
      : b(e.builder()), l(e.location()), codeType(codeType),
        hardware(hardware) {}

  /// Two pairs of codes (vector<2xi8> each) as two f16 pairs: an mma
  /// operand's two registers.
  std::pair<Value, Value> pairs(Value first, Value second) {
    if (hardware)
      return {cvt(first), cvt(second)};
    Value four = vector::ShuffleOp::create(b, l, first, second,
                                           ArrayRef<int64_t>{0, 1, 2, 3});
    Value typed = arith::BitcastOp::create(
        b, l, VectorType::get({4}, codeType), four);
    Value values = dequantizeFp8(b, l, typed, b.getF16Type());
    return {slice(values, 0, 2), slice(values, 2, 2)};
  }
  /// Codes [c0, c1, c2, c3] (vector<4xi8>) as the pairs (c0, c1), (c2, c3).
  std::pair<Value, Value> pairs(Value four) {
    return pairs(slice(four, 0, 2), slice(four, 2, 2));
  }

  /// Elements [first, first + n) of a vector.
  Value slice(Value v, int64_t first, int64_t n) {
    SmallVector<int64_t, 4> positions;
    for (int64_t i = 0; i < n; ++i)
      positions.push_back(first + i);
    return vector::ShuffleOp::create(b, l, v, v, positions);
  }
  /// A vector<N x code> loaded from shared memory as vector<N x i8>.
  Value loadBytes(Value codes, Value at, int64_t n) {
    Value v = vector::LoadOp::create(b, l, VectorType::get({n}, codeType),
                                     codes, ValueRange{at},
                                     /*nontemporal=*/false, llvm::MaybeAlign(n));
    return arith::BitcastOp::create(b, l, VectorType::get({n}, b.getI8Type()),
                                    v);
  }

private:
  OpBuilder &b;
  Location l;
  Type codeType;
  bool hardware;

  Value cvt(Value pair) {
    return NVVM::ConvertF8x2ToF16x2Op::create(
               b, l, VectorType::get({2}, b.getF16Type()), pair,
               b.getBoolAttr(false), TypeAttr::get(codeType))
        .getResult();
  }
};

/// The kernel of a split the request uses (inside DecodeSplitBlock::run):
/// the constructor views the shared memory, starts the first stages'
/// copies and stages Q; kvTile and stageOutput are the file comment's
/// steps.
class Fp8SplitBody : public MmaDecodeRows {
public:
  Fp8SplitBody(MmaEmitter &e, DecodeSplitBlock &block, DecodeAttentionOp op,
               const Fp8SharedLayout &layout, const WarpLane &thread,
               Value raw, bool hardwareConvert)
      : MmaDecodeRows(e, block, thread, op.getKvLoraRank(), raw, layout.max,
                      layout.sum,
                      // Scores in base 2: exp(x * scale) = exp2(x * scale *
                      // log2(e)).
                      op.getSoftmaxScale().convertToDouble() * M_LOG2E),
        b(e.builder()), l(e.location()), layout(layout), raw(raw),
        qkDim(op.getKvLoraRank() + op.getRopeDim()),
        codeType(cast<MemRefType>(block.cache.getType()).getElementType()),
        convert(e, codeType, hardwareConvert) {
    Type f16 = b.getF16Type();
    qS = e.sharedView(raw, layout.q, {kTileRows, layout.qStride}, f16);
    codes = e.sharedView(raw, layout.codes, {kFp8Stages * layout.codeStage},
                         codeType);
    pS = e.sharedView(raw, layout.p, {kTileRows, layout.pStride}, f16);
    warpCol0 = e.mul(thread.warp, e.index(warpColumns));
    codesAligned =
        e.andi(block.aligned, e.vectorAligned({block.cache}, kCodesPerCopy));
    // The first stages' copies go out before Q is staged, so that their
    // latency overlaps it.
    for (int64_t s = 0; s + 1 < kFp8Stages; ++s)
      refill(e.add(block.first, e.index(s * kTileTokens)), e.index(s));
    scoreScale = e.mulf(scoreScale, stageQ());
  }

private:
  OpBuilder &b;
  Location l;
  const Fp8SharedLayout &layout;
  Value raw;
  const int64_t qkDim;
  Type codeType;
  CodeConverter convert;
  Value qS, codes, pS, warpCol0;
  /// Whether the cache allows 16-byte copies of codes (else elements).
  Value codesAligned;

  /// The block's Q rows as f16 times 2^-k in the Q tile (padding rows
  /// zero); returns 2^k (f32). See the file comment.
  Value stageQ();
  /// The largest of every thread's `value` (f32, >= 0): warp maxima
  /// through the row-maxima buffer (a barrier; the tile loop's first
  /// barrier comes before the buffer's next use).
  Value blockMax(Value value);
  /// One 8-column piece of a Q row, as vector<8xf32>.
  Value loadQPiece(const MmaEmitter::SourceRow &row, Value column);

  /// Copies the codes of the tile starting at token `tile` into stage
  /// `stage` if the split has it, and commits a group either way.
  void refill(Value tile, Value stage);
  /// One KV tile starting at token `tile` (see the file comment), from the
  /// state `it` to the one returned.
  SmallVector<Value> kvTile(Value tile, ValueRange it) override;
  /// The scores' 32-column chunks unrolled into one loop iteration: the
  /// most of kMaxChunksPerIteration, 2 and 1 that divides them.
  int64_t chunksPerIteration() const {
    for (int64_t n : {kMaxChunksPerIteration, int64_t(2)})
      if (qkDim % (n * kColumnGroup) == 0)
        return n;
    return 1;
  }
  /// S = Q K^T for the warp's 16 tokens of the stage at byte `stageAt`,
  /// in sFragment's order: two n8 tiles, two accumulator sets each (even
  /// and odd k16 steps), added at the end.
  SmallVector<Value> scores(Value stageAt);
  /// P (sFragment's order) to the P tile, its tokens in the order P V's
  /// fragments take them; a barrier.
  void storeP(ArrayRef<Value> p);
  /// O += P V over the warp's columns (`o` in oFragment's order: n8 tile
  /// 4 c + j is column group c's output columns 4 g' + j).
  void addPv(Value stageAt, MutableArrayRef<Value> o);
  /// Shared-memory byte of the tile's token `row`, column `column`, in
  /// the stage at `stageAt`.
  Value codeAt(Value stageAt, Value row, Value column) {
    return e.add(stageAt, e.add(e.mul(row, e.index(layout.codeStride)), column));
  }
  /// O / l staged as f32 rows over the Q tile and code stages; returns
  /// the staging view.
  Value stageOutput(ArrayRef<Value> state,
                    ArrayRef<FragmentRowEnd> ends) override;
};

Value Fp8SplitBody::loadQPiece(const MmaEmitter::SourceRow &row,
                               Value column) {
  SmallVector<Value> at(row.prefix.begin(), row.prefix.end());
  at.push_back(column);
  auto type = VectorType::get({GpuEmitter::kVectorWidth}, b.getF32Type());
  Value loaded = e.selectValues(
      block.aligned, TypeRange{type},
      [&] { return SmallVector<Value>{e.loadVectorF32(block.q, at)}; },
      [&] {
        SmallVector<Value> values, element = at;
        for (int64_t k = 0; k < GpuEmitter::kVectorWidth; ++k) {
          element.back() = e.add(column, e.index(k));
          values.push_back(e.loadF32(block.q, element));
        }
        return SmallVector<Value>{
            vector::FromElementsOp::create(b, l, type, values).getResult()};
      })[0];
  Value zeros = arith::ConstantOp::create(
      b, l, DenseElementsAttr::get(type, b.getF32FloatAttr(0.0f)));
  return arith::SelectOp::create(b, l, row.valid, loaded, zeros);
}

Value Fp8SplitBody::blockMax(Value value) {
  Value warpMax = e.warpMax(value);
  e.ifThen(e.eqIndex(thread.lane, 0), [&] {
    memref::StoreOp::create(b, l, warpMax, maxS, ValueRange{thread.warp});
  });
  e.barrier();
  Value most = e.f32(0.0);
  for (int64_t w = 0; w < kWarps; ++w)
    most = e.maxf(most, memref::LoadOp::create(b, l, maxS,
                                               ValueRange{e.index(w)}));
  return most;
}

Value Fp8SplitBody::stageQ() {
  const int64_t piecesPerRow = qkDim / GpuEmitter::kVectorWidth;
  const int64_t pieces = kTileRows * piecesPerRow;
  const int64_t perThread = (pieces + kThreads - 1) / kThreads;
  // Every thread's pieces, loaded together, and the largest |q| of them.
  SmallVector<std::tuple<Value, Value, Value>> loaded; // row, column, values
  Value most = e.f32(0.0);
  for (int64_t k = 0; k < perThread; ++k) {
    Value piece = e.add(e.threadId(), e.index(k * kThreads));
    if ((k + 1) * kThreads > pieces)
      piece = e.minIndex(piece, e.index(pieces - 1));
    Value row = e.divui(piece, piecesPerRow);
    Value column = e.mul(e.remui(piece, piecesPerRow),
                         e.index(GpuEmitter::kVectorWidth));
    Value values = loadQPiece(block.queryRow(row), column);
    loaded.push_back({row, column, values});
    // max |x| as max(max x, -min x) (no libdevice call for fabs).
    Value largest = vector::ReductionOp::create(
        b, l, vector::CombiningKind::MAXNUMF, values);
    Value smallest = vector::ReductionOp::create(
        b, l, vector::CombiningKind::MINNUMF, values);
    // maxnum: a NaN entry (which stays NaN) does not set the block's k.
    most = arith::MaxNumFOp::create(
        b, l, most,
        arith::MaxNumFOp::create(b, l, largest,
                                 arith::NegFOp::create(b, l, smallest)));
  }
  // k = exponent(max |q|) - 15, clamped; 2^-k and 2^k built from their
  // exponent fields. NaN entries stay NaN (maxnum skips them).
  Type i32 = b.getI32Type();
  auto constant = [&](int64_t v) {
    return arith::ConstantIntOp::create(b, l, v, 32).getResult();
  };
  Value bits = arith::BitcastOp::create(b, l, i32, blockMax(most));
  Value exponent = arith::SubIOp::create(
      b, l,
      arith::AndIOp::create(b, l, arith::ShRUIOp::create(b, l, bits, constant(23)),
                            constant(0xff)),
      constant(127 + kQExponent));
  Value shift = arith::MaxSIOp::create(
      b, l, arith::MinSIOp::create(b, l, exponent, constant(kMaxQShift)),
      constant(-kMaxQShift));
  auto powerOfTwo = [&](Value power) {
    Value field = arith::ShLIOp::create(
        b, l, arith::AddIOp::create(b, l, power, constant(127)), constant(23));
    return arith::BitcastOp::create(b, l, b.getF32Type(), field).getResult();
  };
  Value down = powerOfTwo(arith::SubIOp::create(b, l, constant(0), shift));
  Value up = powerOfTwo(shift);
  auto half8 = VectorType::get({GpuEmitter::kVectorWidth}, b.getF16Type());
  Value downs = vector::BroadcastOp::create(
      b, l, cast<VectorType>(std::get<2>(loaded[0]).getType()), down);
  for (auto [k, entry] : llvm::enumerate(loaded)) {
    auto [row, column, values] = entry;
    auto store = [&, row = row, column = column, values = values] {
      Value scaled = arith::TruncFOp::create(
          b, l, half8, arith::MulFOp::create(b, l, values, downs));
      vector::StoreOp::create(b, l, scaled, qS, ValueRange{row, column},
                              /*nontemporal=*/false, llvm::MaybeAlign(16));
    };
    if (int64_t(k + 1) * kThreads > pieces)
      e.ifThen(e.lessThan(e.add(e.threadId(), e.index(k * kThreads)),
                          e.index(pieces)),
               store);
    else
      store();
  }
  return up;
}

void Fp8SplitBody::refill(Value tile, Value stage) {
  Value stageAt = e.mul(stage, e.index(layout.codeStage));
  e.ifThen(e.lessThan(tile, block.kvEnd), [&] {
    e.copyTile(
        codesAligned, codes, block.cache, kTileTokens, qkDim / kCodesPerCopy,
        thread.warp, thread.lane,
        [&](Value row) { return block.cacheRow(tile, row); }, kWarps,
        [&](Value row, Value column) {
          return SmallVector<Value, 2>{codeAt(stageAt, row, column)};
        },
        /*firstVector=*/0, kCodesPerCopy);
  });
  e.commitCopies();
}

SmallVector<Value> Fp8SplitBody::kvTile(Value tile, ValueRange it) {
  // Tile i's group is done when at most the kFp8Stages - 2 after it are in
  // flight; the barrier also puts every warp past tile i - 1, whose stage
  // the refill takes.
  Value i = e.divui(e.sub(tile, block.first), kTileTokens);
  e.waitPendingCopies(kFp8Stages - 2);
  e.barrier();
  refill(e.add(tile, e.index((kFp8Stages - 1) * kTileTokens)),
         e.remui(e.add(i, e.index(kFp8Stages - 1)), kFp8Stages));
  Value stageAt = e.mul(e.remui(i, kFp8Stages), e.index(layout.codeStage));
  SmallVector<Value> s = scores(stageAt);
  SmallVector<Value> next(it.begin(), it.end());
  SmallVector<Value> p = softmaxStep(
      e.add(tile, e.mul(thread.warp, e.index(kWarpTokens))), s, it, next);
  storeP(p);
  addPv(stageAt, MutableArrayRef<Value>(next).drop_front(4));
  return next;
}

SmallVector<Value> Fp8SplitBody::scores(Value stageAt) {
  Value tokenRow0 = e.add(e.mul(thread.warp, e.index(kWarpTokens)),
                          thread.group);
  Value laneColumn = e.mul(thread.quad, e.index(8));
  // One 32-column chunk: two k16 steps of both n8 tiles.
  auto chunk = [&](Value c, MutableArrayRef<Value> acc) {
    Value column = e.add(c, laneColumn);
    SmallVector<Value, 2> q;
    for (int64_t i = 0; i < 2; ++i)
      q.push_back(vector::LoadOp::create(
          b, l, VectorType::get({8}, b.getF16Type()), qS,
          ValueRange{e.add(thread.group, e.index(8 * i)), column},
          /*nontemporal=*/false, llvm::MaybeAlign(16)));
    SmallVector<Value, 2> k;
    for (int64_t nt = 0; nt < 2; ++nt)
      k.push_back(convert.loadBytes(
          codes, codeAt(stageAt, e.add(tokenRow0, e.index(8 * nt)), column),
          8));
    for (int64_t s = 0; s < 2; ++s) {
      SmallVector<Value, 4> a{
          convert.slice(q[0], 4 * s, 2), convert.slice(q[1], 4 * s, 2),
          convert.slice(q[0], 4 * s + 2, 2), convert.slice(q[1], 4 * s + 2, 2)};
      for (int64_t nt = 0; nt < 2; ++nt) {
        auto [b0, b1] = convert.pairs(convert.slice(k[nt], 4 * s, 4));
        e.mma(a, b0, b1, acc.slice(8 * nt + 4 * s, 4));
      }
    }
  };
  // Several chunks an iteration where they divide the columns: the loads
  // of the later ones are in flight during the first's products (the
  // block is latency-bound: from 16k, three chunks were 1 to 2% faster
  // than two, nine 1 to 1.7% faster than three).
  const int64_t perIteration = chunksPerIteration();
  SmallVector<Value> sets = e.forLoop(
      e.index(0), e.index(qkDim), perIteration * kColumnGroup,
      SmallVector<Value>(16, fzero),
      [&](Value c, ValueRange acc) -> SmallVector<Value> {
        SmallVector<Value> next(acc.begin(), acc.end());
        for (int64_t u = 0; u < perIteration; ++u)
          chunk(e.add(c, e.index(u * kColumnGroup)), next);
        return next;
      });
  SmallVector<Value> acc;
  for (int64_t nt = 0; nt < 2; ++nt)
    for (int64_t r = 0; r < 4; ++r)
      acc.push_back(e.addf(sets[8 * nt + r], sets[8 * nt + 4 + r]));
  return acc;
}

void Fp8SplitBody::storeP(ArrayRef<Value> p) {
  // Token 8 nt + 2 quad + c of the warp's 16 goes to column 4 (token % 4)
  // + token / 4 of its k16 step (addPv's order).
  Type f16 = b.getF16Type();
  Value warpColumn0 = e.mul(thread.warp, e.index(kWarpTokens));
  for (int64_t nt = 0; nt < 2; ++nt)
    for (int64_t c = 0; c < 2; ++c) {
      Value token = e.add(e.index(8 * nt + c), e.mul(thread.quad, e.index(2)));
      Value column = e.add(warpColumn0, e.add(e.mul(e.remui(token, 4), e.index(4)),
                                              e.divui(token, 4)));
      for (int64_t i = 0; i < 2; ++i)
        memref::StoreOp::create(
            b, l, arith::TruncFOp::create(b, l, f16, p[sFragment.at(0, nt, i, c)]),
            pS, ValueRange{e.add(thread.group, e.index(8 * i)), column});
    }
  e.barrier();
}

void Fp8SplitBody::addPv(Value stageAt, MutableArrayRef<Value> o) {
  const int64_t groups = warpColumns / kColumnGroup;
  Value laneColumn = e.mul(thread.group, e.index(4));
  for (int64_t kk = 0; kk < kTileTokens / 16; ++kk) {
    // A: P rows g and g + 8, columns 4 quad .. 4 quad + 3 of the step.
    SmallVector<Value, 2> pRows;
    for (int64_t i = 0; i < 2; ++i)
      pRows.push_back(vector::LoadOp::create(
          b, l, VectorType::get({4}, b.getF16Type()), pS,
          ValueRange{e.add(thread.group, e.index(8 * i)),
                     e.add(e.index(16 * kk), e.mul(thread.quad, e.index(4)))},
          /*nontemporal=*/false, llvm::MaybeAlign(8)));
    SmallVector<Value, 4> a{
        convert.slice(pRows[0], 0, 2), convert.slice(pRows[1], 0, 2),
        convert.slice(pRows[0], 2, 2), convert.slice(pRows[1], 2, 2)};
    for (int64_t g = 0; g < groups; ++g) {
      // Tokens quad + 4 r of the step, output columns 4 group .. + 3 of
      // column group g.
      Value column = e.add(warpCol0, e.add(e.index(kColumnGroup * g), laneColumn));
      SmallVector<Value, 4> rows;
      for (int64_t r = 0; r < 4; ++r)
        rows.push_back(convert.loadBytes(
            codes,
            codeAt(stageAt, e.add(thread.quad, e.index(16 * kk + 4 * r)),
                   column),
            4));
      // One byte permute gives two columns' pairs of two tokens.
      for (int64_t j = 0; j < 4; j += 2) {
        SmallVector<int64_t, 4> picks{j, 4 + j, j + 1, 5 + j};
        Value low = vector::ShuffleOp::create(b, l, rows[0], rows[1], picks);
        Value high = vector::ShuffleOp::create(b, l, rows[2], rows[3], picks);
        for (int64_t jj = 0; jj < 2; ++jj) {
          auto [b0, b1] = convert.pairs(convert.slice(low, 2 * jj, 2),
                                        convert.slice(high, 2 * jj, 2));
          e.mma(a, b0, b1, o.slice(oFragment.at(0, 4 * g + j + jj, 0, 0), 4));
        }
      }
    }
  }
}

Value Fp8SplitBody::stageOutput(ArrayRef<Value> state,
                                ArrayRef<FragmentRowEnd> ends) {
  // O / l staged as f32 rows over the Q tile and the code stages (every
  // warp is past its last P V: finishRows' barrier). Fragment column
  // 2 quad + c of n8 tile 4 g + j is output column 32 g + 4 (2 quad + c)
  // + j of the warp's: four consecutive columns a store.
  const int64_t stagingStride = latent + kRowPad;
  Type f32 = b.getF32Type();
  Value staging = e.sharedView(raw, 0, {kTileRows, stagingStride}, f32);
  auto four = VectorType::get({4}, f32);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t g = 0; g < warpColumns / kColumnGroup; ++g)
      for (int64_t c = 0; c < 2; ++c) {
        SmallVector<Value, 4> values;
        for (int64_t j = 0; j < 4; ++j)
          values.push_back(e.mulf(state[4 + oFragment.at(0, 4 * g + j, i, c)],
                                  ends[i].inverse));
        Value column = e.add(
            warpCol0,
            e.add(e.index(kColumnGroup * g + 4 * c),
                  e.mul(thread.quad, e.index(8))));
        vector::StoreOp::create(
            b, l, vector::FromElementsOp::create(b, l, four, values), staging,
            ValueRange{laneRows[i].local, column}, /*nontemporal=*/false,
            llvm::MaybeAlign(16));
      }
  e.barrier();
  return staging;
}

} // namespace

void launchMmaDecodeFp8Split(DecodeAttentionOp op, KernelFactory &kernels,
                             const DecodeSchedule &schedule, OpBuilder &host,
                             ValueRange splitArgs, Value splits) {
  const int64_t qkDim = op.getKvLoraRank() + op.getRopeDim();
  Fp8SharedLayout layout(qkDim);
  const GpuTarget &target = kernels.target();
  // cvt.rn.f16x2.{e4m3x2,e5m2x2}: sm_89 and later.
  const bool hardwareConvert =
      target.major > 8 || (target.major == 8 && target.minor >= 9);
  auto kernel = kernels.create(
      "decode_attention_split_mma_fp8", splitArgs.getTypes(),
      [&](GpuEmitter &base, ValueRange a) {
        MmaEmitter e(base.builder(), base.location(),
                     base.builder().getF16Type());
        DecodeSplitBlock block(e, op, schedule, a, kTileRows);
        WarpLane thread(e);
        block.run([&] {
          Value raw = e.dynamicShared();
          Fp8SplitBody body(e, block, op, layout, thread, raw,
                            hardwareConvert);
          SmallVector<Value> state = body.walkTiles();
          // The empty groups of the last refills.
          e.waitPendingCopies(0);
          body.writeResults(state);
        });
      });
  // Two blocks an SM, as its shared memory allows: ptxas may then use up
  // to 255 registers a thread instead of its default cap of 168.
  kernel->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(),
                  host.getI32IntegerAttr(2));
  launchSplitGrid(op, host, kernel, splitArgs, splits, kTileRows,
                  layout.bytes);
}

} // namespace mla::gpu
