//===- MlaReference.cpp - Float64 reference for MLA attention -------------===//
//
// Plain-loop double-precision implementations declared in MlaReference.h.
// Every function validates its arguments first: a reference that silently
// reads out of bounds would make a wrong test look right.
//
//===----------------------------------------------------------------------===//

#include "MlaReference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace mla {
namespace ref {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();
constexpr double kPosInf = std::numeric_limits<double>::infinity();

void require(bool condition, const char *function, const std::string &what) {
  if (!condition)
    throw std::invalid_argument(std::string("mla::ref::") + function + ": " +
                                what);
}

void requireSize(const std::vector<double> &tensor, int64_t expected,
                 const char *function, const char *name) {
  require(static_cast<int64_t>(tensor.size()) == expected, function,
          std::string(name) + " has " + std::to_string(tensor.size()) +
              " elements, expected " + std::to_string(expected));
}

template <typename IndexT>
void requireIndexSize(const std::vector<IndexT> &tensor, int64_t expected,
                      const char *function, const char *name) {
  require(static_cast<int64_t>(tensor.size()) == expected, function,
          std::string(name) + " has " + std::to_string(tensor.size()) +
              " elements, expected " + std::to_string(expected));
}

/// Checks that `cu` is a valid prefix-sum array: starts at 0, never decreases,
/// and ends no later than `rows`.
void requireCumulative(const std::vector<int32_t> &cu, int64_t rows,
                       const char *function, const char *name) {
  require(!cu.empty(), function, std::string(name) + " is empty");
  require(cu.front() == 0, function, std::string(name) + "[0] is not 0");
  for (size_t i = 1; i < cu.size(); ++i)
    require(cu[i] >= cu[i - 1], function,
            std::string(name) + " decreases at index " + std::to_string(i));
  require(cu.back() <= rows, function,
          std::string(name) + " ends at " + std::to_string(cu.back()) +
              ", beyond the " + std::to_string(rows) + " available rows");
}

/// Number of keys a query sees. With causal masking the queries are aligned
/// to the end of the key sequence, so query i sees keys 0 .. i + (Skv - Sq).
int64_t visibleKeyCount(int64_t queryIndex, int64_t numQueries, int64_t numKeys,
                        bool causal) {
  if (!causal)
    return numKeys;
  int64_t lastVisible = queryIndex + (numKeys - numQueries);
  return std::max<int64_t>(0, std::min(numKeys, lastVisible + 1));
}

/// Softmax attention of one query over `keys.size()` keys.
///
/// keys[j] and values[j] point at qkDim and vDim contiguous doubles. Writes
/// vDim outputs to `out` and returns the LSE. The maximum score is subtracted
/// before exponentiating so large scores cannot overflow.
double attendOneQuery(const double *query,
                      const std::vector<const double *> &keys,
                      const std::vector<const double *> &values, int64_t qkDim,
                      int64_t vDim, double scale, double *out) {
  const size_t numKeys = keys.size();
  if (numKeys == 0) {
    std::fill(out, out + vDim, 0.0);
    return kNegInf;
  }

  std::vector<double> scores(numKeys);
  double maxScore = kNegInf;
  for (size_t j = 0; j < numKeys; ++j) {
    double dot = 0.0;
    for (int64_t d = 0; d < qkDim; ++d)
      dot += query[d] * keys[j][d];
    scores[j] = scale * dot;
    maxScore = std::max(maxScore, scores[j]);
  }

  double weightSum = 0.0;
  std::vector<double> accum(vDim, 0.0);
  for (size_t j = 0; j < numKeys; ++j) {
    double weight = std::exp(scores[j] - maxScore);
    weightSum += weight;
    for (int64_t d = 0; d < vDim; ++d)
      accum[d] += weight * values[j][d];
  }
  for (int64_t d = 0; d < vDim; ++d)
    out[d] = accum[d] / weightSum;
  return maxScore + std::log(weightSum);
}

/// Page-table lookup shared by the paged-cache functions: returns the offset
/// of context token `token` of request `request` in a cache whose rows have
/// `rowSize` values.
int64_t pagedRowOffset(const std::vector<int32_t> &blockTable, int64_t request,
                       int64_t token, int64_t blockSize, int64_t maxBlocks,
                       int64_t numBlocks, int64_t rowSize,
                       const char *function) {
  int64_t logicalBlock = token / blockSize;
  require(logicalBlock < maxBlocks, function,
          "token " + std::to_string(token) + " of request " +
              std::to_string(request) + " needs block-table column " +
              std::to_string(logicalBlock) + " >= maxBlocks " +
              std::to_string(maxBlocks));
  int64_t page = blockTable[request * maxBlocks + logicalBlock];
  require(page >= 0 && page < numBlocks, function,
          "block table entry [" + std::to_string(request) + "][" +
              std::to_string(logicalBlock) + "] = " + std::to_string(page) +
              " is not a valid page (numBlocks " + std::to_string(numBlocks) +
              ")");
  return (page * blockSize + token % blockSize) * rowSize;
}

} // namespace

