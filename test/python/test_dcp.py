"""Decode context parallelism through Python: a rank's local slot mapping,
ranks simulated in one process (each layer over its share of the cache,
the partials gathered and merged with Layer.merge_dcp_partials) against a
layer without DCP and the float64 reference, and two processes over a
gloo process group running mla.dcp.step on mixed batches, the prefills'
context chunks all-gathered inside the forward (dcp_worker.py)."""

import math
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import mla
import mla.dcp
import reference
import support
from mla import DType

SMALL = dict(
    **support.SMALL_DIMS,
    needs_decode_lse=True,
    activation_dtype=DType.F32,
    cache_dtype=DType.F32,
)


def test_local_slot_mapping_by_hand():
    # 9 tokens, the new one at position 8: rank 0 of 2 owns it, at local
    # position 4 of its pages [3, 0]; rank 1 writes nothing.
    metadata = mla.BatchMetadata.from_lengths([1], [9], [[3, 0]], 16)
    assert mla.dcp.local_slot_mapping(metadata, 16, 2, 0) == [3 * 16 + 4]
    assert mla.dcp.local_slot_mapping(metadata, 16, 2, 1) == [-1]
    # Runs of 4: position 8 is in run 2, rank 0's second run (local 4).
    assert mla.dcp.local_slot_mapping(metadata, 16, 2, 0, interleave=4) == [3 * 16 + 4]
    with pytest.raises(mla.InvalidArgumentError, match="cp_kv_cache_interleave_size"):
        mla.dcp.local_slot_mapping(metadata, 16, 2, 0, interleave=3)
    with pytest.raises(mla.InvalidArgumentError, match="dcp_rank"):
        mla.dcp.local_slot_mapping(metadata, 16, 2, 2)


