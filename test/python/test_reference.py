"""The float64 reference checked against itself: the identities the layer
relies on (the absorbed decode is the same attention; context chunks merged
by their LSE are the whole attention), causal alignment, and the merge of
empty states."""

import math

import numpy as np

import reference

N, LKV, P, R, V = 3, 8, 4, 2, 5


def random_case(rng, context, new):
    q = rng.normal(size=(new, N, P + R))
    latent = rng.normal(size=(context + new, LKV + R))
    kv_b_proj = rng.normal(size=(LKV, N, P + V))
    return q, latent, kv_b_proj


def test_one_token_alone_sees_only_itself(rng):
    q, latent, w = random_case(rng, 0, 1)
    out, lse = reference.attention(q, latent, w, R, 0.5)
    v = latent[0, :LKV] @ w[:, :, P:].reshape(LKV, -1)
    np.testing.assert_allclose(out[0], v.reshape(N, V), rtol=1e-12)
    k_nope = np.einsum("l,lnp->np", latent[0, :LKV], w[:, :, :P])
    score = 0.5 * (np.einsum("np,np->n", q[0, :, :P], k_nope) + q[0, :, P:] @ latent[0, LKV:])
    np.testing.assert_allclose(lse[:, 0], score, rtol=1e-12)


def test_the_absorbed_decode_is_the_same_attention(rng):
    q, latent, w = random_case(rng, 11, 2)
    scale = 1 / math.sqrt(P + R)
    w_uk_t = w[:, :, :P].transpose(1, 2, 0)  # [N, P, Lkv]
    w_uv = w[:, :, P:].transpose(1, 0, 2)  # [N, Lkv, V]
    absorbed = np.einsum("inp,npl->inl", q[:, :, :P], w_uk_t)
    scores = scale * (np.einsum("inl,sl->nis", absorbed, latent[:, :LKV]) + np.einsum("inr,sr->nis", q[:, :, P:], latent[:, LKV:]))
    visible = np.arange(13)[None, :] <= 11 + np.arange(2)[:, None]
    scores = np.where(visible[None], scores, -np.inf)
    weights = np.exp(scores - scores.max(axis=2, keepdims=True))
    weights /= weights.sum(axis=2, keepdims=True)
    latent_out = np.einsum("nis,sl->inl", weights, latent[:, :LKV])
    out = np.einsum("inl,nlv->inv", latent_out, w_uv)
    want, _ = reference.attention(q, latent, w, R, scale)
    np.testing.assert_allclose(out, want, rtol=1e-10, atol=1e-12)


def test_chunks_merged_by_lse_are_the_whole(rng):
    """A prefill's new tokens over their context: each context chunk and the
    new tokens attended apart (as the chunked prefill does), then merged."""
    q, latent, w = random_case(rng, 9, 3)
    want_out, want_lse = reference.attention(q, latent, w, R, 0.3)
    # Every new token sees each context chunk whole (non-causal).
    parts = [unmasked_attention(q, latent[chunk], w, 0.3) for chunk in (slice(0, 4), slice(4, 9))]
    own_out, own_lse = reference.attention(q, latent[9:], w, R, 0.3)
    out, lse = own_out, own_lse
    for part_out, part_lse in parts:
        out, lse = reference.merge_attn_states(out, lse, part_out, part_lse)
    np.testing.assert_allclose(out, want_out, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-12)


def unmasked_attention(q, keys, w, scale):
    """Non-causal attention of q over `keys`, written out apart from
    reference.attention."""
    k_nope = np.einsum("sl,lnp->nsp", keys[:, :LKV], w[:, :, :P])
    v = np.einsum("sl,lnd->nsd", keys[:, :LKV], w[:, :, P:])
    scores = scale * (np.einsum("inp,nsp->nis", q[:, :, :P], k_nope) + np.einsum("inr,sr->nis", q[:, :, P:], keys[:, LKV:]))
    lse = np.log(np.exp(scores).sum(axis=2))
    out = np.einsum("nis,nsd->ind", np.exp(scores - lse[:, :, None]), v)
    return out, lse


def test_causal_alignment(rng):
    """New token i of Q over S keys sees keys 0..S-Q+i: changing key
    S-Q+i+1 leaves token i alone and moves token i+1."""
    q, latent, w = random_case(rng, 5, 3)
    before, _ = reference.attention(q, latent, w, R, 0.5)
    changed = latent.copy()
    changed[5 + 1] += 1.0
    after, _ = reference.attention(q, changed, w, R, 0.5)
    np.testing.assert_array_equal(after[0], before[0])
    assert np.abs(after[1] - before[1]).max() > 1e-3


def test_merging_empty_states():
    out = np.ones((2, N, V))
    inf = np.full((N, 2), np.inf)
    merged, lse = reference.merge_attn_states(out, -inf, out * 2, inf)
    assert np.all(merged == 0) and np.all(np.isneginf(lse))
    merged, lse = reference.merge_attn_states(out, np.zeros((N, 2)), out * 2, -inf)
    assert np.all(merged == 1) and np.all(lse == 0)


def test_the_step_writes_the_cache_and_reads_pages(rng):
    cache = rng.normal(size=(4, 2, LKV + R))
    kv_c, k_pe = rng.normal(size=(2, LKV)), rng.normal(size=(2, R))
    written = reference.concat_and_cache(cache, kv_c, k_pe, np.array([5, -1]))
    np.testing.assert_array_equal(written[2, 1], np.concatenate([kv_c[0], k_pe[0]]))
    changed = np.ones(cache.shape, bool)
    changed[2, 1] = False
    np.testing.assert_array_equal(written[changed], cache[changed])
    np.testing.assert_array_equal(reference.gather_context(cache, np.array([3, 0]), 3), cache[[3, 3, 0], [0, 1, 0]])
