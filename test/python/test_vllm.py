"""mla.vllm, the vLLM-shaped backend: the backend's declarations and
validation reasons (from libmla's selection where it decides), the
metadata builder's ordering, split and refusals, and the impl running
mixed batches from engine-shaped inputs against the float64 reference.
CUDA-graph capture and replay run on a GPU only.

Tolerances are support.output_tolerance's (relative L2 of the output: four
roundings to the activation dtype, 4u, floored at 2^-16 for f32
accumulation), derived there. They carry over unchanged: the impl's weight
preparation only transposes values already in the activation dtype, so the
reference sees exactly the library's weights and inputs.
"""

import dataclasses
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="mla.vllm needs torch")

import mla  # noqa: E402
import reference  # noqa: E402
import support  # noqa: E402
import vllm_support  # noqa: E402
from mla import DType  # noqa: E402
from mla import vllm as mv  # noqa: E402
from test_layer import mixed_batch  # noqa: E402
from vllm_support import SMALL  # noqa: E402

Backend = mv.MlaJitBackend
DEEPSEEK_ENTRY = 512 + 64


def device_of(runtime):
    return f"cuda:{runtime.gpu_ordinal}" if runtime.is_cuda else "cpu"


# The backend class.


def test_class_data_and_names():
    assert Backend.accept_output_buffer
    assert {torch.bfloat16, torch.float16, torch.float32} == set(Backend.supported_dtypes)
    assert "auto" in Backend.supported_kv_cache_dtypes
    assert {"fp8", "fp8_e4m3", "fp8_e5m2"} <= set(Backend.supported_kv_cache_dtypes)
    assert Backend.get_name() == "MLA_JIT"
    assert Backend.get_impl_cls() is mv.MlaJitImpl
    assert Backend.get_builder_cls() is mv.MlaJitMetadataBuilder
    assert Backend.is_mla() and not Backend.is_sparse() and not Backend.supports_sink()
    assert Backend.full_cls_name() == ("mla.vllm.backend", "MlaJitBackend")
    assert Backend.get_required_kv_cache_layout() is None


def test_kv_cache_shape_and_layout():
    assert Backend.get_kv_cache_shape(7, 64, 1, DEEPSEEK_ENTRY) == (7, 64, DEEPSEEK_ENTRY)
    assert Backend.get_kv_cache_shape(3, 16, 1, 80, "bfloat16") == (3, 16, 80)
    with pytest.raises(ValueError, match="num_kv_heads=8"):
        Backend.get_kv_cache_shape(7, 64, 8, DEEPSEEK_ENTRY)
    assert Backend.get_kv_cache_shape(7, 64, 1, DEEPSEEK_ENTRY, "fp8_e4m3") == (7, 64, DEEPSEEK_ENTRY)
    with pytest.raises(ValueError, match="fp4"):
        Backend.get_kv_cache_shape(7, 64, 1, DEEPSEEK_ENTRY, "fp4")
    assert Backend.get_kv_cache_stride_order() == (0, 1, 2)
    assert Backend.get_kv_cache_stride_order(include_num_layers_dimension=True) == (0, 1, 2, 3)


def test_supports_predicates():
    assert Backend.get_supported_kernel_block_sizes() == [mv.MultipleOf(1)]
    assert all(Backend.supports_block_size(size) for size in (None, 1, 16, 64, 48))
    assert not Backend.supports_block_size(0)
    assert Backend.get_supported_head_sizes() == [] and Backend.supports_head_size(DEEPSEEK_ENTRY)
    assert all(Backend.supports_dtype(t) for t in (torch.bfloat16, torch.float16, torch.float32))
    assert not Backend.supports_dtype(torch.float64) and not Backend.supports_dtype(torch.int32)
    assert all(Backend.supports_kv_cache_dtype(t) for t in (None, "auto", "bfloat16", "float16"))
    assert Backend.supports_kv_cache_dtype("fp8") and Backend.supports_kv_cache_dtype("fp8_e5m2")
    assert not Backend.supports_kv_cache_dtype("fp4") and not Backend.supports_kv_cache_dtype("int8")
    assert Backend.supports_attn_type("decoder") and not Backend.supports_attn_type("encoder_only")
    assert Backend.supports_compute_capability((9, 0))


