"""libmla as a vLLM-shaped MLA attention backend, without vLLM.

The classes have the shape of vLLM's attention backend interface, so that
an engine written against it (or vLLM itself, through a thin registration
shim) drives libmla's layers the way it drives its own MLA backends:

- `MlaJitBackend`: what the backend supports (dtypes, cache shape and
  layout, block sizes, head sizes), `validate_configuration` with the
  library's own reasons, and the builder and impl classes.
- `MlaJitMetadataBuilder`: one per group of layers sharing a cache layout;
  every step turns the engine's `CommonAttentionMetadata` (ordered decodes
  first: `decodes_first_order`) into one `MlaJitMetadata` for all layers.
- `MlaJitImpl`: one per layer; `process_weights_after_loading` makes its
  `mla.Layer`, `forward` runs the whole MLA step in one library call.
- CUDA graphs of decode steps: `build_for_cudagraph_capture`, a warm-up
  forward, the forward inside `torch.cuda.graph`, then `build` before each
  replay (`mla.vllm.cuda_graphs` explains the protocol).

All objects of one device share one `mla.Runtime` (`shared_runtime`), so
kernels compile once per configuration. Requires torch; `import mla`
alone does not import this module.
"""

from .backend import AttentionCGSupport, AttentionType, MlaJitBackend, MultipleOf, kv_cache_dtype_of
from .cuda_graphs import CapturedDecodeStep, CapturedDecodeSteps
from .impl import MlaJitImpl
from .metadata import (
    CommonAttentionMetadata,
    MlaJitMetadata,
    MlaJitMetadataBuilder,
    decodes_first_order,
    split_decodes_and_prefills,
)
from .runtimes import shared_runtime

__all__ = [
    "AttentionCGSupport",
    "AttentionType",
    "CapturedDecodeStep",
    "CapturedDecodeSteps",
    "CommonAttentionMetadata",
    "MlaJitBackend",
    "MlaJitImpl",
    "MlaJitMetadata",
    "MlaJitMetadataBuilder",
    "MultipleOf",
    "decodes_first_order",
    "kv_cache_dtype_of",
    "shared_runtime",
    "split_decodes_and_prefills",
]
