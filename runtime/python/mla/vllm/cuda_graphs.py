"""Decode steps inside an engine's CUDA graphs.

An engine captures its whole decode step (every layer) into one CUDA graph
per batch size with `torch.cuda.graph`, and at run time builds the
attention metadata, writes the step's inputs into its buffers and replays
the graph, without calling any layer's forward. libmla's side of that is a
`DecodeGraph` per layer and shape: made outside any capture (it allocates
device memory and captures the layer's kernels), enqueued inside the
engine's capture, and staged with each step's plan before each replay.

Three moments, three places:

- Warm-up (a forward outside capture, on metadata from
  `build_for_cudagraph_capture`): the impl makes its layer's DecodeGraph
  for the shape, on buffers of this module's own, and runs the step through
  it once.
- Capture (the same forward inside `torch.cuda.graph`): the impl records a
  copy of its inputs into those buffers, `DecodeGraph.enqueue()` and a copy
  of the result into the engine's output.
- Replay: the builder's `build` sees a decode-only batch that a captured
  shape holds and stages the batch's plan into every layer's DecodeGraph of
  that shape; the engine then replays its graph.

The extra buffers exist because a captured kernel reads the addresses it
was captured with, and the tensors an engine passes inside its capture
(intermediates of its graph's memory pool) exist only from the capture on,
too late to make a DecodeGraph on them. The layers of one configuration
share one set of buffers per shape: they run one after another on one
stream. The copies move the step's q, kv_c, k_pe and output once more,
small next to the cache the step reads.
"""

from typing import Dict, List, Optional, Tuple

import torch

from ..config import LayerConfig
from ..decode_graph import DecodeGraph, DecodeGraphShape
from ..layer import Layer
from ..metadata import BatchMetadata


