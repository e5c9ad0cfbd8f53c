"""The runtime from Python: its properties, the log forwarded to `logging`
from the library's threads, the kernel cache's counters across runtimes,
backend selection, and device buffers."""

import logging
import threading

import numpy as np
import pytest

import mla
import support
from mla import DType
from test_layer import SMALL

F32 = dict(SMALL, activation_dtype=DType.F32, cache_dtype=DType.F32)


def make_layer(runtime, config=None, seed=0):
    config = config or mla.LayerConfig(**F32)
    tensors = support.TorchTensors(runtime) if runtime.is_cuda else support.NumpyTensors(runtime)
    weights = support.random_weights(np.random.default_rng(seed), tensors, config)
    return mla.Layer(runtime, config, weights["kv_b_proj"], weights["w_uk_t"], weights["w_uv"])


def test_properties(runtime, cache_dir):
    assert runtime.device_kind == ("cuda" if support.ON_GPU else "cpu")
    assert runtime.is_cuda == support.ON_GPU
    assert runtime.cache_dir == str(cache_dir)
    assert runtime.parallelism >= 1
    assert runtime.description.startswith("NVIDIA" if support.ON_GPU else "host CPU")
    assert runtime.description in repr(runtime)


def test_memory_only_cache(tmp_path):
    with mla.Runtime(device="cpu", cache_dir=tmp_path, disable_disk_cache=True) as rt:
        assert rt.cache_dir is None
        make_layer(rt).close()
    assert not any(tmp_path.iterdir())


def test_log_lines_reach_the_mla_logger_from_every_thread(tmp_path, caplog):
    threads = set()

    class Threads(logging.Handler):
        def emit(self, record):
            threads.add(record.thread)

    handler = Threads()
    logging.getLogger("mla").addHandler(handler)
    try:
        with caplog.at_level(logging.INFO, logger="mla"):
            with mla.Runtime(device="cpu", cache_dir=tmp_path) as rt:
                make_layer(rt).close()
    finally:
        logging.getLogger("mla").removeHandler(handler)
    lines = [r.getMessage() for r in caplog.records if r.name == "mla"]
    assert any(line.startswith("runtime: device host CPU") for line in lines), lines
    compiled = [line for line in lines if "compiled" in line]
    assert len(compiled) == 5, lines
    # The kernels compile on the library's worker threads, which log too.
    assert len(threads) > 1 or rt.parallelism == 1


def test_log_to_a_logger_of_ones_own_or_nowhere(tmp_path, caplog):
    with caplog.at_level(logging.INFO):
        with mla.Runtime(device="cpu", cache_dir=tmp_path, log=logging.getLogger("engine.attention")):
            pass
        with mla.Runtime(device="cpu", cache_dir=tmp_path, log=False):
            pass
    names = {r.name for r in caplog.records}
    assert names == {"engine.attention"}, names


def test_cache_counters_across_runtimes(tmp_path):
    with mla.Runtime(device="cpu", cache_dir=tmp_path) as first:
        assert first.cache_stats() == mla.CacheStats(0, 0, 0, 0, 0, 0)
        make_layer(first).close()
        stats = first.cache_stats()
        assert (stats.compiles, stats.misses, stats.disk_hits) == (5, 5, 0)
        make_layer(first, seed=1).close()  # the same kernels, held by the runtime
        assert first.cache_stats().memory_hits == 5
    with mla.Runtime(device="cpu", cache_dir=tmp_path) as second:
        make_layer(second).close()
        stats = second.cache_stats()
        assert (stats.disk_hits, stats.compiles, stats.corrupt_entries, stats.store_failures) == (5, 0, 0, 0)
    with mla.Runtime(device="cpu", cache_dir=tmp_path, force_recompile=True) as third:
        make_layer(third).close()
        assert third.cache_stats().compiles == 5


def test_backend_selection(runtime, monkeypatch):
    native = "GENERIC_GPU" if runtime.is_cuda else "CPU_JIT"
    requested = runtime.select_backend(mla.LayerConfig(**F32, backend=native))
    assert (requested.backend, requested.source, requested.skipped) == (native, "requested", ())
    assert str(requested) == requested.summary and native in requested.summary
    chosen = runtime.select_backend(mla.LayerConfig(**F32))
    assert chosen.source == "priority" and chosen.description
    # The CPU runs everything on the calling thread: nothing to capture.
    assert chosen.cuda_graphs == ("uniform_batch" if runtime.is_cuda else "never")
    monkeypatch.setenv("MLA_ATTENTION_BACKEND", native)
    assert runtime.select_backend(mla.LayerConfig(**F32)).source == "environment"