def share_of(world, rank, interleave, length):
    """Positions of a `length`-token sequence that `rank` holds, in order."""
    return [i for i in range(length) if (i // interleave) % world == rank]


@pytest.mark.parametrize("world,interleave,query_len", [(2, 1, 1), (3, 1, 2), (2, 16, 1), (2, 4, 3)])
def test_simulated_ranks_match_one_layer(cpu_runtime, rng, world, interleave, query_len):
    tensors = support.NumpyTensors(cpu_runtime)
    base = {**SMALL, "decode_threshold": query_len}
    config = mla.LayerConfig(**base)
    weights = support.random_weights(rng, tensors, config)
    contexts = [0, 1, world * interleave - 1] + [int(c) for c in rng.integers(0, 120, 4)]
    seq_lens = [c + query_len for c in contexts]
    batch = support.make_batch(rng, seq_lens, query_len, [], config.block_size)
    step = support.random_batch_step(rng, tensors, config, batch)
    _, want_out, want_lse = support.expected_step(step, weights, config, batch)
    f64 = step["f64"]
    n, v, rows = config.num_heads, config.v_head_dim, len(seq_lens) * query_len

    # Each rank: its own pages holding its share of every sequence (the
    # new tokens too, written by the layer), its slots, its partials.
    partial_out, partial_lse, layers, plans = [], [], [], []
    for rank in range(world):
        dcp = mla.LayerConfig(**{**base, "dcp_world_size": world, "dcp_rank": rank,
                                 "dcp_interleave": interleave})
        positions = [share_of(world, rank, interleave, s) for s in seq_lens]
        need = [max(1, math.ceil(len(p) / config.block_size)) for p in positions]
        table = np.arange(sum(need), dtype=np.int32)
        width = max(need)
        block_table = np.zeros((len(seq_lens), width), dtype=np.int32)
        start = 0
        for b, count in enumerate(need):
            block_table[b, :count] = table[start : start + count]
            start += count
        cache = np.zeros((sum(need), config.block_size, config.cache_entry_dim))
        for b, held in enumerate(positions):
            for local, i in enumerate(held):
                if i < contexts[b]:
                    page, row = block_table[b, local // config.block_size], local % config.block_size
                    cache[page, row] = reference.gather_context(f64["kv_cache"], batch.block_table[b], i + 1)[i]
        metadata = mla.BatchMetadata.from_lengths(
            [query_len] * len(seq_lens), seq_lens, block_table, config.block_size, dcp=(world, rank, interleave))
        layer = mla.Layer(cpu_runtime, dcp, weights["kv_b_proj"], weights["w_uk_t"], weights["w_uv"])
        plan = layer.plan(metadata, cache.shape[0])
        out = tensors.full((rows, n, v), support.SENTINEL, DType.F32)
        lse = tensors.full((len(seq_lens), n, query_len), support.SENTINEL, DType.F32)
        layer.forward(plan, step["q"], step["kv_c"], step["k_pe"], tensors.tensor(cache, DType.F32), out, lse)
        partial_out.append(tensors.to_f64(out))
        partial_lse.append(tensors.to_f64(lse))
        layers.append(layer)
        plans.append(plan)

    gathered_out = tensors.tensor(np.stack(partial_out), DType.F32)
    gathered_lse = tensors.tensor(np.stack(partial_lse), DType.F32)
    tol = support.output_tolerance(DType.F32)
    merged = tensors.full((rows, n, v), support.SENTINEL, DType.F32)
    merged_lse = tensors.full((len(seq_lens), n, query_len), support.SENTINEL, DType.F32)
    layers[0].merge_dcp_partials(plans[0], gathered_out, gathered_lse, merged, merged_lse)
    assert reference.relative_l2(tensors.to_f64(merged), want_out) <= tol
    lse_want = reference.decode_lse(want_lse, len(seq_lens), query_len)
    assert np.max(np.abs(tensors.to_f64(merged_lse) - lse_want)) <= 1e-3
    if n % world == 0:
        share = n // world
        for rank in range(world):
            own = tensors.full((rows, share, v), support.SENTINEL, DType.F32)
            layers[rank].merge_dcp_partials(plans[rank], gathered_out, gathered_lse, own)
            want = want_out[:, rank * share : (rank + 1) * share]
            assert reference.relative_l2(tensors.to_f64(own), want) <= tol


def test_merge_needs_a_dcp_layer_and_the_right_heads(cpu_runtime, rng):
    tensors = support.NumpyTensors(cpu_runtime)
    config = mla.LayerConfig(**SMALL)
    weights = support.random_weights(rng, tensors, config)
    plain = mla.Layer(cpu_runtime, config, weights["kv_b_proj"], weights["w_uk_t"], weights["w_uv"])
    metadata = mla.BatchMetadata.from_lengths([1], [9], [[0]], 16)
    plan = plain.plan(metadata, 1)
    n, v = config.num_heads, config.v_head_dim
    out = np.zeros((2, 1, n, v), np.float32)
    lse = np.zeros((2, 1, n, 1), np.float32)
    with pytest.raises(mla.InvalidArgumentError, match="without decode context parallelism"):
        plain.merge_dcp_partials(plan, out, lse, np.zeros((1, n, v), np.float32))
    dcp = mla.Layer(cpu_runtime, mla.LayerConfig(**{**SMALL, "dcp_world_size": 2}),
                    weights["kv_b_proj"], weights["w_uk_t"], weights["w_uv"])
    metadata = mla.BatchMetadata.from_lengths([1], [9], [[0]], 16, dcp=(2, 0, 1))
    plan = dcp.plan(metadata, 1)
    with pytest.raises(mla.InvalidArgumentError, match="every head"):
        dcp.merge_dcp_partials(plan, out, lse, np.zeros((1, 3, v), np.float32))
    with pytest.raises(mla.InvalidArgumentError, match="dcp_rank"):
        mla.Layer(cpu_runtime, mla.LayerConfig(**{**SMALL, "dcp_world_size": 2, "dcp_rank": 2}),
                  weights["kv_b_proj"], weights["w_uk_t"], weights["w_uv"])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("interleave,dtype", [(1, "bf16"), (16, "f32")])
def test_two_processes_over_gloo(interleave, dtype):
    support.torch_or_skip()
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("this torch has no gloo")
    worker = Path(__file__).resolve().parent / "dcp_worker.py"
    init = f"tcp://127.0.0.1:{free_port()}"
    # The workers import the package this test imported.
    env = os.environ.copy()
    package_root = str(Path(mla.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    procs = [
        subprocess.Popen(
            [sys.executable, str(worker), "--rank", str(rank), "--world", "2", "--init", init,
             "--backend", "gloo", "--small", "--interleave", str(interleave), "--dtype", dtype,
             "--seed", str(7 + interleave), "--prefills", "90:7,0:3,17:2", "--workspace", "64"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        for rank in range(2)
    ]
    outputs = [p.communicate(timeout=300)[0] for p in procs]
    for rank, (p, text) in enumerate(zip(procs, outputs)):
        assert p.returncode == 0 and f"rank {rank}: PASS" in text, text


def test_prefill_context_needs_the_groups_all_gather(cpu_runtime, rng):
    """A prefill with context reads it through the all-gather: refused
    without one; an exception the all-gather raises comes out of forward;
    the all-gather sees the layer's rows, one call per context chunk."""
    tensors = support.NumpyTensors(cpu_runtime)
    config = mla.LayerConfig(**{**SMALL, "dcp_world_size": 2, "workspace_tokens": 32})
    weights = support.random_weights(rng, tensors, config)
    layer = mla.Layer(cpu_runtime, config, weights["kv_b_proj"], weights["w_uk_t"], weights["w_uv"])
    # One prefill: 40 cached tokens (rank 0 holds 20), 3 new ones.
    metadata = mla.BatchMetadata.from_lengths([3], [43], [[0, 1]], 16, dcp=(2, 0, 1))
    plan = layer.plan(metadata, 2)
    assert plan.info.num_context_chunks == 2
    n, v, entry = config.num_heads, config.v_head_dim, config.cache_entry_dim
    args = [tensors.full(shape, 0.5, DType.F32) for shape in
            ((3, n, config.qk_head_dim), (3, config.kv_lora_rank), (3, config.qk_rope_head_dim),
             (2, 16, entry), (3, n, v))]
    with pytest.raises(mla.InvalidArgumentError, match="all-gather"):
        layer.forward(plan, *args)

    class GroupGone(Exception):
        pass

    def gone(send, received, size, stream):
        raise GroupGone("the group is gone")

    layer.set_dcp_all_gather(gone)
    with pytest.raises(GroupGone, match="the group is gone"):
        layer.forward(plan, *args)

    calls = []

    def by_hand(send, received, size, stream):
        # Both ranks "send" this rank's rows (a group of one, twice).
        calls.append(size)
        ctypes_bytes = (np.ctypeslib.ctypes.c_uint8 * size).from_address(send)
        rows = np.frombuffer(ctypes_bytes, dtype=np.uint8)
        target = np.ctypeslib.as_array((np.ctypeslib.ctypes.c_uint8 * (2 * size)).from_address(received))
        target[:size] = rows
        target[size:] = rows

    layer.set_dcp_all_gather(by_hand)
    layer.forward(plan, *args)
    # Chunks of 32 tokens: rank 0 holds 16 of the first and 4 of the second;
    # each rank sends the most any rank holds of a chunk, 16 rows.
    assert calls == [16 * entry * 4] * 2
    assert np.all(np.isfinite(tensors.to_f64(args[4])))
    layer.set_dcp_all_gather(None)
    with pytest.raises(mla.InvalidArgumentError, match="all-gather"):
        layer.forward(plan, *args)
