"""BatchMetadata: host arrays from lists, numpy and torch, the counts
derived from them, and the checks that keep the library from reading past
an array."""

import ctypes

import numpy as np
import pytest

import mla
from mla.metadata import host_ints


def c_ints(address, ctype, count):
    return list((ctype * count).from_address(address)) if count else []


def test_lists_become_contiguous_int_arrays_and_counts():
    md = mla.BatchMetadata([0, 2, 4, 11], [9, 2, 30], [[3, 1], [0, 0], [5, 6]], [49, 50, 1, 2, 80, 81, 82, 83, 84, 85, 86, -1])
    assert (md.num_reqs, md.num_actual_tokens, md.max_query_len, md.max_seq_len) == (3, 11, 7, 30)
    assert (md.max_blocks, md.num_slots) == (2, 12)
    assert md.query_start_loc.dtype == np.int32 and md.slot_mapping.dtype == np.int64
    c = md._c
    assert c_ints(c.query_start_loc, ctypes.c_int32, 4) == [0, 2, 4, 11]
    assert c_ints(c.block_table, ctypes.c_int32, 6) == [3, 1, 0, 0, 5, 6]
    assert c_ints(c.slot_mapping, ctypes.c_int64, 12)[-2:] == [86, -1]
    assert (c.num_reqs, c.num_actual_tokens, c.max_query_len, c.max_seq_len, c.num_slots) == (3, 11, 7, 30, 12)


def test_right_typed_numpy_arrays_are_not_copied():
    starts = np.array([0, 1, 3], np.int32)
    slots = np.array([5, 6, 7], np.int64)
    md = mla.BatchMetadata(starts, np.array([4, 2], np.int32), np.zeros((2, 1), np.int32), slots)
    assert md.query_start_loc is starts and md._c.slot_mapping == slots.ctypes.data
    wide = mla.BatchMetadata(starts.astype(np.int64), [4, 2], [[0], [1]], slots.astype(np.int32))
    assert wide.query_start_loc.dtype == np.int32 and wide.slot_mapping.dtype == np.int64


def test_torch_cpu_tensors_are_read_in_place():
    torch = pytest.importorskip("torch")
    starts = torch.tensor([0, 1, 3], dtype=torch.int32)
    md = mla.BatchMetadata(starts, torch.tensor([4, 2], dtype=torch.int32), torch.zeros((2, 1), dtype=torch.int32), torch.tensor([5, 6, 7]))
    assert md._c.query_start_loc == starts.data_ptr()
    assert md.max_query_len == 2


def test_cuda_tensors_are_refused():
    torch = pytest.importorskip("torch")
    device = "cuda" if torch.cuda.is_available() else "meta"
    with pytest.raises(mla.InvalidMetadataError, match=f"seq_lens is on {device}.*host arrays"):
        mla.BatchMetadata([0, 1], torch.tensor([3], device=device), [[0]], [2])


def test_padded_arrays_and_explicit_counts():
    # vLLM pads the arrays of a CUDA-graph batch; num_reqs says how many count.
    md = mla.BatchMetadata([0, 1, 2, 2, 2], [5, 7, 0, 0], [[0], [1], [0], [0]], [4, 22, -1, -1], num_reqs=2, max_seq_len=64)
    assert (md.num_reqs, md.num_actual_tokens, md.max_query_len, md.max_seq_len) == (2, 2, 1, 64)
    assert md._c.num_slots == 4


@pytest.mark.parametrize(
    "arrays, message",
    [
        (dict(query_start_loc=[0, 1]), "query_start_loc has 2 entries.*3 of 2 requests"),
        (dict(block_table=[[0]]), "block_table has 1 entries"),
        (dict(slot_mapping=[1]), "slot_mapping has 1 entries, fewer than num_actual_tokens \\(2\\)"),
        (dict(seq_lens=[3.5, 4]), "seq_lens must hold integers"),
        (dict(slot_mapping=[1, 2**40]), None),
        (dict(query_start_loc=[0, 1, 2**33]), "query_start_loc has values outside int32"),
        (dict(block_table=[0, 1]), "block_table must have 2 dimension"),
        (dict(block_table=[[0, 1], [2]]), "block_table"),
        (dict(num_reqs=-1), "num_reqs must be non-negative"),
        (dict(num_reqs=3), "query_start_loc has 3 entries"),
        (dict(num_reqs=3, query_start_loc=[0, 1, 2, 2]), "seq_lens has 2 entries"),
        (dict(max_seq_len="long"), "max_seq_len must be an integer"),
    ],
)
def test_arrays_that_do_not_fit_their_counts(arrays, message):
    fields = dict(query_start_loc=[0, 1, 2], seq_lens=[3, 4], block_table=[[0], [1]], slot_mapping=[2, 19])
    fields.update(arrays)
    if message is None:  # a valid int64 slot: only the library can judge it
        assert mla.BatchMetadata(**fields).slot_mapping[1] == 2**40
        return
    with pytest.raises(mla.InvalidMetadataError, match=message):
        mla.BatchMetadata(**fields)


def test_from_lengths():
    md = mla.BatchMetadata.from_lengths([2, 3], [5, 17], [[4, 9, 0], [7, 2, 5]], block_size=8, num_slots=7)
    np.testing.assert_array_equal(md.query_start_loc, [0, 2, 5])
    # Request 0: positions 3, 4 in page 4; request 1: positions 14, 15 at
    # the end of its second page (2), 16 at the start of its third (5).
    np.testing.assert_array_equal(md.slot_mapping, [35, 36, 22, 23, 40, -1, -1])
    with pytest.raises(mla.InvalidMetadataError, match="no page 2 for request 1"):
        mla.BatchMetadata.from_lengths([1, 1], [3, 17], [[0, 1], [2, 3]], block_size=8)
    with pytest.raises(mla.InvalidMetadataError, match="num_slots"):
        mla.BatchMetadata.from_lengths([2], [5], [[0]], block_size=8, num_slots=1)


def test_without_numpy_ctypes_arrays_hold_the_same(monkeypatch):
    monkeypatch.setattr(mla.metadata, "_numpy", lambda: None)
    md = mla.BatchMetadata([0, 2, 4, 11], [9, 2, 30], [[3, 1], [0, 0], [5, 6]], list(range(12)))
    assert isinstance(md.query_start_loc, ctypes.Array)
    assert (md.num_actual_tokens, md.max_query_len, md.max_seq_len, md.max_blocks) == (11, 7, 30, 2)
    assert c_ints(md._c.block_table, ctypes.c_int32, 6) == [3, 1, 0, 0, 5, 6]
    for values, message in (([1.5], "integers"), ([2**31], "outside int32")):
        with pytest.raises(mla.InvalidMetadataError, match=message):
            host_ints(values, "seq_lens", 32, 1)
    with pytest.raises(mla.InvalidMetadataError, match="rows of different lengths"):
        host_ints([[1, 2], [3]], "block_table", 32, 2)
    assert host_ints([], "block_table", 32, 2)[2] == (0, 0)


def test_an_empty_batch():
    md = mla.BatchMetadata([0], [], np.zeros((0, 4), np.int32), [])
    assert (md.num_reqs, md.num_actual_tokens, md.max_query_len, md.max_seq_len, md.max_blocks) == (0, 0, 0, 0, 4)
