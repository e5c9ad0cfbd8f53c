"""Python bindings of libmla, the JIT kernel compiler and runtime for
DeepSeek-style Multi-head Latent Attention (MLA).

Pure Python over the C API (include/mla/mla.h) through ctypes: no compile
step, any CPython >= 3.9. torch (>= 1.13) and numpy are both optional and
never imported by `import mla`; tensors of either are passed zero-copy.

Finding the library
    `import mla` works without libmla; the first call that needs it loads
    it from, in order: $MLA_LIBRARY (a file path, then the only place
    tried), `mla/libmla.so*` next to the package, `<prefix>/lib/libmla.so.0`
    for a package installed in `<prefix>/lib/python3*/{dist,site}-packages`,
    `<repo>/build/lib/libmla.so` for the package in the source tree, and
    `ctypes.util.find_library("mla")`. If none works, `LibraryLoadError`
    (an ImportError) lists each place and why it failed. A library of
    another C API major version is refused.

A step of an MLA layer::

    import mla, torch

    rt = mla.Runtime(device="auto")               # the GPU if usable, else the CPU
    config = mla.LayerConfig(num_heads=16)         # DeepSeek-V3 dims, bf16, 64-token pages
    layer = mla.Layer(rt, config, kv_b_proj, w_uk_t, w_uv)
    print(layer.selection)                         # the backend, and why others were skipped
    print(layer.prefill_selection)                 # the chunked prefill's, chosen apart

    md = mla.BatchMetadata(query_start_loc, seq_lens, block_table, slot_mapping)
    plan = layer.plan(md, num_cache_blocks)        # host only: checks and plans the batch
    layer.forward(plan, q, kv_c, k_pe, kv_cache, output)   # in place, on torch's current stream

Decode steps as CUDA graphs (GPU)::

    shape = mla.DecodeGraphShape(max_decodes=64, query_len=1,
                                 max_blocks_per_request=2048, num_cache_blocks=n)
    graph = layer.capture_decode_step(shape, q, kv_c, k_pe, kv_cache, output)
    # every step, after writing its q, kv_c, k_pe into those buffers:
    graph.replay(layer.plan_decode_step(md, graph.shape))

    # or inside the engine's own graph:
    with torch.cuda.graph(g):
        graph.enqueue()
    graph.stage(layer.plan_decode_step(md, graph.shape)); g.replay()

Public API
    Runtime(device="auto"|"cpu"|"gpu", gpu_ordinal=0, cache_dir=None,
            disable_disk_cache=False, force_recompile=False, log=True)
        .device_kind ("cpu" / "cuda"), .is_cuda, .gpu_ordinal,
        .description, .parallelism, .cache_dir
        .cache_stats() -> CacheStats
        .select_backend(config) -> BackendSelection
        .select_prefill_backend(config) -> BackendSelection
        .compile(source, entry) -> Kernel
        .allocate(shape, dtype) -> DeviceBuffer
        .synchronize(stream=None)
    Kernel: .info (KernelInfo), .argument(i) (ArgumentSpec),
        .run(*tensors, stream=None)
    DeviceBuffer: .shape, .dtype, .nbytes, .data_ptr,
        .upload(host, stream=None), .download(out=None, stream=None)
    LayerConfig(...): dataclass, DeepSeek-V3 defaults
    Layer(runtime, config, kv_b_proj, w_uk_t, w_uv)
        .config, .runtime, .weights, .selection, .prefill_selection
        .plan(metadata, num_cache_blocks) -> Plan
        .forward(plan, q, kv_c, k_pe, kv_cache, output, decode_lse=None,
                 stream=None)
        .plan_decode_step(metadata, shape) -> Plan
        .capture_decode_step(shape, q, kv_c, k_pe, kv_cache, output,
                             decode_lse=None) -> DecodeGraph
        .replay(graph, plan, stream=None)
    BackendSelection: .backend, .source, .skipped ((name, reasons) each),
        .summary, .description, .cuda_graphs
    CacheStats: .memory_hits, .disk_hits, .misses, .compiles,
        .corrupt_entries, .store_failures
    Plan: .info (PlanInfo), str(plan)
    DecodeGraphShape(max_decodes, query_len, max_blocks_per_request,
                     num_cache_blocks, max_splits_per_request=0)
    DecodeGraph: .shape, .layer, .replay(plan, stream=None),
        .stage(plan, stream=None), .enqueue(stream=None)
    BatchMetadata(query_start_loc, seq_lens, block_table, slot_mapping, *,
                  num_reqs, num_actual_tokens, max_query_len, max_seq_len)
        BatchMetadata.from_lengths(query_lens, seq_lens, block_table,
                                   block_size, num_slots=None)
    DType (F32, F16, BF16, I32, I64), version() -> VersionInfo

Tensors
    torch tensors (CPU or CUDA) and numpy arrays are passed as views of
    their own memory: the library writes outputs and the cache in place.
    They must be on the runtime's device (a CUDA tensor on cuda:<ordinal>
    for a GPU runtime; a CPU tensor or numpy array for a CPU runtime; a
    `DeviceBuffer` carries numpy data to a GPU) and of an element type the
    library has; the layer's must be contiguous. Anything that would need a
    copy is an InvalidArgumentError (a ValueError) naming the tensor. numpy
    has no bfloat16: bf16 goes through torch.bfloat16.

Streams
    On a GPU runtime, calls are queued on `stream=`: a torch.cuda.Stream,
    an integer CUstream, or None for torch's current stream on the
    runtime's GPU (the legacy default stream when torch is not in use).
    CPU runtimes run everything on the calling thread, finished on return.

Lifetimes
    Layers, kernels and buffers keep their runtime alive, decode graphs
    their layer and the tensors captured; plans are host data. Every object
    has close() and is a context manager; closing a runtime closes what was
    made on it. Whatever is left is released at interpreter exit, children
    first. A DecodeGraph whose kernels were enqueued into a torch graph
    must stay open as long as that graph may be replayed.

Errors
    One class per C status, all deriving from MlaError (.status,
    .status_name, .message from mla_last_error): InvalidArgumentError
    (also ValueError), NoDeviceError, CompileError, BackendRejectedError,
    InvalidMetadataError (also ValueError), DeviceRuntimeError (also
    RuntimeError), OutOfMemoryError (also MemoryError), InternalError.

vLLM's shape
    `mla.vllm` (imported on its own: `import mla.vllm`) has the classes of a
    vLLM MLA attention backend over this package: MlaJitBackend,
    MlaJitMetadataBuilder, MlaJitImpl, CommonAttentionMetadata
    (docs/python.md, "Wiring into a serving engine").

Logging
    The library's log lines (the device chosen, backends, each kernel
    compiled or loaded from the cache and its time) go to the "mla"
    logger at INFO, from whichever thread logs them.
"""

