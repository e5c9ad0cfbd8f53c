"""Finding and loading libmla, its version, and the ctypes declarations
checked against mla.h (every function declared, every struct laid out as
the C compiler lays it out)."""

import ctypes
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

import mla
from mla import _capi, _library
from conftest import PACKAGE, REPO

HEADER = REPO / "include" / "mla" / "mla.h"
needs_header = pytest.mark.skipif(not HEADER.exists(), reason="needs include/mla/mla.h (a source checkout)")


def run_python(code, cwd, env_changes):
    """Runs `code` in a fresh interpreter (the library is loaded once per
    process); returns (returncode, stdout, stderr)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MLA_LIBRARY", "PYTHONPATH")}
    env.update(env_changes)
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )
    return result.returncode, result.stdout, result.stderr


def copy_package(directory):
    target = directory / "mla"
    shutil.copytree(PACKAGE, target, ignore=shutil.ignore_patterns("__pycache__", "libmla.so*"))
    return target


def test_import_needs_neither_the_library_nor_numpy_nor_torch(tmp_path):
    code, out, err = run_python(
        """
        import sys, mla
        assert "numpy" not in sys.modules and "torch" not in sys.modules, sorted(sys.modules)
        config = mla.LayerConfig(num_heads=16)
        try:
            mla.Runtime()
        except ImportError as error:
            assert isinstance(error, mla.LibraryLoadError)
            print(error)
        """,
        tmp_path,
        {"MLA_LIBRARY": str(tmp_path / "missing.so"), "PYTHONPATH": str(PACKAGE.parent)},
    )
    assert code == 0, err
    assert f"$MLA_LIBRARY={tmp_path / 'missing.so'}: no such file" in out
    assert "Set MLA_LIBRARY" in out


def test_an_unusable_explicit_library_is_the_error(tmp_path):
    bogus = tmp_path / "libmla.so"
    bogus.write_text("not a library")
    code, out, err = run_python(
        "import mla\ntry:\n    mla.version()\nexcept mla.LibraryLoadError as e:\n    print(e)",
        tmp_path,
        {"MLA_LIBRARY": str(bogus), "PYTHONPATH": str(PACKAGE.parent)},
    )
    assert code == 0, err
    # Only the named library was tried, and dlopen's reason is given.
    assert f"$MLA_LIBRARY={bogus}:" in out and "tried, in order:\n  $MLA_LIBRARY" in out
    assert "next to the package" not in out


def test_every_place_tried_is_listed(tmp_path):
    copy_package(tmp_path)
    code, out, err = run_python(
        "import mla\ntry:\n    mla.version()\nexcept mla.LibraryLoadError as e:\n    print(e)",
        tmp_path,
        {"PYTHONPATH": str(tmp_path), "LD_LIBRARY_PATH": ""},
    )
    assert code == 0, err
    places = ["next to the package: no libmla.so*", "the install layout:", "the build tree:", "find_library('mla')"]
    positions = [out.find(place) for place in places]
    assert all(p >= 0 for p in positions) and positions == sorted(positions), out


def built_library():
    library = _library.load()
    return os.path.realpath(library.path)


def test_a_library_next_to_the_package(tmp_path):
    package = copy_package(tmp_path)
    (package / "libmla.so.0").symlink_to(built_library())
    code, out, err = run_python(
        "import mla; print(mla.version().library_path)", tmp_path, {"PYTHONPATH": str(tmp_path)}
    )
    assert code == 0, err
    assert out.strip() == str(package / "libmla.so.0")


def test_the_install_layout(tmp_path):
    site = tmp_path / "lib" / "python3" / "dist-packages"
    site.mkdir(parents=True)
    copy_package(site)
    (tmp_path / "lib" / "libmla.so.0").symlink_to(built_library())
    code, out, err = run_python(
        "import mla; print(mla.version().library_path)", tmp_path, {"PYTHONPATH": str(site)}
    )
    assert code == 0, err
    assert out.strip() == str(tmp_path / "lib" / "libmla.so.0")


def test_the_build_tree_when_nothing_is_named(tmp_path):
    if PACKAGE != REPO / "runtime" / "python" / "mla" or not (REPO / "build" / "lib" / "libmla.so").exists():
        pytest.skip("needs the package in a source checkout with build/lib/libmla.so")
    code, out, err = run_python(
        "import mla; print(mla.version().library_path)", tmp_path, {"PYTHONPATH": str(PACKAGE.parent)}
    )
    assert code == 0, err
    assert out.strip() == str(REPO / "build" / "lib" / "libmla.so")


def test_another_major_version_is_refused(monkeypatch):
    path = _library.load().path
    monkeypatch.setattr(_capi, "VERSION_MAJOR", _capi.VERSION_MAJOR + 1)
    with pytest.raises(mla.LibraryLoadError, match=f"needs {_capi.VERSION_MAJOR}.{_capi.VERSION_MINOR} or a later"):
        _library._open(path)


def test_a_function_the_library_lacks_says_so():
    libc = _library.Library(ctypes.CDLL(None), "libc")
    with pytest.raises(mla.LibraryLoadError, match="libc does not export mla_version"):
        libc.mla_version(None)


def test_version():
    info = mla.version()
    assert (info.major, info.minor) == (mla.VERSION_MAJOR, mla.VERSION_MINOR)
    assert info.version == f"{info.major}.{info.minor}.{info.patch}" == mla.__version__
    assert info.build_identity.startswith(f"mla-compiler {info.version} (") and "LLVM" in info.build_identity
    assert "sm_80" in info.gpu_chips and all(re.fullmatch(r"sm_\d+a?", chip) for chip in info.gpu_chips)
    assert info.host_target and os.path.exists(info.library_path)


def header_functions():
    text = HEADER.read_text()
    return set(re.findall(r"^(?:mla_status_t|const char \*)\s*(mla_\w+)\(", text, re.M))


@needs_header
def test_every_function_of_the_header_is_declared():
    assert header_functions() == set(_capi.PROTOTYPES)
    library = _library.load()
    for name in _capi.PROTOTYPES:
        function = getattr(library, name)
        assert isinstance(function, ctypes._CFuncPtr), f"{library.path} lacks {name}"
        assert function.argtypes is not None and function.restype is not None


STRUCTS = [
    getattr(_capi, name)
    for name in dir(_capi)
    if name.endswith("_t") and isinstance(getattr(_capi, name), type) and issubclass(getattr(_capi, name), ctypes.Structure)
]


@needs_header
def test_structs_match_the_header(tmp_path):
    compiler = shutil.which("cc")
    if compiler is None:
        pytest.skip("no C compiler to read the header's layout")
    lines = []
    for struct in STRUCTS:
        lines.append(f'printf("{struct.__name__} %zu\\n", sizeof({struct.__name__}));')
        for field, _ in struct._fields_:
            lines.append(f'printf("{struct.__name__}.{field} %zu\\n", offsetof({struct.__name__}, {field}));')
    source = tmp_path / "layout.c"
    source.write_text(
        "#include <stddef.h>\n#include <stdio.h>\n#include \"mla/mla.h\"\nint main(void) {\n"
        + "\n".join(lines)
        + "\nreturn 0;\n}\n"
    )
    subprocess.run([compiler, "-std=c99", f"-I{REPO / 'include'}", str(source), "-o", str(tmp_path / "layout")], check=True)
    layout = dict(line.rsplit(" ", 1) for line in subprocess.check_output([str(tmp_path / "layout")], text=True).splitlines())
    for struct in STRUCTS:
        assert int(layout[struct.__name__]) == ctypes.sizeof(struct), struct.__name__
        for field, _ in struct._fields_:
            assert int(layout[f"{struct.__name__}.{field}"]) == getattr(struct, field).offset, f"{struct.__name__}.{field}"
    assert len(STRUCTS) == len(re.findall(r"^typedef struct \w+ \{", HEADER.read_text(), re.M))


@needs_header
def test_enums_match_the_header():
    text = HEADER.read_text()
    values = {name: int(value) for name, value in re.findall(r"\b(MLA_\w+) = (\d+)", text)}
    assert values["MLA_ERROR_INTERNAL"] == _capi.ERROR_INTERNAL
    assert values["MLA_DEVICE_GPU"] == _capi.DEVICE_GPU
    assert values["MLA_DTYPE_I64"] == mla.DType.I64
    assert values["MLA_KERNEL_DISK_CACHE"] == _capi.KERNEL_ORIGINS.index("disk_cache")
    assert values["MLA_BACKEND_SOURCE_ENVIRONMENT"] == _capi.BACKEND_SOURCES.index("environment")
    for macro in ("MAJOR", "MINOR", "PATCH"):
        assert re.search(rf"#define MLA_VERSION_{macro} {getattr(_capi, 'VERSION_' + macro)}\b", text)


def test_layer_config_defaults_mirror_the_library():
    c = _capi.mla_layer_config_t()
    _library.load().mla_layer_config_default(ctypes.byref(c))
    ours = mla.LayerConfig()._to_c()
    for field, _ in c._fields_:
        assert getattr(ours, field) == getattr(c, field), field