void prefillAttention(const std::vector<double> &q,
                      const std::vector<double> &k,
                      const std::vector<double> &v,
                      const std::vector<int32_t> &cuSeqlensQ,
                      const std::vector<int32_t> &cuSeqlensK, int64_t numHeads,
                      int64_t qkDim, int64_t vDim, double scale, bool causal,
                      std::vector<double> &out, std::vector<double> &lse) {
  const char *fn = "prefillAttention";
  require(numHeads > 0 && qkDim > 0 && vDim > 0, fn, "non-positive dimension");
  require(q.size() % (numHeads * qkDim) == 0, fn, "q is not [T, N, qkDim]");
  require(k.size() % (numHeads * qkDim) == 0, fn, "k is not [S, N, qkDim]");
  const int64_t numQueryRows = q.size() / (numHeads * qkDim);
  const int64_t numKeyRows = k.size() / (numHeads * qkDim);
  requireSize(v, numKeyRows * numHeads * vDim, fn, "v");
  requireSize(out, numQueryRows * numHeads * vDim, fn, "out");
  requireSize(lse, numHeads * numQueryRows, fn, "lse");
  requireCumulative(cuSeqlensQ, numQueryRows, fn, "cuSeqlensQ");
  requireCumulative(cuSeqlensK, numKeyRows, fn, "cuSeqlensK");
  require(cuSeqlensQ.size() == cuSeqlensK.size(), fn,
          "cuSeqlensQ and cuSeqlensK describe different batch sizes");

  const int64_t batch = static_cast<int64_t>(cuSeqlensQ.size()) - 1;
  std::vector<const double *> keys, values;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t queryBegin = cuSeqlensQ[b];
    const int64_t numQueries = cuSeqlensQ[b + 1] - queryBegin;
    const int64_t keyBegin = cuSeqlensK[b];
    const int64_t numKeys = cuSeqlensK[b + 1] - keyBegin;
    for (int64_t i = 0; i < numQueries; ++i) {
      const int64_t row = queryBegin + i;
      const int64_t visible = visibleKeyCount(i, numQueries, numKeys, causal);
      for (int64_t h = 0; h < numHeads; ++h) {
        keys.clear();
        values.clear();
        for (int64_t j = 0; j < visible; ++j) {
          keys.push_back(&k[((keyBegin + j) * numHeads + h) * qkDim]);
          values.push_back(&v[((keyBegin + j) * numHeads + h) * vDim]);
        }
        lse[h * numQueryRows + row] = attendOneQuery(
            &q[(row * numHeads + h) * qkDim], keys, values, qkDim, vDim, scale,
            &out[(row * numHeads + h) * vDim]);
      }
    }
  }
}

