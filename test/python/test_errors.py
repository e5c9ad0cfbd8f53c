"""Every error the package raises, reached from Python: the class of each C
status with the library's message, and the checks made before calling
(tensors of the wrong device, layout or type)."""

import dataclasses
import re

import numpy as np
import pytest

import mla
import support
from mla import DType
from test_layer import SMALL

F32 = dict(SMALL, activation_dtype=DType.F32, cache_dtype=DType.F32)


def field(name):
    """A pattern for a metadata field as the library names it (snake or
    camel case: seq_lens / seqLens)."""
    parts = name.split("_")
    return re.compile("|".join([name, parts[0] + "".join(p.title() for p in parts[1:])]))


@pytest.fixture(scope="module")
def tensors(runtime):
    return support.TorchTensors(runtime) if runtime.is_cuda else support.NumpyTensors(runtime)


@pytest.fixture(scope="module")
def layer(runtime, tensors):
    rng = np.random.default_rng(0)
    config = mla.LayerConfig(**F32)
    weights = support.random_weights(rng, tensors, config)
    return mla.Layer(runtime, config, weights["kv_b_proj"], weights["w_uk_t"], weights["w_uv"])


@pytest.fixture(scope="module")
def step(layer, tensors):
    """A consistent batch (a decode, a prefill of 4 over 6 cached tokens)
    and its tensors."""
    rng = np.random.default_rng(1)
    metadata = mla.BatchMetadata([0, 1, 5], [3, 10], [[0, 1], [2, 3]], [2, 38, 39, 40, 41])
    tensors_ = support.random_step(rng, tensors, layer.config, rows=5, num_cache_blocks=8)
    return metadata, tensors_


def args_of(step):
    _, t = step
    return [t["q"], t["kv_c"], t["k_pe"], t["kv_cache"], t["output"]]


def test_the_classes_are_their_statuses():
    library = mla._library.load()
    for cls, builtin in (
        (mla.InvalidArgumentError, ValueError),
        (mla.NoDeviceError, None),
        (mla.CompileError, None),
        (mla.BackendRejectedError, None),
        (mla.InvalidMetadataError, ValueError),
        (mla.DeviceRuntimeError, RuntimeError),
        (mla.OutOfMemoryError, MemoryError),
        (mla.InternalError, None),
    ):
        assert issubclass(cls, mla.MlaError)
        if builtin is not None:
            assert issubclass(cls, builtin)
        assert library.mla_status_string(cls.status).decode() == cls.status_name
        error = mla.errors.error_for_status(cls.status, "f: why")
        assert type(error) is cls and error.message == "f: why" and str(error) == f"f: why [{cls.status_name}]"
    assert not issubclass(mla.DeviceRuntimeError, mla.InvalidArgumentError)
    unknown = mla.errors.error_for_status(99, "newer")
    assert type(unknown) is mla.MlaError and unknown.status == 99
    assert issubclass(mla.LibraryLoadError, ImportError)


# Configs and backends.


@pytest.mark.parametrize(
    "change, name",
    [
        (dict(num_heads=0), "num_heads"),
        (dict(kv_lora_rank=-4), "kv_lora_rank"),
        (dict(block_size=0), "block_size"),
        (dict(decode_threshold=0), "decode_threshold"),
        (dict(softmax_scale=-1.0), "softmax_scale"),
        (dict(softmax_scale=float("nan")), "softmax_scale"),
        (dict(activation_dtype="i32"), "activation_dtype"),
        (dict(workspace_tokens=-1), "workspace_tokens"),
        (dict(max_model_len=2**40), "max_model_len"),
    ],
)
def test_a_bad_config_names_its_field(runtime, change, name):
    config = mla.LayerConfig(**change)
    with pytest.raises(mla.InvalidArgumentError, match=f"config->{name}"):
        runtime.select_backend(config)


@pytest.mark.parametrize(
    "change, name",
    [
        (dict(num_heads=2.5), "config.num_heads"),
        (dict(block_size="64"), "config.block_size"),
        (dict(cache_dtype="f64"), "config.cache_dtype"),
        (dict(backend=3), "config.backend"),
        (dict(max_num_seqs=2**64), "config.max_num_seqs"),
        (dict(softmax_scale="big"), "config.softmax_scale"),
    ],
)
def test_a_config_python_cannot_pass_names_its_field(change, name):
    with pytest.raises(mla.InvalidArgumentError, match=re.escape(name)):
        mla.LayerConfig(**change)


def test_a_bad_config_fails_layer_creation_too(runtime, tensors, layer):
    weights = layer.weights
    with pytest.raises(mla.InvalidArgumentError, match="config->qk_rope_head_dim"):
        mla.Layer(runtime, mla.LayerConfig(**dict(F32, qk_rope_head_dim=0)), *weights)


def test_an_unknown_backend_lists_the_valid_ones(runtime):
    with pytest.raises(mla.BackendRejectedError, match="unknown attention backend 'NOPE'.*CPU_JIT"):
        runtime.select_backend(mla.LayerConfig(backend="NOPE"))


