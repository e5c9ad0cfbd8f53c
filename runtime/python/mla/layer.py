"""The MLA attention layer (mla_layer_t) and its per-step plans."""

import ctypes
from dataclasses import dataclass
from typing import Any, Callable, Optional, Tuple

from . import _capi
from ._checks import as_int
from ._handles import Handle
from ._streams import stream_handle
from .config import LayerConfig
from .decode_graph import DecodeGraph, DecodeGraphShape
from .errors import InvalidMetadataError, MlaError
from .metadata import BatchMetadata
from .runtime import BackendSelection, Runtime
from .tensors import describe, describe_into

# Bytes of one tensor view in mla_forward_args_t.
_TENSOR_BYTES = ctypes.sizeof(_capi.mla_tensor_t)


@dataclass(frozen=True)
class PlanInfo:
    """What a plan runs (mla_plan_info_t)."""

    num_decodes: int
    num_prefills: int
    num_decode_tokens: int
    num_prefill_tokens: int
    num_actual_tokens: int
    decode_query_len: int
    """New tokens of every decode (0 without decodes)."""
    num_context_chunks: int
    """Context chunks the prefills gather (0 without prefills)."""
    num_cache_blocks: int


class Plan(Handle):
    """One batch checked and planned on the host by `Layer.plan` or
    `Layer.plan_decode_step`: the decode/prefill split, the split-KV decode
    schedule, the prefills' context chunks. Plain host data: usable only
    with the layer that made it, which it does not keep alive. `str(plan)`
    describes it in one line."""

    _kind = "plan"

    def __init__(self, handle: int, library: Any):
        self._adopt(handle, library.mla_plan_destroy)
        self._library = library

    @property
    def info(self) -> PlanInfo:
        info = _capi.mla_plan_info_t()
        self._library.mla_plan_get_info(self._live(), ctypes.byref(info))
        return PlanInfo(*(getattr(info, name) for name, _ in info._fields_))

    def __str__(self) -> str:
        line = ctypes.c_char_p()
        self._library.mla_plan_describe(self._live(), ctypes.byref(line))
        return line.value.decode()

    def __repr__(self) -> str:
        return f"<mla.Plan {'closed' if self.closed else str(self)}>"


