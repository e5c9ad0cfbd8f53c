"""Decode context parallelism (DCP) across processes.

A DCP group spreads every request's latent cache over the ranks of a
process group: token i lives on rank (i // interleave) % world_size, so
each rank stores and reads about 1 / world_size of every context. Each
rank's layer (`LayerConfig.dcp_world_size`, `dcp_rank`, `dcp_interleave`)
plans the batch as every rank sees it with its own block table and
`local_slot_mapping`, and runs its decodes over the tokens it holds;
`step` then all-gathers the partial rows and LSEs over the engine's
`torch.distributed` process group (NCCL on GPUs, gloo on CPUs) and merges
them into the exact rows of the rank's heads, as vLLM's `cp_lse_ag_out_rs`
does. Prefills attend over their whole context: each context chunk's rows
are gathered by every rank from its share, all-gathered over the group
(`attach` gives the layer that all-gather) and read back in token order,
so every rank's prefill rows come out exact. The collectives are the
engine's: this module only calls torch.distributed on the group it is
given, on the current stream.
"""

import ctypes
from typing import Any, List, Optional, Tuple

from . import _library
from ._checks import as_int
from .metadata import BatchMetadata

__all__ = ["local_slot_mapping", "attach", "step"]


def local_slot_mapping(
    metadata: BatchMetadata, block_size: int, world_size: int, rank: int, interleave: int = 1
) -> List[int]:
    """The slot mapping of `rank` for the new tokens of `metadata` (the
    batch with its global seq_lens and the rank's own block table): the
    rank's slot of each new token it owns, -1 for the others and for
    padding. `BatchMetadata.from_lengths(..., dcp=(world_size, rank,
    interleave))` builds a rank's metadata with it."""
    library = _library.load()
    slots = (ctypes.c_int64 * metadata.num_slots)()
    library.mla_dcp_local_slot_mapping(
        ctypes.byref(metadata._c),
        as_int(block_size, "block_size"),
        as_int(world_size, "world_size"),
        as_int(rank, "rank"),
        as_int(interleave, "interleave"),
        slots,
    )
    return list(slots)


def attach(layer: Any, group: Any = None) -> None:
    """Gives `layer` (a DCP rank's) torch.distributed's all-gather over
    `group` (default: the default process group) for its prefills' context
    chunks: NCCL for a GPU runtime, on the current stream; gloo for a CPU
    runtime. `step` attaches it itself."""
    import torch

    world = layer.config.dcp_world_size
    cuda = layer.runtime.is_cuda

    def all_gather(send: int, received: int, size: int, stream: Optional[int]) -> None:
        gathered = _bytes_at(torch, received, world * size, cuda).view(world, size)
        _all_gather(gathered, _bytes_at(torch, send, size, cuda), group)

    layer.set_dcp_all_gather(all_gather)


def step(
    layer: Any,
    plan: Any,
    q: Any,
    kv_c: Any,
    k_pe: Any,
    kv_cache: Any,
    output: Any,
    decode_lse: Optional[Any] = None,
    group: Any = None,
    *,
    own_heads: bool = True,
    merged_lse: bool = False,
) -> Tuple[Optional[Any], Optional[Any]]:
    """One DCP rank's step on torch tensors, decodes and prefills: the
    layer's forward (the prefills' context chunks all-gathered over `group`,
    default the default process group; their rows in `output` come out
    exact; the decodes' partial rows over the rank's tokens, their LSE into
    `decode_lse`, needed when the step has decodes), then the all-gather of
    the decode partials and their merge. Returns the exact decode rows
    [Td, H, V] of this rank's heads (H = N / world_size, heads rank * H
    onwards; every head with own_heads=False or when they do not divide),
    and their LSE [decodes, H, new tokens] with merged_lse=True, else None;
    (None, None) without decodes. Runs on torch's current stream, as the
    collectives do."""
    import torch

    config = layer.config
    world = config.dcp_world_size
    info = plan.info
    td = info.num_decode_tokens
    attach(layer, group)
    layer.forward(plan, q, kv_c, k_pe, kv_cache, output, decode_lse)
    if td == 0:
        return None, None
    partial = output[:td].contiguous()
    gathered_output = torch.empty((world,) + tuple(partial.shape), dtype=partial.dtype, device=partial.device)
    gathered_lse = torch.empty((world,) + tuple(decode_lse.shape), dtype=decode_lse.dtype, device=decode_lse.device)
    _all_gather(gathered_output, partial, group)
    _all_gather(gathered_lse, decode_lse.contiguous(), group)
    heads = config.num_heads
    if own_heads and heads % world == 0:
        heads //= world
    merged = torch.empty((td, heads, config.v_head_dim), dtype=partial.dtype, device=partial.device)
    # Always an LSE of our own: the step stays capturable into a CUDA graph
    # (without one the layer would allocate scratch on first use).
    lse = torch.empty((info.num_decodes, heads, info.decode_query_len), dtype=torch.float32, device=partial.device)
    layer.merge_dcp_partials(plan, gathered_output, gathered_lse, merged, lse)
    return merged, (lse if merged_lse else None)


class _DeviceBytes:
    """`size` bytes of GPU memory at `address`, as torch.as_tensor takes
    them (the CUDA array interface)."""

    def __init__(self, address: int, size: int):
        self.__cuda_array_interface__ = {
            "shape": (size,),
            "typestr": "|u1",
            "data": (address, False),
            "version": 2,
        }


def _bytes_at(torch: Any, address: int, size: int, cuda: bool) -> Any:
    """A uint8 tensor over `size` bytes of the layer's memory at `address`
    (no copy)."""
    if cuda:
        return torch.as_tensor(_DeviceBytes(address, size), device="cuda")
    return torch.frombuffer((ctypes.c_uint8 * size).from_address(address), dtype=torch.uint8)


def _all_gather(gathered: Any, tensor: Any, group: Any) -> None:
    """Every rank's `tensor` into gathered[rank]: one all_gather_into_tensor
    where the backend has it (NCCL), else all_gather into the rank slices
    (gloo)."""
    import torch.distributed as dist

    # CUDA tensors go through NCCL (a group may also hold gloo for CPUs).
    if tensor.is_cuda:
        dist.all_gather_into_tensor(gathered, tensor, group=group)
        return
    import torch

    # gloo moves no bfloat16 (nor int16): 2-byte floats travel as bytes.
    if tensor.element_size() == 2 and tensor.is_floating_point():
        gathered, tensor = gathered.view(torch.uint8), tensor.view(torch.uint8)
    dist.all_gather(list(gathered.unbind(0)), tensor, group=group)