def validate(runtime, head_size=DEEPSEEK_ENTRY, dtype=torch.bfloat16, kv_cache_dtype="auto", block_size=64, **options):
    features = {name: options.pop(name) for name in ("use_mla", "has_sink", "use_sparse", "attn_type") if name in options}
    return Backend.validate_configuration(
        head_size, dtype, kv_cache_dtype, block_size, device_capability=None, runtime=runtime, **features, **options
    )


def test_a_supported_configuration_has_no_reasons(runtime):
    assert validate(runtime) == []
    small = mla.LayerConfig(**SMALL)
    assert validate(runtime, head_size=small.cache_entry_dim, dtype=torch.float32, kv_cache_dtype="float32",
                    block_size=16, config=small) == []


@pytest.mark.parametrize(
    "options, words",
    [
        (dict(head_size=512), ["head_size 512", "576"]),
        (dict(dtype=torch.float64), ["dtype torch.float64 not supported", "bfloat16"]),
        (dict(kv_cache_dtype="int8"), ["kv_cache_dtype 'int8' not supported", "fp8_e5m2"]),
        (dict(block_size=0), ["block_size must be positive"]),
        (dict(config=mla.LayerConfig(num_heads=200)), ["num heads 200 not supported"]),
        (dict(use_mla=False), ["non-MLA"]),
        (dict(use_sparse=True), ["sparse"]),
        (dict(has_sink=True), ["sinks"]),
        (dict(attn_type="encoder_only"), ["attention type encoder_only"]),
    ],
    ids=["head size", "dtype", "cache dtype", "block size", "heads", "non-MLA", "sparse", "sinks", "attention type"],
)
def test_each_refusal_gives_its_reason(runtime, options, words):
    reasons = validate(runtime, **options)
    assert len(reasons) == 1, reasons
    for word in words:
        assert word in reasons[0]


def test_reasons_accumulate(runtime):
    reasons = validate(runtime, head_size=100, dtype=torch.float64, kv_cache_dtype="int8", use_sparse=True,
                       config=mla.LayerConfig(num_heads=200))
    assert len(reasons) == 5, reasons
    assert "num heads 200" in reasons[-1]  # the library still judged the rest


@pytest.mark.parametrize("dtype, kv_cache_dtype, want", [(torch.float32, "auto", "f32, kv_cache_dtype=f32"),
                                                          (torch.float16, "float32", "f16, kv_cache_dtype=f32")])
def test_the_library_judges_the_dtypes_given(runtime, dtype, kv_cache_dtype, want):
    # A refused configuration's message shows what the library was asked.
    [reason] = validate(runtime, dtype=dtype, kv_cache_dtype=kv_cache_dtype, config=mla.LayerConfig(num_heads=200))
    assert f"dtype={want}" in reason


def test_an_unknown_backend_in_the_environment(runtime, monkeypatch):
    monkeypatch.setenv("MLA_ATTENTION_BACKEND", "NO_SUCH_BACKEND")
    [reason] = validate(runtime)
    assert "unknown attention backend 'NO_SUCH_BACKEND'" in reason and "CPU_JIT" in reason


@support.needs_cpu
def test_a_named_backend_for_another_device(runtime):
    [reason] = validate(runtime, config=mla.LayerConfig(backend="TC_SM90A"))
    assert "TC_SM90A" in reason and "device CPU not supported" in reason


@pytest.mark.parametrize("level", list(mv.AttentionCGSupport), ids=lambda level: level.name)
def test_cuda_graph_levels_follow_the_library(runtime, level):
    selection = runtime.select_backend(mla.LayerConfig(**SMALL))
    assert mv.AttentionCGSupport.of(dataclasses.replace(selection, cuda_graphs=level.name.lower())) is level


