"""Caller tensors as mla_tensor_t views: zero-copy, checked, never copied.

Accepted: torch tensors (CPU or CUDA), numpy arrays (host memory, so CPU
runtimes only) and `DeviceBuffer`s of the same runtime. The view points at
the tensor's own memory; the library reads and writes it in place. Whatever
would need a copy is refused with an InvalidArgumentError (a ValueError)
naming the tensor by its role ("q", "kv_cache", "argument 2"):

- a tensor on a device the runtime does not run on (a CUDA tensor given to
  a CPU runtime, a CPU tensor or numpy array given to a GPU runtime, a CUDA
  tensor on another GPU than the runtime's);
- a dtype libmla has no element type for (float64, bool, ...);
- a non-contiguous tensor where the library needs row-major contiguous
  memory (the layer's tensors), or a read-only array it would write.

Dtypes and shapes against what the layer or kernel expects are checked by
the library itself, whose errors name the tensor the same way.

numpy has no bfloat16: bf16 data goes through torch (or an ml_dtypes
bfloat16 array, which numpy reports as "bfloat16").
"""

import ctypes
import functools
import struct
import sys
from typing import Any, Optional, Sequence, Tuple

from . import _capi
from .dtypes import DType
from .errors import InvalidArgumentError

# mla_tensor_t as bytes (data, dtype, rank, shape[], strides[]), so that a
# view is written with one pack rather than field by field: the layer's
# forward writes six per step. _capi's struct must have this layout.
_LAYOUT = struct.Struct(f"=Qii{_capi.MAX_RANK}q{_capi.MAX_RANK}q")
_ZEROS = (0,) * _capi.MAX_RANK
assert _LAYOUT.size == ctypes.sizeof(_capi.mla_tensor_t)
assert _capi.mla_tensor_t.strides.offset == _LAYOUT.size - 8 * _capi.MAX_RANK


def describe(
    value: Any,
    name: str,
    runtime: Any,
    *,
    contiguous: bool = True,
    writable: bool = False,
) -> _capi.mla_tensor_t:
    """The view of `value` for `runtime`'s device. `contiguous`: the library
    needs row-major contiguous memory (else the tensor's own strides are
    passed, for a kernel to check). `writable`: the library writes it."""
    tensor = _capi.mla_tensor_t()
    describe_into(memoryview(tensor).cast("B"), 0, value, name, runtime,
                  contiguous=contiguous, writable=writable)
    return tensor