class Layer(Handle):
    """An MLA attention layer on a runtime: its backend and prefill backend
    selected and its kernels compiled (or loaded from the kernel cache)
    when it is made.

    Args:
        runtime: the runtime it runs on (kept alive by the layer).
        config: its LayerConfig.
        kv_b_proj: [Lkv, N, P + V], the prefill up-projection.
        w_uk_t: [N, P, Lkv], for the decode's query absorption.
        w_uv: [N, Lkv, V], the decode's output projection.

    The weights are in the runtime's device memory, of the activation
    dtype, contiguous. The library reads them in place at every step (it
    does not copy them): the layer keeps them referenced, and they must not
    change while it is used.

    Errors: InvalidArgumentError for a malformed config (naming the field)
    or a weight of the wrong dtype, shape or device (naming it),
    BackendRejectedError when no backend (or no prefill backend) takes the
    config, CompileError when a kernel does not compile.

    Tensors of a step, each in the runtime's device memory, contiguous, the
    token-indexed ones with at least num_actual_tokens rows (row t belongs
    to query token t):
        q [T, N, P + R] (q_nope then q_pe per head), kv_c [T, Lkv],
        k_pe [T, R], output [T, N, V], all of the activation dtype;
        kv_cache [num_cache_blocks, block_size, Lkv + R] of the cache dtype,
        updated in place with the new tokens;
        decode_lse, optional: [num_decodes, N, decode_query_len], float32,
        natural log.
    """

    _kind = "layer"

    def __init__(self, runtime: Runtime, config: LayerConfig, kv_b_proj: Any, w_uk_t: Any, w_uv: Any):
        library = runtime._library
        weights = _capi.mla_layer_weights_t(
            describe(kv_b_proj, "kv_b_proj", runtime),
            describe(w_uk_t, "w_uk_t", runtime),
            describe(w_uv, "w_uv", runtime),
        )
        handle = ctypes.c_void_p()
        library.mla_layer_create(
            runtime._live(), ctypes.byref(config._to_c()), ctypes.byref(weights), ctypes.byref(handle)
        )
        self._adopt(handle.value, library.mla_layer_destroy, runtime, kv_b_proj, w_uk_t, w_uv)
        self._library = library
        self._runtime = runtime
        self._args = _capi.mla_forward_args_t()
        self._args_bytes = memoryview(self._args).cast("B")
        self._config = config
        self._weights = (kv_b_proj, w_uk_t, w_uv)
        selection = _capi.mla_backend_selection_t()
        library.mla_layer_selection(handle, ctypes.byref(selection))
        self._selection = BackendSelection._from_c(selection)
        prefill = _capi.mla_backend_selection_t()
        library.mla_layer_prefill_selection(handle, ctypes.byref(prefill))
        self._prefill_selection = BackendSelection._from_c(prefill)
        # The DCP all-gather's C trampoline (kept alive while set) and what
        # it raised during the forward now running.
        self._dcp_all_gather: Any = None
        self._dcp_error: Optional[BaseException] = None

    def __repr__(self) -> str:
        return f"<mla.Layer {self._selection.backend}, {self._config.num_heads} heads{' (closed)' if self.closed else ''}>"

    @property
    def runtime(self) -> Runtime:
        return self._runtime

    @property
    def config(self) -> LayerConfig:
        return self._config

    @property
    def weights(self) -> Tuple[Any, Any, Any]:
        """(kv_b_proj, w_uk_t, w_uv), as given."""
        return self._weights

    @property
    def selection(self) -> BackendSelection:
        """The backend the layer runs on and why those above it were not
        chosen."""
        return self._selection

    @property
    def prefill_selection(self) -> BackendSelection:
        """The prefill backend the layer's chunked prefill runs on (chosen
        apart from `selection`) and why those above it were not chosen."""
        return self._prefill_selection

    def plan(self, metadata: BatchMetadata, num_cache_blocks: int) -> Plan:
        """Checks `metadata` against itself and a cache of
        `num_cache_blocks` pages and plans the step. InvalidMetadataError
        naming the field, request or token for anything inconsistent."""
        handle = ctypes.c_void_p()
        self._library.mla_layer_plan(
            self._live(),
            ctypes.byref(metadata._c),
            as_int(num_cache_blocks, "num_cache_blocks", error=InvalidMetadataError),
            ctypes.byref(handle),
        )
        return Plan(handle.value, self._library)

    def _forward_args(
        self,
        q: Any,
        kv_c: Any,
        k_pe: Any,
        kv_cache: Any,
        output: Any,
        decode_lse: Optional[Any],
        kv_scale: Optional[Any] = None,
    ) -> _capi.mla_forward_args_t:
        """The step's tensors as the layer's one mla_forward_args_t, written
        in place (calls of one layer are ordered, as the C API requires).
        An FP8 cache may be a uint8 tensor, as vLLM keeps it."""
        runtime, target = self._runtime, self._args_bytes
        size = _TENSOR_BYTES
        cache_dtype = self._config.cache_dtype
        describe_into(target, 0, q, "q", runtime)
        describe_into(target, size, kv_c, "kv_c", runtime)
        describe_into(target, 2 * size, k_pe, "k_pe", runtime)
        describe_into(target, 3 * size, kv_cache, "kv_cache", runtime, writable=True,
                      bytes_as=cache_dtype if cache_dtype.is_fp8 else None)
        describe_into(target, 4 * size, output, "output", runtime, writable=True)
        for index, name, value, writable in ((5, "decode_lse", decode_lse, True), (6, "kv_scale", kv_scale, False)):
            if value is None:
                target[index * size : (index + 1) * size] = bytes(size)
            else:
                describe_into(target, index * size, value, name, runtime, writable=writable)
        return self._args

    def forward(
        self,
        plan: Plan,
        q: Any,
        kv_c: Any,
        k_pe: Any,
        kv_cache: Any,
        output: Any,
        decode_lse: Optional[Any] = None,
        stream: Any = None,
        kv_scale: Optional[Any] = None,
    ) -> None:
        """Runs the step `plan` describes: writes the new tokens into
        kv_cache, then output (and decode_lse when given), in place. On a
        GPU it is queued on `stream` and returns without waiting; on the
        CPU it has finished when it returns. With an FP8 cache (a uint8 or
        torch float8 tensor) `kv_scale` is its scale, a [1] float32 tensor
        (vLLM's per-layer k_scale): entries are stored as value / scale."""
        args = self._forward_args(q, kv_c, k_pe, kv_cache, output, decode_lse, kv_scale)
        self._dcp_error = None
        try:
            self._library.mla_layer_forward(
                self._live(), plan._live(), ctypes.byref(args), stream_handle(stream, self._runtime)
            )
        except MlaError as error:
            raised, self._dcp_error = self._dcp_error, None
            if raised is not None:
                raise raised from error
            raise

    def set_dcp_all_gather(self, all_gather: Optional[Callable[[int, int, int, Optional[int]], None]]) -> None:
        """The all-gather a DCP rank's `forward` reads its prefills'
        context through, called once per context chunk as
        all_gather(send, received, bytes_per_rank, stream): every rank's
        bytes_per_rank bytes at device address `send` into `received`, rank
        by rank, ordered on the CUstream handle `stream` (None: the default
        stream; ignored on the CPU). The addresses are the layer's, valid
        during the call. An exception it raises ends the forward and is
        raised from it. `mla.dcp.attach` sets one over a torch.distributed
        group; None clears it."""
        if all_gather is None:
            trampoline = _capi.mla_dcp_all_gather_fn()
        else:

            def call(user: Any, send: Optional[int], received: Optional[int], size: int, stream: Optional[int]) -> int:
                try:
                    all_gather(send or 0, received or 0, size, stream)
                    return 0
                except BaseException as error:  # raised again by forward
                    self._dcp_error = error
                    return 1

            trampoline = _capi.mla_dcp_all_gather_fn(call)
        self._library.mla_layer_set_dcp_all_gather(self._live(), trampoline, None)
        self._dcp_all_gather = trampoline

    def merge_dcp_partials(
        self,
        plan: Plan,
        gathered_output: Any,
        gathered_lse: Any,
        output: Any,
        lse: Optional[Any] = None,
        stream: Any = None,
    ) -> None:
        """Decode context parallelism's step after the all-gather (vLLM's
        cp_lse_ag_out_rs): `gathered_output` [W, Td, N, V] holds every
        rank's first Td = decodes x new-token rows of its `forward` output,
        `gathered_lse` [W, decodes, N, new tokens] float32 every rank's
        decode_lse; writes the exact rows into `output` [Td, H, V], of every
        head (H = N) or of this rank's share (H = N / W, heads
        dcp_rank * H onwards), and their LSE into `lse` [decodes, H, new
        tokens] when given (give it when capturing the merge into a CUDA
        graph: without it the layer allocates scratch on first use). `plan`
        is the step's plan. See `mla.dcp`."""
        args = _capi.mla_dcp_merge_args_t()
        target = memoryview(args).cast("B")
        runtime, size = self._runtime, _TENSOR_BYTES
        describe_into(target, 0, gathered_output, "gathered_output", runtime)
        describe_into(target, size, gathered_lse, "gathered_lse", runtime)
        describe_into(target, 2 * size, output, "output", runtime, writable=True)
        if lse is not None:
            describe_into(target, 3 * size, lse, "lse", runtime, writable=True)
        self._library.mla_layer_merge_dcp_partials(
            self._live(), plan._live(), ctypes.byref(args), stream_handle(stream, self._runtime)
        )

    def plan_decode_step(self, metadata: BatchMetadata, shape: DecodeGraphShape) -> Plan:
        """Plans a decode-only batch padded to `shape` (a captured graph's
        `shape`): padding requests have no context, their output rows come
        out 0 and their LSE -inf. InvalidMetadataError for a batch that
        does not fit the shape; InvalidArgumentError for a bad shape."""
        handle = ctypes.c_void_p()
        self._library.mla_layer_plan_decode_step(
            self._live(), ctypes.byref(metadata._c), ctypes.byref(shape._c), ctypes.byref(handle)
        )
        return Plan(handle.value, self._library)

    def capture_decode_step(
        self,
        shape: DecodeGraphShape,
        q: Any,
        kv_c: Any,
        k_pe: Any,
        kv_cache: Any,
        output: Any,
        decode_lse: Optional[Any] = None,
        kv_scale: Optional[Any] = None,
    ) -> DecodeGraph:
        """Captures the decode step of `shape` on these tensors as a CUDA
        graph (nothing runs until it is replayed). The tensors are the
        engine's persistent buffers, with at least max_decodes * query_len
        rows; the graph keeps them referenced. With an FP8 cache,
        `kv_scale` is its [1] float32 scale on the device, read at each
        replay. DeviceRuntimeError on a CPU runtime or for a backend that
        cannot be captured."""
        args = self._forward_args(q, kv_c, k_pe, kv_cache, output, decode_lse, kv_scale)
        handle = ctypes.c_void_p()
        self._library.mla_layer_capture_decode_step(
            self._live(), ctypes.byref(shape._c), ctypes.byref(args), ctypes.byref(handle)
        )
        return DecodeGraph(self, handle.value, (q, kv_c, k_pe, kv_cache, output, decode_lse, kv_scale))

    def replay(self, graph: DecodeGraph, plan: Plan, stream: Any = None) -> None:
        """Replays `graph` (captured by this layer) for `plan` (from
        `plan_decode_step` with the graph's shape), queued on `stream`."""
        self._library.mla_layer_replay(
            self._live(), graph._live(), plan._live(), stream_handle(stream, self._runtime)
        )
