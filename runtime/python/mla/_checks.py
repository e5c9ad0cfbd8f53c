"""Integers bound for C fields, checked before ctypes would wrap them."""

import operator
from typing import Any, Type

from .errors import InvalidArgumentError, MlaError


def as_int(
    value: Any,
    what: str,
    low: int = -(2**63),
    high: int = 2**63 - 1,
    error: Type[MlaError] = InvalidArgumentError,
) -> int:
    """`value` as an int in [low, high] (ctypes silently wraps what does not
    fit its field); `error` naming `what` otherwise."""
    try:
        number = operator.index(value)
    except TypeError:
        raise error(f"{what} must be an integer, got {value!r}") from None
    if not low <= number <= high:
        bounds = "non-negative" if low == 0 else f"in [{low}, {high}]"
        raise error(f"{what} must be {bounds}, got {number}")
    return number
