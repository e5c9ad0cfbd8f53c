"""Tensor views (zero-copy descriptors of numpy arrays and torch tensors),
dtype spellings and stream handles, without a device."""

import numpy as np
import pytest

import mla
from mla import DType
from mla._streams import stream_handle
from mla.tensors import describe


class Cpu:
    is_cuda = False


class Gpu:
    is_cuda = True
    gpu_ordinal = 1


def fields(view):
    return view.data, DType(view.dtype), tuple(view.shape[: view.rank]), tuple(view.strides[: view.rank])


def test_a_numpy_array_is_viewed_in_place():
    array = np.zeros((3, 4, 5), np.float16)
    assert fields(describe(array, "q", Cpu)) == (array.ctypes.data, DType.F16, (3, 4, 5), (20, 5, 1))
    column = np.zeros((4, 6), np.int64)[:, 1:3]
    # Kernels take strided memrefs: the array's own strides, in elements.
    assert fields(describe(column, "argument 0", Cpu, contiguous=False))[1:] == (DType.I64, (4, 2), (6, 1))
    with pytest.raises(mla.InvalidArgumentError, match=r"^x must be contiguous \(row-major\), got strides \(6, 1\)"):
        describe(column, "x", Cpu)


def test_a_torch_tensor_is_viewed_in_place():
    torch = pytest.importorskip("torch")
    tensor = torch.zeros((2, 3, 8), dtype=torch.bfloat16)
    assert fields(describe(tensor, "q", Cpu)) == (tensor.data_ptr(), DType.BF16, (2, 3, 8), (24, 8, 1))
    rows = tensor[1:]
    assert describe(rows, "q", Cpu).data == rows.data_ptr() != tensor.data_ptr()
    # A size-1 dimension's stride does not matter to contiguity.
    odd = torch.zeros((4, 1, 8)).as_strided((4, 1, 8), (8, 99, 1))
    assert fields(describe(odd, "q", Cpu))[3] == (8, 8, 1)
    with pytest.raises(mla.InvalidArgumentError, match="^q must be contiguous"):
        describe(tensor.transpose(0, 1), "q", Cpu)
    with pytest.raises(mla.InvalidArgumentError, match="^q is a torch.sparse_coo tensor"):
        describe(torch.zeros(4, 4).to_sparse(), "q", Cpu)


@pytest.mark.parametrize("dtype", ["float64", "bool", "uint8", "complex64"])
def test_dtypes_libmla_lacks_are_named(dtype):
    with pytest.raises(mla.InvalidArgumentError, match=f"^kv_c's dtype: dtype\\('{dtype}'\\)"):
        describe(np.zeros(3, dtype), "kv_c", Cpu)


def test_devices():
    torch = pytest.importorskip("torch")
    with pytest.raises(mla.InvalidArgumentError, match="^q is on the CPU, but the runtime runs on cuda:1"):
        describe(torch.zeros(2), "q", Gpu)
    with pytest.raises(mla.InvalidArgumentError, match="^q is a numpy array in host memory, but the runtime runs on cuda:1"):
        describe(np.zeros(2, np.float32), "q", Gpu)
    with pytest.raises(mla.InvalidArgumentError, match="^q is on meta"):
        describe(torch.zeros(2, device="meta"), "q", Cpu)
    if torch.cuda.is_available():
        with pytest.raises(mla.InvalidArgumentError, match="^q is on cuda:0, but the runtime runs on cuda:1"):
            describe(torch.zeros(2, device="cuda:0"), "q", Gpu)


def test_other_checks():
    with pytest.raises(mla.InvalidArgumentError, match="at most 8"):
        describe(np.zeros((1,) * 9, np.float32), "q", Cpu)
    swapped = np.zeros(3, np.dtype(np.float32).newbyteorder())
    with pytest.raises(mla.InvalidArgumentError, match="byte order"):
        describe(swapped, "q", Cpu)
    with pytest.raises(TypeError, match="^q must be a torch tensor"):
        describe(memoryview(b"abc"), "q", Cpu)


@pytest.mark.parametrize(
    "spelling, dtype",
    [("bf16", DType.BF16), ("bfloat16", DType.BF16), ("F16", DType.F16), ("half", DType.F16), ("float32", DType.F32), (np.float32, DType.F32), (np.dtype("int64"), DType.I64), (DType.I32, DType.I32)],
)
def test_dtype_spellings(spelling, dtype):
    assert DType.parse(spelling) is dtype


def test_torch_dtypes():
    torch = pytest.importorskip("torch")
    assert [DType.parse(t) for t in (torch.bfloat16, torch.half, torch.float32, torch.int32, torch.long)] == list(
        (DType.BF16, DType.F16, DType.F32, DType.I32, DType.I64)
    )
    assert DType.BF16.to_torch() is torch.bfloat16
    with pytest.raises(mla.InvalidArgumentError, match="config.activation_dtype"):
        DType.parse(torch.float64, "config.activation_dtype")


def test_dtype_properties():
    assert [d.itemsize for d in DType] == [4, 2, 2, 4, 8, 1, 1]
    assert str(DType.BF16) == "bf16" and DType.BF16.is_float and not DType.I32.is_float
    # The FP8 cache formats: vLLM's names, kept as uint8 codes in numpy.
    assert str(DType.FP8_E4M3) == "fp8_e4m3" and DType.parse("fp8") is DType.FP8_E4M3
    assert DType.FP8_E5M2.is_fp8 and not DType.FP8_E5M2.is_float
    assert DType.FP8_E4M3.to_numpy() == np.uint8
    assert DType.F16.to_numpy() == np.float16
    with pytest.raises(TypeError, match="numpy has no bfloat16"):
        DType.BF16.to_numpy()
    with pytest.raises(mla.InvalidArgumentError, match="'f64' is not an element type"):
        DType.parse("f64")


def test_streams():
    assert stream_handle(12345, Cpu) is None  # CPU runtimes ignore streams
    assert stream_handle(12345, Gpu) == 12345
    assert stream_handle(0, Gpu) is None

    class External:
        cuda_stream = 777

    assert stream_handle(External(), Gpu) == 777
    with pytest.raises(TypeError, match="stream must be"):
        stream_handle(1.5, Gpu)
