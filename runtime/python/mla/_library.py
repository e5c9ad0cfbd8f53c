"""Finding, loading and binding libmla.so, once, on first use.

`import mla` never touches the library, so the package imports (and its
pure-Python parts work) on machines without it; the first call that needs
it loads it and, if that fails, raises `LibraryLoadError` listing every
place tried and why each failed. The places, in order:

1. `MLA_LIBRARY`, a file path. When set it is the only place tried: a user
   who names a library means that one, and a silent fallback to another
   would hide the mistake.
2. Next to the package: `mla/libmla.so*` (a wheel or a copy that carries
   its library).
3. The install layout: the package in `<prefix>/lib/python3*/{dist,site}-
   packages/mla`, the library in `<prefix>/lib/libmla.so.0`.
4. The build tree: the package in `<repo>/runtime/python/mla`, the library
   in `<repo>/build/lib/libmla.so`.
5. `ctypes.util.find_library("mla")` (the loader's search path).

A library is taken when its C API has this package's major version and at
least its minor one (mla.h's rule for programs built against it).

The library is opened with `ctypes.CDLL`, which releases the GIL during
each call: compiles take seconds, and the library calls the log callback
from its compile worker threads, which must be able to take the GIL.
"""

import ctypes
import ctypes.util
import os
import threading
from pathlib import Path
from typing import Any, Callable, List, Optional, Tuple

from . import _capi
from .errors import LibraryLoadError, error_for_status

ENVIRONMENT_VARIABLE = "MLA_LIBRARY"


class Library:
    """The loaded library: one attribute per C function of `_capi`,
    prototyped, status-returning ones checked (a failure raises the
    `MlaError` subclass of its status with mla_last_error's message)."""

    def __init__(self, cdll: ctypes.CDLL, path: str):
        self.path = path
        self._cdll = cdll
        for name in _capi.PROTOTYPES:
            setattr(self, name, self._bind(name))

    def _bind(self, name: str) -> Callable[..., Any]:
        try:
            function = getattr(self._cdll, name)
        except AttributeError:
            return _missing(self.path, name)
        restype, argtypes = _capi.PROTOTYPES[name]
        function.restype = restype
        function.argtypes = argtypes
        if name not in _capi.UNCHECKED:
            function.errcheck = self._check
        return function

    def _check(self, result: int, function: Any, arguments: Any) -> int:
        if result != _capi.OK:
            message = self.mla_last_error().decode("utf-8", "replace")
            raise error_for_status(result, message)
        return result


def _missing(path: str, name: str) -> Callable[..., Any]:
    """A stand-in for a function the library does not export (a library
    older than this package): calling it says so."""

    def call(*_: Any) -> Any:
        raise LibraryLoadError(
            f"{path} does not export {name}: the library is older than this "
            f"package (C API {_capi.VERSION_MAJOR}.{_capi.VERSION_MINOR}); "
            "rebuild or reinstall libmla"
        )

    return call


def _package_directory() -> Path:
    return Path(__file__).resolve().parent


def candidates() -> List[Tuple[str, Optional[str]]]:
    """The places to look, in order, as (description, path); a path of
    None means the place had nothing to offer (the description says
    why)."""
    explicit = os.environ.get(ENVIRONMENT_VARIABLE)
    if explicit is not None:
        return [(f"${ENVIRONMENT_VARIABLE}={explicit}", explicit)]

    package = _package_directory()
    places: List[Tuple[str, Optional[str]]] = []

    beside = sorted(package.glob("libmla.so*"), key=lambda p: (len(p.name), p.name))
    places.append(
        (f"next to the package: {beside[0]}", str(beside[0]))
        if beside
        else (f"next to the package: no libmla.so* in {package}", None)
    )

    site, python = package.parent, package.parent.parent
    if site.name in ("dist-packages", "site-packages") and python.name.startswith("python3"):
        installed = python.parent / "libmla.so.0"
        places.append((f"the install layout: {installed}", str(installed)))
    else:
        places.append((f"the install layout: {package} is not in <prefix>/lib/python3*/", None))

    if package.parent.name == "python" and package.parent.parent.name == "runtime":
        built = package.parents[2] / "build" / "lib" / "libmla.so"
        places.append((f"the build tree: {built}", str(built)))
    else:
        places.append((f"the build tree: {package} is not in <repo>/runtime/python/", None))

    found = ctypes.util.find_library("mla")
    places.append(
        (f"ctypes.util.find_library('mla'): {found}", found)
        if found
        else ("ctypes.util.find_library('mla'): not found", None)
    )
    return places


def _open(path: str) -> Library:
    """Opens and binds `path`, checking that its C API major version is
    this package's; raises OSError or LibraryLoadError saying why not."""
    # A bare name from find_library is the loader's business; a path must
    # exist, which gives a clearer reason than dlopen's.
    if os.sep in path:
        if not os.path.exists(path):
            raise OSError("no such file")
        path = os.path.abspath(path)
    library = Library(ctypes.CDLL(path), path)
    info = _capi.mla_version_info_t()
    library.mla_version(ctypes.byref(info))
    # As mla.h says of programs built against it: the same major version,
    # at least the minor one this package was written for.
    if info.major != _capi.VERSION_MAJOR or info.minor < _capi.VERSION_MINOR:
        raise LibraryLoadError(
            f"its C API is version {info.version.decode()}, this package needs "
            f"{_capi.VERSION_MAJOR}.{_capi.VERSION_MINOR} or a later {_capi.VERSION_MAJOR}.x"
        )
    return library


_lock = threading.Lock()
_loaded: Optional[Library] = None


def load() -> Library:
    """The library, loaded on the first call. A failure is not remembered:
    a later call looks again (the library may have been built since)."""
    global _loaded
    if _loaded is not None:
        return _loaded
    with _lock:
        if _loaded is None:
            tried = []
            for description, path in candidates():
                if path is None:
                    tried.append(description)
                    continue
                try:
                    _loaded = _open(path)
                    break
                except (OSError, LibraryLoadError) as error:
                    tried.append(f"{description}: {error}")
            else:
                raise LibraryLoadError(
                    "libmla.so could not be loaded; tried, in order:\n  "
                    + "\n  ".join(tried)
                    + f"\nSet {ENVIRONMENT_VARIABLE} to the library's path."
                )
    return _loaded
