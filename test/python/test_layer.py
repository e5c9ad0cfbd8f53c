"""The MLA layer through Python against the float64 reference: mixed
batches (speculative decodes, prefills with and without cached context in
several chunks, padded slots, shuffled pages) on numpy and torch tensors of
each dtype, DeepSeek-V3's dims, and decode steps padded to a graph shape."""

import numpy as np
import pytest

import mla
import reference
import support
from mla import DType

# A 32-token context workspace over 16-token pages splits every context of
# more than 16 tokens into chunks.
SMALL = dict(
    **support.SMALL_DIMS,
    decode_threshold=2,
    needs_decode_lse=True,
    workspace_tokens=32,
)

DTYPES = (DType.F32, DType.F16, DType.BF16)


def make_layer(runtime, tensors, rng, **config):
    config = mla.LayerConfig(**config)
    weights = support.random_weights(rng, tensors, config)
    layer = mla.Layer(runtime, config, weights["kv_b_proj"], weights["w_uk_t"], weights["w_uv"])
    return layer, weights


def run_and_check(layer, weights, tensors, batch, rng):
    """Runs one step of `batch` on fresh random tensors and checks every
    output against the reference: output rows by part, padding rows left
    alone, the decode LSE, and the cache (exactly: the new rows are
    copies)."""
    config = layer.config
    step = support.random_batch_step(rng, tensors, config, batch)
    want_cache, want_out, want_lse = support.expected_step(step, weights, config, batch)
    output_pointer = tensors.pointer(step["output"])

    plan = layer.plan(batch.metadata, batch.num_cache_blocks)
    info = plan.info
    assert (info.num_decodes, info.num_prefills) == (batch.num_decodes, len(batch.seq_lens) - batch.num_decodes)
    assert info.num_actual_tokens == batch.num_tokens
    layer.forward(
        plan,
        step["q"],
        step["kv_c"],
        step["k_pe"],
        step["kv_cache"],
        step["output"],
        decode_lse=step.get("decode_lse"),
    )

    # The caller's own output storage was written in place.
    assert tensors.pointer(step["output"]) == output_pointer
    out = tensors.to_f64(step["output"])
    tol = support.output_tolerance(config.activation_dtype)
    decode_rows = batch.num_decodes * batch.decode_query_len
    for part, rows in (("decode", slice(0, decode_rows)), ("prefill", slice(decode_rows, batch.num_tokens))):
        if rows.stop > rows.start:
            error = reference.relative_l2(out[rows], want_out[rows])
            assert error <= tol, f"{part} rows: relative L2 error {error:.3g} > {tol:.3g} ({plan})"
    assert np.all(out[batch.num_tokens :] == support.SENTINEL), "padding rows were written"

    if "decode_lse" in step:
        got_lse = tensors.to_f64(step["decode_lse"])
        want = reference.decode_lse(want_lse, batch.num_decodes, batch.decode_query_len)
        lse_tol = support.lse_tolerance(config.activation_dtype, want)
        assert np.abs(got_lse - want).max() <= lse_tol

    np.testing.assert_array_equal(tensors.to_f64(step["kv_cache"]), want_cache)
    return plan


def mixed_batch(rng, block_size, padding=3):
    """Three speculative decodes (2 new tokens; one with no context), three
    prefills: cached context over several pages, none, and a context that
    ends mid-page."""
    contexts = [0, int(rng.integers(1, 40)), int(rng.integers(40, 90))]
    prefills = [
        (int(rng.integers(3, 12)), int(rng.integers(33, 70))),
        (int(rng.integers(3, 9)), 0),
        (int(rng.integers(3, 12)), int(rng.integers(1, 15)) + block_size),
    ]
    return support.make_batch(
        rng,
        decode_seq_lens=[c + 2 for c in contexts],
        decode_query_len=2,
        prefills=[(q, q + c) for q, c in prefills],
        block_size=block_size,
        padding=padding,
    )


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_mixed_batch_matches_reference(runtime, framework, dtype, rng):
    layer, weights = make_layer(runtime, framework, rng, **SMALL, activation_dtype=dtype, cache_dtype=dtype)
    batch = mixed_batch(rng, layer.config.block_size)
    plan = run_and_check(layer, weights, framework, batch, rng)
    assert plan.info.decode_query_len == 2
    assert plan.info.num_context_chunks >= 2, str(plan)


