"""One batch's metadata, as vLLM's CommonAttentionMetadata (host arrays).

The library reads these arrays during planning only, through raw pointers
and the counts that come with them, so everything that could make it read
past an array is checked here first (the library checks the values). The
arrays are held as contiguous int32 (int64 for slot_mapping) host arrays:
numpy arrays when numpy is there (no copy when the input already is one of
the right type, e.g. vLLM's `*_cpu` tensors through `.numpy()`), else
ctypes arrays.
"""

import ctypes
import operator
import sys
from dataclasses import dataclass, field
from typing import Any, List, Optional, Sequence, Tuple

from . import _capi
from ._checks import as_int
from .errors import InvalidMetadataError
from .tensors import numpy_address

_INT_RANGE = {32: (-(2**31), 2**31 - 1), 64: (-(2**63), 2**63 - 1)}


def _numpy() -> Any:
    """numpy, or None without it (imported on first use only)."""
    global _numpy_module
    if _numpy_module is False:
        try:
            import numpy
        except ImportError:
            numpy = None
        _numpy_module = numpy
    return _numpy_module


_numpy_module: Any = False


def _as_list(values: Any) -> list:
    return values.tolist() if hasattr(values, "tolist") else list(values)


def _from_torch(values: Any, name: str, numpy: Any) -> Any:
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(values, torch.Tensor):
        return values
    if values.device.type != "cpu":
        raise InvalidMetadataError(
            f"{name} is on {values.device}; metadata must be host arrays (vLLM's *_cpu tensors)"
        )
    return values.numpy() if numpy is not None else values.tolist()


def host_ints(values: Any, name: str, bits: int, ndim: int) -> Tuple[Any, int, Tuple[int, ...]]:
    """`values` (a list, numpy array or CPU torch tensor of `ndim`
    dimensions) as a contiguous host array of `bits`-bit integers: (the
    array, its address, its shape). InvalidMetadataError naming `name` for
    non-integers, values out of range or the wrong number of dimensions."""
    numpy = _numpy()
    values = _from_torch(values, name, numpy)
    low, high = _INT_RANGE[bits]
    if numpy is not None:
        try:
            array = numpy.asarray(values)
        except ValueError as failure:  # ragged rows
            raise InvalidMetadataError(f"{name}: {failure}") from None
        if ndim == 2 and array.shape == (0,):
            array = array.reshape(0, 0)
        if array.ndim != ndim:
            raise InvalidMetadataError(f"{name} must have {ndim} dimension(s), got shape {array.shape}")
        target = numpy.int32 if bits == 32 else numpy.int64
        if array.dtype != target:
            if array.size and array.dtype.kind not in "iu":
                raise InvalidMetadataError(f"{name} must hold integers, got {array.dtype}")
            if array.size and (array.min() < low or array.max() > high):
                raise InvalidMetadataError(f"{name} has values outside int{bits}")
            array = array.astype(target)
        if not array.flags.c_contiguous:
            array = numpy.ascontiguousarray(array)
        return array, numpy_address(array), array.shape

    rows = list(values) if ndim == 1 else [list(row) for row in values]
    if ndim == 2:
        width = len(rows[0]) if rows else 0
        if any(len(row) != width for row in rows):
            raise InvalidMetadataError(f"{name} has rows of different lengths")
        shape: Tuple[int, ...] = (len(rows), width)
        flat = [value for row in rows for value in row]
    else:
        shape = (len(rows),)
        flat = rows
    try:
        flat = [operator.index(value) for value in flat]
    except TypeError:
        raise InvalidMetadataError(f"{name} must hold integers") from None
    if any(not low <= value <= high for value in flat):
        raise InvalidMetadataError(f"{name} has values outside int{bits}")
    array = ((ctypes.c_int32 if bits == 32 else ctypes.c_int64) * len(flat))(*flat)
    return array, ctypes.addressof(array), shape


def _max(values: Any, count: int) -> int:
    if count == 0:
        return 0
    window = values[:count]
    return int(window.max()) if hasattr(window, "max") else max(window)


def _max_step(starts: Any, count: int) -> int:
    """The largest starts[b + 1] - starts[b] for b < count."""
    if count == 0:
        return 0
    window = starts[: count + 1]
    if hasattr(window, "max"):
        return int((window[1:] - window[:-1]).max())
    return max(b - a for a, b in zip(window, window[1:]))


