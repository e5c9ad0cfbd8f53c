"""Lifetimes: children keep their parents alive and go first, whatever
order references are dropped in (cycles too), closing a runtime closes what
was made on it, and nothing crashes or complains at interpreter exit."""

import gc
import weakref

import numpy as np
import pytest

import mla
import support
from conftest import PACKAGE, TESTS
from test_kernel import MERGE
from test_layer import SMALL
from test_library import run_python

F32 = dict(SMALL, activation_dtype="f32", cache_dtype="f32")


def cpu_layer(runtime, seed=0):
    config = mla.LayerConfig(**F32)
    weights = support.random_weights(np.random.default_rng(seed), support.NumpyTensors(runtime), config)
    return mla.Layer(runtime, config, weights["kv_b_proj"], weights["w_uk_t"], weights["w_uv"])


def test_closing_a_runtime_closes_what_was_made_on_it(tmp_path):
    runtime = mla.Runtime(device="cpu", cache_dir=tmp_path, log=False)
    layer = cpu_layer(runtime)
    kernel = runtime.compile(MERGE, "kernel")
    buffer = runtime.allocate((4,), "f32")
    plan = layer.plan(mla.BatchMetadata([0, 1], [1], [[0]], [0]), 1)
    runtime.close()
    assert runtime.closed and layer.closed and kernel.closed and buffer.closed
    assert not plan.closed and plan.info.num_decodes == 1  # plans are host data
    with pytest.raises(mla.InvalidArgumentError, match="the runtime is closed"):
        runtime.cache_stats()
    with pytest.raises(mla.InvalidArgumentError, match="the kernel is closed"):
        kernel.run()
    runtime.close()  # again: nothing to do


def test_a_child_keeps_its_runtime_alive(tmp_path):
    runtime = mla.Runtime(device="cpu", cache_dir=tmp_path, log=False)
    layer = cpu_layer(runtime)
    gone = weakref.ref(runtime)
    del runtime
    gc.collect()
    assert gone() is not None and not layer.runtime.closed
    layer.plan(mla.BatchMetadata([0, 1], [1], [[0]], [0]), 1)
    del layer
    gc.collect()
    assert gone() is None


def test_cycles_are_released_children_first(tmp_path):
    runtime = mla.Runtime(device="cpu", cache_dir=tmp_path, log=False)
    layer = cpu_layer(runtime)
    kernel = runtime.compile(MERGE, "kernel")
    runtime.cycle = [layer, kernel, runtime]
    layer.cycle = runtime
    gone = weakref.ref(runtime)
    del runtime, layer, kernel
    gc.collect()
    gc.collect()
    assert gone() is None


def test_context_managers(tmp_path):
    with mla.Runtime(device="cpu", cache_dir=tmp_path, log=False) as runtime:
        with cpu_layer(runtime) as layer:
            pass
        assert layer.closed and not runtime.closed
    assert runtime.closed


@pytest.mark.parametrize("close", [False, True], ids=["left to exit", "closed out of order"])
def test_interpreter_exit_is_quiet(tmp_path, close):
    code, out, err = run_python(
        f"""
        import logging, sys
        sys.path.insert(0, {str(TESTS)!r})
        import numpy as np, mla, support
        from test_kernel import MERGE
        from test_layer import SMALL
        logging.basicConfig(level=logging.INFO)
        runtime = mla.Runtime(device="cpu", cache_dir={str(tmp_path)!r})
        config = mla.LayerConfig(**SMALL, activation_dtype="f32", cache_dtype="f32")
        weights = support.random_weights(np.random.default_rng(0), support.NumpyTensors(runtime), config)
        layer = mla.Layer(runtime, config, weights["kv_b_proj"], weights["w_uk_t"], weights["w_uv"])
        kernel = runtime.compile(MERGE, "kernel")
        buffer = runtime.allocate((8,), "f32")
        plan = layer.plan(mla.BatchMetadata([0, 1], [1], [[0]], [0]), 1)
        runtime.cycle = [layer, kernel, buffer, plan]
        if {close}:
            kernel.close(); runtime.close(); layer.close()
        print("done")
        """,
        tmp_path,
        {"MLA_LIBRARY": mla.version().library_path, "PYTHONPATH": str(PACKAGE.parent)},
    )
    assert code == 0, err
    assert out.strip() == "done"
    assert "Traceback" not in err and "Exception ignored" not in err, err


def test_a_parent_gone_first_is_released_after_its_last_child():
    from mla._handles import _Owner

    order = []
    runtime = _Owner(1, order.append, None, ())
    layer = _Owner(2, order.append, runtime, ())
    graph = _Owner(3, order.append, layer, ())
    runtime.release()
    layer.release()
    assert order == []
    graph.release()
    assert order == [3, 2, 1]
    runtime.release()
    graph.release()
    assert order == [3, 2, 1]
