"""One `mla.Runtime` per device, shared by the builder and every layer.

A runtime holds the device's kernels in memory: layers of one
configuration made on one runtime compile (or load) their kernels once.
An engine that builds its attention objects independently of each other
(one builder per KV-cache group, one impl per layer) would otherwise make
a runtime each, so they all ask this module for theirs.
"""

import threading
from typing import Any, Dict, Tuple

import torch

from ..runtime import Runtime

_lock = threading.Lock()
_runtimes: Dict[Tuple[str, int], Runtime] = {}


def _device_key(device: Any) -> Tuple[str, int]:
    """("cpu", 0) or ("gpu", ordinal) for a device given as None (torch's
    current CUDA device when torch sees one, else the CPU), "cpu", "gpu",
    "cuda", "cuda:N" or a torch.device."""
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "gpu":
        device = "cuda"
    device = torch.device(device)
    if device.type == "cpu":
        return "cpu", 0
    if device.type != "cuda":
        raise ValueError(f"libmla runs on the CPU or a CUDA GPU, not on {device}")
    return "gpu", torch.cuda.current_device() if device.index is None else device.index


def shared_runtime(device: Any = None) -> Runtime:
    """The process's runtime for `device` (see `_device_key`), made on first
    use with the default options (kernel cache in $MLA_CACHE_DIR or
    ~/.cache/mla, log lines to the "mla" logger). An `mla.Runtime` is
    returned as it is: pass one to choose other options."""
    if isinstance(device, Runtime):
        return device
    key = _device_key(device)
    with _lock:
        runtime = _runtimes.get(key)
        if runtime is None or runtime.closed:
            runtime = Runtime(device=key[0], gpu_ordinal=key[1])
            _runtimes[key] = runtime
        return runtime


def torch_device(runtime: Runtime) -> torch.device:
    """Where tensors for `runtime` live."""
    return torch.device("cuda", runtime.gpu_ordinal) if runtime.is_cuda else torch.device("cpu")
