"""Single kernels compiled from MLIR text (mla_kernel_t)."""

import ctypes
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Tuple

from . import _capi
from ._handles import Handle
from ._streams import stream_handle
from .dtypes import DType
from .tensors import describe

if TYPE_CHECKING:
    from .runtime import Runtime


@dataclass(frozen=True)
class KernelInfo:
    """Where a kernel's code came from when it was first asked for.

    Attributes:
        num_args: the entry's argument count.
        origin: "compiled", "memory_cache" or "disk_cache".
        milliseconds: wall time from the module to loaded code.
        cache_entry: the kernel cache entry's name.
    """

    num_args: int
    origin: str
    milliseconds: float
    cache_entry: str


@dataclass(frozen=True)
class ArgumentSpec:
    """What an entry argument must be: its dtype and sizes (-1 where
    dynamic)."""

    dtype: DType
    shape: Tuple[int, ...]


class Kernel(Handle):
    """A function of an mla module compiled for a runtime's device; made by
    `Runtime.compile`. Keeps its runtime alive."""

    _kind = "kernel"

    def __init__(self, runtime: "Runtime", source: str, entry: str):
        library = runtime._library
        handle = ctypes.c_void_p()
        library.mla_kernel_compile_source(
            runtime._live(), source.encode(), entry.encode(), ctypes.byref(handle)
        )
        self._adopt(handle.value, library.mla_kernel_destroy, runtime)
        self._runtime = runtime
        self._library = library
        info = _capi.mla_kernel_info_t()
        library.mla_kernel_get_info(handle, ctypes.byref(info))
        self._info = KernelInfo(
            num_args=info.num_args,
            origin=_capi.KERNEL_ORIGINS[info.origin],
            milliseconds=info.milliseconds,
            cache_entry=info.cache_entry.decode(),
        )

    def __repr__(self) -> str:
        return f"<mla.Kernel {self._info.cache_entry}{' (closed)' if self.closed else ''}>"

    @property
    def info(self) -> KernelInfo:
        return self._info

    def argument(self, index: int) -> ArgumentSpec:
        """The spec of entry argument `index` (InvalidArgumentError outside
        the entry's arguments)."""
        spec = _capi.mla_tensor_t()
        self._library.mla_kernel_argument(self._live(), index, ctypes.byref(spec))
        return ArgumentSpec(DType(spec.dtype), tuple(spec.shape[: spec.rank]))

    def run(self, *tensors: Any, stream: Any = None) -> None:
        """Runs the kernel on `tensors` (zero-copy views of the caller's
        memory, on the runtime's device), queued on `stream` on a GPU, to
        completion on the CPU. The library checks each against the entry's
        signature (dtype, rank, static sizes, strides) and names a mismatch
        by its index."""
        handle = self._live()
        runtime = self._runtime
        views = (_capi.mla_tensor_t * len(tensors))(
            *(
                describe(tensor, f"argument {i}", runtime, contiguous=False)
                for i, tensor in enumerate(tensors)
            )
        )
        self._library.mla_kernel_run(handle, views, len(tensors), stream_handle(stream, runtime))