from ._capi import VERSION_MAJOR, VERSION_MINOR, VERSION_PATCH
from .config import LayerConfig
from .decode_graph import DecodeGraph, DecodeGraphShape
from .dtypes import DType
from .errors import (
    BackendRejectedError,
    CompileError,
    DeviceRuntimeError,
    InternalError,
    InvalidArgumentError,
    InvalidMetadataError,
    LibraryLoadError,
    MlaError,
    NoDeviceError,
    OutOfMemoryError,
)
from .kernel import ArgumentSpec, Kernel, KernelInfo
from .layer import Layer, Plan, PlanInfo
from .memory import DeviceBuffer
from .metadata import BatchMetadata
from .runtime import BackendSelection, CacheStats, Runtime
from ._version import VersionInfo, version

__version__ = f"{VERSION_MAJOR}.{VERSION_MINOR}.{VERSION_PATCH}"

__all__ = [
    "ArgumentSpec",
    "BackendRejectedError",
    "BackendSelection",
    "BatchMetadata",
    "CacheStats",
    "CompileError",
    "DType",
    "DecodeGraph",
    "DecodeGraphShape",
    "DeviceBuffer",
    "DeviceRuntimeError",
    "InternalError",
    "InvalidArgumentError",
    "InvalidMetadataError",
    "Kernel",
    "KernelInfo",
    "Layer",
    "LayerConfig",
    "LibraryLoadError",
    "MlaError",
    "NoDeviceError",
    "OutOfMemoryError",
    "Plan",
    "PlanInfo",
    "Runtime",
    "VersionInfo",
    "version",
]
