"""On a CUDA GPU (MLA_TEST_DEVICE=gpu, or wherever torch sees one): work
queued on torch streams, decode steps captured inside torch.cuda.graph and
replayed with new lengths, the layer's own graph replayed, and
DeepSeek-V3-shaped layers driven from Python, all against the float64
reference. Skipped on machines without a GPU."""

import numpy as np
import pytest

import mla
import reference
import support
from mla import DType
from test_layer import SMALL, make_layer, mixed_batch, run_and_check

pytestmark = support.needs_gpu


@pytest.fixture(scope="module")
def torch():
    return support.torch_or_skip()


@pytest.fixture
def tensors(runtime, torch):
    return support.TorchTensors(runtime)


@pytest.mark.parametrize("how", ["current stream", "torch stream", "integer handle"])
def test_forward_is_ordered_on_the_given_stream(runtime, tensors, torch, rng, how):
    """The forward reads a q that a copy queued on a side stream (behind a
    long sleep) writes just before it: only a forward ordered on that
    stream sees it. The side stream is torch's current one inside
    `torch.cuda.stream`, or given as `stream=`."""
    layer, weights = make_layer(runtime, tensors, rng, **SMALL, activation_dtype=DType.BF16, cache_dtype=DType.BF16)
    batch = mixed_batch(rng, 16)
    step = support.random_batch_step(rng, tensors, layer.config, batch)
    _, want_out, _ = support.expected_step(step, weights, layer.config, batch)
    plan = layer.plan(batch.metadata, batch.num_cache_blocks)
    args = [step[name] for name in ("q", "kv_c", "k_pe", "kv_cache", "output")] + [step.get("decode_lse")]
    q = step["q"].clone()
    step["q"].zero_()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)
        step["q"].copy_(q)
    if how == "current stream":
        with torch.cuda.stream(side):
            layer.forward(plan, *args)
    else:
        layer.forward(plan, *args, stream=side if how == "torch stream" else side.cuda_stream)
    runtime.synchronize(side)
    out = tensors.to_f64(step["output"])[: batch.num_tokens]
    assert reference.relative_l2(out, want_out) <= support.output_tolerance(DType.BF16)