def test_a_layer_reports_its_selection(runtime):
    layer = make_layer(runtime)
    assert layer.selection == runtime.select_backend(layer.config)
    assert layer.selection.backend in repr(layer)


def test_skipped_backends_are_parsed_per_backend_and_reason():
    c = mla._capi.mla_backend_selection_t()
    c.backend, c.source, c.num_skipped = b"GENERIC_GPU", 0, 2
    c.skipped = b"TC_SM90A: heads 8 not supported; needs sm_90a\nTC_SM80: head dim 72 not a multiple of 16"
    c.summary = b"GENERIC_GPU (skipped ...)"
    c.description = b"CUDA cores"
    c.cuda_graphs = 2
    selection = mla.BackendSelection._from_c(c)
    assert selection.skipped == (
        ("TC_SM90A", ("heads 8 not supported", "needs sm_90a")),
        ("TC_SM80", ("head dim 72 not a multiple of 16",)),
    )
    assert (selection.source, selection.description, selection.cuda_graphs) == ("priority", "CUDA cores", "uniform_batch")


def test_runtimes_in_several_threads(tmp_path):
    """The library releases the GIL and serializes compiles per runtime:
    threads sharing a runtime, or each with its own, all finish."""
    failures = []

    def work(rt, seed):
        try:
            make_layer(rt, seed=seed).close()
        except Exception as error:  # reported below
            failures.append(error)

    with mla.Runtime(device="cpu", cache_dir=tmp_path / "shared", log=False) as shared:
        workers = [threading.Thread(target=work, args=(shared, seed)) for seed in range(3)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    assert not failures


def test_device_buffers_round_trip(runtime):
    values = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    with runtime.allocate((2, 3, 4), "f32") as buffer:
        assert (buffer.shape, buffer.dtype, buffer.nbytes) == ((2, 3, 4), DType.F32, 96)
        buffer.upload(values)
        np.testing.assert_array_equal(buffer.download(), values)
        out = np.empty_like(values)
        assert buffer.download(out) is out
        np.testing.assert_array_equal(out, values)
        with pytest.raises(mla.InvalidArgumentError, match="host is f16"):
            buffer.upload(values.astype(np.float16))
        with pytest.raises(mla.InvalidArgumentError, match=r"out is f32\[24\]"):
            buffer.download(np.empty(24, np.float32))
    assert buffer.closed
    empty = runtime.allocate((0, 5), DType.I64)
    assert empty.nbytes == 0 and not empty.closed
    empty.close()
    with pytest.raises(mla.InvalidArgumentError, match="shape\\[1\\] must be non-negative"):
        runtime.allocate((2, -1), "f32")


def test_device_buffers_belong_to_their_runtime(runtime, tmp_path):
    with mla.Runtime(device="cpu", cache_dir=tmp_path) as other:
        foreign = other.allocate((5, 64), "f32")
        layer = make_layer(runtime)
        metadata = mla.BatchMetadata([0, 5], [5], [[0]], [0, 1, 2, 3, 4])
        tensors = support.NumpyTensors(runtime) if not runtime.is_cuda else support.TorchTensors(runtime)
        step = support.random_step(np.random.default_rng(0), tensors, layer.config, 5, 2)
        with pytest.raises(mla.InvalidArgumentError, match="kv_c is a DeviceBuffer of another runtime"):
            layer.forward(
                layer.plan(metadata, 2), step["q"], foreign, step["k_pe"], step["kv_cache"], step["output"]
            )


def test_wait_for_kernel_upgrades(tmp_path):
    # On a GPU the layer's kernels are linked first and replaced by their
    # module-load code in the background; the wait returns once that is
    # done (at once on the CPU), and is refused on a closed runtime.
    rt = mla.Runtime(device=support.DEVICE, cache_dir=tmp_path)
    layer = make_layer(rt)
    rt.wait_for_kernel_upgrades()
    rt.wait_for_kernel_upgrades()
    layer.close()
    rt.close()
    with pytest.raises(mla.InvalidArgumentError, match="the runtime is closed"):
        rt.wait_for_kernel_upgrades()


def test_synchronize(runtime):
    runtime.synchronize()
    runtime.synchronize(stream=0)
    with pytest.raises(TypeError, match="stream"):
        mla._streams.stream_handle("default", _GpuLike())


class _GpuLike:
    is_cuda = True
    gpu_ordinal = 0