@pytest.mark.parametrize("kind", ["decodes only", "prefills only", "one token decodes"])
def test_uniform_batches(runtime, framework, kind, rng):
    dtype = DType.F32
    layer, weights = make_layer(runtime, framework, rng, **SMALL, activation_dtype=dtype, cache_dtype=dtype)
    lengths = [int(n) for n in rng.integers(1, 100, size=4)]
    if kind == "decodes only":
        batch = support.make_batch(rng, [n + 2 for n in lengths], 2, [], 16)
    elif kind == "one token decodes":
        batch = support.make_batch(rng, [n + 1 for n in lengths], 1, [], 16)
    else:
        # The 32-token workspace holds a page for two prefills with context.
        prefills = [(n % 13 + 3, n % 13 + 3 + c) for n, c in zip(lengths, (0, lengths[2], 0, lengths[3]))]
        batch = support.make_batch(rng, [], 0, prefills, 16, padding=1)
    run_and_check(layer, weights, framework, batch, rng)


def test_explicit_softmax_scale(runtime, framework, rng):
    layer, weights = make_layer(
        runtime, framework, rng, **SMALL, activation_dtype=DType.F32, cache_dtype=DType.F32, softmax_scale=0.37
    )
    run_and_check(layer, weights, framework, mixed_batch(rng, 16), rng)


@pytest.mark.parametrize("dtype", [DType.F32, DType.BF16], ids=str)
def test_deepseek_v3_dims(runtime, framework, dtype, rng):
    """DeepSeek-V3's MLA dims (Lkv 512, R 64, P 128, V 128), 64-token pages,
    with few heads to stay quick on the CPU."""
    heads = 16 if runtime.is_cuda else 2
    layer, weights = make_layer(
        runtime,
        framework,
        rng,
        num_heads=heads,
        activation_dtype=dtype,
        cache_dtype=dtype,
        needs_decode_lse=True,
        workspace_tokens=128,
    )
    batch = support.make_batch(
        rng,
        decode_seq_lens=[int(n) for n in rng.integers(1, 300, size=2)],
        decode_query_len=1,
        prefills=[(int(rng.integers(2, 20)), int(rng.integers(150, 300)))],
        block_size=64,
        padding=2,
    )
    run_and_check(layer, weights, framework, batch, rng)


def test_plan_describes_the_batch(runtime, rng):
    tensors = support.NumpyTensors(runtime) if not runtime.is_cuda else support.TorchTensors(runtime)
    layer, _ = make_layer(runtime, tensors, rng, **SMALL, activation_dtype=DType.F32, cache_dtype=DType.F32)
    batch = support.make_batch(rng, [5, 9], 2, [(4, 40)], 16)
    plan = layer.plan(batch.metadata, batch.num_cache_blocks)
    info = plan.info
    assert info == mla.PlanInfo(
        num_decodes=2,
        num_prefills=1,
        num_decode_tokens=4,
        num_prefill_tokens=4,
        num_actual_tokens=8,
        decode_query_len=2,
        num_context_chunks=info.num_context_chunks,
        num_cache_blocks=batch.num_cache_blocks,
    )
    # 36 cached tokens in chunks of at most 32 (the workspace).
    assert info.num_context_chunks == 2
    line = str(plan)
    assert line.startswith("2 decodes (4 tokens") and "1 prefills (4 tokens, 2 context chunks)" in line
    assert line in repr(plan)
    plan.close()
    assert plan.closed and "closed" in repr(plan)