def queued_behind_a_sleep(torch, work):
    """Runs `work(stream)` on a side stream busy with a long sleep; True when
    it returned while the sleep still ran (it waited for nothing)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)
        work(side)
        returned_early = not side.query()
    side.synchronize()
    return returned_early


def test_a_decode_step_returns_without_waiting(runtime, tensors, torch, rng):
    """A decode step's forward queues its metadata copy (from page-locked
    memory) and its kernels, and returns while the stream still runs
    earlier work. (A step with prefills waits: the chunked prefill's host
    code reads its chunk plan back from the device.)"""
    layer, _ = make_layer(runtime, tensors, rng, **SMALL, activation_dtype=DType.BF16, cache_dtype=DType.BF16)
    lengths = [int(n) for n in rng.integers(1, 100, size=4)]
    batch = support.make_batch(rng, [n + 1 for n in lengths], 1, [], 16)
    step = support.random_batch_step(rng, tensors, layer.config, batch)
    plan = layer.plan(batch.metadata, batch.num_cache_blocks)
    args = [step[name] for name in ("q", "kv_c", "k_pe", "kv_cache", "output")] + [step.get("decode_lse")]
    layer.forward(plan, *args)  # sizes the layer's scratch, which waits
    assert queued_behind_a_sleep(torch, lambda stream: layer.forward(plan, *args, stream=stream))


class PersistentStep:
    """An engine's persistent decode buffers for a graph shape, and the
    float64 state of its cache, refilled each step with new requests."""

    def __init__(self, layer, kv_b_proj_f64, tensors, rng, shape):
        config = layer.config
        self.layer, self.tensors, self.rng, self.shape = layer, tensors, rng, shape
        self.kv_b_proj_f64 = kv_b_proj_f64
        rows = shape.max_decodes * shape.query_len
        lse_shape = (shape.max_decodes, config.num_heads, shape.query_len)
        self.buffers = support.random_step(rng, tensors, config, rows, shape.num_cache_blocks, lse_shape)
        self.args = [self.buffers[name] for name in ("q", "kv_c", "k_pe", "kv_cache", "output", "decode_lse")]

    def next_batch(self, num_decodes):
        """New requests with new lengths, new inputs written into the
        persistent buffers in place; returns their metadata and reference."""
        rng, shape, config = self.rng, self.shape, self.layer.config
        pages_each = shape.max_blocks_per_request
        pages = rng.permutation(shape.num_cache_blocks)[: num_decodes * pages_each].reshape(num_decodes, pages_each)
        longest = pages_each * config.block_size
        seq_lens = [int(n) for n in rng.integers(shape.query_len, longest + 1, size=num_decodes)]
        metadata = mla.BatchMetadata.from_lengths([shape.query_len] * num_decodes, seq_lens, pages, config.block_size)
        for name in ("q", "kv_c", "k_pe"):
            fresh = rng.uniform(-1, 1, tuple(self.buffers[name].shape))
            self.buffers[name].copy_(self.tensors.tensor(fresh, config.activation_dtype))
        f64 = {name: self.tensors.to_f64(self.buffers[name]) for name in ("q", "kv_c", "k_pe", "kv_cache")}
        want = reference.mla_step(
            f64["q"], f64["kv_c"], f64["k_pe"], f64["kv_cache"], self.kv_b_proj_f64,
            np.asarray(metadata.query_start_loc), np.asarray(seq_lens), pages, np.asarray(metadata.slot_mapping),
        )
        return metadata, want

    def check(self, num_decodes, want):
        want_cache, want_out, want_lse = want
        dtype = self.layer.config.activation_dtype
        real = num_decodes * self.shape.query_len
        out = self.tensors.to_f64(self.buffers["output"])
        assert reference.relative_l2(out[:real], want_out) <= support.output_tolerance(dtype)
        assert np.all(out[real:] == 0)
        lse = self.tensors.to_f64(self.buffers["decode_lse"])
        want_decode_lse = reference.decode_lse(want_lse, num_decodes, self.shape.query_len)
        assert np.abs(lse[:num_decodes] - want_decode_lse).max() <= support.lse_tolerance(dtype, want_decode_lse)
        assert np.all(np.isneginf(lse[num_decodes:]))
        np.testing.assert_array_equal(self.tensors.to_f64(self.buffers["kv_cache"]), want_cache)


def graph_layer(runtime, tensors, rng, query_len, heads=16):
    """A DeepSeek-V3-dims layer set up for CUDA graphs and its persistent
    buffers for a shape of 8 decodes of `query_len` tokens over 8 pages."""
    layer, weights = make_layer(
        runtime,
        tensors,
        rng,
        num_heads=heads,
        decode_threshold=query_len,
        needs_decode_lse=True,
        wants_cuda_graphs=True,
    )
    shape = mla.DecodeGraphShape(max_decodes=8, query_len=query_len, max_blocks_per_request=8, num_cache_blocks=80)
    return layer, PersistentStep(layer, weights["kv_b_proj_f64"], tensors, rng, shape)


@pytest.mark.parametrize("query_len", [1, 2], ids=["decode", "speculative decode"])
def test_capture_inside_torch_cuda_graph(runtime, tensors, torch, rng, query_len):
    layer, state = graph_layer(runtime, tensors, rng, query_len)
    graph = layer.capture_decode_step(state.shape, *state.args)
    assert graph.shape.max_splits_per_request > 0  # the layer chose one
    assert graph.layer is layer

    # Outside a capture, stage + enqueue is a plain step.
    metadata, want = state.next_batch(3)
    graph.stage(layer.plan_decode_step(metadata, graph.shape))
    graph.enqueue()
    state.check(3, want)

    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        graph.enqueue()
    for num_decodes in (8, 1, 5, 2):
        metadata, want = state.next_batch(num_decodes)
        graph.stage(layer.plan_decode_step(metadata, graph.shape))
        g.replay()
        state.check(num_decodes, want)


@pytest.mark.parametrize("heads", [16, 128])
def test_the_layers_own_graph(runtime, tensors, torch, rng, heads):
    layer, state = graph_layer(runtime, tensors, rng, 1, heads)
    with layer.capture_decode_step(state.shape, *state.args) as graph:
        for num_decodes in (4, 8, 2):
            metadata, want = state.next_batch(num_decodes)
            graph.replay(layer.plan_decode_step(metadata, graph.shape))
            state.check(num_decodes, want)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        metadata, want = state.next_batch(6)
        layer.replay(graph, layer.plan_decode_step(metadata, graph.shape), stream=side)
        side.synchronize()
        state.check(6, want)
    assert graph.closed and not layer.closed


def test_a_replay_returns_without_waiting(runtime, tensors, torch, rng):
    layer, state = graph_layer(runtime, tensors, rng, 1)
    graph = layer.capture_decode_step(state.shape, *state.args)
    metadata, want = state.next_batch(5)
    plan = layer.plan_decode_step(metadata, graph.shape)
    assert queued_behind_a_sleep(torch, lambda stream: graph.replay(plan, stream=stream))
    state.check(5, want)


def test_a_plan_of_another_shape_is_refused(runtime, tensors, torch, rng):
    layer, state = graph_layer(runtime, tensors, rng, 1)
    graph = layer.capture_decode_step(state.shape, *state.args)
    metadata, _ = state.next_batch(2)
    other = mla.DecodeGraphShape(4, 1, 8, 80)
    with pytest.raises(mla.InvalidArgumentError, match="mla_layer_replay"):
        graph.replay(layer.plan_decode_step(metadata, other))
    with pytest.raises(mla.InvalidArgumentError):
        graph.stage(layer.plan_decode_step(metadata, other))


@pytest.mark.parametrize("heads", [16, 128])
def test_deepseek_v3_layer_mixed_batch(runtime, tensors, rng, heads):
    layer, weights = make_layer(runtime, tensors, rng, num_heads=heads, needs_decode_lse=True)
    new = int(rng.integers(2, 40))  # a prefill without context
    batch = support.make_batch(
        rng,
        decode_seq_lens=[int(n) for n in rng.integers(1, 600, size=6)],
        decode_query_len=1,
        prefills=[(int(rng.integers(20, 80)), int(rng.integers(200, 500))), (new, new)],
        block_size=64,
        padding=5,
    )
    run_and_check(layer, weights, tensors, batch, rng)
    assert layer.selection.backend != "CPU_JIT"
