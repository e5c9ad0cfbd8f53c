//===- KernelBuilders.cpp - One-op kernel modules -------------------------===//

#include "mla/Builders/KernelBuilders.h"
#include "mla/Dialect/MLADialect.h"
#include "mla/Pipelines/Pipelines.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectRegistry.h"

using namespace mlir;

namespace mla {

void loadKernelDialects(MLIRContext &ctx) {
  DialectRegistry registry;
  registerMLADialects(registry);
  ctx.appendDialectRegistry(registry);
  ctx.loadAllAvailableDialects();
}

namespace {

constexpr int64_t kDyn = ShapedType::kDynamic;

/// The FP8 cache's scale, kv_scale [1] f32: an operand (and a kernel
/// argument) of the ops that touch an FP8 cache, after their cache inputs.
const std::pair<SmallVector<int64_t>, DType> kScaleParam{{1}, DType::F32};

Type elementType(OpBuilder &b, DType t) {
  switch (t) {
  case DType::F32:
    return b.getF32Type();
  case DType::F16:
    return b.getF16Type();
  case DType::BF16:
    return b.getBF16Type();
  case DType::I32:
    return b.getI32Type();
  case DType::I64:
    return b.getI64Type();
  case DType::FP8E4M3:
    return b.getType<Float8E4M3FNType>();
  case DType::FP8E5M2:
    return b.getType<Float8E5M2Type>();
  }
  return {};
}

/// A module with an empty @kernel over memrefs of the given shapes.
struct KernelModule {
  OwningOpRef<ModuleOp> module;
  OpBuilder b;
  SmallVector<Value> args;

  /// Identity layouts, or with `views`, strided views whose rows are
  /// contiguous (every other stride and the offset dynamic).
  KernelModule(MLIRContext &ctx,
               ArrayRef<std::pair<SmallVector<int64_t>, DType>> params,
               bool views = false)
      : b(&ctx) {
    loadKernelDialects(ctx);
    Location loc = b.getUnknownLoc();
    module = ModuleOp::create(loc);
    SmallVector<Type> types;
    for (auto &[shape, dtype] : params) {
      MemRefLayoutAttrInterface layout;
      if (views) {
        SmallVector<int64_t> strides(shape.size(), kDyn);
        strides.back() = 1;
        layout = StridedLayoutAttr::get(&ctx, kDyn, strides);
      }
      types.push_back(MemRefType::get(shape, elementType(b, dtype), layout));
    }
    b.setInsertionPointToEnd(module->getBody());
    auto func = func::FuncOp::create(b, loc, kKernelEntry,
                                     b.getFunctionType(types, {}));
    Block *body = func.addEntryBlock();
    b.setInsertionPointToStart(body);
    func::ReturnOp::create(b, loc);
    b.setInsertionPointToStart(body);
    args.assign(body->args_begin(), body->args_end());
  }

