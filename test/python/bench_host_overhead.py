"""Host time of a decode step through the Python package, next to the same
C functions called directly through ctypes with arguments built once: the
difference is what the package adds per step (argument checks, tensor
views, stream lookup, object wrapping). Prints medians; asserts nothing.

    MLA_LIBRARY=build/lib/libmla.so /usr/bin/python3 test/python/bench_host_overhead.py [--steps 500]

On a GPU runtime the calls queue work and return, so their times are the
host's alone; the GPU is waited for after each call, outside the timings.
On the CPU a forward runs its kernels before returning, so only the plan
rows (and the metadata row) measure overhead there.
"""

import argparse
import ctypes
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "runtime" / "python"))

import numpy as np  # noqa: E402

import mla  # noqa: E402
from mla import _capi  # noqa: E402


def median_microseconds(call: Callable[[], object], steps: int, wait: Callable[[], None]) -> float:
    """The median host time of `call`, each call timed with the device idle
    (waited for after each call, outside the timing): queued work never
    fills the queues a call would then wait on, so the time is the host's."""
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
        wait()
    return statistics.median(times) * 1e6


def raw_functions(path: str) -> ctypes.CDLL:
    """The library's functions without the package's error check: the
    floor of any call through ctypes."""
    raw = ctypes.CDLL(path)
    for name, (restype, argtypes) in _capi.PROTOTYPES.items():
        function = getattr(raw, name)
        function.restype, function.argtypes = restype, argtypes
    return raw


def main(argv: Optional[List[str]] = None) -> Dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "gpu"])
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--decodes", type=int, default=32)
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=500)
    args = parser.parse_args(argv)

    runtime = mla.Runtime(device=args.device, log=False)
    try:
        import torch
    except ImportError:
        torch = None
    if runtime.is_cuda and torch is None:
        sys.exit("a GPU runtime needs torch for its tensors here")
    dtype = mla.DType.BF16 if torch is not None else mla.DType.F32
    config = mla.LayerConfig(num_heads=args.heads, activation_dtype=dtype, cache_dtype=dtype, wants_cuda_graphs=runtime.is_cuda)
    n, lkv, r = config.num_heads, config.kv_lora_rank, config.qk_rope_head_dim
    p, v, block = config.qk_nope_head_dim, config.v_head_dim, config.block_size
    pages_each = math.ceil(args.context / block)
    num_pages = args.decodes * pages_each

    if torch is not None:
        device = f"cuda:{runtime.gpu_ordinal}" if runtime.is_cuda else "cpu"

        def zeros(*shape: int, dtype: mla.DType = dtype) -> object:
            return torch.zeros(shape, dtype=dtype.to_torch(), device=device)

    else:

        def zeros(*shape: int, dtype: mla.DType = dtype) -> object:
            return np.zeros(shape, dtype.to_numpy())

    weights = (zeros(lkv, n, p + v), zeros(n, p, lkv), zeros(n, lkv, v))
    layer = mla.Layer(runtime, config, *weights)
    tensors = [
        zeros(args.decodes, n, p + r),
        zeros(args.decodes, lkv),
        zeros(args.decodes, r),
        zeros(num_pages, block, lkv + r),
        zeros(args.decodes, n, v),
    ]
    starts = np.arange(args.decodes + 1, dtype=np.int32)
    seq_lens = np.full(args.decodes, args.context, np.int32)
    table = np.arange(num_pages, dtype=np.int32).reshape(args.decodes, pages_each)
    last = args.context - 1
    slots = (table[:, last // block] * block + last % block).astype(np.int64)
    metadata = mla.BatchMetadata(starts, seq_lens, table, slots)
    plan = layer.plan(metadata, num_pages)

    raw = raw_functions(mla.version().library_path)
    stream = mla._streams.stream_handle(None, runtime)
    forward_args = layer._forward_args(*tensors, None)

    def raw_plan() -> None:
        handle = ctypes.c_void_p()
        raw.mla_layer_plan(layer._handle, ctypes.byref(metadata._c), num_pages, ctypes.byref(handle))
        raw.mla_plan_destroy(handle)

    # Each operation: through the package, and the same C calls through
    # ctypes with arguments built once.
    operations = {
        "plan": (lambda: layer.plan(metadata, num_pages), raw_plan),
        "forward": (
            lambda: layer.forward(plan, *tensors),
            lambda: raw.mla_layer_forward(layer._handle, plan._handle, ctypes.byref(forward_args), stream),
        ),
    }
    if runtime.is_cuda:
        shape = mla.DecodeGraphShape(args.decodes, 1, pages_each, num_pages)
        graph = layer.capture_decode_step(shape, *tensors)
        step_plan = layer.plan_decode_step(metadata, graph.shape)
        shape_c = graph.shape._c

        def raw_graph_step() -> None:
            handle = ctypes.c_void_p()
            raw.mla_layer_plan_decode_step(layer._handle, ctypes.byref(metadata._c), ctypes.byref(shape_c), ctypes.byref(handle))
            raw.mla_layer_replay(layer._handle, graph._handle, handle, stream)
            raw.mla_plan_destroy(handle)

        operations["graph replay"] = (
            lambda: graph.replay(step_plan),
            lambda: raw.mla_layer_replay(layer._handle, graph._handle, step_plan._handle, stream),
        )
        operations["graph step (plan + replay)"] = (
            lambda: graph.replay(layer.plan_decode_step(metadata, graph.shape)),
            raw_graph_step,
        )

    def wait() -> None:
        runtime.synchronize(stream)

    def measure(call: Callable[[], object], between: Callable[[], None]) -> float:
        call()  # once outside the timing (allocations, lazy loads)
        wait()
        return median_microseconds(call, args.steps, between)

    print(f"{runtime.description}: {layer.selection.backend}, {n} heads, {dtype}, {args.decodes} decodes x {args.context} tokens")
    print(f"host time per call in us, median of {args.steps}, each with the device idle:")
    print(f"  {'':<28} {'package':>9} {'C (ctypes)':>11} {'added':>8}")
    results = {}
    for name, (package, floor) in operations.items():
        results[name + ": package"] = measure(package, wait)
        results[name + ": C through ctypes"] = measure(floor, wait)
        added = results[name + ": package"] - results[name + ": C through ctypes"]
        print(f"  {name:<28} {results[name + ': package']:9.1f} {results[name + ': C through ctypes']:11.1f} {added:8.1f}")
    # The package's own work, back to back (warm caches), without C calls.
    alone = {
        "BatchMetadata from numpy arrays": lambda: mla.BatchMetadata(starts, seq_lens, table, slots),
        "a forward's tensor views and stream": lambda: (
            layer._forward_args(*tensors, None),
            mla._streams.stream_handle(None, runtime),
        ),
    }
    print("the package's own work alone, back to back:")
    for name, call in alone.items():
        results[name] = measure(call, lambda: None)
        print(f"  {name:<40} {results[name]:8.1f}")
    return results


if __name__ == "__main__":
    main()