def test_decode_step_padded_to_a_graph_shape(runtime, framework, rng):
    """plan_decode_step pads a decode batch to the shape (what a captured
    graph replays); forward runs the padded plan on every device: real rows
    match the reference, padding rows come out 0 with LSE -inf, and padding
    writes nothing to the cache."""
    dtype = DType.F32
    layer, weights = make_layer(runtime, framework, rng, **SMALL, activation_dtype=dtype, cache_dtype=dtype)
    batch = support.make_batch(rng, [int(n) + 2 for n in rng.integers(0, 60, size=2)], 2, [], 16)
    shape = mla.DecodeGraphShape(
        max_decodes=4, query_len=2, max_blocks_per_request=8, num_cache_blocks=batch.num_cache_blocks
    )
    rows = shape.max_decodes * shape.query_len
    lse_shape = (shape.max_decodes, layer.config.num_heads, shape.query_len)
    step = support.random_step(rng, framework, layer.config, rows, batch.num_cache_blocks, lse_shape)
    want_cache, want_out, want_lse = support.expected_step(step, weights, layer.config, batch)

    plan = layer.plan_decode_step(batch.metadata, shape)
    assert plan.info.num_decodes == shape.max_decodes
    layer.forward(
        plan, step["q"], step["kv_c"], step["k_pe"], step["kv_cache"], step["output"], step["decode_lse"]
    )
    out = framework.to_f64(step["output"])
    real = batch.num_tokens
    assert reference.relative_l2(out[:real], want_out) <= support.output_tolerance(dtype)
    assert np.all(out[real:] == 0)
    lse = framework.to_f64(step["decode_lse"])
    want = reference.decode_lse(want_lse, batch.num_decodes, 2)
    assert np.abs(lse[: batch.num_decodes] - want).max() <= support.lse_tolerance(dtype, want)
    assert np.all(np.isneginf(lse[batch.num_decodes :]))
    np.testing.assert_array_equal(framework.to_f64(step["kv_cache"]), want_cache)


def test_decode_step_refuses_what_does_not_fit(runtime, rng):
    tensors = support.TorchTensors(runtime) if runtime.is_cuda else support.NumpyTensors(runtime)
    layer, _ = make_layer(runtime, tensors, rng, **SMALL, activation_dtype=DType.F32, cache_dtype=DType.F32)
    batch = support.make_batch(rng, [5, 6, 7], 2, [], 16)
    shape = mla.DecodeGraphShape(2, 2, 8, batch.num_cache_blocks)
    with pytest.raises(mla.InvalidMetadataError, match="mla_layer_plan_decode_step"):
        layer.plan_decode_step(batch.metadata, shape)  # three decodes, two in the shape
    with pytest.raises(mla.InvalidArgumentError):
        layer.plan_decode_step(batch.metadata, mla.DecodeGraphShape(4, 3, 8, batch.num_cache_blocks))
    with_prefill = support.make_batch(rng, [5], 2, [(4, 9)], 16)
    with pytest.raises(mla.InvalidMetadataError):
        layer.plan_decode_step(with_prefill.metadata, mla.DecodeGraphShape(4, 2, 8, with_prefill.num_cache_blocks))


@support.needs_cpu
def test_capturing_on_the_cpu_is_a_runtime_error(runtime, rng):
    tensors = support.NumpyTensors(runtime)
    layer, _ = make_layer(runtime, tensors, rng, **SMALL, activation_dtype=DType.F32, cache_dtype=DType.F32)
    step = support.random_step(rng, tensors, layer.config, rows=4, num_cache_blocks=8)
    with pytest.raises(mla.DeviceRuntimeError, match="mla_layer_capture_decode_step"):
        layer.capture_decode_step(
            mla.DecodeGraphShape(2, 2, 4, 8), step["q"], step["kv_c"], step["k_pe"], step["kv_cache"], step["output"]
        )
