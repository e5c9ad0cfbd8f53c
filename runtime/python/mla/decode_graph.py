"""Decode steps captured once as CUDA graphs and replayed every step.

A graph records addresses and shapes, so a captured step has a fixed
shape (`DecodeGraphShape`), every batch is planned padded to it
(`Layer.plan_decode_step`), and every replay reads and writes the tensors
given at capture: the engine's persistent buffers, into which it writes
each step's q, kv_c and k_pe before replaying.

Two ways to run a captured step:

- `replay(plan)`: stages the plan's metadata and launches the layer's own
  graph, on one stream.
- Inside an engine's own graph (`torch.cuda.graph`): `enqueue()` while the
  engine captures, queuing the step's kernels into its graph; then, every
  step, `stage(plan)` before replaying the engine's graph. The engine's
  graph reads this object's metadata block and scratch: keep the
  DecodeGraph alive (not closed) as long as that graph may be replayed.
"""

import ctypes
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import _capi
from ._checks import as_int
from ._handles import Handle
from ._streams import stream_handle

if TYPE_CHECKING:
    from .layer import Layer, Plan


@dataclass(frozen=True)
class DecodeGraphShape:
    """The fixed shape of a captured decode step.

    Attributes:
        max_decodes: decode requests, padding included.
        query_len: new tokens of every request (1, or 1 + speculative
            tokens; at most the layer's decode_threshold).
        max_blocks_per_request: the block table's width: the most pages one
            request may name.
        num_cache_blocks: pages of the paged cache.
        max_splits_per_request: the most KV splits one request may take; 0
            lets the layer choose (the captured graph's `shape` says what it
            chose).
    """

    max_decodes: int
    query_len: int
    max_blocks_per_request: int
    num_cache_blocks: int
    max_splits_per_request: int = 0
    _c: _capi.mla_decode_graph_shape_t = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        c = _capi.mla_decode_graph_shape_t()
        for name, _ in c._fields_:
            value = as_int(getattr(self, name), f"shape.{name}")
            object.__setattr__(self, name, value)
            setattr(c, name, value)
        object.__setattr__(self, "_c", c)


class DecodeGraph(Handle):
    """A decode step captured by `Layer.capture_decode_step`. Keeps its
    layer and the tensors given at capture alive; close it (or drop it)
    before its layer can go."""

    _kind = "decode graph"

    def __init__(self, layer: "Layer", handle: int, tensors: tuple):
        library = layer._library
        self._adopt(handle, library.mla_decode_graph_destroy, layer, *tensors)
        self._layer = layer
        self._library = library
        self._runtime = layer.runtime
        shape = _capi.mla_decode_graph_shape_t()
        library.mla_decode_graph_get_shape(handle, ctypes.byref(shape))
        self._shape = DecodeGraphShape(*(getattr(shape, name) for name, _ in shape._fields_))

    @property
    def shape(self) -> DecodeGraphShape:
        """The captured shape, with the split limit the layer chose: the
        shape to plan steps with."""
        return self._shape

    @property
    def layer(self) -> "Layer":
        return self._layer

    def replay(self, plan: "Plan", stream: Any = None) -> None:
        """Runs the captured step for `plan` (from
        `Layer.plan_decode_step` with this graph's shape), queued on
        `stream`; returns without waiting for the GPU."""
        self._layer.replay(self, plan, stream)

    def stage(self, plan: "Plan", stream: Any = None) -> None:
        """Writes `plan`'s metadata into the buffers the captured kernels
        read, ordered on `stream`, for the next replay of an engine graph
        holding `enqueue()`'s kernels. Call it outside any capture."""
        self._library.mla_decode_graph_stage(
            self._layer._live(), self._live(), plan._live(), stream_handle(stream, self._runtime)
        )

    def enqueue(self, stream: Any = None) -> None:
        """Queues the step's kernels on `stream` (default: torch's current
        stream, which inside `torch.cuda.graph` is the capturing one),
        reading the staged metadata and the tensors given at capture."""
        self._library.mla_decode_graph_enqueue(
            self._layer._live(), self._live(), stream_handle(stream, self._runtime)
        )