def test_builder_cuda_graph_support(runtime):
    support_level = mv.MlaJitMetadataBuilder.get_cudagraph_support(mla.LayerConfig(**SMALL), runtime)
    if runtime.is_cuda:
        assert support_level >= mv.AttentionCGSupport.UNIFORM_BATCH
    else:
        assert support_level is mv.AttentionCGSupport.NEVER


# The metadata builder.


def random_lengths(rng, count, threshold):
    """Query lengths around the threshold and sequence lengths with some
    cached context, in random order."""
    query_lens = [int(n) for n in rng.integers(1, threshold + 4, size=count)]
    seq_lens = [q + int(rng.integers(0, 40)) for q in query_lens]
    return query_lens, seq_lens


def common_of(query_lens, seq_lens, block_size=16, padding=0, width=None):
    pages = [math.ceil(s / block_size) for s in seq_lens]
    width = width or max(pages, default=0) + 1
    table = np.zeros((len(seq_lens), width), dtype=np.int32)
    start = 0
    for b, count in enumerate(pages):
        table[b, :count] = np.arange(start, start + count)
        start += count
    return mv.CommonAttentionMetadata.from_lengths(
        query_lens, seq_lens, table, block_size, num_slots=sum(query_lens) + padding
    )


@pytest.mark.parametrize("threshold", [1, 2, 4])
def test_decodes_first_order_and_split(rng, threshold):
    for _ in range(20):
        query_lens, seq_lens = random_lengths(rng, int(rng.integers(0, 12)), threshold)
        order = mv.decodes_first_order(query_lens, threshold)
        # A stable sort on "is a prefill" is the same order, written otherwise.
        assert order == sorted(range(len(query_lens)), key=lambda b: query_lens[b] > threshold)

        common = common_of([query_lens[b] for b in order], [seq_lens[b] for b in order])
        decodes = [n for n in query_lens if n <= threshold]
        prefills = [n for n in query_lens if n > threshold]
        want = (len(decodes), len(prefills), sum(decodes), sum(prefills))
        assert mv.split_decodes_and_prefills(common, threshold) == want


def test_build_splits_and_converts(runtime, rng):
    config = mla.LayerConfig(**SMALL)
    builder = mv.MlaJitMetadataBuilder(config, runtime)
    assert builder.reorder_batch_threshold == config.decode_threshold == 2
    common = common_of([2, 2, 2, 7, 3], [9, 30, 4, 7, 50], padding=3)
    metadata = builder.build(0, common)
    assert (metadata.num_decodes, metadata.num_decode_tokens, metadata.decode_query_len) == (3, 6, 2)
    assert (metadata.num_prefills, metadata.num_prefill_tokens) == (2, 10)
    assert metadata.num_reqs == 5 and metadata.num_actual_tokens == 16
    assert metadata.cuda_graph_step is None and metadata.staged_step is None
    batch = metadata.batch
    np.testing.assert_array_equal(batch.query_start_loc, [0, 2, 4, 6, 13, 16])
    # The padded slots past num_actual_tokens are left behind.
    assert len(common.slot_mapping) == 19 and batch.num_slots == 16
    np.testing.assert_array_equal(batch.slot_mapping, common.slot_mapping[:16].numpy())


def test_build_refuses_a_batch_not_ordered_decodes_first(runtime):
    builder = mv.MlaJitMetadataBuilder(mla.LayerConfig(**SMALL), runtime)
    with pytest.raises(mla.InvalidMetadataError, match=r"request 2 \(1 new tokens\) is a decode after prefill request 1"):
        builder.build(0, common_of([2, 5, 1], [10, 10, 10]))


