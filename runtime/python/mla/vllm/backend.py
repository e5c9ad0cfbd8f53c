"""The attention backend class: what libmla's MLA layer supports, declared
the way a vLLM-style engine asks for it, and checked by the library's own
backend selection wherever it can answer."""

import dataclasses
import enum
from dataclasses import dataclass
from typing import Any, ClassVar, List, Optional, Tuple, Type, Union

import torch

from ..config import LayerConfig
from ..dtypes import DType
from ..errors import BackendRejectedError, InvalidArgumentError
from ..runtime import BackendSelection, Runtime
from .runtimes import shared_runtime


class AttentionCGSupport(enum.IntEnum):
    """Which batches a backend's attention can run inside a CUDA graph
    (vLLM's levels, ordered: a higher level includes the lower ones)."""

    NEVER = 0
    UNIFORM_SINGLE_TOKEN_DECODE = 1
    """Decode-only batches of one new token per request."""
    UNIFORM_BATCH = 2
    """Decode-only batches of the same number of new tokens per request (1
    + speculative tokens)."""
    ALWAYS = 3
    """Any batch, prefills included."""

    @classmethod
    def of(cls, selection: BackendSelection) -> "AttentionCGSupport":
        """The level libmla declares for the backend `selection` chose."""
        level = selection.cuda_graphs
        return cls[level.upper()] if isinstance(level, str) else cls(int(level))


class AttentionType(str, enum.Enum):
    """What attends to what; MLA layers are decoder self-attention."""

    DECODER = "decoder"
    ENCODER = "encoder"
    ENCODER_ONLY = "encoder_only"
    ENCODER_DECODER = "encoder_decoder"


@dataclass(frozen=True)
class MultipleOf:
    """A kernel block size rule: any multiple of `base` tokens."""

    base: int


# Spellings of the cache dtype an engine may pass; "auto" is the activation
# dtype. FP8 caches ("fp8" is e4m3, as vLLM means it) hold value / scale
# with the layer's k_scale, which forward passes to libmla.
_KV_CACHE_DTYPES = {
    "auto": None,
    "bfloat16": DType.BF16,
    "bf16": DType.BF16,
    "float16": DType.F16,
    "fp16": DType.F16,
    "half": DType.F16,
    "float32": DType.F32,
    "fp32": DType.F32,
    "float": DType.F32,
    "fp8": DType.FP8_E4M3,
    "fp8_e4m3": DType.FP8_E4M3,
    "fp8_e5m2": DType.FP8_E5M2,
}


def kv_cache_dtype_of(kv_cache_dtype: Optional[str], activation_dtype: Any) -> DType:
    """The cache element type for an engine's kv_cache_dtype string (None
    and "auto": the activation dtype). InvalidArgumentError (a ValueError)
    for anything libmla has no cache of."""
    name = "auto" if kv_cache_dtype is None else str(kv_cache_dtype).lower()
    if name not in _KV_CACHE_DTYPES:
        raise InvalidArgumentError(
            f"kv_cache_dtype {kv_cache_dtype!r} not supported; "
            f"supports {', '.join(MlaJitBackend.supported_kv_cache_dtypes)}"
        )
    found = _KV_CACHE_DTYPES[name]
    return DType.parse(activation_dtype, "activation dtype") if found is None else found


def _float_dtype(dtype: Any) -> Optional[DType]:
    """`dtype` as a float DType, or None when libmla has no such
    activation type."""
    try:
        parsed = DType.parse(dtype)
    except InvalidArgumentError:
        return None
    return parsed if parsed.is_float else None


