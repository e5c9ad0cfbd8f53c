"""Per-step attention metadata: the engine's batch description
(`CommonAttentionMetadata`), the decodes-first ordering MLA needs, and the
builder that turns one into what every layer of the step plans with."""

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from ..config import LayerConfig
from ..errors import InvalidMetadataError
from ..layer import Layer, Plan
from ..metadata import BatchMetadata
from .backend import AttentionCGSupport, MlaJitBackend
from .cuda_graphs import CapturedDecodeStep, CapturedDecodeSteps
from .runtimes import shared_runtime


def _slice(tensor: Optional[torch.Tensor], count: int) -> Optional[torch.Tensor]:
    return None if tensor is None else tensor[:count]


@dataclass
class CommonAttentionMetadata:
    """One step's batch, shared by every attention layer (vLLM's fields).

    Requests are rows of the batch; request b's new tokens are query rows
    [query_start_loc[b], query_start_loc[b + 1]) of the step's token
    tensors, its cached context plus new tokens seq_lens[b]. Tensors may be
    on the device or the host; the `*_cpu` ones are host copies (derived
    when not given). The arrays may have more entries than num_reqs and
    num_actual_tokens (a padded batch): only those are read.

    Attributes:
        query_start_loc, query_start_loc_cpu: [num_reqs + 1] int32.
        seq_lens, seq_lens_cpu: [num_reqs] int32.
        num_computed_tokens_cpu: [num_reqs], seq_lens minus query lengths.
        num_reqs: requests in the batch.
        num_actual_tokens: tokens of those requests.
        max_query_len, max_seq_len: the longest query and sequence (the
            latter may be an upper bound).
        block_table_tensor: [num_reqs, max_blocks] int32 page numbers.
        slot_mapping: [num_tokens] int64 cache slots of the new tokens, -1
            for a token whose entry is not written (padding).
        causal: must be True for MLA.
        dcp_local_seq_lens(_cpu): decode context parallelism; not supported,
            must be None.
    """

    query_start_loc: torch.Tensor
    query_start_loc_cpu: torch.Tensor
    seq_lens: torch.Tensor
    num_reqs: int
    num_actual_tokens: int
    max_query_len: int
    max_seq_len: int
    block_table_tensor: torch.Tensor
    slot_mapping: torch.Tensor
    causal: bool = True
    seq_lens_cpu: Optional[torch.Tensor] = None
    num_computed_tokens_cpu: Optional[torch.Tensor] = None
    dcp_local_seq_lens: Optional[torch.Tensor] = None
    dcp_local_seq_lens_cpu: Optional[torch.Tensor] = None

    def __post_init__(self) -> None:
        if self.seq_lens_cpu is None:
            self.seq_lens_cpu = self.seq_lens.cpu()
        if self.num_computed_tokens_cpu is None:
            starts = self.query_start_loc_cpu[: self.num_reqs + 1]
            self.num_computed_tokens_cpu = self.seq_lens_cpu[: self.num_reqs] - (starts[1:] - starts[:-1])

    @property
    def query_lens(self) -> np.ndarray:
        """New tokens of each request, on the host."""
        starts = np.asarray(self.query_start_loc_cpu[: self.num_reqs + 1], dtype=np.int64)
        return starts[1:] - starts[:-1]

    def unpadded(self, num_actual_tokens: int, num_actual_reqs: int) -> "CommonAttentionMetadata":
        """The batch without the padding a CUDA-graph-sized batch carries:
        its first `num_actual_reqs` requests and `num_actual_tokens`
        tokens (views, no copies)."""
        reqs = num_actual_reqs
        return CommonAttentionMetadata(
            query_start_loc=self.query_start_loc[: reqs + 1],
            query_start_loc_cpu=self.query_start_loc_cpu[: reqs + 1],
            seq_lens=self.seq_lens[:reqs],
            num_reqs=reqs,
            num_actual_tokens=num_actual_tokens,
            max_query_len=self.max_query_len,
            max_seq_len=self.max_seq_len,
            block_table_tensor=self.block_table_tensor[:reqs],
            slot_mapping=self.slot_mapping[:num_actual_tokens],
            causal=self.causal,
            seq_lens_cpu=_slice(self.seq_lens_cpu, reqs),
            num_computed_tokens_cpu=_slice(self.num_computed_tokens_cpu, reqs),
            dcp_local_seq_lens=_slice(self.dcp_local_seq_lens, reqs),
            dcp_local_seq_lens_cpu=_slice(self.dcp_local_seq_lens_cpu, reqs),
        )

    @classmethod
    def from_lengths(
        cls,
        query_lens: Sequence[int],
        seq_lens: Sequence[int],
        block_table: Any,
        block_size: int,
        num_slots: Optional[int] = None,
        device: Any = "cpu",
    ) -> "CommonAttentionMetadata":
        """The metadata of requests with `query_lens` new tokens each, the
        last of their `seq_lens` positions, in the pages of `block_table`,
        on `device` (see `mla.BatchMetadata.from_lengths`; `num_slots` pads
        slot_mapping with -1). For dummy and warm-up batches, and tests."""
        batch = BatchMetadata.from_lengths(query_lens, seq_lens, block_table, block_size, num_slots)
        host = {
            name: torch.from_numpy(np.asarray(getattr(batch, name)))
            for name in ("query_start_loc", "seq_lens", "block_table", "slot_mapping")
        }
        return cls(
            query_start_loc=host["query_start_loc"].to(device),
            query_start_loc_cpu=host["query_start_loc"],
            seq_lens=host["seq_lens"].to(device),
            seq_lens_cpu=host["seq_lens"],
            num_reqs=batch.num_reqs,
            num_actual_tokens=batch.num_actual_tokens,
            max_query_len=batch.max_query_len,
            max_seq_len=batch.max_seq_len,
            block_table_tensor=host["block_table"].to(device),
            slot_mapping=host["slot_mapping"].to(device),
        )


