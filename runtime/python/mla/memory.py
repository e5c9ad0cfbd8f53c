"""Device memory owned by a runtime (mla_runtime_allocate)."""

import ctypes
import functools
from typing import TYPE_CHECKING, Any, Optional, Sequence, Tuple

from . import _capi
from ._checks import as_int
from ._handles import Handle
from ._streams import stream_handle
from .dtypes import DType
from .errors import InvalidArgumentError
from .tensors import describe, row_major_strides

if TYPE_CHECKING:
    from .runtime import Runtime


class _Host:
    """Stands for "host memory" where tensors.describe asks for a runtime:
    what a DeviceBuffer copies from or to."""

    is_cuda = False


class DeviceBuffer(Handle):
    """A contiguous tensor in a runtime's device memory (host memory on a
    CPU runtime), for callers that do not allocate through torch: numpy
    data reaches a GPU runtime through it. Made by `Runtime.allocate`;
    passed wherever a tensor is taken, on its own runtime only. Keeps the
    runtime alive. On a GPU, close it only after the work that uses it has
    finished (synchronize first)."""

    _kind = "device buffer"

    def __init__(self, runtime: "Runtime", shape: Sequence[int], dtype: DType):
        dims = tuple(as_int(size, f"shape[{i}]", 0) for i, size in enumerate(shape))
        count = 1
        for size in dims:
            count *= size
        library = runtime._library
        pointer = ctypes.c_void_p()
        runtime_handle = runtime._live()
        library.mla_runtime_allocate(runtime_handle, count * dtype.itemsize, ctypes.byref(pointer))
        # A zero-byte buffer has a NULL pointer, which is still a live buffer.
        self._adopt(
            pointer.value or 0,
            functools.partial(library.mla_runtime_free, runtime_handle),
            runtime,
        )
        self._runtime = runtime
        self._library = library
        self._shape = dims
        self._dtype = dtype
        self._nbytes = count * dtype.itemsize

    def __repr__(self) -> str:
        return f"<mla.DeviceBuffer {self._dtype}{list(self._shape)} on {self._runtime.device_kind}>"

    @property
    def shape(self) -> Tuple[int, ...]:
        return self._shape

    @property
    def dtype(self) -> DType:
        return self._dtype

    @property
    def nbytes(self) -> int:
        return self._nbytes

    @property
    def data_ptr(self) -> int:
        """The device address."""
        return self._live()

    def _mla_describe(self, name: str, runtime: Any) -> tuple:
        """(data, dtype, shape, strides), as tensors.describe takes them."""
        if runtime is not self._runtime:
            raise InvalidArgumentError(f"{name} is a DeviceBuffer of another runtime")
        return self._live(), self._dtype, self._shape, row_major_strides(self._shape)

    def _host_view(self, host: Any, name: str) -> _capi.mla_tensor_t:
        """`host` as host memory of this buffer's dtype and shape."""
        tensor = describe(host, name, _Host, writable=name == "out")
        if tensor.dtype != self._dtype or tuple(tensor.shape[: tensor.rank]) != self._shape:
            raise InvalidArgumentError(
                f"{name} is {DType(tensor.dtype)}{list(tensor.shape[: tensor.rank])}, the buffer "
                f"{self._dtype}{list(self._shape)}"
            )
        return tensor

    def upload(self, host: Any, stream: Any = None) -> None:
        """Copies `host` (a numpy array or CPU torch tensor of the buffer's
        dtype and shape) into the buffer, ordered on `stream`; `host` may
        be reused when this returns."""
        source = self._host_view(host, "host")
        self._library.mla_runtime_upload(
            self._runtime._live(),
            self._live(),
            source.data,
            self._nbytes,
            stream_handle(stream, self._runtime),
        )

    def download(self, out: Optional[Any] = None, stream: Any = None) -> Any:
        """The buffer's contents after the work queued on `stream`, in
        `out` (a numpy array or CPU torch tensor of its dtype and shape) or
        a new numpy array (not for bf16, which numpy lacks)."""
        if out is None:
            import numpy

            out = numpy.empty(self._shape, self._dtype.to_numpy())
        target = self._host_view(out, "out")
        self._library.mla_runtime_download(
            self._runtime._live(),
            target.data,
            self._live(),
            self._nbytes,
            stream_handle(stream, self._runtime),
        )
        return out
