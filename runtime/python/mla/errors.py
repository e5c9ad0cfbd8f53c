"""Exceptions: one class per status of the C API, all under `MlaError`.

A failed C call raises the class of its status with the message the library
left for the calling thread (mla_last_error), which names the function and
what is wrong: the tensor by its role, the metadata field and request, the
config field, the compiler's diagnostics. Checks this package makes itself
before calling (a tensor on the wrong device, a host array too short)
raise the same classes, so callers catch one family.

Where a status has a natural built-in counterpart the class derives from it
too (`InvalidArgumentError` is a `ValueError`, `OutOfMemoryError` a
`MemoryError`), so generic handlers keep working.

`LibraryLoadError` is apart: it is raised before any C call can be made,
when libmla cannot be found or loaded, and is an `ImportError`.
"""

from typing import Dict, Type

from . import _capi


class MlaError(Exception):
    """A failure reported by libmla (or found before calling it).

    Attributes:
        status: the C status code (an `mla_status_t` value).
        status_name: its C name, e.g. "MLA_ERROR_COMPILE".
        message: the library's message (mla_last_error).
    """

    status_name = "MLA_ERROR"
    status = -1

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return f"{self.message} [{self.status_name}]"


class InvalidArgumentError(MlaError, ValueError):
    """A NULL or closed handle, a value out of range, a tensor of the wrong
    dtype, shape, layout or device, a malformed layer config (the message
    names the tensor or field)."""

    status = _capi.ERROR_INVALID_ARGUMENT
    status_name = "MLA_ERROR_INVALID_ARGUMENT"


class NoDeviceError(MlaError):
    """A GPU runtime was asked for and no usable GPU is there."""

    status = _capi.ERROR_NO_DEVICE
    status_name = "MLA_ERROR_NO_DEVICE"


class CompileError(MlaError):
    """A module did not parse, verify or lower (the message holds the
    compiler's diagnostics)."""

    status = _capi.ERROR_COMPILE
    status_name = "MLA_ERROR_COMPILE"


class BackendRejectedError(MlaError):
    """The named backend does not exist or refuses the config, or none
    fits (the message gives every reason)."""

    status = _capi.ERROR_BACKEND_REJECTED
    status_name = "MLA_ERROR_BACKEND_REJECTED"


class InvalidMetadataError(MlaError, ValueError):
    """A batch's metadata is inconsistent (the message names the field and
    request)."""

    status = _capi.ERROR_INVALID_METADATA
    status_name = "MLA_ERROR_INVALID_METADATA"


class DeviceRuntimeError(MlaError, RuntimeError):
    """A kernel launch, copy or synchronization failed on the device, or the
    operation cannot run on this runtime's device (capturing a CUDA graph on
    the CPU)."""

    status = _capi.ERROR_RUNTIME
    status_name = "MLA_ERROR_RUNTIME"


class OutOfMemoryError(MlaError, MemoryError):
    """Device memory (host memory on a CPU runtime) could not be had."""

    status = _capi.ERROR_OUT_OF_MEMORY
    status_name = "MLA_ERROR_OUT_OF_MEMORY"


class InternalError(MlaError):
    """Something the library did not expect; the message is worth
    reporting."""

    status = _capi.ERROR_INTERNAL
    status_name = "MLA_ERROR_INTERNAL"


class LibraryLoadError(ImportError):
    """libmla could not be found, loaded, or is of an incompatible version.
    The message lists every place tried and why each failed."""


_BY_STATUS: Dict[int, Type[MlaError]] = {
    cls.status: cls
    for cls in (
        InvalidArgumentError,
        NoDeviceError,
        CompileError,
        BackendRejectedError,
        InvalidMetadataError,
        DeviceRuntimeError,
        OutOfMemoryError,
        InternalError,
    )
}


def error_for_status(status: int, message: str) -> MlaError:
    """The exception for a failed call's `status` and message; a status the
    package does not know (a newer library) becomes an `MlaError` that
    still carries it."""
    cls = _BY_STATUS.get(status)
    if cls is not None:
        return cls(message)
    error = MlaError(message)
    error.status = status
    error.status_name = f"status {status}"
    return error