class MlaJitBackend:
    """libmla's MLA attention as an engine's attention backend.

    The class answers an engine's questions before any layer exists (which
    dtypes, cache layout, block sizes, whether a configuration runs) and
    names the builder and impl classes. Model dims the engine's signatures
    do not carry (heads, latent and head dims) come from a `LayerConfig`
    passed as `config=`; without one, DeepSeek-V3's defaults apply.
    """

    accept_output_buffer: ClassVar[bool] = True
    supported_dtypes: ClassVar[List[torch.dtype]] = [torch.float16, torch.bfloat16, torch.float32]
    supported_kv_cache_dtypes: ClassVar[List[str]] = [
        "auto",
        "bfloat16",
        "float16",
        "float32",
        "fp8",
        "fp8_e4m3",
        "fp8_e5m2",
    ]

    @staticmethod
    def get_name() -> str:
        return "MLA_JIT"

    @staticmethod
    def get_impl_cls() -> Type[Any]:
        from .impl import MlaJitImpl

        return MlaJitImpl

    @staticmethod
    def get_builder_cls() -> Type[Any]:
        from .metadata import MlaJitMetadataBuilder

        return MlaJitMetadataBuilder

    @staticmethod
    def get_supported_kernel_block_sizes() -> List[Union[int, MultipleOf]]:
        # The kernels index pages of any size.
        return [MultipleOf(1)]

    @staticmethod
    def get_kv_cache_shape(
        num_blocks: int,
        block_size: int,
        num_kv_heads: int,
        head_size: int,
        cache_dtype_str: str = "auto",
    ) -> Tuple[int, ...]:
        """(num_blocks, block_size, head_size): one latent entry of
        kv_lora_rank + qk_rope_head_dim values per token, shared by all
        heads, so `num_kv_heads` must be 1."""
        if num_kv_heads != 1:
            raise ValueError(f"MLA caches one latent KV head per token, got num_kv_heads={num_kv_heads}")
        kv_cache_dtype_of(cache_dtype_str, DType.BF16)
        return (num_blocks, block_size, head_size)

    @staticmethod
    def get_kv_cache_stride_order(include_num_layers_dimension: bool = False) -> Tuple[int, ...]:
        """The logical order: each layer's cache is one contiguous
        [num_blocks, block_size, head_size] array, as the kernels read it
        (with a leading layers dimension, it stays outermost)."""
        return (0, 1, 2, 3) if include_num_layers_dimension else (0, 1, 2)

    @classmethod
    def full_cls_name(cls) -> Tuple[str, str]:
        return (cls.__module__, cls.__qualname__)

    @classmethod
    def get_supported_head_sizes(cls) -> List[int]:
        """Empty: any MLA dims; `validate_configuration` checks the head
        size against the layer config and the library checks the dims."""
        return []

    @classmethod
    def supports_head_size(cls, head_size: int) -> bool:
        sizes = cls.get_supported_head_sizes()
        return not sizes or head_size in sizes

    @classmethod
    def supports_dtype(cls, dtype: Any) -> bool:
        return _float_dtype(dtype) is not None

    @classmethod
    def supports_kv_cache_dtype(cls, kv_cache_dtype: Optional[str]) -> bool:
        return kv_cache_dtype is None or str(kv_cache_dtype).lower() in _KV_CACHE_DTYPES

    @classmethod
    def supports_block_size(cls, block_size: Optional[int]) -> bool:
        return block_size is None or block_size >= 1

    @classmethod
    def supports_compute_capability(cls, capability: Any) -> bool:
        """True: the library checks the capability of the GPU it runs on
        when it selects a backend (see `validate_configuration`)."""
        return True

    @classmethod
    def supports_attn_type(cls, attn_type: str) -> bool:
        return attn_type == AttentionType.DECODER

    @classmethod
    def is_mla(cls) -> bool:
        return True

    @classmethod
    def is_sparse(cls) -> bool:
        return False

    @classmethod
    def supports_sink(cls) -> bool:
        return False

    @classmethod
    def supports_mm_prefix(cls) -> bool:
        return False

    @classmethod
    def get_required_kv_cache_layout(cls) -> None:
        return None

    @classmethod
    def select(cls, config: LayerConfig, runtime: Any = None) -> BackendSelection:
        """The libmla backend that would run layers of `config` on
        `runtime` (default: the shared runtime of torch's device).
        BackendRejectedError with every reason when none would."""
        return shared_runtime(runtime).select_backend(config)

    @classmethod
    def select_prefill(cls, config: LayerConfig, runtime: Any = None) -> BackendSelection:
        """The libmla prefill backend that would run the chunked prefill of
        layers of `config` on `runtime`, chosen apart from the decode's as
        vLLM's get_mla_prefill_backend chooses its MLA prefill backend:
        `config.prefill_backend` (vLLM's attention_config.mla_prefill_backend),
        else $MLA_PREFILL_BACKEND, else the device's prefill priorities.
        BackendRejectedError with every reason when none would."""
        return shared_runtime(runtime).select_prefill_backend(config)

    @classmethod
    def validate_configuration(
        cls,
        head_size: int,
        dtype: Any,
        kv_cache_dtype: Optional[str],
        block_size: int,
        use_mla: bool = True,
        has_sink: bool = False,
        use_sparse: bool = False,
        use_mm_prefix: bool = False,
        device_capability: Any = None,
        attn_type: str = AttentionType.DECODER,
        *,
        config: Optional[LayerConfig] = None,
        runtime: Optional[Runtime] = None,
    ) -> List[str]:
        """Every reason this backend refuses the configuration; empty when
        it takes it.

        The features the backend never has (non-MLA, sparse, sinks, other
        attention types), the activation and cache dtypes and the head size
        (which must be the config's kv_lora_rank + qk_rope_head_dim) are
        checked here; everything else (heads, dims, block size, the device
        and its compute capability, CUDA graphs if the config wants them,
        $MLA_ATTENTION_BACKEND or config.backend) by libmla's backend
        selection on `runtime`, whose message lists each backend's reasons,
        and by its prefill backend selection (config.prefill_backend or
        $MLA_PREFILL_BACKEND), since a layer needs both.
        """
        config = config or LayerConfig()
        reasons = []
        if not use_mla:
            reasons.append("non-MLA attention not supported")
        if use_sparse:
            reasons.append("sparse MLA not supported")
        if has_sink:
            reasons.append("attention sinks not supported")
        if use_mm_prefix:
            reasons.append("full attention over multimodal prefixes not supported")
        if not cls.supports_attn_type(attn_type):
            reasons.append(f"attention type {getattr(attn_type, 'value', attn_type)} not supported (decoder only)")
        if head_size != config.cache_entry_dim:
            reasons.append(
                f"head_size {head_size} is not the layer's kv_lora_rank + qk_rope_head_dim "
                f"({config.kv_lora_rank} + {config.qk_rope_head_dim} = {config.cache_entry_dim})"
            )
        # Dtypes refused here are replaced by the config's, so that the
        # library's other reasons still come out. (DType.F32 is 0: compare
        # with None, not truth.)
        activation = _float_dtype(dtype)
        if activation is None:
            names = ", ".join(str(t).replace("torch.", "") for t in cls.supported_dtypes)
            reasons.append(f"dtype {dtype} not supported (supports {names})")
            activation = config.activation_dtype
        try:
            cache = kv_cache_dtype_of(kv_cache_dtype, activation)
        except InvalidArgumentError as refused:
            reasons.append(refused.message)
            cache = config.cache_dtype

        try:
            candidate = dataclasses.replace(
                config,
                activation_dtype=activation,
                cache_dtype=cache,
                block_size=config.block_size if block_size is None else block_size,
            )
            cls.select(candidate, runtime)
        except (BackendRejectedError, InvalidArgumentError) as refused:
            reasons.append(refused.message)
        else:
            # A malformed config was named by the decode's selection already.
            try:
                cls.select_prefill(candidate, runtime)
            except BackendRejectedError as refused:
                reasons.append(refused.message)
        return reasons