def test_build_refuses_what_mla_does_not_do(runtime):
    builder = mv.MlaJitMetadataBuilder(mla.LayerConfig(**SMALL), runtime)
    common = common_of([1, 4], [10, 10])
    with pytest.raises(mla.InvalidMetadataError, match="causal"):
        builder.build(0, dataclasses.replace(common, causal=False))
    with pytest.raises(mla.InvalidMetadataError, match="decode context parallelism"):
        builder.build(0, dataclasses.replace(common, dcp_local_seq_lens=common.seq_lens))
    with pytest.raises(mla.InvalidMetadataError, match="num_actual_tokens"):
        builder.build(0, dataclasses.replace(common, num_actual_tokens=3))
    with pytest.raises(mla.InvalidMetadataError, match=r"same number of new tokens.*\[1, 2\]"):
        builder.build(0, common_of([2, 1, 2, 4], [10, 10, 10, 10]))


def test_build_for_cudagraph_capture(runtime):
    builder = mv.MlaJitMetadataBuilder(mla.LayerConfig(**SMALL), runtime)
    metadata = builder.build_for_cudagraph_capture(common_of([2] * 4, [5, 9, 2, 40], width=6))
    step = metadata.cuda_graph_step
    assert (step.num_decodes, step.query_len, step.rows) == (4, 2, 8)
    assert step.max_blocks_per_request == metadata.batch.max_blocks == 6
    # A second build of the shape (warm-up, then capture) finds the same step.
    again = builder.build_for_cudagraph_capture(common_of([2] * 4, [3, 3, 3, 3], width=6))
    assert again.cuda_graph_step is step and list(builder.captured) == [step]
    # Nothing was captured on it yet, so a replay-sized batch stages nothing.
    assert builder.build(0, common_of([2] * 3, [5, 9, 2], width=6)).staged_step is None
    with pytest.raises(ValueError, match="block table is 3 pages wide"):
        builder.build_for_cudagraph_capture(common_of([2] * 4, [3, 3, 3, 3], width=3))
    with pytest.raises(mla.InvalidMetadataError, match="decode-only"):
        builder.build_for_cudagraph_capture(common_of([2, 5], [5, 9], width=6))


def test_replayed_shape_is_the_smallest_that_holds_the_batch():
    steps = mv.CapturedDecodeSteps()
    small, large, other = steps.step(2, 1, 8), steps.step(8, 1, 8), steps.step(4, 2, 8)
    assert steps.replayed_for(1, 1) is small and steps.replayed_for(2, 1) is small
    assert steps.replayed_for(3, 1) is large and steps.replayed_for(4, 2) is other
    assert steps.replayed_for(9, 1) is None and steps.replayed_for(1, 3) is None
    with pytest.raises(ValueError, match="block table"):
        steps.step(2, 1, 16)


def test_unpadded_trims_requests_and_tokens():
    common = common_of([1, 1, 3], [5, 6, 7], padding=4)
    trimmed = common.unpadded(num_actual_tokens=2, num_actual_reqs=2)
    assert trimmed.num_reqs == 2 and trimmed.num_actual_tokens == 2
    assert trimmed.query_start_loc_cpu.tolist() == [0, 1, 2]
    assert trimmed.seq_lens_cpu.tolist() == [5, 6] and trimmed.num_computed_tokens_cpu.tolist() == [4, 5]
    assert tuple(trimmed.block_table_tensor.shape) == (2, common.block_table_tensor.shape[1])
    assert trimmed.slot_mapping.tolist() == common.slot_mapping[:2].tolist()


# The impl.


def small_impl(runtime, rng, dtype=DType.F32, **config):
    return vllm_support.make_impl(runtime, rng, dtype, mla.LayerConfig(**{**SMALL, **config}))