def describe_into(
    target: memoryview,
    offset: int,
    value: Any,
    name: str,
    runtime: Any,
    *,
    contiguous: bool = True,
    writable: bool = False,
    bytes_as: Optional[DType] = None,
) -> None:
    """Writes the view of `value` (as `describe` makes it) into the
    mla_tensor_t at byte `offset` of `target`. `bytes_as`: a tensor of
    1-byte elements (uint8, int8 or torch's float8 types) is read as that
    dtype: an FP8 cache, which vLLM keeps in uint8 tensors."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        if value.layout is not torch.strided:
            raise InvalidArgumentError(f"{name} is a {value.layout} tensor; libmla takes dense ones")
        fields = _torch_fields(value, name, runtime, contiguous, bytes_as)
    else:
        numpy = sys.modules.get("numpy")
        if numpy is not None and isinstance(value, numpy.ndarray):
            fields = _numpy_fields(value, name, runtime, contiguous, writable, bytes_as)
        else:
            own = getattr(value, "_mla_describe", None)
            if own is None:
                raise TypeError(
                    f"{name} must be a torch tensor, a numpy array or an mla.DeviceBuffer, "
                    f"got {type(value).__name__}"
                )
            fields = own(name, runtime)
    pack_view(target, offset, *fields)


def pack_view(
    target: memoryview, offset: int, data: int, dtype: DType, shape: Sequence[int], strides: Sequence[int]
) -> None:
    """Writes an mla_tensor_t over `data` (strides in elements, at most
    MAX_RANK of each, as the callers check) at byte `offset` of `target`."""
    pad = _ZEROS[len(shape):]
    _LAYOUT.pack_into(target, offset, data, dtype, len(shape), *shape, *pad, *strides, *pad)


def view(data: int, dtype: DType, shape: Sequence[int], strides: Sequence[int]) -> _capi.mla_tensor_t:
    """An mla_tensor_t over `data` (strides in elements)."""
    tensor = _capi.mla_tensor_t()
    pack_view(memoryview(tensor).cast("B"), 0, data, dtype, shape, strides)
    return tensor


@functools.lru_cache(maxsize=256)
def row_major_strides(shape: Tuple[int, ...]) -> Tuple[int, ...]:
    """The strides, in elements, of a contiguous tensor of `shape` (a
    tuple; cached, as a serving loop passes the same shapes every step)."""
    strides = []
    stride = 1
    for size in reversed(shape):
        strides.append(stride)
        stride *= size
    return tuple(reversed(strides))


def _check_rank(name: str, shape: Sequence[int]) -> None:
    if len(shape) > _capi.MAX_RANK:
        raise InvalidArgumentError(
            f"{name} has {len(shape)} dimensions; libmla takes at most {_capi.MAX_RANK}"
        )


def _not_contiguous(name: str, shape: Sequence[int], strides: Sequence[int]) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"{name} must be contiguous (row-major), got strides {tuple(strides)} for "
        f"shape {tuple(shape)}; make a contiguous copy first if that is intended"
    )


def _torch_fields(value: Any, name: str, runtime: Any, contiguous: bool, bytes_as: Optional[DType] = None) -> tuple:
    """(data, dtype, shape, strides) of a torch tensor on `runtime`'s device.
    The checks read as few tensor attributes as they can, each once: they
    run for every tensor of every step."""
    if value.is_cuda:
        if not runtime.is_cuda or value.get_device() != runtime.gpu_ordinal:
            raise _wrong_device(value, name, runtime)
    elif runtime.is_cuda or value.device.type != "cpu":
        raise _wrong_device(value, name, runtime)
    if bytes_as is not None and value.element_size() == 1:
        dtype = bytes_as
    else:
        dtype = _TORCH_DTYPES.get(value.dtype)
        if dtype is None:
            dtype = _TORCH_DTYPES[value.dtype] = DType.parse(value.dtype, what=f"{name}'s dtype")
    shape = value.shape  # a torch.Size: a tuple
    if len(shape) > _capi.MAX_RANK:
        _check_rank(name, shape)
    if contiguous:
        if not value.is_contiguous():
            raise _not_contiguous(name, shape, value.stride())
        strides = row_major_strides(shape)
    else:
        strides = value.stride()
    return value.data_ptr(), dtype, shape, strides


# torch dtypes seen before, as DTypes: one dict access per tensor.
_TORCH_DTYPES: dict = {}


def _wrong_device(value: Any, name: str, runtime: Any) -> InvalidArgumentError:
    device = value.device
    if runtime.is_cuda:
        where = f"cuda:{runtime.gpu_ordinal}"
        if device.type == "cpu":
            return InvalidArgumentError(f"{name} is on the CPU, but the runtime runs on {where}; pass a CUDA tensor")
        if device.type == "cuda":
            return InvalidArgumentError(f"{name} is on {device}, but the runtime runs on {where}")
    elif device.type == "cuda":
        return InvalidArgumentError(f"{name} is on {device}, but the runtime runs on the CPU; pass a CPU tensor")
    return InvalidArgumentError(f"{name} is on {device}, which libmla cannot use")


def _numpy_fields(
    value: Any, name: str, runtime: Any, contiguous: bool, writable: bool, bytes_as: Optional[DType] = None
) -> tuple:
    """(data, dtype, shape, strides) of a numpy array (host memory)."""
    if runtime.is_cuda:
        raise InvalidArgumentError(
            f"{name} is a numpy array in host memory, but the runtime runs on "
            f"cuda:{runtime.gpu_ordinal}; pass a CUDA tensor or an mla.DeviceBuffer"
        )
    if not value.dtype.isnative:
        raise InvalidArgumentError(f"{name} is not in the machine's byte order ({value.dtype})")
    if bytes_as is not None and value.dtype.itemsize == 1:
        dtype = bytes_as
    else:
        dtype = DType.parse(value.dtype, what=f"{name}'s dtype")
    shape = value.shape
    _check_rank(name, shape)
    if writable and not value.flags.writeable:
        raise InvalidArgumentError(f"{name} is read-only, and libmla writes it")
    if contiguous:
        if not value.flags.c_contiguous:
            raise _not_contiguous(name, shape, [s // value.itemsize for s in value.strides])
        strides = row_major_strides(shape)
    else:
        if any(s % value.itemsize for s in value.strides):
            raise InvalidArgumentError(
                f"{name} has strides {value.strides} bytes, not whole elements"
            )
        strides = tuple(s // value.itemsize for s in value.strides)
    return numpy_address(value), dtype, shape, strides


def numpy_address(array: Any) -> int:
    """The address of a numpy array's data. (ctypes' view of a writable
    buffer gives it four times faster than `array.ctypes.data`, which
    matters in per-step calls; read-only and empty arrays take the slow
    way.)"""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(array))
    except (TypeError, ValueError):
        return array.ctypes.data