void decodeAttention(const std::vector<double> &q,
                     const std::vector<double> &kvCache,
                     const std::vector<int32_t> &blockTable,
                     const std::vector<int32_t> &seqLens, int64_t numBlocks,
                     int64_t blockSize, int64_t maxBlocks, int64_t batch,
                     int64_t queryLen, int64_t numHeads, int64_t kvLoraRank,
                     int64_t ropeDim, double scale, bool causal,
                     std::vector<double> &out, std::vector<double> &lse) {
  const char *fn = "decodeAttention";
  require(numBlocks >= 0 && blockSize > 0 && maxBlocks >= 0 && batch >= 0 &&
              queryLen >= 0 && numHeads > 0 && kvLoraRank > 0 && ropeDim >= 0,
          fn, "invalid dimension");
  const int64_t entry = kvLoraRank + ropeDim;
  requireSize(q, batch * queryLen * numHeads * entry, fn, "q");
  requireSize(kvCache, numBlocks * blockSize * entry, fn, "kvCache");
  requireIndexSize(blockTable, batch * maxBlocks, fn, "blockTable");
  requireIndexSize(seqLens, batch, fn, "seqLens");

  out.assign(batch * queryLen * numHeads * kvLoraRank, 0.0);
  lse.assign(batch * numHeads * queryLen, kNegInf);

  std::vector<const double *> rows;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t seqLen = seqLens[b];
    require(seqLen >= 0 && seqLen <= maxBlocks * blockSize, fn,
            "seqLens[" + std::to_string(b) + "] = " + std::to_string(seqLen) +
                " does not fit the block table");
    // The query tokens are the last queryLen cached tokens; a request with
    // fewer cached tokens simply leaves the earliest queries with no keys.
    for (int64_t s = 0; s < queryLen; ++s) {
      const int64_t visible = visibleKeyCount(s, queryLen, seqLen, causal);
      rows.clear();
      for (int64_t j = 0; j < visible; ++j)
        rows.push_back(&kvCache[pagedRowOffset(
            blockTable, b, j, blockSize, maxBlocks, numBlocks, entry, fn)]);
      // Keys are whole cache rows and values their first kvLoraRank entries,
      // so the same pointers serve as both.
      for (int64_t h = 0; h < numHeads; ++h) {
        const int64_t qRow = (b * queryLen + s) * numHeads + h;
        lse[(b * numHeads + h) * queryLen + s] =
            attendOneQuery(&q[qRow * entry], rows, rows, entry, kvLoraRank,
                           scale, &out[qRow * kvLoraRank]);
      }
    }
  }
}

void mergeAttnStates(const std::vector<double> &prefixOut,
                     const std::vector<double> &prefixLse,
                     const std::vector<double> &suffixOut,
                     const std::vector<double> &suffixLse, int64_t T, int64_t N,
                     int64_t D, std::vector<double> &out,
                     std::vector<double> &outLse) {
  const char *fn = "mergeAttnStates";
  require(T >= 0 && N > 0 && D > 0, fn, "invalid dimension");
  requireSize(prefixOut, T * N * D, fn, "prefixOut");
  requireSize(suffixOut, T * N * D, fn, "suffixOut");
  requireSize(prefixLse, N * T, fn, "prefixLse");
  requireSize(suffixLse, N * T, fn, "suffixLse");

  out.assign(T * N * D, 0.0);
  outLse.assign(N * T, kNegInf);

  auto normalize = [](double value) {
    return value == kPosInf ? kNegInf : value;
  };
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < N; ++h) {
      const double lseP = normalize(prefixLse[h * T + t]);
      const double lseS = normalize(suffixLse[h * T + t]);
      const double maxLse = std::max(lseP, lseS);
      if (maxLse == kNegInf)
        continue; // Both empty: keep out = 0, lse = -inf.

      const int64_t base = (t * N + h) * D;
      // An empty state contributes nothing; skipping it also keeps whatever
      // its output holds (possibly NaN) out of the result.
      const double weightP = lseP == kNegInf ? 0.0 : std::exp(lseP - maxLse);
      const double weightS = lseS == kNegInf ? 0.0 : std::exp(lseS - maxLse);
      const double weightSum = weightP + weightS;
      for (int64_t d = 0; d < D; ++d) {
        double value = 0.0;
        if (weightP != 0.0)
          value += weightP * prefixOut[base + d];
        if (weightS != 0.0)
          value += weightS * suffixOut[base + d];
        out[base + d] = value / weightSum;
      }
      outLse[h * T + t] = maxLse + std::log(weightSum);
    }
  }
}