class CapturedDecodeStep:
    """One captured batch shape: `num_decodes` requests of `query_len` new
    tokens each, block tables `max_blocks_per_request` wide, and each
    layer's DecodeGraph of it."""

    def __init__(self, num_decodes: int, query_len: int, max_blocks_per_request: int):
        self.num_decodes = num_decodes
        self.query_len = query_len
        self.max_blocks_per_request = max_blocks_per_request
        # layer -> (its graph, the data_ptr of the cache it was made on)
        self._graphs: Dict[Layer, Tuple[DecodeGraph, int]] = {}
        # Graphs replaced after the cache moved: an engine graph captured
        # before may still enqueue them, so they stay alive.
        self._retired: List[DecodeGraph] = []
        self._buffers: Dict[tuple, Dict[str, torch.Tensor]] = {}

    @property
    def rows(self) -> int:
        """Token rows of the step, padding included."""
        return self.num_decodes * self.query_len

    @property
    def graphs(self) -> List[DecodeGraph]:
        return [graph for graph, _ in self._graphs.values()]

    def __repr__(self) -> str:
        return (
            f"<CapturedDecodeStep {self.num_decodes} decodes x {self.query_len} tokens, "
            f"{len(self._graphs)} layers>"
        )

    def run(
        self,
        layer: Layer,
        batch: BatchMetadata,
        q: torch.Tensor,
        kv_c: torch.Tensor,
        k_pe: torch.Tensor,
        kv_cache: torch.Tensor,
        output: torch.Tensor,
        kv_scale: Optional[torch.Tensor] = None,
    ) -> None:
        """The layer's step through its DecodeGraph, queued on torch's
        current stream. Outside a capture (the warm-up) the graph is made if
        needed and `batch` staged; inside, the graph must exist already. An
        FP8 cache's `kv_scale` is captured by address: the replays read the
        value it holds then."""
        if q.shape[0] < self.rows or output.shape[0] < self.rows:
            raise ValueError(
                f"the captured decode step has {self.rows} token rows, but q has {q.shape[0]} "
                f"and output {output.shape[0]}"
            )
        if torch.cuda.is_current_stream_capturing():
            graph = self._captured_graph(layer, kv_cache, kv_scale)
        else:
            graph = self._prepare(layer, kv_cache, kv_scale)
            graph.stage(layer.plan_decode_step(batch, graph.shape))
        buffers = self._buffers_for(layer.config, kv_cache.device)
        rows = self.rows
        buffers["q"].copy_(q[:rows])
        buffers["kv_c"].copy_(kv_c[:rows])
        buffers["k_pe"].copy_(k_pe[:rows])
        graph.enqueue()
        output[:rows].copy_(buffers["output"])

    def stage(self, batch: BatchMetadata) -> None:
        """Plans `batch` once for the layers configured alike (a plan serves
        them all) and stages it into every layer's graph on torch's current
        stream, for the engine's next replay."""
        plans = {}
        for graph, _ in self._graphs.values():
            layer = graph.layer
            key = (layer.runtime, layer.config, layer.selection.backend, graph.shape)
            if key not in plans:
                plans[key] = layer.plan_decode_step(batch, graph.shape)
            graph.stage(plans[key])

    @staticmethod
    def _addresses(kv_cache: torch.Tensor, kv_scale: Optional[torch.Tensor]) -> Tuple[int, int]:
        """What a graph captured the cache and its scale at."""
        return (kv_cache.data_ptr(), 0 if kv_scale is None else kv_scale.data_ptr())

    def _captured_graph(
        self, layer: Layer, kv_cache: torch.Tensor, kv_scale: Optional[torch.Tensor]
    ) -> DecodeGraph:
        entry = self._graphs.get(layer)
        if entry is None:
            raise RuntimeError(
                f"no decode graph of this layer for {self.num_decodes} decodes of {self.query_len} "
                "tokens: run the step once outside the capture first (a warm-up forward on "
                "metadata from build_for_cudagraph_capture); making one needs device "
                "allocations, which a capture does not allow"
            )
        if entry[1] != self._addresses(kv_cache, kv_scale):
            raise RuntimeError(
                "the KV cache or its scale moved since the warm-up forward: run the warm-up again "
                "before capturing"
            )
        return entry[0]

    def _prepare(self, layer: Layer, kv_cache: torch.Tensor, kv_scale: Optional[torch.Tensor]) -> DecodeGraph:
        entry = self._graphs.get(layer)
        addresses = self._addresses(kv_cache, kv_scale)
        if entry is not None and entry[1] == addresses:
            return entry[0]
        if entry is not None:
            self._retired.append(entry[0])
        buffers = self._buffers_for(layer.config, kv_cache.device)
        shape = DecodeGraphShape(
            max_decodes=self.num_decodes,
            query_len=self.query_len,
            max_blocks_per_request=self.max_blocks_per_request,
            num_cache_blocks=kv_cache.shape[0],
        )
        graph = layer.capture_decode_step(
            shape, buffers["q"], buffers["kv_c"], buffers["k_pe"], kv_cache, buffers["output"], kv_scale=kv_scale
        )
        self._graphs[layer] = (graph, addresses)
        return graph

    def _buffers_for(self, config: LayerConfig, device: torch.device) -> Dict[str, torch.Tensor]:
        key = (
            config.num_heads,
            config.qk_head_dim,
            config.kv_lora_rank,
            config.qk_rope_head_dim,
            config.v_head_dim,
            config.activation_dtype,
            device,
        )
        buffers = self._buffers.get(key)
        if buffers is None:
            rows, heads = self.rows, config.num_heads
            options = dict(dtype=config.activation_dtype.to_torch(), device=device)
            buffers = {
                "q": torch.zeros(rows, heads, config.qk_head_dim, **options),
                "kv_c": torch.zeros(rows, config.kv_lora_rank, **options),
                "k_pe": torch.zeros(rows, config.qk_rope_head_dim, **options),
                "output": torch.zeros(rows, heads, config.v_head_dim, **options),
            }
            self._buffers[key] = buffers
        return buffers


class CapturedDecodeSteps:
    """A builder's captured shapes, by (decodes, query length)."""

    def __init__(self) -> None:
        self._steps: Dict[Tuple[int, int], CapturedDecodeStep] = {}

    def __iter__(self):
        return iter(self._steps.values())

    def step(self, num_decodes: int, query_len: int, max_blocks_per_request: int) -> CapturedDecodeStep:
        """The step of this shape, made on first use."""
        step = self._steps.get((num_decodes, query_len))
        if step is None:
            step = CapturedDecodeStep(num_decodes, query_len, max_blocks_per_request)
            self._steps[(num_decodes, query_len)] = step
        elif step.max_blocks_per_request != max_blocks_per_request:
            raise ValueError(
                f"the block table is {max_blocks_per_request} pages wide, but the decode step of "
                f"{num_decodes} x {query_len} tokens was captured with {step.max_blocks_per_request}: "
                "keep the block table's width fixed"
            )
        return step

    def replayed_for(self, num_decodes: int, query_len: int) -> Optional[CapturedDecodeStep]:
        """The step an engine replays for a decode-only batch of
        `num_decodes` requests of `query_len` tokens: the fewest decodes
        that hold it, as engines pad a batch to the next captured size.
        None when no captured shape holds it."""
        fits = [s for s in self._steps.values() if s.query_len == query_len and s.num_decodes >= num_decodes]
        return min(fits, key=lambda s: s.num_decodes, default=None)