def decodes_first_order(query_lens: Sequence[int], decode_threshold: int) -> List[int]:
    """The batch order MLA runs in: requests of at most `decode_threshold`
    new tokens (decodes) first, then the others (prefills), each group in
    its original order. Entry i is the index of the request that goes to
    position i; the engine moves its requests accordingly before building
    the step's metadata."""
    lens = [int(n) for n in query_lens]
    decodes = [b for b, n in enumerate(lens) if n <= decode_threshold]
    prefills = [b for b, n in enumerate(lens) if n > decode_threshold]
    return decodes + prefills


def split_decodes_and_prefills(
    common: CommonAttentionMetadata, decode_threshold: int = 1
) -> Tuple[int, int, int, int]:
    """(num_decodes, num_prefills, num_decode_tokens, num_prefill_tokens) of
    a batch ordered decodes first. InvalidMetadataError naming the first
    decode found after a prefill: the layer would run it as a prefill."""
    lens = common.query_lens
    is_decode = lens <= decode_threshold
    num_decodes = int(np.argmin(is_decode)) if not is_decode.all() else len(lens)
    late = np.flatnonzero(is_decode[num_decodes:])
    if late.size:
        b = num_decodes + int(late[0])
        raise InvalidMetadataError(
            f"request {b} ({lens[b]} new tokens) is a decode after prefill request {num_decodes} "
            f"({lens[num_decodes]} new tokens; decodes have at most {decode_threshold}): order the "
            "batch decodes first (decodes_first_order)"
        )
    num_decode_tokens = int(lens[:num_decodes].sum())
    return num_decodes, len(lens) - num_decodes, num_decode_tokens, int(lens.sum()) - num_decode_tokens


def _host(tensor: Any) -> Any:
    """A host view of a step array. A device tensor is copied, waiting for
    the device: libmla plans on the host, so engines that keep host copies
    of the block table and slot mapping should pass those."""
    return tensor.cpu() if isinstance(tensor, torch.Tensor) and tensor.device.type != "cpu" else tensor


@dataclass(eq=False)
class MlaJitMetadata:
    """What every layer of one step needs: the decode/prefill split, the
    batch as host arrays (`batch`) and, per layer, its plan (made on the
    first layer's forward and reused by later calls on the same layer).

    `cuda_graph_step` is set on metadata from `build_for_cudagraph_capture`
    (the shape the forward captures); `staged_step` on a decode-only batch
    whose plans `build` staged for the replay of a captured shape."""

    num_reqs: int
    num_actual_tokens: int
    num_decodes: int
    num_decode_tokens: int
    num_prefills: int
    num_prefill_tokens: int
    batch: BatchMetadata = field(repr=False)
    cuda_graph_step: Optional[CapturedDecodeStep] = None
    staged_step: Optional[CapturedDecodeStep] = None
    _plans: Dict[Tuple[Layer, int], Plan] = field(default_factory=dict, init=False, repr=False)

    @property
    def plans(self) -> Tuple[Plan, ...]:
        """The plans made so far, one per layer configuration (`str(plan)`
        describes one in a line, for logs)."""
        return tuple(self._plans.values())

    @property
    def decode_query_len(self) -> int:
        """New tokens of every decode (0 without decodes)."""
        return self.num_decode_tokens // self.num_decodes if self.num_decodes else 0

    def plan_for(self, layer: Layer, num_cache_blocks: int) -> Plan:
        """`layer`'s plan of this step over a cache of `num_cache_blocks`
        pages, made once for every layer configured alike (libmla lets a
        plan serve every layer of its runtime with the same configuration
        and backend): a model's layers plan a step once."""
        key = (layer.runtime, layer.config, layer.selection.backend, num_cache_blocks)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = layer.plan(self.batch, num_cache_blocks)
        return plan


