"""One MLA attention layer of the model, run by libmla: the cache write,
the prefills (new tokens and chunked cached context) and the absorbed
decodes of a step in one `mla.Layer.forward`."""

import dataclasses
from typing import Any, List, Optional

import torch

from ..config import LayerConfig
from ..dtypes import DType
from ..layer import Layer
from .backend import AttentionType, kv_cache_dtype_of
from .metadata import MlaJitMetadata
from .runtimes import shared_runtime, torch_device


class MlaJitImpl:
    """An engine's attention impl for one MLA layer.

    Made with the layer's shape (the engine's arguments; head_size is the
    cache entry, kv_lora_rank + qk_rope_head_dim) and its `kv_b_proj`;
    `process_weights_after_loading` then derives the weights libmla reads
    and makes the `mla.Layer` (selecting the backend and compiling or
    loading its kernels). Features the library does not have are refused
    here, at model construction, rather than at the first step.

    Keyword-only extras:
        runtime: an `mla.Runtime`, or a device for the shared one (default:
            torch's current device).
        config: a LayerConfig carrying the engine-wide settings (block_size,
            decode_threshold, wants_cuda_graphs, max_model_len,
            max_num_seqs, workspace_tokens, backend, prefill_backend); pass
            the builder's.
            The dims, heads and scale come from this impl's arguments, the
            dtypes from `act_dtype` and `kv_cache_dtype`.
    """

    can_return_lse_for_decode = False
    need_to_return_lse_for_decode = False
    supports_quant_query_input = False
    dcp_world_size = 1
    dcp_rank = 0

    def __init__(
        self,
        num_heads: int,
        head_size: int,
        scale: float,
        num_kv_heads: int,
        alibi_slopes: Optional[List[float]],
        sliding_window: Optional[int],
        kv_cache_dtype: str,
        logits_soft_cap: Optional[float],
        attn_type: str,
        kv_sharing_target_layer_name: Optional[str],
        *,
        q_lora_rank: Optional[int],
        kv_lora_rank: int,
        qk_nope_head_dim: int,
        qk_rope_head_dim: int,
        qk_head_dim: int,
        v_head_dim: int,
        kv_b_proj: Any,
        indexer: Optional[Any] = None,
        runtime: Any = None,
        config: Optional[LayerConfig] = None,
    ) -> None:
        unsupported = [
            feature
            for present, feature in (
                (alibi_slopes is not None, "ALiBi slopes"),
                (sliding_window is not None, "sliding-window attention"),
                (bool(logits_soft_cap), "logits soft capping"),
                (attn_type != AttentionType.DECODER, f"attention type {getattr(attn_type, 'value', attn_type)!r}"),
                (kv_sharing_target_layer_name is not None, "KV cache sharing between layers"),
                (indexer is not None, "sparse MLA (an indexer)"),
            )
            if present
        ]
        if unsupported:
            raise NotImplementedError(f"{type(self).__name__} does not support {', '.join(unsupported)}")
        if num_kv_heads != 1:
            raise ValueError(f"MLA caches one latent KV head per token, got num_kv_heads={num_kv_heads}")
        if head_size != kv_lora_rank + qk_rope_head_dim:
            raise ValueError(
                f"head_size {head_size} is not kv_lora_rank + qk_rope_head_dim "
                f"({kv_lora_rank} + {qk_rope_head_dim})"
            )
        if qk_head_dim != qk_nope_head_dim + qk_rope_head_dim:
            raise ValueError(
                f"qk_head_dim {qk_head_dim} is not qk_nope_head_dim + qk_rope_head_dim "
                f"({qk_nope_head_dim} + {qk_rope_head_dim})"
            )
        self.num_heads = num_heads
        self.head_size = head_size
        self.scale = float(scale)
        self.num_kv_heads = num_kv_heads
        self.kv_cache_dtype = kv_cache_dtype
        self.q_lora_rank = q_lora_rank
        self.kv_lora_rank = kv_lora_rank
        self.qk_nope_head_dim = qk_nope_head_dim
        self.qk_rope_head_dim = qk_rope_head_dim
        self.qk_head_dim = qk_head_dim
        self.v_head_dim = v_head_dim
        self.kv_b_proj = kv_b_proj
        self.runtime = shared_runtime(runtime)
        self.config = dataclasses.replace(
            config or LayerConfig(),
            num_heads=num_heads,
            kv_lora_rank=kv_lora_rank,
            qk_nope_head_dim=qk_nope_head_dim,
            qk_rope_head_dim=qk_rope_head_dim,
            v_head_dim=v_head_dim,
            softmax_scale=self.scale,
        )
        # Unknown cache dtypes are refused now, not after loading.
        kv_cache_dtype_of(kv_cache_dtype, self.config.activation_dtype)
        self.layer: Optional[Layer] = None
        self.W_UK_T: Optional[torch.Tensor] = None
        self.W_UV: Optional[torch.Tensor] = None

    def process_weights_after_loading(self, act_dtype: Any) -> None:
        """Derives the layer's weights from kv_b_proj and makes the layer.

        kv_b_proj is a Linear-like object whose `.weight` is [N * (P + V),
        Lkv] (output features by input features, as a column-parallel
        linear stores it: per head, P rows of W_UK then V rows of W_UV), or
        that weight itself. libmla reads three forms, each in `act_dtype`,
        contiguous, on the runtime's device: kv_b_proj [Lkv, N, P + V] for
        the prefill, W_UK_T [N, P, Lkv] and W_UV [N, Lkv, V] for the
        absorbed decode. They are made once here and referenced by the
        layer for its lifetime."""
        weight = getattr(self.kv_b_proj, "weight", self.kv_b_proj)
        heads, nope, value, latent = self.num_heads, self.qk_nope_head_dim, self.v_head_dim, self.kv_lora_rank
        if not isinstance(weight, torch.Tensor):
            raise TypeError(f"kv_b_proj must be a torch tensor or have a .weight tensor, got {type(weight).__name__}")
        if tuple(weight.shape) != (heads * (nope + value), latent):
            raise ValueError(
                f"kv_b_proj's weight has shape {tuple(weight.shape)}, expected [num_heads * "
                f"(qk_nope_head_dim + v_head_dim), kv_lora_rank] = [{heads * (nope + value)}, {latent}]"
            )
        if not weight.is_floating_point():
            raise ValueError(f"kv_b_proj's weight is {weight.dtype}: quantized weights are not supported, dequantize first")
        dtype = DType.parse(act_dtype, "act_dtype")
        with torch.no_grad():
            kv_b_proj = (
                weight.detach()
                .to(device=torch_device(self.runtime), dtype=dtype.to_torch())
                .t()
                .reshape(latent, heads, nope + value)
                .contiguous()
            )
            self.W_UK_T = kv_b_proj[:, :, :nope].permute(1, 2, 0).contiguous()
            self.W_UV = kv_b_proj[:, :, nope:].permute(1, 0, 2).contiguous()
        self.config = dataclasses.replace(
            self.config, activation_dtype=dtype, cache_dtype=kv_cache_dtype_of(self.kv_cache_dtype, dtype)
        )
        self.layer = Layer(self.runtime, self.config, kv_b_proj, self.W_UK_T, self.W_UV)

    def forward(
        self,
        layer: Any,
        q: torch.Tensor,
        kv_c_normed: torch.Tensor,
        k_pe: torch.Tensor,
        kv_cache: torch.Tensor,
        attn_metadata: Optional[MlaJitMetadata],
        output: Optional[torch.Tensor] = None,
        output_scale: Optional[torch.Tensor] = None,
        output_block_scale: Optional[torch.Tensor] = None,
    ) -> torch.Tensor:
        """Runs the layer's step: writes the new tokens' kv_c_normed | k_pe
        into kv_cache at their slots, then the attention output of every
        query token into `output`, in place, queued on torch's current
        stream (finished on return on the CPU).

        Tensors (on the runtime's device, contiguous, rows = tokens; only
        the batch's num_actual_tokens rows are read or written):
            q [T, N, P + R] or [T, N * (P + R)]; kv_c_normed [T, Lkv];
            k_pe [T, R] or [T, 1, R]; kv_cache [num_blocks, block_size,
            Lkv + R]; output [T, N * V] or [T, N, V] (None: allocated).
        With an FP8 cache (a uint8 or torch float8 tensor, as vLLM keeps
        it), `layer._k_scale` (the engine's attention module's per-layer
        scale, a one-element float32 tensor on the device) is the cache's
        scale, read by the kernels when they run, so a captured graph
        replays with the scale the tensor holds then; `layer` is otherwise
        not used. Without metadata (an engine's profiling run) output is
        returned untouched.
        On metadata from `build_for_cudagraph_capture` (GPU) the step runs
        through a captured decode step (see `mla.vllm.cuda_graphs`)."""
        if output_scale is not None or output_block_scale is not None:
            raise NotImplementedError(
                "fused output quantization (output_scale) is not supported: the output is the activation dtype"
            )
        if output is None:
            output = q.new_empty(q.shape[0], self.num_heads * self.v_head_dim)
        if attn_metadata is None:
            return output
        if self.layer is None:
            raise RuntimeError("call process_weights_after_loading(act_dtype) before forward")
        q = q.view(q.shape[0], self.num_heads, self.qk_head_dim)
        k_pe = k_pe.view(k_pe.shape[0], self.qk_rope_head_dim)
        out = output.view(output.shape[0], self.num_heads, self.v_head_dim)
        kv_scale = self._kv_scale(layer)
        step = attn_metadata.cuda_graph_step
        if step is not None and self.runtime.is_cuda:
            step.run(self.layer, attn_metadata.batch, q, kv_c_normed, k_pe, kv_cache, out, kv_scale)
        elif q.is_cuda and torch.cuda.is_current_stream_capturing():
            raise RuntimeError(
                "a forward inside CUDA graph capture needs metadata from build_for_cudagraph_capture"
            )
        else:
            plan = attn_metadata.plan_for(self.layer, kv_cache.shape[0])
            self.layer.forward(plan, q, kv_c_normed, k_pe, kv_cache, out, kv_scale=kv_scale)
        return output

    def _kv_scale(self, layer: Any) -> Optional[torch.Tensor]:
        """The FP8 cache's scale from the engine's attention module
        (`_k_scale`, vLLM's one scale for MLA's latent cache) as the [1]
        float32 view libmla reads; None for other caches."""
        if not self.config.cache_dtype.is_fp8:
            return None
        scale = getattr(layer, "_k_scale", None)
        if not isinstance(scale, torch.Tensor) or scale.numel() != 1:
            raise ValueError(
                f"an {self.config.cache_dtype.name.lower()} KV cache needs the attention layer's _k_scale, "
                f"a one-element float32 tensor (got {type(scale).__name__})"
            )
        return scale.reshape(1)