void gatherCache(const std::vector<double> &kvCache,
                 const std::vector<int32_t> &blockTable,
                 const std::vector<int32_t> &cuSeqLens,
                 const std::vector<int32_t> &seqStarts, int64_t blockSize,
                 int64_t maxBlocks, int64_t E, std::vector<double> &workspace) {
  const char *fn = "gatherCache";
  require(blockSize > 0 && maxBlocks >= 0 && E > 0, fn, "invalid dimension");
  require(kvCache.size() % (blockSize * E) == 0, fn,
          "kvCache is not [numBlocks, blockSize, E]");
  require(workspace.size() % E == 0, fn, "workspace is not [W, E]");
  const int64_t numBlocks = kvCache.size() / (blockSize * E);
  const int64_t workspaceRows = workspace.size() / E;
  requireCumulative(cuSeqLens, workspaceRows, fn, "cuSeqLens");
  const int64_t batch = static_cast<int64_t>(cuSeqLens.size()) - 1;
  requireIndexSize(seqStarts, batch, fn, "seqStarts");
  requireIndexSize(blockTable, batch * maxBlocks, fn, "blockTable");

  for (int64_t b = 0; b < batch; ++b) {
    require(seqStarts[b] >= 0, fn, "negative seqStarts entry");
    const int64_t count = cuSeqLens[b + 1] - cuSeqLens[b];
    for (int64_t i = 0; i < count; ++i) {
      const int64_t src =
          pagedRowOffset(blockTable, b, seqStarts[b] + i, blockSize, maxBlocks,
                         numBlocks, E, fn);
      const int64_t dst = (cuSeqLens[b] + i) * E;
      std::copy(kvCache.begin() + src, kvCache.begin() + src + E,
                workspace.begin() + dst);
    }
  }
}

void concatAndCache(const std::vector<double> &kvC,
                    const std::vector<double> &kPe,
                    const std::vector<int64_t> &slotMapping, int64_t L,
                    int64_t R, int64_t blockSize, int64_t numBlocks,
                    std::vector<double> &kvCache) {
  const char *fn = "concatAndCache";
  require(L > 0 && R >= 0 && blockSize > 0 && numBlocks >= 0, fn,
          "invalid dimension");
  const int64_t numTokens = slotMapping.size();
  const int64_t entry = L + R;
  requireSize(kvC, numTokens * L, fn, "kvC");
  requireSize(kPe, numTokens * R, fn, "kPe");
  requireSize(kvCache, numBlocks * blockSize * entry, fn, "kvCache");

  for (int64_t t = 0; t < numTokens; ++t) {
    const int64_t slot = slotMapping[t];
    if (slot < 0)
      continue; // Padded token: nothing to store.
    require(slot < numBlocks * blockSize, fn,
            "slot " + std::to_string(slot) + " is outside the cache");
    // slot / blockSize is the page and slot % blockSize the row, so the
    // flattened row index is the slot itself.
    double *row = &kvCache[slot * entry];
    std::copy(kvC.begin() + t * L, kvC.begin() + (t + 1) * L, row);
    std::copy(kPe.begin() + t * R, kPe.begin() + (t + 1) * R, row + L);
  }
}

void kvUpProj(const std::vector<double> &kvC, const std::vector<double> &kPe,
              const std::vector<double> &kvBProj, int64_t S, int64_t N,
              int64_t L, int64_t P, int64_t R, int64_t V,
              std::vector<double> &k, std::vector<double> &v) {
  const char *fn = "kvUpProj";
  require(S >= 0 && N > 0 && L > 0 && P >= 0 && R >= 0 && V > 0, fn,
          "invalid dimension");
  requireSize(kvC, S * L, fn, "kvC");
  requireSize(kPe, S * R, fn, "kPe");
  requireSize(kvBProj, L * N * (P + V), fn, "kvBProj");

  const int64_t kDim = P + R;
  const int64_t wCols = P + V;
  k.assign(S * N * kDim, 0.0);
  v.assign(S * N * V, 0.0);
  for (int64_t s = 0; s < S; ++s) {
    for (int64_t h = 0; h < N; ++h) {
      double *kRow = &k[(s * N + h) * kDim];
      double *vRow = &v[(s * N + h) * V];
      for (int64_t l = 0; l < L; ++l) {
        const double latent = kvC[s * L + l];
        const double *wRow = &kvBProj[(l * N + h) * wCols];
        for (int64_t p = 0; p < P; ++p)
          kRow[p] += latent * wRow[p];
        for (int64_t d = 0; d < V; ++d)
          vRow[d] += latent * wRow[P + d];
      }
      // The rope part of the key is not projected and is shared by all heads.
      for (int64_t r = 0; r < R; ++r)
        kRow[P + r] = kPe[s * R + r];
    }
  }
}