class MlaJitMetadataBuilder:
    """Builds each step's `MlaJitMetadata` from the engine's
    `CommonAttentionMetadata`.

    Args:
        config: the layers' LayerConfig (the same one given to every
            impl): its decode_threshold orders batches, and libmla's
            selection for it says what CUDA graphs can hold.
        device: the runtime (an `mla.Runtime`) or its device ("cpu",
            "cuda:0", a torch.device; None: torch's current device).
        layer_names: the layers whose metadata this builds (kept for the
            engine; not used).
    """

    supports_update_block_table = False

    def __init__(self, config: LayerConfig, device: Any = None, layer_names: Sequence[str] = ()):
        self.config = config
        self.runtime = shared_runtime(device)
        self.layer_names = list(layer_names)
        self.reorder_batch_threshold: int = config.decode_threshold
        self.captured = CapturedDecodeSteps()

    @classmethod
    def get_cudagraph_support(cls, config: LayerConfig, device: Any = None) -> AttentionCGSupport:
        """What libmla's backend for `config` on `device` can run inside a
        CUDA graph (NEVER on the CPU)."""
        return AttentionCGSupport.of(MlaJitBackend.select(config, shared_runtime(device)))

    def build(
        self,
        common_prefix_len: int,
        common_attn_metadata: CommonAttentionMetadata,
        fast_build: bool = False,
    ) -> MlaJitMetadata:
        """The step's metadata. The batch must be ordered decodes first,
        its decodes of one query length, causal, without decode context
        parallelism (InvalidMetadataError otherwise). `common_prefix_len` (cascade attention, which this
        backend does not use) and `fast_build` change nothing. A
        decode-only batch that a captured shape holds is staged for that
        shape's replay (see `mla.vllm.cuda_graphs`)."""
        common = common_attn_metadata
        if not common.causal:
            raise InvalidMetadataError("MLA attention is causal; got causal=False")
        if common.dcp_local_seq_lens is not None:
            raise InvalidMetadataError("decode context parallelism (dcp_local_seq_lens) is not supported")
        num_decodes, num_prefills, decode_tokens, prefill_tokens = split_decodes_and_prefills(
            common, self.reorder_batch_threshold
        )
        decode_lens = common.query_lens[:num_decodes]
        if num_decodes and (decode_lens != decode_lens[0]).any():
            raise InvalidMetadataError(
                f"decodes must all have the same number of new tokens (libmla runs them as one "
                f"uniform batch); these have {sorted(set(decode_lens.tolist()))}"
            )
        if decode_tokens + prefill_tokens > common.num_actual_tokens:
            raise InvalidMetadataError(
                f"the requests have {decode_tokens + prefill_tokens} new tokens, more than "
                f"num_actual_tokens ({common.num_actual_tokens})"
            )
        batch = BatchMetadata(
            common.query_start_loc_cpu,
            common.seq_lens_cpu,
            _host(common.block_table_tensor[: common.num_reqs]),
            _host(common.slot_mapping[: common.num_actual_tokens]),
            num_reqs=common.num_reqs,
            max_seq_len=common.max_seq_len,
        )
        metadata = MlaJitMetadata(
            num_reqs=common.num_reqs,
            num_actual_tokens=batch.num_actual_tokens,
            num_decodes=num_decodes,
            num_decode_tokens=decode_tokens,
            num_prefills=num_prefills,
            num_prefill_tokens=prefill_tokens,
            batch=batch,
        )
        if num_decodes and not num_prefills:
            step = self.captured.replayed_for(num_decodes, metadata.decode_query_len)
            if step is not None and step.graphs:
                step.stage(batch)
                metadata.staged_step = step
        return metadata

    def build_for_cudagraph_capture(self, common_attn_metadata: CommonAttentionMetadata) -> MlaJitMetadata:
        """The metadata of a decode-only batch whose step the engine warms
        up and then captures: its shape (decodes, query length, block
        table width) becomes a captured shape. InvalidMetadataError for a
        batch with prefills."""
        metadata = self.build(0, common_attn_metadata)
        if metadata.num_prefills or not metadata.num_decodes:
            raise InvalidMetadataError(
                f"CUDA graphs hold decode-only batches; this one has {metadata.num_decodes} decodes "
                f"and {metadata.num_prefills} prefills (decodes have at most "
                f"{self.reorder_batch_threshold} new tokens)"
            )
        metadata.cuda_graph_step = self.captured.step(
            metadata.num_decodes, metadata.decode_query_len, metadata.batch.max_blocks
        )
        return metadata

    def build_for_drafting(self, common_attn_metadata: CommonAttentionMetadata, draft_index: int) -> MlaJitMetadata:
        return self.build(0, common_attn_metadata, fast_build=True)

    def use_cascade_attention(self, *args: Any, **kwargs: Any) -> bool:
        return False
