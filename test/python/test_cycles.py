"""A thousand create / plan / forward / close cycles of a layer on one
runtime, and of a whole runtime with its layer, leave the process's memory
where it was after the first cycles: the resident set on the host and, on
a GPU, the driver's free device memory. Only the kernel cache may hold
more, and it is warm after the first cycle (the same kernels every time).
The first and last cycles are checked against the float64 reference."""

import numpy as np
import pytest

import mla
import support
from test_layer import SMALL, mixed_batch, run_and_check

F32 = dict(SMALL, activation_dtype="f32", cache_dtype="f32")
CYCLES = 1000
# A new runtime on a GPU opens the device's context and loads its modules;
# fewer of those keep the suite's time in bounds there.
RUNTIME_CYCLES = 200 if support.ON_GPU else 1000
WARMUP = 20
# Allocator noise stays far below this; a leak of 2.5 KB a cycle does not.
SLACK_MIB = 2.0
FRAMEWORK = "torch" if support.ON_GPU else "numpy"


def resident_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 2**20


def device_free_mib() -> float:
    if not support.ON_GPU:
        return 0.0
    torch = support.torch_or_skip()
    torch.cuda.synchronize()
    return torch.cuda.mem_get_info()[0] / 2**20


def one_cycle(runtime, rng, check):
    tensors = support.make_framework(FRAMEWORK, runtime)
    config = mla.LayerConfig(**F32)
    weights = support.random_weights(rng, tensors, config)
    layer = mla.Layer(runtime, config, weights["kv_b_proj"], weights["w_uk_t"], weights["w_uv"])
    batch = mixed_batch(rng, config.block_size)
    if check:
        run_and_check(layer, weights, tensors, batch, rng)
    else:
        step = support.random_batch_step(rng, tensors, config, batch)
        plan = layer.plan(batch.metadata, batch.num_cache_blocks)
        layer.forward(plan, step["q"], step["kv_c"], step["k_pe"], step["kv_cache"],
                      step["output"], decode_lse=step.get("decode_lse"))
    layer.close()


def measure_growth(cycle, count):
    """Runs `cycle(i)` `count` times; host and device growth in MiB after
    the warm-up."""
    for i in range(WARMUP):
        cycle(i)
    host, device = resident_mib(), device_free_mib()
    for i in range(WARMUP, count):
        cycle(i)
    return resident_mib() - host, device - device_free_mib()


def test_layer_cycles_do_not_grow(tmp_path):
    rng = np.random.default_rng(support.seed_for("layer cycles"))
    with mla.Runtime(device=support.DEVICE, cache_dir=tmp_path) as runtime:
        host, device = measure_growth(
            lambda i: one_cycle(runtime, rng, check=i in (0, CYCLES - 1)), CYCLES)
    assert host <= SLACK_MIB, f"the resident set grew {host:.1f} MiB over {CYCLES} layer cycles"
    assert device <= SLACK_MIB, f"device memory grew {device:.1f} MiB over {CYCLES} layer cycles"


def test_runtime_cycles_do_not_grow(tmp_path):
    rng = np.random.default_rng(support.seed_for("runtime cycles"))

    def cycle(i):
        with mla.Runtime(device=support.DEVICE, cache_dir=tmp_path) as runtime:
            one_cycle(runtime, rng, check=i in (0, RUNTIME_CYCLES - 1))

    host, device = measure_growth(cycle, RUNTIME_CYCLES)
    assert host <= SLACK_MIB, f"the resident set grew {host:.1f} MiB over {RUNTIME_CYCLES} runtime cycles"
    assert device <= SLACK_MIB, f"device memory grew {device:.1f} MiB over {RUNTIME_CYCLES} runtime cycles"
