"""Float64 reference of one MLA layer step, in numpy, independent of libmla.

Written from the math (shared/notes/mla-reference.md), in the plain
non-absorbed form for every request: the decode's absorbed form
(q_nope x W_UK_T against the latent cache, then x W_UV) computes the same
attention, so one formula checks both paths.

For request b with seq_len S and query_len Q (C = S - Q cached tokens):
  latent rows 0..C-1 come from the paged cache through the block table,
  rows C..S-1 are the new tokens' kv_c | k_pe;
  k_nope[s, n] = latent[s] @ W_UK[:, n]   v[s, n] = latent[s] @ W_UV[:, n]
  (kv_b_proj [Lkv, N, P + V] holds W_UK then W_UV per head), k_pe shared;
  new token i sits at position C + i and sees keys 0..C + i (bottom-right
  causal alignment);
  score = scale * (q_nope . k_nope + q_pe . k_pe), scale 1/sqrt(P + R) by
  default; out = softmax(score) @ v; lse = log sum exp(score), natural log.

Arrays are float64 numpy arrays; integer metadata as numpy int arrays.
"""

import math
from typing import Optional, Tuple

import numpy as np


def concat_and_cache(
    kv_cache: np.ndarray, kv_c: np.ndarray, k_pe: np.ndarray, slot_mapping: np.ndarray
) -> np.ndarray:
    """A copy of kv_cache [pages, block_size, Lkv + R] with token t's
    kv_c[t] | k_pe[t] in slot slot_mapping[t] (page * block_size + row);
    slots of -1 are skipped."""
    cache = kv_cache.copy()
    block_size = cache.shape[1]
    for token, slot in enumerate(slot_mapping):
        if slot >= 0:
            cache[slot // block_size, slot % block_size] = np.concatenate([kv_c[token], k_pe[token]])
    return cache


def gather_context(kv_cache: np.ndarray, pages: np.ndarray, count: int) -> np.ndarray:
    """The first `count` latent rows [count, Lkv + R] of a request whose
    tokens live in `pages`."""
    block_size = kv_cache.shape[1]
    positions = np.arange(count)
    return kv_cache[pages[positions // block_size], positions % block_size]


def attention(
    q: np.ndarray,
    latent: np.ndarray,
    kv_b_proj: np.ndarray,
    rope_dim: int,
    scale: float,
) -> Tuple[np.ndarray, np.ndarray]:
    """Causal MLA attention of one request's Q new tokens q [Q, N, P + R]
    over its S = len(latent) latent rows [S, Lkv + R], the new tokens last.
    Returns out [Q, N, V] and lse [N, Q]."""
    num_new, _, qk_dim = q.shape
    lkv = latent.shape[1] - rope_dim
    nope = qk_dim - rope_dim
    kv_c, k_pe = latent[:, :lkv], latent[:, lkv:]
    # optimize=True lets einsum use BLAS: DeepSeek-sized heads need it.
    k_nope = np.einsum("sl,lnp->nsp", kv_c, kv_b_proj[:, :, :nope], optimize=True)
    v = np.einsum("sl,lnd->nsd", kv_c, kv_b_proj[:, :, nope:], optimize=True)
    scores = scale * (
        np.einsum("inp,nsp->nis", q[:, :, :nope], k_nope, optimize=True)
        + np.einsum("inr,sr->nis", q[:, :, nope:], k_pe, optimize=True)
    )
    context = len(latent) - num_new
    visible = np.arange(len(latent))[None, :] <= context + np.arange(num_new)[:, None]
    scores = np.where(visible[None], scores, -np.inf)
    peak = scores.max(axis=2, keepdims=True)
    weights = np.exp(scores - peak)
    total = weights.sum(axis=2, keepdims=True)
    out = np.einsum("nis,nsd->ind", weights / total, v, optimize=True)
    lse = (peak + np.log(total))[:, :, 0]
    return out, lse


def mla_step(
    q: np.ndarray,
    kv_c: np.ndarray,
    k_pe: np.ndarray,
    kv_cache: np.ndarray,
    kv_b_proj: np.ndarray,
    query_start_loc: np.ndarray,
    seq_lens: np.ndarray,
    block_table: np.ndarray,
    slot_mapping: np.ndarray,
    softmax_scale: Optional[float] = None,
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One layer step over a batch: the cache after the new tokens are
    written, out [T, N, V] (row t for query token t) and lse [N, T], for
    the T = query_start_loc[-1] tokens of the batch's requests."""
    rope_dim = k_pe.shape[1]
    qk_dim = q.shape[2]
    scale = softmax_scale or 1.0 / math.sqrt(qk_dim)
    num_tokens = int(query_start_loc[-1])
    cache = concat_and_cache(kv_cache, kv_c, k_pe, slot_mapping[:num_tokens])
    out = np.zeros((num_tokens, q.shape[1], kv_b_proj.shape[2] - (qk_dim - rope_dim)))
    lse = np.zeros((q.shape[1], num_tokens))
    for b, seq_len in enumerate(seq_lens):
        start, stop = int(query_start_loc[b]), int(query_start_loc[b + 1])
        context = int(seq_len) - (stop - start)
        latent = np.concatenate(
            [
                gather_context(kv_cache, block_table[b], context),
                np.concatenate([kv_c[start:stop], k_pe[start:stop]], axis=1),
            ]
        )
        out[start:stop], lse[:, start:stop] = attention(q[start:stop], latent, kv_b_proj, rope_dim, scale)
    return cache, out, lse


def decode_lse(lse: np.ndarray, num_decodes: int, query_len: int) -> np.ndarray:
    """The decode rows of lse [N, T] in the layout the layer returns them:
    [num_decodes, N, query_len]."""
    heads = lse.shape[0]
    rows = lse[:, : num_decodes * query_len].reshape(heads, num_decodes, query_len)
    return rows.transpose(1, 0, 2)


def merge_attn_states(
    prefix_out: np.ndarray, prefix_lse: np.ndarray, suffix_out: np.ndarray, suffix_lse: np.ndarray
) -> Tuple[np.ndarray, np.ndarray]:
    """Merges two attention states over disjoint keys: outs [T, N, D], lses
    [N, T]. +inf LSE (an empty state from some kernels) counts as -inf; two
    empty states merge to out 0, lse -inf."""
    lp = np.where(np.isposinf(prefix_lse), -np.inf, prefix_lse)
    ls = np.where(np.isposinf(suffix_lse), -np.inf, suffix_lse)
    peak = np.maximum(lp, ls)
    safe = np.where(np.isneginf(peak), 0.0, peak)
    wp, ws = np.exp(lp - safe), np.exp(ls - safe)
    total = wp + ws
    denominator = np.where(total > 0, total, 1.0)
    out = (wp.T[:, :, None] * prefix_out + ws.T[:, :, None] * suffix_out) / denominator.T[:, :, None]
    lse = np.where(total > 0, safe + np.log(np.where(total > 0, total, 1.0)), -np.inf)
    return out, lse


def relative_l2(got: np.ndarray, want: np.ndarray) -> float:
    """||got - want|| / ||want||, float64."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    norm = np.linalg.norm(want)
    return float(np.linalg.norm(got - want) / (norm if norm > 0 else 1.0))
