"""Element types (mla_dtype_t) and their spellings in Python.

A dtype may be given as a `DType`, a string ("bf16", "bfloat16", "f16",
"float16", "half", "f32", "float32", "float", "i32", "int32", "i64",
"int64", and for KV caches "fp8_e4m3", "fp8" (e4m3, as vLLM means it),
"fp8_e5m2", "float8_e4m3fn", "float8_e5m2"), a torch dtype or a numpy
dtype. Torch and numpy are consulted only for values that come from them,
so neither is imported here.

numpy has no bfloat16: bf16 tensors go through torch (torch.bfloat16).
"""

import enum
import sys
from typing import Any, Dict, Optional

from .errors import InvalidArgumentError


class DType(enum.IntEnum):
    """An element type, valued as mla_dtype_t."""

    F32 = 0
    F16 = 1
    BF16 = 2
    I32 = 3
    I64 = 4
    # KV cache formats only (vLLM's kv_cache_dtype "fp8_e4m3", "fp8_e5m2"),
    # kept in uint8 tensors or torch's float8 dtypes.
    FP8_E4M3 = 5
    FP8_E5M2 = 6

    def __str__(self) -> str:
        return self.name.lower()

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return _ITEMSIZE[self]

    @property
    def is_float(self) -> bool:
        """An activation format (not FP8)."""
        return self in (DType.F32, DType.F16, DType.BF16)

    @property
    def is_fp8(self) -> bool:
        return self in (DType.FP8_E4M3, DType.FP8_E5M2)

    def to_torch(self) -> Any:
        """The torch dtype (imports torch)."""
        import torch

        return getattr(torch, _LONG_NAME[self])

    def to_numpy(self) -> Any:
        """The numpy dtype (imports numpy); TypeError for bf16, which numpy
        lacks."""
        import numpy

        if self is DType.BF16:
            raise TypeError("numpy has no bfloat16; use torch.bfloat16 tensors")
        if self.is_fp8:
            return numpy.dtype("uint8")  # the codes, as vLLM keeps them
        return numpy.dtype(_LONG_NAME[self])

    @classmethod
    def parse(cls, value: Any, what: str = "dtype") -> "DType":
        """`value` as a DType; InvalidArgumentError naming `what` for
        anything else."""
        if isinstance(value, DType):
            return value
        try:
            return _PARSED[value]
        except (KeyError, TypeError):  # not seen yet, or unhashable
            pass
        name = _spelling(value)
        found = _BY_NAME.get(name) if name is not None else None
        if found is None:
            raise InvalidArgumentError(
                f"{what}: {value!r} is not an element type (use one of "
                "f32, f16, bf16, i32, i64, fp8_e4m3, fp8_e5m2 or a torch/numpy dtype)"
            )
        _PARSED[value] = found
        return found


# Spellings parsed before: every tensor passed is parsed, so the lookup is
# kept to one dict access after the first time.
_PARSED: Dict[Any, DType] = {}

_ITEMSIZE = {
    DType.F32: 4,
    DType.F16: 2,
    DType.BF16: 2,
    DType.I32: 4,
    DType.I64: 8,
    DType.FP8_E4M3: 1,
    DType.FP8_E5M2: 1,
}

_LONG_NAME = {
    DType.F32: "float32",
    DType.F16: "float16",
    DType.BF16: "bfloat16",
    DType.I32: "int32",
    DType.I64: "int64",
    DType.FP8_E4M3: "float8_e4m3fn",
    DType.FP8_E5M2: "float8_e5m2",
}

_BY_NAME: Dict[str, DType] = {
    **{str(d): d for d in DType},
    **{name: d for d, name in _LONG_NAME.items()},
    "float": DType.F32,
    "half": DType.F16,
    "fp8": DType.FP8_E4M3,  # vLLM's kv_cache_dtype="fp8"
}


def _spelling(value: Any) -> Optional[str]:
    """The name `value` goes by: itself for a string, "float32" for
    torch.float32 or numpy.float32; None when it is no dtype at all."""
    if isinstance(value, str):
        return value.lower()
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.dtype):
        return str(value)[len("torch."):]
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        try:
            return numpy.dtype(value).name
        except (TypeError, ValueError):
            return None
    return None