def test_a_backend_of_another_device_gives_its_reasons(runtime):
    other = "CPU_JIT" if runtime.is_cuda else "GENERIC_GPU"
    with pytest.raises(mla.BackendRejectedError, match=f"{other} \\(requested\\) cannot run") as failure:
        runtime.select_backend(mla.LayerConfig(backend=other))
    assert failure.value.status == mla.BackendRejectedError.status


def test_the_environment_backend_is_refused_the_same_way(runtime, monkeypatch):
    monkeypatch.setenv("MLA_ATTENTION_BACKEND", "NOPE")
    with pytest.raises(mla.BackendRejectedError, match="NOPE"):
        runtime.select_backend(mla.LayerConfig())


# Devices.


def test_a_gpu_that_is_not_there_is_no_device(cache_dir):
    with pytest.raises(mla.NoDeviceError, match="mla_runtime_create"):
        mla.Runtime(device="gpu", gpu_ordinal=4096, cache_dir=cache_dir)


@support.needs_cpu
def test_asking_for_a_gpu_without_one_is_no_device(cache_dir):
    with pytest.raises(mla.NoDeviceError, match="no usable GPU"):
        mla.Runtime(device="gpu", cache_dir=cache_dir)


@pytest.mark.parametrize("kwargs", [dict(device="tpu"), dict(gpu_ordinal=-1), dict(gpu_ordinal="0")])
def test_runtime_options_are_checked(kwargs):
    with pytest.raises(mla.InvalidArgumentError, match="device|gpu_ordinal"):
        mla.Runtime(**kwargs)


def test_log_must_be_a_bool_or_a_logger(cache_dir):
    with pytest.raises(TypeError, match="log"):
        mla.Runtime(device="cpu", cache_dir=cache_dir, log="mla")


# Metadata, as the library checks it.


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(seq_lens=[3, 2]), field("seq_lens")),
        (dict(slot_mapping=[2, 38, 39, 40, 42]), field("slot_mapping")),
        (dict(query_start_loc=[0, 5, 1]), field("query_start_loc")),
        (dict(max_query_len=2), field("max_query_len")),
        (dict(block_table=[[0, 1], [9, 3]], slot_mapping=[2, 150, 151, 152, 153]), "page|block"),
    ],
)
def test_inconsistent_metadata_names_the_field(layer, change, message):
    fields = dict(query_start_loc=[0, 1, 5], seq_lens=[3, 10], block_table=[[0, 1], [2, 3]])
    fields["slot_mapping"] = [2, 38, 39, 40, 41]
    fields.update(change)
    metadata = mla.BatchMetadata(**fields)
    with pytest.raises(mla.InvalidMetadataError, match=message):
        layer.plan(metadata, 8)


def test_a_batch_not_ordered_decodes_first(layer):
    metadata = mla.BatchMetadata([0, 4, 5], [10, 3], [[2, 3], [0, 1]], [38, 39, 40, 41, 2])
    with pytest.raises(mla.InvalidMetadataError, match="decodes-first"):
        layer.plan(metadata, 8)


def test_a_cache_size_out_of_range(layer, step):
    metadata, _ = step
    with pytest.raises(mla.InvalidMetadataError, match="num_cache_blocks"):
        layer.plan(metadata, -1)


# Tensors.


def test_a_plan_serves_layers_configured_alike_only(runtime, layer, step, tensors):
    """A model's layers share one configuration and plan a step once: a plan
    serves every layer configured as the one that made it, and no other."""
    metadata, _ = step
    config = layer.config
    weights = support.random_weights(np.random.default_rng(2), tensors, config)
    same = mla.Layer(runtime, config, weights["kv_b_proj"], weights["w_uk_t"], weights["w_uv"])
    layer.forward(same.plan(metadata, 8), *args_of(step))
    other_config = dataclasses.replace(config, workspace_tokens=config.workspace_tokens + 64)
    other = mla.Layer(runtime, other_config, weights["kv_b_proj"], weights["w_uk_t"], weights["w_uv"])
    with pytest.raises(mla.InvalidArgumentError, match="another configuration"):
        layer.forward(other.plan(metadata, 8), *args_of(step))


@pytest.mark.parametrize(
    "role, change, message",
    [
        ("q", lambda t, fw: fw.tensor(fw.to_f64(t), DType.F16), "'q'.*wrong element type"),
        ("q", lambda t, fw: fw.tensor(fw.to_f64(t)[:, :3], DType.F32), "'q'.*dimension 1 should be 4"),
        ("kv_c", lambda t, fw: fw.tensor(fw.to_f64(t)[:4], DType.F32), "'kv_c'.*fewer rows"),
        ("kv_cache", lambda t, fw: fw.tensor(fw.to_f64(t)[:7], DType.F32), "'kv_cache'.*dimension 0"),
        ("output", lambda t, fw: fw.tensor(fw.to_f64(t)[..., :8], DType.F32), "'output'"),
    ],
)
def test_a_tensor_of_the_wrong_type_or_shape_is_named(layer, step, tensors, role, change, message):
    metadata, t = step
    args = dict(zip(["q", "kv_c", "k_pe", "kv_cache", "output"], args_of(step)))
    args[role] = change(args[role], tensors)
    with pytest.raises(mla.InvalidArgumentError, match=message):
        layer.forward(layer.plan(metadata, 8), **args)


