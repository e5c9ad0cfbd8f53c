"""Single kernels from MLIR text: compiled, described, run on numpy and
torch tensors against the float64 reference, and their errors."""

import numpy as np
import pytest

import mla
import reference
from mla import DType

# A merge of two attention states over 4 heads of 32 values, f32.
MERGE = """
func.func @kernel(%po: memref<?x4x32xf32>, %pl: memref<4x?xf32>,
                  %so: memref<?x4x32xf32>, %sl: memref<4x?xf32>,
                  %o: memref<?x4x32xf32>, %ol: memref<4x?xf32>) {
  mla.merge_attn_states ins(%po, %pl, %so, %sl : memref<?x4x32xf32>, memref<4x?xf32>, memref<?x4x32xf32>, memref<4x?xf32>)
      outs(%o, %ol : memref<?x4x32xf32>, memref<4x?xf32>)
  return
}
"""


@pytest.fixture(scope="module")
def merge(runtime):
    with runtime.compile(MERGE, "kernel") as kernel:
        yield kernel


def merge_inputs(rng, tokens):
    """Two random states, with empty ones (-inf, and +inf as some kernels
    write them) in both, alone and together."""
    prefix_out, suffix_out = rng.uniform(-1, 1, (2, tokens, 4, 32))
    prefix_lse, suffix_lse = rng.uniform(-3, 3, (2, 4, tokens))
    prefix_lse[0, 0] = -np.inf
    suffix_lse[1, 1] = np.inf
    prefix_lse[2, 2] = suffix_lse[2, 2] = -np.inf
    return prefix_out, prefix_lse, suffix_out, suffix_lse


def test_info_and_arguments(runtime, merge):
    info = merge.info
    assert info.num_args == 6
    assert info.origin in ("compiled", "disk_cache")
    assert info.milliseconds > 0 and "merge_attn_states" in info.cache_entry
    assert merge.argument(0) == mla.ArgumentSpec(DType.F32, (-1, 4, 32))
    assert merge.argument(5) == mla.ArgumentSpec(DType.F32, (4, -1))
    with pytest.raises(mla.InvalidArgumentError, match="index 6"):
        merge.argument(6)
    # The runtime already holds it: a memory hit, and the same kernel (its
    # origin says where its code came from when it was first asked for).
    hits = runtime.cache_stats().memory_hits
    with runtime.compile(MERGE, "kernel") as again:
        assert again.info == info
        assert runtime.cache_stats().memory_hits == hits + 1


def run_merge(merge, tensors, to_numpy, rng):
    tokens = 5
    inputs = merge_inputs(rng, tokens)
    args = [tensors(x) for x in inputs] + [tensors(np.full((tokens, 4, 32), 9.0)), tensors(np.full((4, tokens), 9.0))]
    merge.run(*args)
    want_out, want_lse = reference.merge_attn_states(*inputs)
    out, lse = to_numpy(args[4]), to_numpy(args[5])
    assert reference.relative_l2(out, want_out) <= 2.0**-16
    assert np.array_equal(np.isneginf(lse), np.isneginf(want_lse))
    finite = np.isfinite(want_lse)
    assert np.abs(lse[finite] - want_lse[finite]).max() <= 2.0**-16 * 4
    assert np.all(out[2, 2] == 0)


def test_run_on_numpy(runtime, merge, rng):
    if runtime.is_cuda:
        pytest.skip("numpy arrays are host memory")
    run_merge(merge, lambda x: x.astype(np.float32), lambda x: x, rng)


def test_run_on_torch(runtime, merge, rng):
    torch = pytest.importorskip("torch")
    device = f"cuda:{runtime.gpu_ordinal}" if runtime.is_cuda else "cpu"

    def to_numpy(tensor):
        return tensor.cpu().numpy()

    run_merge(merge, lambda x: torch.tensor(x, dtype=torch.float32, device=device), to_numpy, rng)
    if runtime.is_cuda:
        runtime.synchronize()


def test_run_on_device_buffers(runtime, merge, rng):
    def upload(values):
        buffer = runtime.allocate(values.shape, "f32")
        buffer.upload(values.astype(np.float32))
        return buffer

    def download(buffer):
        runtime.synchronize()
        return buffer.download()

    run_merge(merge, upload, download, rng)


def test_arguments_that_do_not_fit_are_named_by_index(runtime, merge):
    if runtime.is_cuda:
        torch = pytest.importorskip("torch")
        zeros = lambda *shape: torch.zeros(shape, device=f"cuda:{runtime.gpu_ordinal}")  # noqa: E731
    else:
        zeros = lambda *shape: np.zeros(shape, np.float32)  # noqa: E731
    good = [zeros(3, 4, 32), zeros(4, 3)] * 3
    bad = list(good)
    bad[2] = zeros(3, 4, 16)
    with pytest.raises(mla.InvalidArgumentError, match="argument 2"):
        merge.run(*bad)
    with pytest.raises(mla.InvalidArgumentError):
        merge.run(*good[:5])


@pytest.mark.parametrize(
    "source, entry, message",
    [
        ("func.func @kernel(", "kernel", "mla_kernel_compile_source"),
        (MERGE, "missing", "missing"),
        (MERGE.replace("memref<?x4x32xf32>, memref<4x?xf32>)\n      outs", "memref<?x4x16xf32>, memref<4x?xf32>)\n      outs"), "kernel", "mla_kernel_compile_source"),
    ],
    ids=["does not parse", "no such entry", "does not verify"],
)
def test_bad_mlir_is_a_compile_error(runtime, source, entry, message):
    with pytest.raises(mla.CompileError, match=message) as failure:
        runtime.compile(source, entry)
    assert failure.value.status_name == "MLA_ERROR_COMPILE"