@pytest.mark.parametrize(
    "override, error, words",
    [
        (dict(alibi_slopes=[0.5]), NotImplementedError, "ALiBi"),
        (dict(sliding_window=128), NotImplementedError, "sliding-window"),
        (dict(logits_soft_cap=30.0), NotImplementedError, "soft capping"),
        (dict(attn_type="encoder_decoder"), NotImplementedError, "attention type 'encoder_decoder'"),
        (dict(kv_sharing_target_layer_name="layers.0"), NotImplementedError, "KV cache sharing"),
        (dict(num_kv_heads=4), ValueError, "num_kv_heads=4"),
        (dict(head_size=512), ValueError, "head_size 512"),
        (dict(qk_head_dim=64), ValueError, "qk_head_dim 64"),
        (dict(kv_cache_dtype="int8"), ValueError, "kv_cache_dtype 'int8' not supported"),
    ],
    ids=lambda value: next(iter(value)) if isinstance(value, dict) else None,
)
def test_impl_refuses_unsupported_features(runtime, override, error, words):
    config = mla.LayerConfig(**SMALL)
    arguments = vllm_support.impl_arguments(config, None, 0.1, **override)
    with pytest.raises(error, match=words):
        mv.MlaJitImpl(**arguments, runtime=runtime, config=config)


def test_weights_are_derived_from_the_linear_weight(runtime, rng):
    impl, kv_b_proj = small_impl(runtime, rng)
    p = SMALL["qk_nope_head_dim"]
    np.testing.assert_array_equal(impl.W_UK_T.cpu().double().numpy(), kv_b_proj[:, :, :p].transpose(1, 2, 0))
    np.testing.assert_array_equal(impl.W_UV.cpu().double().numpy(), kv_b_proj[:, :, p:].transpose(1, 0, 2))
    assert impl.W_UK_T.is_contiguous() and impl.W_UV.is_contiguous()
    np.testing.assert_array_equal(impl.layer.weights[0].cpu().double().numpy(), kv_b_proj)
    assert impl.layer.config.softmax_scale == pytest.approx(impl.scale)


def test_bad_weights_are_refused(runtime, rng):
    config = mla.LayerConfig(**SMALL)
    wrong = torch.zeros(config.kv_lora_rank, config.num_heads * 64)  # [in, out]: transposed
    impl = mv.MlaJitImpl(**vllm_support.impl_arguments(config, wrong, 0.1), runtime=runtime, config=config)
    with pytest.raises(ValueError, match=r"expected \[num_heads \* \(qk_nope_head_dim \+ v_head_dim\), kv_lora_rank\]"):
        impl.process_weights_after_loading(torch.float32)
    impl.kv_b_proj = torch.zeros(config.num_heads * 64, config.kv_lora_rank, dtype=torch.int8)
    with pytest.raises(ValueError, match="quantized"):
        impl.process_weights_after_loading(torch.float32)


def run_step(impl, builder, kv_b_proj_f64, batch, rng):
    """One engine step of `batch` through builder and impl on fresh random
    tensors; checks output (in place, padding rows untouched) and cache."""
    runtime, config = impl.runtime, impl.layer.config
    common = vllm_support.common_metadata(batch, device_of(runtime))
    step = vllm_support.engine_step(rng, runtime, config, batch.rows, batch.num_cache_blocks)
    want_cache, want_out = vllm_support.expected(step, kv_b_proj_f64, common, impl.scale)
    output = step["output"]
    address = output.data_ptr()

    metadata = builder.build(0, common)
    returned = impl.forward(None, step["q"], step["kv_c"], step["k_pe"], step["kv_cache"], metadata, output)

    assert returned is output and output.data_ptr() == address
    got = support.TorchTensors(runtime).to_f64(output).reshape(batch.rows, config.num_heads, config.v_head_dim)
    error = reference.relative_l2(got[: batch.num_tokens], want_out)
    tolerance = support.output_tolerance(config.activation_dtype)
    assert error <= tolerance, f"relative L2 error {error:.3g} > {tolerance:.3g}"
    assert np.all(got[batch.num_tokens :] == support.SENTINEL), "rows past num_actual_tokens were written"
    np.testing.assert_array_equal(support.TorchTensors(runtime).to_f64(step["kv_cache"]), want_cache)
    return metadata


