"""The MLA layer's configuration (mla_layer_config_t)."""

from dataclasses import dataclass
from typing import Any, Optional

from . import _capi
from ._checks import as_int
from .dtypes import DType
from .errors import InvalidArgumentError

_INTEGER_FIELDS = (
    "num_heads",
    "kv_lora_rank",
    "qk_nope_head_dim",
    "qk_rope_head_dim",
    "v_head_dim",
    "block_size",
    "decode_threshold",
    "max_model_len",
    "max_num_seqs",
    "workspace_tokens",
    "dcp_world_size",
    "dcp_rank",
    "dcp_interleave",
)


@dataclass(frozen=True)
class LayerConfig:
    """One MLA attention layer; the defaults are DeepSeek-V3's, as
    mla_layer_config_default sets them. Engines sharding heads over
    devices (tensor parallelism) set `num_heads` to the heads per device:
    `LayerConfig(num_heads=16)` or `dataclasses.replace(config, ...)`.

    Dtypes may be given in any spelling `DType.parse` takes ("bf16",
    torch.bfloat16, numpy.float32, ...) and are stored as `DType`. Values
    are checked here only as far as Python needs (integers that fit the C
    struct); the library checks the rest when the config is used and names
    the field ("config->num_heads must be positive").

    Attributes:
        num_heads: heads on this device (N).
        kv_lora_rank: the latent width (Lkv).
        qk_nope_head_dim: P.
        qk_rope_head_dim: R.
        v_head_dim: V.
        activation_dtype: of q, kv_c, k_pe, the output and the weights.
        cache_dtype: of the paged latent cache.
        block_size: tokens per cache page.
        softmax_scale: None (or 0) for 1 / sqrt(P + R).
        decode_threshold: requests with at most this many new tokens run as
            decodes (1, or 1 + speculative tokens).
        needs_decode_lse: the caller wants the decode LSE.
        wants_cuda_graphs: the caller will capture decode steps as CUDA
            graphs (backends that cannot are passed over).
        max_model_len, max_num_seqs: size the default prefill context
            workspace (vLLM's formula).
        workspace_tokens: rows of that workspace instead; 0 for the formula.
        backend: a backend name ("CPU_JIT", "GENERIC_GPU", ...) instead of
            automatic selection; None: $MLA_ATTENTION_BACKEND, else the
            device's priority list.
        prefill_backend: a prefill backend name ("PREFILL_TC_SM80",
            "PREFILL_CPU_JIT", ...) for the chunked prefill, chosen apart
            from `backend`; None: $MLA_PREFILL_BACKEND, else the device's
            prefill priority list.
        dcp_world_size, dcp_rank, dcp_interleave: decode context
            parallelism (vLLM's dcp_world_size, dcp_rank and
            cp_kv_cache_interleave_size): this layer is one rank of a group
            that spreads every request's cache over its ranks, token i on
            rank (i // dcp_interleave) % dcp_world_size. World size 1 is
            off. See `mla.dcp` for the step across the group.
    """

    num_heads: int = 128
    kv_lora_rank: int = 512
    qk_nope_head_dim: int = 128
    qk_rope_head_dim: int = 64
    v_head_dim: int = 128
    activation_dtype: Any = DType.BF16
    cache_dtype: Any = DType.BF16
    block_size: int = 64
    softmax_scale: Optional[float] = None
    decode_threshold: int = 1
    needs_decode_lse: bool = False
    wants_cuda_graphs: bool = False
    max_model_len: int = 163840
    max_num_seqs: int = 256
    workspace_tokens: int = 0
    backend: Optional[str] = None
    # --- Prefill backend selection ---
    prefill_backend: Optional[str] = None
    # --- Decode context parallelism ---
    dcp_world_size: int = 1
    dcp_rank: int = 0
    dcp_interleave: int = 1

    def __post_init__(self) -> None:
        for field in _INTEGER_FIELDS:
            object.__setattr__(self, field, as_int(getattr(self, field), f"config.{field}"))
        for field in ("activation_dtype", "cache_dtype"):
            object.__setattr__(self, field, DType.parse(getattr(self, field), f"config.{field}"))
        if self.softmax_scale is not None:
            try:
                scale = float(self.softmax_scale)
            except (TypeError, ValueError):
                raise InvalidArgumentError(
                    f"config.softmax_scale must be a number or None, got {self.softmax_scale!r}"
                ) from None
            object.__setattr__(self, "softmax_scale", scale)
        for field in ("backend", "prefill_backend"):
            value = getattr(self, field)
            if value is not None and not isinstance(value, str):
                raise InvalidArgumentError(f"config.{field} must be a backend's name or None, got {value!r}")

    @property
    def qk_head_dim(self) -> int:
        """P + R: q's last dimension."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    @property
    def cache_entry_dim(self) -> int:
        """Lkv + R: the paged cache's last dimension."""
        return self.kv_lora_rank + self.qk_rope_head_dim

    def _to_c(self) -> _capi.mla_layer_config_t:
        c = _capi.mla_layer_config_t()
        for field in _INTEGER_FIELDS:
            setattr(c, field, getattr(self, field))
        c.activation_dtype = self.activation_dtype
        c.cache_dtype = self.cache_dtype
        c.softmax_scale = self.softmax_scale or 0.0
        c.needs_decode_lse = int(bool(self.needs_decode_lse))
        c.wants_cuda_graphs = int(bool(self.wants_cuda_graphs))
        c.backend = self.backend.encode() if self.backend else None
        c.prefill_backend = self.prefill_backend.encode() if self.prefill_backend else None
        return c