void qAbsorb(const std::vector<double> &qNope, const std::vector<double> &wUkT,
             int64_t T, int64_t N, int64_t P, int64_t L,
             std::vector<double> &qlNope) {
  const char *fn = "qAbsorb";
  require(T >= 0 && N > 0 && P > 0 && L > 0, fn, "invalid dimension");
  requireSize(qNope, T * N * P, fn, "qNope");
  requireSize(wUkT, N * P * L, fn, "wUkT");

  qlNope.assign(T * N * L, 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < N; ++h)
      for (int64_t p = 0; p < P; ++p) {
        const double qValue = qNope[(t * N + h) * P + p];
        for (int64_t l = 0; l < L; ++l)
          qlNope[(t * N + h) * L + l] += qValue * wUkT[(h * P + p) * L + l];
      }
}

void vUpProj(const std::vector<double> &oLatent, const std::vector<double> &wUv,
             int64_t T, int64_t N, int64_t L, int64_t V,
             std::vector<double> &out) {
  const char *fn = "vUpProj";
  require(T >= 0 && N > 0 && L > 0 && V > 0, fn, "invalid dimension");
  requireSize(oLatent, T * N * L, fn, "oLatent");
  requireSize(wUv, N * L * V, fn, "wUv");

  out.assign(T * N * V, 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < N; ++h)
      for (int64_t l = 0; l < L; ++l) {
        const double oValue = oLatent[(t * N + h) * L + l];
        for (int64_t d = 0; d < V; ++d)
          out[(t * N + h) * V + d] += oValue * wUv[(h * L + l) * V + d];
      }
}

