//===- StepSupport.cpp - What the serving-step harnesses share ------------===//

#include "StepSupport.h"

#include "MlaReference.h"

#include <cmath>

namespace mla::step {

using runtime::Runtime;

double outputTolerance(DType activation) {
  return activation == DType::F32 ? 1e-4
         : activation == DType::F16 ? 4e-3
                                    : 1.5e-2;
}

llvm::Expected<Mirrored> mirror(Runtime &runtime, HostTensor host) {
  auto device = runtime.allocate(host.sizeInBytes());
  if (!device)
    return device.takeError();
  if (llvm::Error e = runtime.upload(device->data(), host.view().data,
                                     host.sizeInBytes()))
    return std::move(e);
  return Mirrored{std::move(host), std::move(*device)};
}

llvm::Expected<std::optional<Mirrored>>
cacheScaleFor(runtime::Runtime &runtime, DType cache) {
  if (!isFp8(cache))
    return std::optional<Mirrored>();
  HostTensor scale(DType::F32, {1});
  scale.fromDouble({kFp8CacheScale});
  auto mirrored = mirror(runtime, std::move(scale));
  if (!mirrored)
    return mirrored.takeError();
  return std::optional<Mirrored>(std::move(*mirrored));
}

std::vector<double> cacheEntries(const HostTensor &cache, bool fp8) {
  std::vector<double> values = cache.toDouble();
  if (fp8)
    for (double &v : values)
      v = double(float(v) * float(kFp8CacheScale));
  return values;
}

void toFp8CacheUnits(std::vector<double> &row) {
  for (double &v : row)
    v = double(float(v) / float(kFp8CacheScale));
}

llvm::Error download(Runtime &runtime, Mirrored &m) {
  return runtime.download(m.host.view().data, m.device.data(),
                          m.host.sizeInBytes());
}

std::vector<double> rows(const std::vector<double> &v, int64_t first,
                         int64_t count, int64_t width) {
  return std::vector<double>(v.begin() + first * width,
                             v.begin() + (first + count) * width);
}

std::vector<double> columns(const std::vector<double> &v, int64_t width,
                            int64_t from, int64_t keep) {
  std::vector<double> out;
  for (size_t r = 0; r * width < v.size(); ++r)
    out.insert(out.end(), v.begin() + r * width + from,
               v.begin() + r * width + from + keep);
  return out;
}

double maxLseError(const std::vector<double> &got,
                   const std::vector<double> &want) {
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isinf(want[i]) && got[i] == want[i])
      continue;
    double e = std::fabs(got[i] - want[i]);
    worst = std::isnan(e) ? INFINITY : std::max(worst, e);
  }
  return worst;
}

llvm::Expected<Weights> makeWeights(Runtime &runtime, const MlaDims &d,
                                    DType act, std::mt19937 &rng) {
  int64_t n = d.numHeads, latent = d.kvLoraRank, nope = d.qkNopeHeadDim,
          vDim = d.vHeadDim;
  HostTensor kvBProj(act, {latent, n, nope + vDim});
  kvBProj.fillRandom(rng, -1.0 / std::sqrt(double(latent)),
                     1.0 / std::sqrt(double(latent)));
  Weights w;
  w.kvBProj = kvBProj.toDouble();
  w.wUkT.resize(n * nope * latent);
  w.wUv.resize(n * latent * vDim);
  for (int64_t l = 0; l < latent; ++l)
    for (int64_t h = 0; h < n; ++h) {
      const double *row = &w.kvBProj[(l * n + h) * (nope + vDim)];
      for (int64_t p = 0; p < nope; ++p)
        w.wUkT[(h * nope + p) * latent + l] = row[p];
      for (int64_t v = 0; v < vDim; ++v)
        w.wUv[(h * latent + l) * vDim + v] = row[nope + v];
    }
  HostTensor wUkT(act, {n, nope, latent}), wUv(act, {n, latent, vDim});
  wUkT.fromDouble(w.wUkT);
  wUv.fromDouble(w.wUv);
  for (HostTensor *t : {&kvBProj, &wUkT, &wUv}) {
    auto mirrored = mirror(runtime, std::move(*t));
    if (!mirrored)
      return mirrored.takeError();
    w.onDevice.push_back(std::move(*mirrored));
  }
  return w;
}


runtime::MlaLayerConfig checkedLayerConfig(const MlaDims &dims, DType activation,
                                           DType cache, int64_t blockSize,
                                           const std::string &backend,
                                           const std::string &prefillBackend) {
  runtime::MlaLayerConfig c;
  c.dims = dims;
  c.activation = activation;
  c.cacheDType = cache;
  c.blockSize = blockSize;
  c.needsDecodeLse = true;
  c.backend = backend;
  c.prefillBackend = prefillBackend;
  return c;
}

llvm::Expected<std::pair<Mirrored, Mirrored>>
poisonedRows(Runtime &runtime, DType activation, int64_t rows, int64_t heads,
             int64_t headDim) {
  HostTensor out(activation, {rows, heads, headDim}),
      lse(DType::F32, {rows, heads, 1});
  out.poison();
  lse.poison();
  auto outMirror = mirror(runtime, std::move(out));
  if (!outMirror)
    return outMirror.takeError();
  auto lseMirror = mirror(runtime, std::move(lse));
  if (!lseMirror)
    return lseMirror.takeError();
  return std::make_pair(std::move(*outMirror), std::move(*lseMirror));
}

runtime::MlaLayerWeights Weights::views() {
  return {onDevice[0].deviceView(), onDevice[1].deviceView(),
          onDevice[2].deviceView()};
}

void referenceDecode(const std::vector<double> &qValues,
                     const std::vector<double> &cacheValues,
                     const Weights &weights, const MlaDims &d,
                     llvm::ArrayRef<int32_t> blockTable,
                     llvm::ArrayRef<int32_t> seqLens, int64_t tableWidth,
                     int64_t numBlocks, int64_t blockSize, int64_t queryLen,
                     float scale, std::vector<double> &out,
                     std::vector<double> &lse) {
  const int64_t n = d.numHeads, latent = d.kvLoraRank, rope = d.ropeDim,
                nope = d.qkNopeHeadDim, b = int64_t(seqLens.size()),
                td = b * queryLen;
  // The absorbed query in float64 from the unrounded product.
  std::vector<double> qDec = rows(qValues, 0, td, n * d.qkHeadDim());
  std::vector<double> ql;
  ref::qAbsorb(columns(qDec, d.qkHeadDim(), 0, nope), weights.wUkT, td, n,
               nope, latent, ql);
  std::vector<double> qPe = columns(qDec, d.qkHeadDim(), nope, rope);
  std::vector<double> qRef;
  for (int64_t r = 0; r < td * n; ++r) {
    qRef.insert(qRef.end(), ql.begin() + r * latent,
                ql.begin() + (r + 1) * latent);
    qRef.insert(qRef.end(), qPe.begin() + r * rope,
                qPe.begin() + (r + 1) * rope);
  }
  std::vector<double> latentOut;
  ref::decodeAttention(qRef, cacheValues,
                       std::vector<int32_t>(blockTable.begin(), blockTable.end()),
                       std::vector<int32_t>(seqLens.begin(), seqLens.end()),
                       numBlocks, blockSize, tableWidth, b, queryLen, n, latent,
                       rope, scale, /*causal=*/true, latentOut, lse);
  ref::vUpProj(latentOut, weights.wUv, td, n, latent, d.vHeadDim, out);
}

} // namespace mla::step
