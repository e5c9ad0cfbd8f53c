"""FP8 KV caches through Python on the CPU: a layer with an fp8_e4m3 or
fp8_e5m2 cache (uint8 codes, as vLLM keeps it) runs a mixed step; the new
tokens' codes equal an independent numpy encoder's (nearest value, ties to
the even code, saturation), and the output equals the float64 reference
over the dequantized cache, whose decode keys include the new tokens as
quantized (prefills attend over their new tokens unquantized, as vLLM's
do). A missing or bad kv_scale is refused by name."""

import math

import numpy as np
import pytest

import mla
import reference
import support
from mla import DType
from support import fp8_encode, fp8_step_reference

SCALE = 0.03


@pytest.mark.parametrize("cache_dtype", [DType.FP8_E4M3, DType.FP8_E5M2])
def test_mixed_step_over_an_fp8_cache(cpu_runtime, rng, cache_dtype):
    tensors = support.NumpyTensors(cpu_runtime)
    config = mla.LayerConfig(**{**support.SMALL_DIMS, "activation_dtype": DType.F32,
                                "cache_dtype": cache_dtype, "workspace_tokens": 32})
    weights = support.random_weights(rng, tensors, config)
    layer = mla.Layer(cpu_runtime, config, weights["kv_b_proj"], weights["w_uk_t"], weights["w_uv"])
    # Two decodes, then two prefills: one over 50 cached tokens (two
    # context chunks), one without context.
    batch = support.make_batch(rng, [41, 1], 1, [(6, 56), (3, 3)], config.block_size)
    plan = layer.plan(batch.metadata, batch.num_cache_blocks)
    n, lkv, r, v = config.num_heads, config.kv_lora_rank, config.qk_rope_head_dim, config.v_head_dim
    rows = batch.num_tokens
    q = rng.uniform(-1, 1, (rows, n, config.qk_head_dim)).astype(np.float32)
    kv_c = rng.uniform(-1, 1, (rows, lkv)).astype(np.float32)
    k_pe = rng.uniform(-1, 1, (rows, r)).astype(np.float32)
    # Values that round to zero keep their sign (+0 and -0 codes), every run.
    kv_c[0, :4] = [-1e-7, 1e-7, -0.0, 0.0]
    codes = fp8_encode(rng.uniform(-1, 1, (batch.num_cache_blocks, config.block_size, lkv + r)) / SCALE,
                       cache_dtype).reshape(batch.num_cache_blocks, config.block_size, lkv + r)
    cache = codes.copy()
    output = np.full((rows, n, v), 7.0, np.float32)
    scale = np.array([SCALE], np.float32)
    layer.forward(plan, q, kv_c, k_pe, cache, output, kv_scale=scale)

    # The new tokens' codes.
    new_rows = np.concatenate([kv_c, k_pe], axis=1).astype(np.float64)
    want_codes = fp8_encode((new_rows.astype(np.float32) / np.float32(SCALE)).astype(np.float64), cache_dtype)
    want_codes = want_codes.reshape(rows, lkv + r)
    slots = np.asarray(batch.metadata.slot_mapping[:rows])
    flat = cache.reshape(-1, lkv + r)
    assert np.array_equal(flat[slots], want_codes)
    untouched = np.setdiff1d(np.arange(flat.shape[0]), slots)
    assert np.array_equal(flat[untouched], codes.reshape(-1, lkv + r)[untouched])

    # The float64 reference over the dequantized cache.
    want = fp8_step_reference(batch, q, new_rows, cache, cache_dtype, SCALE, weights["kv_b_proj_f64"],
                              r, 1.0 / math.sqrt(config.qk_head_dim))
    assert reference.relative_l2(output.astype(np.float64), want) <= support.output_tolerance(DType.F32)


def test_fp8_cache_needs_a_good_kv_scale(cpu_runtime, rng):
    tensors = support.NumpyTensors(cpu_runtime)
    config = mla.LayerConfig(**{**support.SMALL_DIMS, "activation_dtype": DType.F32, "cache_dtype": "fp8_e4m3"})
    weights = support.random_weights(rng, tensors, config)
    layer = mla.Layer(cpu_runtime, config, weights["kv_b_proj"], weights["w_uk_t"], weights["w_uv"])
    batch = support.make_batch(rng, [9], 1, [], config.block_size)
    plan = layer.plan(batch.metadata, batch.num_cache_blocks)
    n, lkv, r = config.num_heads, config.kv_lora_rank, config.qk_rope_head_dim
    args = (np.zeros((1, n, config.qk_head_dim), np.float32), np.zeros((1, lkv), np.float32),
            np.zeros((1, r), np.float32),
            np.zeros((batch.num_cache_blocks, config.block_size, lkv + r), np.uint8),
            np.zeros((1, n, config.v_head_dim), np.float32))
    with pytest.raises(mla.InvalidArgumentError, match="kv_scale is required"):
        layer.forward(plan, *args)
    for bad in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(mla.InvalidArgumentError, match="finite and positive"):
            layer.forward(plan, *args, kv_scale=np.array([bad], np.float32))
    # The GPU backends refuse FP8 caches by their kv-cache dtypes.
    selection = cpu_runtime.select_backend(config)
    assert selection.backend == "CPU_JIT"