@dataclass(eq=False)
class BatchMetadata:
    """One batch of requests, ordered decodes first (requests with at most
    the layer's decode_threshold new tokens), as vLLM reorders it.

    Args:
        query_start_loc: [num_reqs + 1]; request b owns query rows
            [query_start_loc[b], query_start_loc[b + 1]).
        seq_lens: [num_reqs]; cached context plus new tokens.
        block_table: [num_reqs, max_blocks]; token j of request b lives in
            page block_table[b][j // block_size], row j % block_size.
        slot_mapping: [num_slots]; the cache slot (page * block_size + row)
            of each new token, -1 to skip its write. Entries past
            num_actual_tokens are padding.
        num_reqs: default len(seq_lens); the arrays may be longer (padded).
        num_actual_tokens: default query_start_loc[num_reqs].
        max_query_len: default the longest query.
        max_seq_len: default the longest sequence (an upper bound will do).

    Lists, numpy arrays and CPU torch tensors are accepted. The arrays are
    converted (copied only when they are not already contiguous int32 /
    int64) and the defaults derived when the object is made, so build one
    per step rather than changing its arrays in place.
    """

    query_start_loc: Any
    seq_lens: Any
    block_table: Any
    slot_mapping: Any
    num_reqs: Optional[int] = None
    num_actual_tokens: Optional[int] = None
    max_query_len: Optional[int] = None
    max_seq_len: Optional[int] = None
    _c: _capi.mla_batch_metadata_t = field(init=False, repr=False)

    def __post_init__(self) -> None:
        starts, starts_address, starts_shape = host_ints(self.query_start_loc, "query_start_loc", 32, 1)
        lens, lens_address, lens_shape = host_ints(self.seq_lens, "seq_lens", 32, 1)
        table, table_address, table_shape = host_ints(self.block_table, "block_table", 32, 2)
        slots, slots_address, slots_shape = host_ints(self.slot_mapping, "slot_mapping", 64, 1)
        self.query_start_loc, self.seq_lens = starts, lens
        self.block_table, self.slot_mapping = table, slots

        num_reqs = (
            lens_shape[0]
            if self.num_reqs is None
            else as_int(self.num_reqs, "num_reqs", 0, error=InvalidMetadataError)
        )
        for name, have, need in (
            ("query_start_loc", starts_shape[0], num_reqs + 1),
            ("seq_lens", lens_shape[0], num_reqs),
            ("block_table", table_shape[0], num_reqs),
        ):
            if have < need:
                raise InvalidMetadataError(
                    f"{name} has {have} entries (rows), fewer than the {need} of {num_reqs} requests"
                )
        self.num_reqs = num_reqs
        derived = {
            "num_actual_tokens": lambda: int(starts[num_reqs]),
            "max_query_len": lambda: _max_step(starts, num_reqs),
            "max_seq_len": lambda: _max(lens, num_reqs),
        }
        for name, derive in derived.items():
            given = getattr(self, name)
            value = derive() if given is None else as_int(given, name, error=InvalidMetadataError)
            setattr(self, name, value)
        if slots_shape[0] < self.num_actual_tokens:
            raise InvalidMetadataError(
                f"slot_mapping has {slots_shape[0]} entries, fewer than num_actual_tokens "
                f"({self.num_actual_tokens})"
            )

        c = _capi.mla_batch_metadata_t()
        c.query_start_loc = starts_address
        c.seq_lens = lens_address
        c.block_table = table_address
        c.max_blocks = table_shape[1]
        c.slot_mapping = slots_address
        c.num_slots = slots_shape[0]
        c.num_reqs = num_reqs
        c.num_actual_tokens = self.num_actual_tokens
        c.max_query_len = self.max_query_len
        c.max_seq_len = self.max_seq_len
        self._c = c

    @property
    def max_blocks(self) -> int:
        """The block table's width."""
        return int(self._c.max_blocks)

    @property
    def num_slots(self) -> int:
        return int(self._c.num_slots)

    @classmethod
    def from_lengths(
        cls,
        query_lens: Sequence[int],
        seq_lens: Sequence[int],
        block_table: Any,
        block_size: int,
        num_slots: Optional[int] = None,
        dcp: Optional[Tuple[int, int, int]] = None,
    ) -> "BatchMetadata":
        """The metadata of requests with `query_lens` new tokens each, the
        last of their `seq_lens` positions, in the pages of `block_table`:
        query_start_loc is their running sum and each new token's slot is
        the page and row of its position. `num_slots` pads slot_mapping
        with -1 (padding tokens, as a CUDA-graph batch has).

        With `dcp` = (world_size, rank, interleave), `block_table` is a
        decode-context-parallel rank's own (its pages hold its share of
        each sequence) and the slots are the rank's: those of the new
        tokens it owns, -1 for the others (`mla.dcp.local_slot_mapping`)."""
        queries = _as_list(query_lens)
        lengths = _as_list(seq_lens)
        table = _as_list(block_table)
        if len(queries) != len(lengths):
            raise InvalidMetadataError(
                f"query_lens has {len(queries)} entries, seq_lens {len(lengths)}"
            )
        if dcp is not None:
            starts = [0]
            for query_len in queries:
                starts.append(starts[-1] + query_len)
            count = starts[-1] if num_slots is None else num_slots
            if count < starts[-1]:
                raise InvalidMetadataError(
                    f"num_slots ({count}) is less than the {starts[-1]} new tokens"
                )
            placeholder = cls(starts, lengths, block_table, [-1] * count)
            from .dcp import local_slot_mapping

            world_size, rank, interleave = dcp
            slots = local_slot_mapping(placeholder, block_size, world_size, rank, interleave)
            return cls(starts, lengths, block_table, slots)
        starts = [0]
        slots: List[int] = []
        for b, (query_len, seq_len) in enumerate(zip(queries, lengths)):
            starts.append(starts[-1] + query_len)
            for position in range(seq_len - query_len, seq_len):
                page = position // block_size
                if b >= len(table) or not 0 <= page < len(table[b]):
                    raise InvalidMetadataError(
                        f"block_table has no page {page} for request {b} (seq_len {seq_len})"
                    )
                slots.append(table[b][page] * block_size + position % block_size)
        if num_slots is not None:
            if num_slots < len(slots):
                raise InvalidMetadataError(
                    f"num_slots ({num_slots}) is less than the {len(slots)} new tokens"
                )
            slots.extend([-1] * (num_slots - len(slots)))
        return cls(starts, lengths, block_table, slots)
