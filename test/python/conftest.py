"""Fixtures of the Python suite: the package from the source tree, the
device under test, a runtime per module with its own kernel cache, and a
random generator seeded afresh each run.

    MLA_LIBRARY=build/lib/libmla.so /usr/bin/python3 -m pytest test/python

MLA_TEST_DEVICE=gpu runs the device-dependent tests on CUDA tensors (the
default when torch sees a GPU); MLA_TEST_DEVICE=cpu forces the CPU.
MLA_TEST_SEED=<n> replays a run's random data (each test prints its seed).
"""

import os
import sys
from pathlib import Path

import pytest

# In the source tree the package is <repo>/runtime/python/mla; elsewhere (an
# installed package, the GPU bundle) it comes from the path.
REPO = Path(__file__).resolve().parents[2]
if (REPO / "runtime" / "python" / "mla").is_dir():
    sys.path.insert(0, str(REPO / "runtime" / "python"))
TESTS = Path(__file__).resolve().parent

import mla  # noqa: E402
import support  # noqa: E402

PACKAGE = Path(mla.__file__).resolve().parent

# Settings from outside would change what the tests select and count.
for _name in ("MLA_ATTENTION_BACKEND", "MLA_PREFILL_BACKEND", "MLA_CACHE_DISABLE", "MLA_CACHE_FORCE_RECOMPILE"):
    os.environ.pop(_name, None)


def pytest_report_header(config):
    return [f"mla: device {support.DEVICE}, seed base {support.SEED_BASE}"]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    """A kernel cache directory of the test module's own."""
    return tmp_path_factory.mktemp("mla-cache")


@pytest.fixture(scope="module")
def runtime(cache_dir):
    """A runtime on the device under test, released after the module."""
    with mla.Runtime(device=support.DEVICE, cache_dir=cache_dir) as rt:
        yield rt


@pytest.fixture(scope="module")
def cpu_runtime(cache_dir):
    """A CPU runtime, whatever the device under test."""
    with mla.Runtime(device="cpu", cache_dir=cache_dir) as rt:
        yield rt


@pytest.fixture
def rng(request):
    """A numpy generator seeded per test from the run's seed (printed, so a
    failure shows it; MLA_TEST_SEED replays it)."""
    seed = support.seed_for(request.node.nodeid)
    print(f"random seed: MLA_TEST_SEED={support.SEED_BASE} ({request.node.nodeid} -> {seed})")
    import numpy

    return numpy.random.default_rng(seed)


@pytest.fixture(params=support.FRAMEWORKS)
def framework(request, runtime):
    """Tensors of one framework (numpy, torch) on the runtime's device."""
    return support.make_framework(request.param, runtime)