@pytest.mark.parametrize("dtype", [DType.F32, DType.BF16], ids=str)
def test_mixed_batch_matches_reference(runtime, rng, dtype):
    """Speculative decodes (2 new tokens; one without context), prefills
    with and without cached context over several chunks, three padded
    tokens (slot -1) past num_actual_tokens, pages in random order."""
    impl, kv_b_proj = small_impl(runtime, rng, dtype)
    builder = mv.MlaJitMetadataBuilder(mla.LayerConfig(**SMALL), runtime)
    metadata = run_step(impl, builder, kv_b_proj, mixed_batch(rng, SMALL["block_size"]), rng)
    assert (metadata.num_decodes, metadata.num_prefills) == (3, 3) and metadata.decode_query_len == 2
    [plan] = metadata.plans
    assert plan.info.num_context_chunks >= 2, str(plan)


def test_deepseek_v3_dims(runtime, rng):
    """DeepSeek-V3's MLA dims (Lkv 512, R 64, P 128, V 128) in bf16 on
    64-token pages, with few heads to stay quick on the CPU."""
    config = mla.LayerConfig(num_heads=16 if runtime.is_cuda else 2, workspace_tokens=128)
    impl, kv_b_proj = vllm_support.make_impl(runtime, rng, DType.BF16, config)
    builder = mv.MlaJitMetadataBuilder(config, runtime)
    batch = support.make_batch(
        rng,
        decode_seq_lens=[int(n) for n in rng.integers(1, 300, size=3)],
        decode_query_len=1,
        prefills=[(q, q + int(rng.integers(100, 250))) for q in rng.integers(5, 40, size=2)] + [(17, 17)],
        block_size=64,
        padding=2,
    )
    run_step(impl, builder, kv_b_proj, batch, rng)


def test_layers_of_one_step_share_its_metadata(runtime, rng):
    """Two layers (different weights, one configuration) run on one
    metadata object: the step is planned once, for both."""
    builder = mv.MlaJitMetadataBuilder(mla.LayerConfig(**SMALL), runtime)
    batch = mixed_batch(rng, SMALL["block_size"])
    first, first_weights = small_impl(runtime, rng)
    second, second_weights = small_impl(runtime, rng)
    metadata = run_step(first, builder, first_weights, batch, rng)
    common = vllm_support.common_metadata(batch, device_of(runtime))
    step = vllm_support.engine_step(rng, runtime, second.layer.config, batch.rows, batch.num_cache_blocks)
    _, want = vllm_support.expected(step, second_weights, common, second.scale)
    second.forward(None, step["q"], step["kv_c"], step["k_pe"], step["kv_cache"], metadata, step["output"])
    got = support.TorchTensors(runtime).to_f64(step["output"])[: batch.num_tokens].reshape(want.shape)
    assert reference.relative_l2(got, want) <= support.output_tolerance(DType.F32)
    [plan] = metadata.plans
    assert metadata.plan_for(first.layer, batch.num_cache_blocks) is plan
    assert metadata.plan_for(second.layer, batch.num_cache_blocks) is plan


def test_forward_edges(runtime, rng):
    impl, _ = small_impl(runtime, rng)
    rows, config = 5, impl.layer.config
    step = vllm_support.engine_step(rng, runtime, config, rows, 4)
    output = step["output"]
    before = output.clone()
    # The engine's profiling run: no metadata, nothing to do.
    assert impl.forward(None, step["q"], step["kv_c"], step["k_pe"], step["kv_cache"], None, output) is output
    assert torch.equal(output, before)
    with pytest.raises(NotImplementedError, match="output_scale"):
        impl.forward(None, step["q"], step["kv_c"], step["k_pe"], step["kv_cache"], None, output,
                     output_scale=torch.ones(1))
    # Without an output buffer one is made.
    common = common_of([1, 4], [3, 9])
    metadata = mv.MlaJitMetadataBuilder(config, runtime).build(0, common)
    step = vllm_support.engine_step(rng, runtime, config, rows, common.block_table_tensor.numel())
    made = impl.forward(None, step["q"], step["kv_c"], step["k_pe"], step["kv_cache"], metadata)
    assert tuple(made.shape) == (rows, config.num_heads * config.v_head_dim)
    unloaded = mv.MlaJitImpl(**vllm_support.impl_arguments(config, None, 0.1), runtime=runtime, config=config)
    with pytest.raises(RuntimeError, match="process_weights_after_loading"):
        unloaded.forward(None, step["q"], step["kv_c"], step["k_pe"], step["kv_cache"], metadata, output)


