"""Helpers of test_vllm.py: impls made the way an engine makes them (the
projection as a Linear module), a step's tensors in the shapes an engine
passes them, and the float64 reference of that step."""

import math
from typing import Any, Dict, Tuple

import numpy as np
import torch

import mla
import reference
import support
import test_layer
from mla import DType
from mla import vllm as mv

# test_layer's small dims (a 32-token context workspace over 16-token pages,
# speculative decodes of up to 2 new tokens), without the decode LSE, which
# the impl does not ask for.
SMALL = {name: value for name, value in test_layer.SMALL.items() if name != "needs_decode_lse"}


def impl_arguments(config: mla.LayerConfig, kv_b_proj: Any, scale: float, **overrides: Any) -> Dict[str, Any]:
    """The arguments an engine gives an MLA impl for a layer of `config`."""
    arguments = dict(
        num_heads=config.num_heads,
        head_size=config.cache_entry_dim,
        scale=scale,
        num_kv_heads=1,
        alibi_slopes=None,
        sliding_window=None,
        kv_cache_dtype="auto",
        logits_soft_cap=None,
        attn_type="decoder",
        kv_sharing_target_layer_name=None,
        q_lora_rank=None,
        kv_lora_rank=config.kv_lora_rank,
        qk_nope_head_dim=config.qk_nope_head_dim,
        qk_rope_head_dim=config.qk_rope_head_dim,
        qk_head_dim=config.qk_head_dim,
        v_head_dim=config.v_head_dim,
        kv_b_proj=kv_b_proj,
    )
    arguments.update(overrides)
    return arguments


def random_kv_b_proj(rng: np.random.Generator, config: mla.LayerConfig, dtype: DType) -> Tuple[torch.nn.Linear, np.ndarray]:
    """A Linear(Lkv -> N * (P + V)) with random weights drawn in `dtype`
    (so the float64 reference sees exactly the library's values), and those
    weights as kv_b_proj [Lkv, N, P + V] in float64."""
    n, lkv = config.num_heads, config.kv_lora_rank
    width = config.qk_nope_head_dim + config.v_head_dim
    linear = torch.nn.Linear(lkv, n * width, bias=False)
    values = rng.uniform(-1, 1, (n * width, lkv)) / math.sqrt(lkv)
    linear.weight.data = torch.from_numpy(values).to(dtype.to_torch())
    exact = linear.weight.data.double().numpy()
    return linear, exact.T.reshape(lkv, n, width).copy()


def make_impl(
    runtime: mla.Runtime,
    rng: np.random.Generator,
    dtype: DType,
    config: mla.LayerConfig,
    scale_factor: float = 1.25,
    **overrides: Any,
) -> Tuple[mv.MlaJitImpl, np.ndarray]:
    """An impl for a layer of `config` in `dtype` (engine arguments
    `overrides`, kv_cache_dtype say), its weights loaded and processed,
    with a softmax scale other than the default (as DeepSeek's YaRN scaling
    gives); returns it and its kv_b_proj in float64."""
    linear, kv_b_proj_f64 = random_kv_b_proj(rng, config, dtype)
    scale = scale_factor / math.sqrt(config.qk_head_dim)
    impl = mv.MlaJitImpl(**impl_arguments(config, linear, scale, **overrides), runtime=runtime, config=config)
    impl.process_weights_after_loading(dtype.to_torch())
    return impl, kv_b_proj_f64


def common_metadata(batch: support.Batch, device: Any) -> mv.CommonAttentionMetadata:
    """The engine's metadata of `batch` (padded slots included)."""
    return mv.CommonAttentionMetadata.from_lengths(
        batch.query_lens, batch.seq_lens, batch.block_table, batch.block_size, num_slots=batch.rows, device=device
    )


def engine_step(rng: np.random.Generator, runtime: mla.Runtime, config: mla.LayerConfig, rows: int, num_cache_blocks: int) -> Dict[str, Any]:
    """Random step tensors of `rows` rows as an engine passes them: k_pe as
    [T, 1, R] and the output flat, [T, N * V], filled with SENTINEL."""
    step = support.random_step(rng, support.TorchTensors(runtime), config, rows, num_cache_blocks)
    step["k_pe"] = step["k_pe"].unsqueeze(1)
    step["output"] = step["output"].view(rows, -1)
    return step


def expected(step: Dict[str, Any], kv_b_proj_f64: np.ndarray, common: mv.CommonAttentionMetadata, scale: float):
    """The float64 reference of `step`: (cache after, out [T, N, V])."""
    f64 = step["f64"]
    reqs = common.num_reqs
    cache, out, _ = reference.mla_step(
        f64["q"],
        f64["kv_c"],
        f64["k_pe"],
        f64["kv_cache"],
        kv_b_proj_f64,
        common.query_start_loc_cpu[: reqs + 1].numpy(),
        common.seq_lens_cpu[:reqs].numpy(),
        common.block_table_tensor[:reqs].cpu().numpy(),
        common.slot_mapping.cpu().numpy(),
        scale,
    )
    return cache, out
