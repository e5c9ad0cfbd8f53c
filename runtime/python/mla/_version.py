"""The loaded library's version and build (mla_version)."""

import ctypes
from dataclasses import dataclass
from typing import Tuple

from . import _capi, _library


@dataclass(frozen=True)
class VersionInfo:
    """What the loaded libmla says of itself.

    Attributes:
        major, minor, patch: the C API version.
        version: the same as text, "0.1.0".
        build_identity: the compiler's identity, also part of every kernel
            cache key ("mla-compiler 0.1.0 (<git commit>) LLVM 22.1.8").
        gpu_chips: the chips the compiler emits code for ("sm_80", ...).
        host_target: the host CPU the JIT compiles for.
        library_path: where the library was loaded from.
    """

    major: int
    minor: int
    patch: int
    version: str
    build_identity: str
    gpu_chips: Tuple[str, ...]
    host_target: str
    library_path: str


def version() -> VersionInfo:
    """The loaded library's version (loads it; LibraryLoadError if it
    cannot be)."""
    library = _library.load()
    info = _capi.mla_version_info_t()
    library.mla_version(ctypes.byref(info))
    chips = info.gpu_chips.decode()
    return VersionInfo(
        major=info.major,
        minor=info.minor,
        patch=info.patch,
        version=info.version.decode(),
        build_identity=info.build_identity.decode(),
        gpu_chips=tuple(chip for chip in chips.split(",") if chip),
        host_target=info.host_target.decode(),
        library_path=library.path,
    )