# FP8 caches.


class AttentionModule:
    """What an engine passes as `layer`: vLLM's attention module keeps the
    FP8 cache's scale as a 0-dim float32 tensor on the device."""

    def __init__(self, scale, device):
        self._k_scale = torch.tensor(scale, dtype=torch.float32, device=device)


@pytest.mark.parametrize("kv_cache_dtype, cache_dtype", [("fp8", DType.FP8_E4M3), ("fp8_e5m2", DType.FP8_E5M2)])
def test_fp8_cache_through_the_adapter(runtime, rng, kv_cache_dtype, cache_dtype):
    """vLLM's FP8 KV cache: a uint8 cache of value / k_scale codes, the
    scale read from the attention module's _k_scale. A mixed batch: the new
    tokens' codes equal the independent encoder's and the output the
    float64 reference over the dequantized cache (support.fp8_step_reference).
    On a GPU: DeepSeek's dims in bf16 at 16 heads, whose decode on an sm_90
    device is the wgmma kernel's, dequantizing its tiles on chip."""
    scale = 0.02
    if runtime.is_cuda:
        dtype, config = DType.BF16, mla.LayerConfig(num_heads=16, workspace_tokens=128)
    else:
        dtype, config = DType.F32, mla.LayerConfig(**SMALL)
    impl, kv_b_proj = vllm_support.make_impl(runtime, rng, dtype, config, kv_cache_dtype=kv_cache_dtype)
    assert impl.layer.config.cache_dtype is cache_dtype
    batch = support.make_batch(rng, [int(n) for n in rng.integers(1, 3 * config.block_size, size=3)], 1,
                               [(9, 9 + 2 * config.block_size + 5), (4, 4)], config.block_size, padding=2)
    device = device_of(runtime)
    tensors = support.TorchTensors(runtime)
    n, lkv, r, entry = config.num_heads, config.kv_lora_rank, config.qk_rope_head_dim, config.cache_entry_dim
    rows, tokens = batch.rows, batch.num_tokens
    q = tensors.tensor(rng.uniform(-1, 1, (rows, n, config.qk_head_dim)), dtype)
    kv_c = tensors.tensor(rng.uniform(-1, 1, (rows, lkv)), dtype)
    k_pe = tensors.tensor(rng.uniform(-1, 1, (rows, 1, r)), dtype)
    codes = support.fp8_encode(rng.uniform(-1, 1, (batch.num_cache_blocks * config.block_size, entry)) / scale,
                               cache_dtype).reshape(batch.num_cache_blocks, config.block_size, entry)
    kv_cache = torch.from_numpy(codes.copy()).to(device)
    output = tensors.full((rows, n * config.v_head_dim), support.SENTINEL, dtype)
    metadata = mv.MlaJitMetadataBuilder(config, runtime).build(0, vllm_support.common_metadata(batch, device))

    impl.forward(AttentionModule(scale, device), q, kv_c, k_pe, kv_cache, metadata, output)

    new_rows = np.concatenate([tensors.to_f64(kv_c), tensors.to_f64(k_pe).reshape(rows, r)], axis=1)[:tokens]
    cache_after = kv_cache.cpu().numpy()
    slots = np.asarray(batch.metadata.slot_mapping[:tokens])
    want_codes = support.fp8_encode((new_rows.astype(np.float32) / np.float32(scale)).astype(np.float64),
                                    cache_dtype).reshape(tokens, entry)
    assert np.array_equal(cache_after.reshape(-1, entry)[slots], want_codes)
    want = support.fp8_step_reference(batch, tensors.to_f64(q)[:tokens], new_rows, cache_after, cache_dtype, scale,
                                      kv_b_proj, r, impl.scale)
    got = tensors.to_f64(output).reshape(rows, n, config.v_head_dim)
    error = reference.relative_l2(got[:tokens], want)
    assert error <= support.output_tolerance(dtype), f"relative L2 error {error:.3g}"
    assert np.all(got[tokens:] == support.SENTINEL), "rows past num_actual_tokens were written"
    with pytest.raises(ValueError, match="_k_scale"):
        impl.forward(None, q, kv_c, k_pe, kv_cache, metadata, output)