void mlaPrefillWithContext(
    const std::vector<double> &q, const std::vector<double> &kvCNew,
    const std::vector<double> &kPeNew, const std::vector<int32_t> &cuSeqlensQ,
    const std::vector<int32_t> &contextLens, const std::vector<double> &kvCache,
    const std::vector<int32_t> &blockTable, const std::vector<double> &kvBProj,
    int64_t numBlocks, int64_t blockSize, int64_t maxBlocks, int64_t N,
    int64_t L, int64_t P, int64_t R, int64_t V, double scale,
    std::vector<double> &out, std::vector<double> &lse) {
  const char *fn = "mlaPrefillWithContext";
  require(numBlocks >= 0 && blockSize > 0 && maxBlocks >= 0 && N > 0 && L > 0 &&
              P >= 0 && R >= 0 && V > 0 && P + R > 0,
          fn, "invalid dimension");
  const int64_t qkDim = P + R;
  const int64_t entry = L + R;
  require(q.size() % (N * qkDim) == 0, fn, "q is not [T, N, P + R]");
  const int64_t numTokens = q.size() / (N * qkDim);
  requireSize(kvCNew, numTokens * L, fn, "kvCNew");
  requireSize(kPeNew, numTokens * R, fn, "kPeNew");
  requireSize(kvCache, numBlocks * blockSize * entry, fn, "kvCache");
  requireSize(kvBProj, L * N * (P + V), fn, "kvBProj");
  requireSize(out, numTokens * N * V, fn, "out");
  requireSize(lse, N * numTokens, fn, "lse");
  requireCumulative(cuSeqlensQ, numTokens, fn, "cuSeqlensQ");
  const int64_t batch = static_cast<int64_t>(cuSeqlensQ.size()) - 1;
  requireIndexSize(contextLens, batch, fn, "contextLens");
  requireIndexSize(blockTable, batch * maxBlocks, fn, "blockTable");

  for (int64_t b = 0; b < batch; ++b) {
    const int64_t contextLen = contextLens[b];
    require(contextLen >= 0, fn, "negative context length");
    const int64_t queryBegin = cuSeqlensQ[b];
    const int64_t numNew = cuSeqlensQ[b + 1] - queryBegin;
    const int64_t seqLen = contextLen + numNew;

    // Latent rows of the whole sequence: context from the cache, then the new
    // tokens, split into the no-rope (L) and rope (R) parts.
    std::vector<double> seqKvC(seqLen * L), seqKPe(seqLen * R);
    for (int64_t j = 0; j < contextLen; ++j) {
      const int64_t src = pagedRowOffset(blockTable, b, j, blockSize, maxBlocks,
                                         numBlocks, entry, fn);
      std::copy(kvCache.begin() + src, kvCache.begin() + src + L,
                seqKvC.begin() + j * L);
      std::copy(kvCache.begin() + src + L, kvCache.begin() + src + entry,
                seqKPe.begin() + j * R);
    }
    for (int64_t i = 0; i < numNew; ++i) {
      const int64_t row = queryBegin + i;
      std::copy(kvCNew.begin() + row * L, kvCNew.begin() + (row + 1) * L,
                seqKvC.begin() + (contextLen + i) * L);
      std::copy(kPeNew.begin() + row * R, kPeNew.begin() + (row + 1) * R,
                seqKPe.begin() + (contextLen + i) * R);
    }

    std::vector<double> seqK, seqV;
    kvUpProj(seqKvC, seqKPe, kvBProj, seqLen, N, L, P, R, V, seqK, seqV);

    // Attend as a single-sequence batch; bottom-right causal alignment gives
    // new token i every context token plus new tokens 0 .. i.
    std::vector<double> seqQ(q.begin() + queryBegin * N * qkDim,
                             q.begin() + (queryBegin + numNew) * N * qkDim);
    std::vector<double> seqOut(numNew * N * V, 0.0), seqLse(N * numNew, 0.0);
    prefillAttention(seqQ, seqK, seqV, {0, static_cast<int32_t>(numNew)},
                     {0, static_cast<int32_t>(seqLen)}, N, qkDim, V, scale,
                     /*causal=*/true, seqOut, seqLse);

    std::copy(seqOut.begin(), seqOut.end(), out.begin() + queryBegin * N * V);
    for (int64_t h = 0; h < N; ++h)
      for (int64_t i = 0; i < numNew; ++i)
        lse[h * numTokens + queryBegin + i] = seqLse[h * numNew + i];
  }
}

double relativeL2Error(const std::vector<double> &got,
                       const std::vector<double> &want) {
  if (got.size() != want.size())
    return kPosInf;
  double diffSq = 0.0;
  double wantSq = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    if (std::isnan(g) || std::isnan(w))
      return kPosInf;
    if (std::isinf(g) || std::isinf(w)) {
      if (g == w)
        continue; // Same infinity: an exact match that no norm can express.
      return kPosInf;
    }
    diffSq += (g - w) * (g - w);
    wantSq += w * w;
  }
  const double tiny = std::numeric_limits<double>::min();
  return std::sqrt(diffSq) / std::max(std::sqrt(wantSq), tiny);
}

bool lseMatches(const std::vector<double> &got, const std::vector<double> &want,
                double absTol, std::string *why) {
  auto fail = [&](const std::string &message) {
    if (why)
      *why = message;
    return false;
  };
  if (got.size() != want.size())
    return fail("size mismatch: got " + std::to_string(got.size()) +
                " elements, want " + std::to_string(want.size()));
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    bool ok;
    if (std::isnan(g) || std::isnan(w))
      ok = false;
    else if (std::isinf(w) || std::isinf(g))
      ok = g == w; // Infinities must match exactly, sign included.
    else
      ok = std::fabs(g - w) <= absTol;
    if (!ok) {
      std::ostringstream message;
      message.precision(17);
      message << "index " << i << ": got " << g << ", want " << w << " (absTol "
              << absTol << ")";
      return fail(message.str());
    }
  }
  if (why)
    why->clear();
  return true;
}

} // namespace ref
} // namespace mla
