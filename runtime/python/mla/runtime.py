"""The runtime: a device, its kernel cache and the kernels compiled on it."""

import ctypes
import logging
import os
from dataclasses import dataclass
from typing import Any, Optional, Sequence, Tuple, Union

from . import _capi, _library
from ._checks import as_int
from ._handles import Handle
from ._streams import stream_handle
from .config import LayerConfig
from .dtypes import DType
from .errors import InvalidArgumentError
from .kernel import Kernel
from .memory import DeviceBuffer

_DEVICES = {"auto": _capi.DEVICE_AUTO, "cpu": _capi.DEVICE_CPU, "gpu": _capi.DEVICE_GPU}

LogSetting = Union[bool, None, logging.Logger]


@dataclass(frozen=True)
class CacheStats:
    """What the runtime's kernel cache has done since the runtime was
    created (mla_cache_stats_t). A kernel the runtime already holds counts
    as a memory hit."""

    memory_hits: int
    disk_hits: int
    misses: int
    compiles: int
    corrupt_entries: int
    store_failures: int


@dataclass(frozen=True)
class BackendSelection:
    """Which attention backend runs a layer (its decode, or its chunked
    prefill), and why each backend above it in priority was passed over.

    Attributes:
        backend: the chosen backend's name, e.g. "CPU_JIT".
        source: how it was chosen: "priority" (the first that fits),
            "requested" (LayerConfig.backend, or .prefill_backend) or
            "environment" ($MLA_ATTENTION_BACKEND, or
            $MLA_PREFILL_BACKEND).
        skipped: (backend, reasons) for each backend passed over, in
            priority order.
        summary: all of it in one line.
        description: the chosen backend in words.
        cuda_graphs: which decode steps of a layer on it can be captured
            into CUDA graphs: "never", "uniform_single_token_decode" (decodes
            of one new token each), "uniform_batch" (decodes of the same
            number of new tokens each) or "always" (vLLM's
            AttentionCGSupport levels); "never" for a prefill backend.
    """

    backend: str
    source: str
    skipped: Tuple[Tuple[str, Tuple[str, ...]], ...]
    summary: str
    description: str
    cuda_graphs: str

    def __str__(self) -> str:
        return self.summary

    @classmethod
    def _from_c(cls, c: _capi.mla_backend_selection_t) -> "BackendSelection":
        # The C side gives one line per backend, "NAME: reason; reason".
        skipped = []
        for line in (c.skipped or b"").decode().splitlines():
            name, _, reasons = line.partition(": ")
            skipped.append((name, tuple(reasons.split("; ")) if reasons else ()))
        return cls(
            backend=c.backend.decode(),
            source=_capi.BACKEND_SOURCES[c.source],
            skipped=tuple(skipped),
            summary=c.summary.decode(),
            description=c.description.decode(),
            cuda_graphs=_capi.CUDA_GRAPH_SUPPORT[c.cuda_graphs],
        )


def _log_sink(log: LogSetting) -> Optional[Any]:
    """The C callback forwarding log lines to `log`'s logger (True: the
    "mla" logger), or None to drop them. Lines go out at INFO: which device
    was chosen, which backend, each kernel compiled or loaded and its time,
    cache problems."""
    if log is None or log is False:
        return None
    if log is True:
        log = logging.getLogger("mla")
    if not isinstance(log, logging.Logger):
        raise TypeError(f"log must be a bool or a logging.Logger, got {type(log).__name__}")
    logger = log

    def forward(line: bytes, user: Any) -> None:
        # Called from whichever thread logs, compile workers included;
        # ctypes takes the GIL for it.
        logger.info("%s", line.decode("utf-8", "replace"))

    return _capi.mla_log_fn(forward)


