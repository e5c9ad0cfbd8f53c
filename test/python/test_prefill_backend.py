"""The prefill backend from Python: chosen apart from the decode's backend
(LayerConfig.prefill_backend, else $MLA_PREFILL_BACKEND, else the device's
prefill priorities), reported by the runtime and the layer, refused with
its reasons, and taken into account by mla.vllm's validation. A layer on
the CPU has one prefill backend, so what is checked is the selection, not
numerics of another pairing (the GPU pairings run in the C++ suite)."""

import ctypes
import dataclasses

import pytest

import mla
import support
from test_layer import SMALL
from test_runtime import F32, make_layer

PREFILL_NAMES = ("PREFILL_GENERIC_GPU", "PREFILL_CPU_JIT", "PREFILL_TC_SM80", "PREFILL_TC_SM90A")


def native(runtime):
    """A prefill backend of the runtime's device that takes F32, and one of
    the other device."""
    return ("PREFILL_GENERIC_GPU", "PREFILL_CPU_JIT") if runtime.is_cuda else ("PREFILL_CPU_JIT", "PREFILL_GENERIC_GPU")


def test_the_config_fields_are_appended_to_the_c_struct():
    fields = [name for name, _ in mla._capi.mla_layer_config_t._fields_]
    # Appended after backend; the DCP fields came after it.
    assert fields[-5:] == ["backend", "prefill_backend", "dcp_world_size", "dcp_rank", "dcp_interleave"]
    config = mla.LayerConfig(prefill_backend="PREFILL_CPU_JIT")._to_c()
    assert ctypes.string_at(config.prefill_backend) == b"PREFILL_CPU_JIT"
    assert mla.LayerConfig()._to_c().prefill_backend is None


def test_a_non_string_name_is_refused():
    with pytest.raises(mla.InvalidArgumentError, match="config.prefill_backend must be a backend's name"):
        mla.LayerConfig(prefill_backend=3)


def test_by_priority_by_name_and_from_the_environment(runtime, monkeypatch):
    own, other = native(runtime)
    chosen = runtime.select_prefill_backend(mla.LayerConfig(**F32))
    assert chosen.source == "priority" and chosen.backend.startswith("PREFILL_")
    # Prefills are never captured; the decode backend answers for graphs.
    assert chosen.cuda_graphs == "never"
    if not runtime.is_cuda:
        assert (chosen.backend, chosen.skipped, str(chosen)) == ("PREFILL_CPU_JIT", (), "PREFILL_CPU_JIT")

    requested = runtime.select_prefill_backend(mla.LayerConfig(**F32, prefill_backend=own))
    assert (requested.backend, requested.source, requested.summary) == (own, "requested", f"{own} (requested)")

    monkeypatch.setenv("MLA_PREFILL_BACKEND", own)
    from_env = runtime.select_prefill_backend(mla.LayerConfig(**F32))
    assert (from_env.backend, from_env.source) == (own, "environment")
    assert from_env.summary == f"{own} (from MLA_PREFILL_BACKEND)"
    # The decode's selection reads its own variable only.
    assert runtime.select_backend(mla.LayerConfig(**F32)).source == "priority"

    monkeypatch.setenv("MLA_PREFILL_BACKEND", other)
    with pytest.raises(mla.BackendRejectedError) as refused:
        runtime.select_prefill_backend(mla.LayerConfig(**F32))
    assert f"prefill backend {other} (named by MLA_PREFILL_BACKEND) cannot run" in refused.value.message
    # The config's name beats the environment's.
    assert runtime.select_prefill_backend(mla.LayerConfig(**F32, prefill_backend=own)).backend == own


def test_refusals_name_their_reasons(runtime):
    _, other = native(runtime)
    with pytest.raises(mla.BackendRejectedError) as refused:
        runtime.select_prefill_backend(mla.LayerConfig(**F32, prefill_backend=other))
    assert "not supported (requires" in refused.value.message
    for unknown in ("FLASH_ATTN", "TC_SM80"):
        with pytest.raises(mla.BackendRejectedError) as refused:
            runtime.select_prefill_backend(mla.LayerConfig(**F32, prefill_backend=unknown))
        assert f"unknown prefill backend '{unknown}'" in refused.value.message
        assert all(name in refused.value.message for name in PREFILL_NAMES)
    with pytest.raises(mla.BackendRejectedError) as refused:
        runtime.select_prefill_backend(mla.LayerConfig(**dict(F32, num_heads=200)))
    assert "no prefill backend fits" in refused.value.message and "num heads 200" in refused.value.message
    with pytest.raises(mla.InvalidArgumentError, match="config->num_heads"):
        runtime.select_prefill_backend(mla.LayerConfig(**dict(F32, num_heads=0)))


def test_a_layer_reports_its_prefill_selection(runtime, monkeypatch):
    own, other = native(runtime)
    layer = make_layer(runtime)
    assert layer.prefill_selection == runtime.select_prefill_backend(layer.config)
    assert layer.selection == runtime.select_backend(layer.config)
    layer.close()
    # Named in the config, with the environment naming one that refuses.
    monkeypatch.setenv("MLA_PREFILL_BACKEND", other)
    with pytest.raises(mla.BackendRejectedError, match="MLA_PREFILL_BACKEND"):
        make_layer(runtime)
    layer = make_layer(runtime, mla.LayerConfig(**F32, prefill_backend=own))
    assert (layer.prefill_selection.backend, layer.prefill_selection.source) == (own, "requested")
    assert layer.selection.source == "priority"
    layer.close()


@support.needs_cpu
def test_vllm_validation_asks_the_prefill_selection_too(runtime, monkeypatch):
    pytest.importorskip("torch", reason="mla.vllm needs torch")
    from mla import vllm as mv

    config = mla.LayerConfig(**SMALL)
    assert mv.MlaJitBackend.select_prefill(config, runtime).backend == "PREFILL_CPU_JIT"

    def reasons(config):
        return mv.MlaJitBackend.validate_configuration(
            config.cache_entry_dim, "bf16", "auto", config.block_size, config=config, runtime=runtime
        )

    assert reasons(config) == []
    [reason] = reasons(dataclasses.replace(config, prefill_backend="PREFILL_TC_SM90A"))
    assert "prefill backend PREFILL_TC_SM90A (requested) cannot run" in reason and "device CPU" in reason
    monkeypatch.setenv("MLA_PREFILL_BACKEND", "NO_SUCH_PREFILL")
    [reason] = reasons(config)
    assert "unknown prefill backend 'NO_SUCH_PREFILL'" in reason and "PREFILL_CPU_JIT" in reason
    # A config the decode's selection refuses is reported once, by it.
    [reason] = reasons(dataclasses.replace(config, num_heads=200))
    assert "no attention backend fits" in reason