def test_a_decode_lse_of_the_wrong_shape_is_named(layer, step, tensors):
    metadata, _ = step
    lse = tensors.full((1, 4, 3), 0.0, DType.F32)
    with pytest.raises(mla.InvalidArgumentError, match="'decode_lse'"):
        layer.forward(layer.plan(metadata, 8), *args_of(step), decode_lse=lse)


def test_a_weight_of_the_wrong_shape_is_named(runtime, layer, tensors):
    kv_b_proj, w_uk_t, w_uv = layer.weights
    narrow = tensors.tensor(tensors.to_f64(kv_b_proj)[:, :2], DType.F32)
    with pytest.raises(mla.InvalidArgumentError, match="'kv_b_proj'"):
        mla.Layer(runtime, layer.config, narrow, w_uk_t, w_uv)
    with pytest.raises(mla.InvalidArgumentError, match="'w_uv'"):
        mla.Layer(runtime, layer.config, kv_b_proj, w_uk_t, w_uk_t)


def test_a_non_contiguous_tensor_is_named_not_copied(layer, step):
    torch = support.torch_or_skip()
    metadata, t = step
    args = args_of(step)
    device = "cuda" if layer.runtime.is_cuda else "cpu"
    q = torch.zeros((5, 48, 4), device=device).transpose(1, 2)
    with pytest.raises(ValueError, match="^q must be contiguous"):
        layer.forward(layer.plan(metadata, 8), q, *args[1:])


@support.needs_cpu
def test_a_non_contiguous_numpy_array_is_named(layer, step):
    metadata, _ = step
    args = args_of(step)
    kv_c = np.zeros((64, 5), np.float32).T
    with pytest.raises(mla.InvalidArgumentError, match="^kv_c must be contiguous"):
        layer.forward(layer.plan(metadata, 8), args[0], kv_c, *args[2:])


@support.needs_cpu
def test_a_dtype_libmla_lacks_is_named(layer, step):
    metadata, _ = step
    args = args_of(step)
    k_pe = np.zeros((5, 16), np.float64)
    with pytest.raises(ValueError, match="k_pe's dtype"):
        layer.forward(layer.plan(metadata, 8), *args[:2], k_pe, *args[3:])


@support.needs_cpu
def test_a_read_only_output_is_named(layer, step):
    metadata, _ = step
    args = args_of(step)
    output = np.zeros((5, 4, 32), np.float32)
    output.flags.writeable = False
    with pytest.raises(mla.InvalidArgumentError, match="output is read-only"):
        layer.forward(layer.plan(metadata, 8), *args[:4], output)


def test_a_tensor_on_the_wrong_device_is_named(layer, step):
    torch = support.torch_or_skip()
    metadata, _ = step
    args = args_of(step)
    plan = layer.plan(metadata, 8)
    if layer.runtime.is_cuda:
        wrong = torch.zeros((5, 16))
        message = "^k_pe is on the CPU, but the runtime runs on cuda"
    elif torch.cuda.is_available():
        wrong = torch.zeros((5, 16), device="cuda")
        message = "^k_pe is on cuda:0, but the runtime runs on the CPU"
    else:
        wrong = torch.zeros((5, 16), device="meta")
        message = "^k_pe is on meta"
    with pytest.raises(mla.InvalidArgumentError, match=message):
        layer.forward(plan, *args[:2], wrong, *args[3:])


@support.needs_gpu
def test_a_numpy_array_on_a_gpu_runtime_is_named(layer, step):
    metadata, _ = step
    args = args_of(step)
    with pytest.raises(mla.InvalidArgumentError, match="^output is a numpy array in host memory"):
        layer.forward(layer.plan(metadata, 8), *args[:4], np.zeros((5, 4, 32), np.float32))


def test_something_that_is_no_tensor(layer, step):
    metadata, _ = step
    args = args_of(step)
    with pytest.raises(TypeError, match="q must be a torch tensor, a numpy array or an mla.DeviceBuffer, got list"):
        layer.forward(layer.plan(metadata, 8), [[0.0]], *args[1:])


def test_a_closed_object_says_so(runtime, tensors):
    config = mla.LayerConfig(**F32)
    weights = support.random_weights(np.random.default_rng(3), tensors, config)
    layer = mla.Layer(runtime, config, weights["kv_b_proj"], weights["w_uk_t"], weights["w_uv"])
    layer.close()
    with pytest.raises(mla.InvalidArgumentError, match="the layer is closed"):
        layer.plan(mla.BatchMetadata([0], [], [[]], []), 1)