class Runtime(Handle):
    """A device (a CUDA GPU, or the host CPU), its kernel cache and the
    kernels compiled on it (mla_runtime_t).

    Args:
        device: "auto" (the GPU if usable, else the CPU, logged), "cpu", or
            "gpu" (NoDeviceError without a usable GPU).
        gpu_ordinal: which GPU, for "auto" and "gpu".
        cache_dir: the kernel cache directory instead of $MLA_CACHE_DIR
            (else $XDG_CACHE_HOME/mla, else ~/.cache/mla).
        disable_disk_cache: keep kernels in memory only.
        force_recompile: compile every kernel again (and store it).
        log: where the library's log lines go: True for the "mla" logger,
            a logging.Logger, or False to drop them.

    Layers, kernels and buffers made on a runtime keep it alive; `close()`
    closes them first. Use it as a context manager to release it at the
    end of a block.
    """

    _kind = "runtime"

    def __init__(
        self,
        device: str = "auto",
        gpu_ordinal: int = 0,
        cache_dir: "Optional[Union[str, os.PathLike]]" = None,
        disable_disk_cache: bool = False,
        force_recompile: bool = False,
        log: LogSetting = True,
    ):
        if device not in _DEVICES:
            raise InvalidArgumentError(
                f"device must be one of {', '.join(map(repr, _DEVICES))}, got {device!r}"
            )
        library = _library.load()
        options = _capi.mla_runtime_options_t()
        library.mla_runtime_options_default(ctypes.byref(options))
        options.device = _DEVICES[device]
        options.gpu_ordinal = as_int(gpu_ordinal, "gpu_ordinal", 0, 2**31 - 1)
        options.cache_dir = os.fsencode(cache_dir) if cache_dir else None
        options.disable_disk_cache = int(bool(disable_disk_cache))
        options.force_recompile = int(bool(force_recompile))
        sink = _log_sink(log)
        if sink is not None:
            options.log = sink
        handle = ctypes.c_void_p()
        library.mla_runtime_create(ctypes.byref(options), ctypes.byref(handle))
        # The callback must outlive the C runtime, which may log until it
        # is destroyed.
        self._adopt(handle.value, library.mla_runtime_destroy, None, sink)
        self._library = library

        kind = ctypes.c_int()
        library.mla_runtime_device_kind(handle, ctypes.byref(kind))
        self._is_cuda = kind.value == _capi.DEVICE_KIND_CUDA
        self._gpu_ordinal = options.gpu_ordinal
        text = ctypes.c_char_p()
        library.mla_runtime_device_description(handle, ctypes.byref(text))
        self._description = text.value.decode()
        library.mla_runtime_cache_dir(handle, ctypes.byref(text))
        self._cache_dir = text.value.decode() or None
        parallelism = ctypes.c_int64()
        library.mla_runtime_parallelism(handle, ctypes.byref(parallelism))
        self._parallelism = parallelism.value

    def __repr__(self) -> str:
        state = "closed" if self.closed else self._description
        return f"<mla.Runtime {self.device_kind}: {state}>"

    @property
    def device_kind(self) -> str:
        """"cuda" or "cpu": where the kernels run."""
        return "cuda" if self._is_cuda else "cpu"

    @property
    def is_cuda(self) -> bool:
        return self._is_cuda

    @property
    def gpu_ordinal(self) -> int:
        """The GPU's CUDA ordinal (on a GPU runtime): tensors must be on
        cuda:<gpu_ordinal>."""
        return self._gpu_ordinal

    @property
    def description(self) -> str:
        """The device in words: "NVIDIA H100 80GB HBM3 (sm_90a, 132 SMs)",
        "host CPU (...)"."""
        return self._description

    @property
    def parallelism(self) -> int:
        """The GPU's streaming multiprocessors, or the CPU's threads."""
        return self._parallelism

    @property
    def cache_dir(self) -> Optional[str]:
        """The kernel cache directory, or None when kernels are cached in
        memory only."""
        return self._cache_dir

    def cache_stats(self) -> CacheStats:
        stats = _capi.mla_cache_stats_t()
        self._library.mla_runtime_cache_stats(self._live(), ctypes.byref(stats))
        return CacheStats(*(getattr(stats, name) for name, _ in stats._fields_))

    def select_backend(self, config: LayerConfig) -> BackendSelection:
        """The backend that would run a layer configured as `config` here,
        and why each one above it was passed over. InvalidArgumentError for
        a malformed config (naming the field), BackendRejectedError when no
        backend fits or the named one does not exist or refuses."""
        selection = _capi.mla_backend_selection_t()
        self._library.mla_runtime_select_backend(
            self._live(), ctypes.byref(config._to_c()), ctypes.byref(selection)
        )
        return BackendSelection._from_c(selection)

    def select_prefill_backend(self, config: LayerConfig) -> BackendSelection:
        """The prefill backend that would run the chunked prefill of a
        layer configured as `config` here (config.prefill_backend, else
        $MLA_PREFILL_BACKEND, else the device's prefill priorities, whatever
        the decode's backend), and why each one above it was passed over.
        Errors as select_backend."""
        selection = _capi.mla_backend_selection_t()
        self._library.mla_runtime_select_prefill_backend(
            self._live(), ctypes.byref(config._to_c()), ctypes.byref(selection)
        )
        return BackendSelection._from_c(selection)

    def compile(self, source: str, entry: str) -> Kernel:
        """Compiles the function `entry` of `source` (a module of mla ops as
        MLIR text, whose entry takes memrefs and returns nothing) for this
        device, or takes it from the kernel cache. CompileError with the
        compiler's diagnostics when it does not parse, verify or lower."""
        return Kernel(self, source, entry)

    def allocate(self, shape: Sequence[int], dtype: Any) -> DeviceBuffer:
        """An uninitialized buffer of the device's memory (host memory on a
        CPU runtime), for callers without torch's allocator: numpy data
        reaches a GPU runtime through `DeviceBuffer.upload`."""
        return DeviceBuffer(self, shape, DType.parse(dtype))

    def wait_for_kernel_upgrades(self) -> None:
        """Waits until the GPU kernels compiled so far run their best code.
        A cold compile first loads the driver's linked code (ready sooner,
        slower) and replaces it in the background; CUDA graph captures wait
        by themselves. Call it where the first steps must run at full
        speed. Returns at once on the CPU."""
        self._library.mla_runtime_wait_for_kernel_upgrades(self._live())

    def synchronize(self, stream: Any = None) -> None:
        """Waits for the work queued on `stream` (see `mla` on streams);
        returns at once on the CPU."""
        self._library.mla_runtime_synchronize(self._live(), stream_handle(stream, self))