# CUDA graphs (GPU).


@support.needs_gpu
@pytest.mark.parametrize("query_len", [1, 2], ids=["decode", "speculative decode"])
def test_decode_steps_in_an_engine_cuda_graph(runtime, rng, query_len):
    """An engine's decode step of two layers captured once with
    torch.cuda.graph and replayed for batches of new lengths and sizes:
    build (staging every layer's plan), new inputs written into the
    engine's buffers, replay, each layer's output and cache checked."""
    config = mla.LayerConfig(num_heads=16, decode_threshold=query_len, wants_cuda_graphs=True)
    builder = mv.MlaJitMetadataBuilder(config, runtime)
    max_decodes, width, num_blocks = 8, 8, 80
    rows = max_decodes * query_len
    layers = []
    for _ in range(2):
        impl, kv_b_proj = vllm_support.make_impl(runtime, rng, DType.BF16, config)
        layers.append((impl, kv_b_proj, vllm_support.engine_step(rng, runtime, impl.layer.config, rows, num_blocks)))

    def batch_of(num_decodes, longest):
        pages = rng.permutation(num_blocks)[: num_decodes * width].reshape(num_decodes, width)
        seq_lens = [int(n) for n in rng.integers(query_len, longest + 1, size=num_decodes)]
        return mv.CommonAttentionMetadata.from_lengths([query_len] * num_decodes, seq_lens, pages, 64,
                                                       device=device_of(runtime))

    def forward_all(metadata):
        for impl, _, step in layers:
            impl.forward(None, step["q"], step["kv_c"], step["k_pe"], step["kv_cache"], metadata, step["output"])

    capture = builder.build_for_cudagraph_capture(batch_of(max_decodes, query_len))
    forward_all(capture)  # warm-up: makes each layer's decode graph
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        forward_all(capture)

    tensors = support.TorchTensors(runtime)
    for num_decodes in (8, 3, 1, 6):
        common = batch_of(num_decodes, width * 64)
        metadata = builder.build(0, common)
        assert metadata.staged_step is capture.cuda_graph_step
        wants = []
        for impl, kv_b_proj, step in layers:
            for name in ("q", "kv_c", "k_pe"):
                step[name].copy_(tensors.tensor(rng.uniform(-1, 1, tuple(step[name].shape)), DType.BF16))
                step["f64"][name] = tensors.to_f64(step[name]).reshape(step["f64"][name].shape)
            step["f64"]["kv_cache"] = tensors.to_f64(step["kv_cache"])
            wants.append(vllm_support.expected(step, kv_b_proj, common, impl.scale))
        graph.replay()
        real = num_decodes * query_len
        for (impl, _, step), (want_cache, want_out) in zip(layers, wants):
            got = tensors.to_f64(step["output"]).reshape(rows, config.num_heads, config.v_head_dim)
            assert reference.relative_l2(got[:real], want_out) <= support.output_tolerance(DType.BF16)
            np.testing.assert_array_equal(tensors.to_f64(step["kv_cache"]), want_cache)