  Location loc() { return b.getUnknownLoc(); }
  IntegerAttr i64(int64_t v) { return b.getI64IntegerAttr(v); }
  FloatAttr f32(float v) { return b.getF32FloatAttr(v); }
  UnitAttr flag(bool on) { return on ? b.getUnitAttr() : UnitAttr(); }
  TypeAttr type(DType t) { return TypeAttr::get(elementType(b, t)); }
};

} // namespace

OwningOpRef<ModuleOp> buildPrefillAttention(MLIRContext &ctx,
                                            const PrefillAttentionSpec &s) {
  int64_t n = s.numHeads;
  KernelModule m(ctx, {{{kDyn, n, s.qkHeadDim}, s.activation},
                       {{kDyn, n, s.qkHeadDim}, s.activation},
                       {{kDyn, n, s.vHeadDim}, s.activation},
                       {{kDyn}, DType::I32},
                       {{kDyn}, DType::I32},
                       {{kDyn, n, s.vHeadDim}, s.activation},
                       {{n, kDyn}, DType::F32}});
  auto &a = m.args;
  PrefillAttentionOp::create(m.b, m.loc(), a[0], a[1], a[2], a[3], a[4], a[5],
                             a[6], m.i64(n), m.i64(s.qkHeadDim),
                             m.i64(s.vHeadDim), m.f32(s.softmaxScale),
                             m.flag(s.causal), m.flag(s.accumulate));
  return std::move(m.module);
}

OwningOpRef<ModuleOp> buildDecodeAttention(MLIRContext &ctx,
                                           const DecodeAttentionSpec &s) {
  const MlaDims &d = s.dims;
  int64_t n = d.numHeads;
  SmallVector<std::pair<SmallVector<int64_t>, DType>> params{
      {{kDyn, kDyn, n, d.cacheEntry()}, s.activation},
      {{kDyn, s.blockSize, d.cacheEntry()}, s.cache},
      {{kDyn, kDyn}, DType::I32},
      {{kDyn}, DType::I32}};
  const bool scaled = isFp8(s.cache);
  if (scaled)
    params.push_back(kScaleParam);
  if (s.withSplitPlan) {
    params.push_back({{kDyn}, DType::I32});
    params.push_back({{kDyn, kDyn, n, kDyn, d.kvLoraRank}, DType::F32});
    params.push_back({{kDyn, kDyn, n, kDyn}, DType::F32});
  }
  params.push_back({{kDyn, kDyn, n, d.kvLoraRank}, s.activation});
  params.push_back({{kDyn, n, kDyn}, DType::F32});
  KernelModule m(ctx, params);
  auto &a = m.args;
  // Absent schedule operands are null values.
  Value scale = scaled ? a[4] : Value();
  Value numSplits, splitOut, splitLse;
  if (s.withSplitPlan) {
    size_t first = scaled ? 5 : 4;
    numSplits = a[first];
    splitOut = a[first + 1];
    splitLse = a[first + 2];
  }
  Value out = a[a.size() - 2], lse = a[a.size() - 1];
  DecodeAttentionOp::create(m.b, m.loc(), a[0], a[1], a[2], a[3], scale,
                            numSplits, splitOut, splitLse, out, lse, m.i64(n),
                            m.i64(d.kvLoraRank), m.i64(d.ropeDim),
                            m.i64(s.blockSize), m.type(s.cache),
                            m.f32(s.softmaxScale), m.flag(s.causal),
                            s.kvShare ? m.b.getDenseI64ArrayAttr(*s.kvShare)
                                      : DenseI64ArrayAttr());
  return std::move(m.module);
}

OwningOpRef<ModuleOp> buildMergeAttnStates(MLIRContext &ctx,
                                           const MergeAttnStatesSpec &s) {
  int64_t n = s.numHeads;
  SmallVector<std::pair<SmallVector<int64_t>, DType>> params{
      {{kDyn, n, s.headDim}, s.activation},
      {{n, kDyn}, DType::F32},
      {{kDyn, n, s.headDim}, s.activation},
      {{n, kDyn}, DType::F32},
      {{kDyn, n, s.headDim}, s.activation}};
  if (s.withOutputLse)
    params.push_back({{n, kDyn}, DType::F32});
  KernelModule m(ctx, params);
  auto &a = m.args;
  MergeAttnStatesOp::create(m.b, m.loc(), a[0], a[1], a[2], a[3], a[4],
                            s.withOutputLse ? a[5] : Value());
  return std::move(m.module);
}

OwningOpRef<ModuleOp> buildMergeAttnStatesN(MLIRContext &ctx,
                                            const MergeAttnStatesNSpec &s) {
  int64_t n = s.numHeads > 0 ? s.numHeads : kDyn, d = s.headDim;
  SmallVector<std::pair<SmallVector<int64_t>, DType>> params{
      {{s.numStates, kDyn, kDyn, n, d}, s.partials},
      {{s.numStates, kDyn, n, kDyn}, DType::F32},
      {{kDyn, kDyn, n, d}, s.output}};
  if (s.withOutputLse)
    params.push_back({{kDyn, n, kDyn}, DType::F32});
  KernelModule m(ctx, params, /*views=*/true);
  auto &a = m.args;
  MergeAttnStatesNOp::create(m.b, m.loc(), a[0], a[1], a[2],
                             s.withOutputLse ? a[3] : Value());
  return std::move(m.module);
}

OwningOpRef<ModuleOp> buildGatherCache(MLIRContext &ctx,
                                       const GatherCacheSpec &s) {
  SmallVector<std::pair<SmallVector<int64_t>, DType>> params{
      {{kDyn, s.blockSize, s.entry}, s.cache},
      {{kDyn, kDyn}, DType::I32},
      {{kDyn}, DType::I32},
      {{kDyn}, DType::I32}};
  const bool scaled = isFp8(s.cache);
  if (scaled)
    params.push_back(kScaleParam);
  params.push_back({{kDyn, s.entry}, s.workspace});
  KernelModule m(ctx, params);
  auto &a = m.args;
  GatherCacheOp::create(m.b, m.loc(), a[0], a[1], a[2], a[3],
                        scaled ? a[4] : Value(), a.back(), m.i64(s.blockSize));
  return std::move(m.module);
}

OwningOpRef<ModuleOp> buildConcatAndCache(MLIRContext &ctx,
                                          const ConcatAndCacheSpec &s) {
  SmallVector<std::pair<SmallVector<int64_t>, DType>> params{
      {{kDyn, s.kvLoraRank}, s.activation},
      {{kDyn, s.ropeDim}, s.activation},
      {{kDyn}, DType::I64}};
  const bool scaled = isFp8(s.cache);
  if (scaled)
    params.push_back(kScaleParam);
  params.push_back({{kDyn, s.blockSize, s.kvLoraRank + s.ropeDim}, s.cache});
  KernelModule m(ctx, params);
  auto &a = m.args;
  ConcatAndCacheOp::create(m.b, m.loc(), a[0], a[1], a[2],
                           scaled ? a[3] : Value(), a.back(),
                           m.i64(s.kvLoraRank), m.i64(s.ropeDim),
                           m.i64(s.blockSize), m.type(s.cache));
  return std::move(m.module);
}

OwningOpRef<ModuleOp> buildKvUpProj(MLIRContext &ctx, const ProjectionSpec &s) {
  const MlaDims &d = s.dims;
  int64_t n = d.numHeads;
  KernelModule m(ctx,
                 {{{kDyn, d.kvLoraRank}, s.activation},
                  {{kDyn, d.ropeDim}, s.activation},
                  {{d.kvLoraRank, n, d.qkNopeHeadDim + d.vHeadDim},
                   s.activation},
                  {{kDyn, n, d.qkHeadDim()}, s.activation},
                  {{kDyn, n, d.vHeadDim}, s.activation}});
  auto &a = m.args;
  KvUpProjOp::create(m.b, m.loc(), a[0], a[1], a[2], a[3], a[4], m.i64(n),
                     m.i64(d.kvLoraRank), m.i64(d.qkNopeHeadDim),
                     m.i64(d.ropeDim), m.i64(d.vHeadDim));
  return std::move(m.module);
}

/// q_absorb over q_nope [T, N, P] (or, with the rope part, the whole query
/// [T, N, P + R] into the decode query [T, N, Lkv + R]).
static OwningOpRef<ModuleOp> buildAbsorb(MLIRContext &ctx,
                                         const ProjectionSpec &s,
                                         bool withRope) {
  const MlaDims &d = s.dims;
  int64_t n = d.numHeads, rope = withRope ? d.ropeDim : 0;
  KernelModule m(ctx,
                 {{{kDyn, n, d.qkNopeHeadDim + rope}, s.activation},
                  {{n, d.qkNopeHeadDim, d.kvLoraRank}, s.activation},
                  {{kDyn, n, d.kvLoraRank + rope}, s.activation}});
  auto &a = m.args;
  QAbsorbOp::create(m.b, m.loc(), a[0], a[1], a[2], m.i64(n),
                    m.i64(d.qkNopeHeadDim), m.i64(d.kvLoraRank),
                    withRope ? m.i64(rope) : IntegerAttr());
  return std::move(m.module);
}

OwningOpRef<ModuleOp> buildQAbsorb(MLIRContext &ctx, const ProjectionSpec &s) {
  return buildAbsorb(ctx, s, /*withRope=*/false);
}

OwningOpRef<ModuleOp> buildDecodeQuery(MLIRContext &ctx,
                                       const ProjectionSpec &s) {
  return buildAbsorb(ctx, s, /*withRope=*/true);
}

OwningOpRef<ModuleOp> buildVUpProj(MLIRContext &ctx, const ProjectionSpec &s) {
  const MlaDims &d = s.dims;
  int64_t n = d.numHeads;
  KernelModule m(ctx, {{{kDyn, n, d.kvLoraRank}, s.activation},
                       {{n, d.kvLoraRank, d.vHeadDim}, s.activation},
                       {{kDyn, n, d.vHeadDim}, s.activation}});
  auto &a = m.args;
  VUpProjOp::create(m.b, m.loc(), a[0], a[1], a[2], m.i64(n),
                    m.i64(d.kvLoraRank), m.i64(d.vHeadDim));
  return std::move(m.module);
}

OwningOpRef<ModuleOp> buildChunkedPrefill(MLIRContext &ctx,
                                          const ChunkedPrefillSpec &s) {
  const MlaDims &d = s.dims;
  int64_t n = d.numHeads;
  SmallVector<std::pair<SmallVector<int64_t>, DType>> params{
      {{kDyn, n, d.qkHeadDim()}, s.activation},
      {{kDyn, d.kvLoraRank}, s.activation},
      {{kDyn, d.ropeDim}, s.activation},
      {{kDyn}, DType::I32},
      {{kDyn, s.blockSize, d.cacheEntry()}, s.cache},
      {{kDyn, kDyn}, DType::I32}};
  const bool scaled = isFp8(s.cache);
  if (scaled)
    params.push_back(kScaleParam);
  params.append({{{kDyn, kDyn}, DType::I32},
                 {{kDyn, kDyn}, DType::I32},
                 {{d.kvLoraRank, n, d.qkNopeHeadDim + d.vHeadDim}, s.activation},
                 {{kDyn, d.cacheEntry()}, s.activation},
                 {{kDyn, n, d.vHeadDim}, s.activation},
                 {{n, kDyn}, DType::F32}});
  KernelModule m(ctx, params);
  // The operands after the scale, wherever it is.
  ArrayRef<Value> a = m.args, rest = a.take_back(6);
  ChunkedPrefillOp::create(
      m.b, m.loc(), a[0], a[1], a[2], a[3], a[4], a[5],
      scaled ? a[6] : Value(), rest[0], rest[1], rest[2], rest[3], rest[4],
      rest[5], m.i64(n), m.i64(d.kvLoraRank),
      m.i64(d.qkNopeHeadDim), m.i64(d.ropeDim), m.i64(d.vHeadDim),
      m.i64(s.blockSize), m.type(s.cache), m.f32(s.softmaxScale),
      s.contextOnly ? m.b.getUnitAttr() : UnitAttr());
  return std::move(m.module);
}

} // namespace mla
