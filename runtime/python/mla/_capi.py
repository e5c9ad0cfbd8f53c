"""The C interface of include/mla/mla.h, as ctypes declarations.

Everything here mirrors the header one for one: the version macros, the
enums, the structs (field for field, in order, so ctypes lays them out as
the C compiler does) and each function's prototype. Nothing here loads the
library; `_library` does, and binds `PROTOTYPES` to it.

Array fields that the C side only reads during a call (the metadata arrays)
are declared `c_void_p` instead of typed pointers: the ABI is the same, and
a plain address can then be stored without building a ctypes pointer
object each step.
"""

from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    c_char_p,
    c_double,
    c_float,
    c_int,
    c_int32,
    c_int64,
    c_size_t,
    c_uint64,
    c_void_p,
)

# The C API version these declarations follow (MLA_VERSION_* in mla.h).
VERSION_MAJOR = 0
VERSION_MINOR = 1
VERSION_PATCH = 0

MAX_RANK = 8

# mla_status_t
OK = 0
ERROR_INVALID_ARGUMENT = 1
ERROR_NO_DEVICE = 2
ERROR_COMPILE = 3
ERROR_BACKEND_REJECTED = 4
ERROR_INVALID_METADATA = 5
ERROR_RUNTIME = 6
ERROR_OUT_OF_MEMORY = 7
ERROR_INTERNAL = 8

# mla_device_preference_t
DEVICE_AUTO = 0
DEVICE_CPU = 1
DEVICE_GPU = 2

# mla_device_kind_t
DEVICE_KIND_CPU = 0
DEVICE_KIND_CUDA = 1

# mla_backend_source_t, by value
BACKEND_SOURCES = ("priority", "requested", "environment")

# mla_cuda_graph_support_t, by value (vLLM's AttentionCGSupport levels)
CUDA_GRAPH_SUPPORT = ("never", "uniform_single_token_decode", "uniform_batch", "always")

# mla_kernel_origin_t, by value
KERNEL_ORIGINS = ("compiled", "memory_cache", "disk_cache")

# C enums are ints on every ABI this library is built for.
c_enum = c_int

mla_log_fn = CFUNCTYPE(None, c_char_p, c_void_p)
# (user_data, send, received, bytes_per_rank, stream) -> 0 on success
mla_dcp_all_gather_fn = CFUNCTYPE(c_int32, c_void_p, c_void_p, c_void_p, c_size_t, c_void_p)


class mla_tensor_t(Structure):
    _fields_ = [
        ("data", c_void_p),
        ("dtype", c_enum),
        ("rank", c_int32),
        ("shape", c_int64 * MAX_RANK),
        ("strides", c_int64 * MAX_RANK),
    ]


class mla_runtime_options_t(Structure):
    _fields_ = [
        ("device", c_enum),
        ("gpu_ordinal", c_int32),
        ("cache_dir", c_char_p),
        ("disable_disk_cache", c_int32),
        ("force_recompile", c_int32),
        ("log", mla_log_fn),
        ("log_user", c_void_p),
    ]


class mla_cache_stats_t(Structure):
    _fields_ = [
        ("memory_hits", c_uint64),
        ("disk_hits", c_uint64),
        ("misses", c_uint64),
        ("compiles", c_uint64),
        ("corrupt_entries", c_uint64),
        ("store_failures", c_uint64),
    ]


class mla_layer_config_t(Structure):
    _fields_ = [
        ("num_heads", c_int64),
        ("kv_lora_rank", c_int64),
        ("qk_nope_head_dim", c_int64),
        ("qk_rope_head_dim", c_int64),
        ("v_head_dim", c_int64),
        ("activation_dtype", c_enum),
        ("cache_dtype", c_enum),
        ("block_size", c_int64),
        ("softmax_scale", c_float),
        ("decode_threshold", c_int64),
        ("needs_decode_lse", c_int32),
        ("wants_cuda_graphs", c_int32),
        ("max_model_len", c_int64),
        ("max_num_seqs", c_int64),
        ("workspace_tokens", c_int64),
        ("backend", c_char_p),
        # --- Prefill backend selection ---
        ("prefill_backend", c_char_p),
        # --- Decode context parallelism ---
        ("dcp_world_size", c_int64),
        ("dcp_rank", c_int64),
        ("dcp_interleave", c_int64),
    ]


class mla_backend_selection_t(Structure):
    _fields_ = [
        ("backend", c_char_p),
        ("source", c_enum),
        ("num_skipped", c_int32),
        ("skipped", c_char_p),
        ("summary", c_char_p),
        ("description", c_char_p),
        ("cuda_graphs", c_enum),
    ]


class mla_layer_weights_t(Structure):
    _fields_ = [
        ("kv_b_proj", mla_tensor_t),
        ("w_uk_t", mla_tensor_t),
        ("w_uv", mla_tensor_t),
    ]


class mla_batch_metadata_t(Structure):
    _fields_ = [
        ("query_start_loc", c_void_p),  # const int32_t *
        ("seq_lens", c_void_p),  # const int32_t *
        ("block_table", c_void_p),  # const int32_t *
        ("max_blocks", c_int64),
        ("slot_mapping", c_void_p),  # const int64_t *
        ("num_slots", c_int64),
        ("num_reqs", c_int64),
        ("num_actual_tokens", c_int64),
        ("max_query_len", c_int64),
        ("max_seq_len", c_int64),
    ]


class mla_plan_info_t(Structure):
    _fields_ = [
        ("num_decodes", c_int64),
        ("num_prefills", c_int64),
        ("num_decode_tokens", c_int64),
        ("num_prefill_tokens", c_int64),
        ("num_actual_tokens", c_int64),
        ("decode_query_len", c_int64),
        ("num_context_chunks", c_int64),
        ("num_cache_blocks", c_int64),
    ]


class mla_forward_args_t(Structure):
    _fields_ = [
        ("q", mla_tensor_t),
        ("kv_c", mla_tensor_t),
        ("k_pe", mla_tensor_t),
        ("kv_cache", mla_tensor_t),
        ("output", mla_tensor_t),
        ("decode_lse", mla_tensor_t),
        ("kv_scale", mla_tensor_t),
    ]


class mla_dcp_merge_args_t(Structure):
    _fields_ = [
        ("gathered_output", mla_tensor_t),
        ("gathered_lse", mla_tensor_t),
        ("output", mla_tensor_t),
        ("lse", mla_tensor_t),
    ]


class mla_decode_graph_shape_t(Structure):
    _fields_ = [
        ("max_decodes", c_int64),
        ("query_len", c_int64),
        ("max_blocks_per_request", c_int64),
        ("num_cache_blocks", c_int64),
        ("max_splits_per_request", c_int64),
    ]


class mla_kernel_info_t(Structure):
    _fields_ = [
        ("num_args", c_int32),
        ("origin", c_enum),
        ("milliseconds", c_double),
        ("cache_entry", c_char_p),
    ]


class mla_version_info_t(Structure):
    _fields_ = [
        ("major", c_int32),
        ("minor", c_int32),
        ("patch", c_int32),
        ("version", c_char_p),
        ("build_identity", c_char_p),
        ("gpu_chips", c_char_p),
        ("host_target", c_char_p),
    ]


# Opaque handles travel as plain addresses.
handle = c_void_p
status = c_enum
P = POINTER

# name -> (restype, argtypes). Every function returning `status` gets the
# error check that turns a failure into an exception (see _library).
PROTOTYPES = {
    "mla_status_string": (c_char_p, [status]),
    "mla_last_error": (c_char_p, []),
    "mla_version": (status, [P(mla_version_info_t)]),
    "mla_dtype_size": (status, [c_enum, P(c_size_t)]),
    "mla_dtype_name": (status, [c_enum, P(c_char_p)]),
    "mla_tensor_contiguous": (
        status,
        [c_void_p, c_enum, c_int32, P(c_int64), P(mla_tensor_t)],
    ),
    "mla_tensor_span_bytes": (status, [P(mla_tensor_t), P(c_size_t)]),
    "mla_runtime_options_default": (status, [P(mla_runtime_options_t)]),
    "mla_runtime_create": (status, [P(mla_runtime_options_t), P(handle)]),
    "mla_runtime_destroy": (status, [handle]),
    "mla_runtime_device_kind": (status, [handle, P(c_enum)]),
    "mla_runtime_device_description": (status, [handle, P(c_char_p)]),
    "mla_runtime_parallelism": (status, [handle, P(c_int64)]),
    "mla_runtime_cache_dir": (status, [handle, P(c_char_p)]),
    "mla_runtime_cache_stats": (status, [handle, P(mla_cache_stats_t)]),
    "mla_runtime_allocate": (status, [handle, c_size_t, P(c_void_p)]),
    "mla_runtime_free": (status, [handle, c_void_p]),
    "mla_runtime_upload": (
        status,
        [handle, c_void_p, c_void_p, c_size_t, c_void_p],
    ),
    "mla_runtime_download": (
        status,
        [handle, c_void_p, c_void_p, c_size_t, c_void_p],
    ),
    "mla_runtime_synchronize": (status, [handle, c_void_p]),
    "mla_runtime_wait_for_kernel_upgrades": (status, [handle]),
    "mla_layer_config_default": (status, [P(mla_layer_config_t)]),
    "mla_runtime_select_backend": (
        status,
        [handle, P(mla_layer_config_t), P(mla_backend_selection_t)],
    ),
    "mla_runtime_select_prefill_backend": (
        status,
        [handle, P(mla_layer_config_t), P(mla_backend_selection_t)],
    ),
    "mla_layer_create": (
        status,
        [handle, P(mla_layer_config_t), P(mla_layer_weights_t), P(handle)],
    ),
    "mla_layer_destroy": (status, [handle]),
    "mla_layer_selection": (status, [handle, P(mla_backend_selection_t)]),
    "mla_layer_prefill_selection": (status, [handle, P(mla_backend_selection_t)]),
    "mla_layer_plan": (
        status,
        [handle, P(mla_batch_metadata_t), c_int64, P(handle)],
    ),
    "mla_plan_destroy": (status, [handle]),
    "mla_plan_get_info": (status, [handle, P(mla_plan_info_t)]),
    "mla_plan_describe": (status, [handle, P(c_char_p)]),
    "mla_layer_forward": (
        status,
        [handle, handle, P(mla_forward_args_t), c_void_p],
    ),
    "mla_dcp_local_slot_mapping": (
        status,
        [P(mla_batch_metadata_t), c_int64, c_int64, c_int64, c_int64, P(c_int64)],
    ),
    "mla_layer_set_dcp_all_gather": (status, [handle, mla_dcp_all_gather_fn, c_void_p]),
    "mla_layer_merge_dcp_partials": (
        status,
        [handle, handle, P(mla_dcp_merge_args_t), c_void_p],
    ),
    "mla_layer_plan_decode_step": (
        status,
        [handle, P(mla_batch_metadata_t), P(mla_decode_graph_shape_t), P(handle)],
    ),
    "mla_layer_capture_decode_step": (
        status,
        [handle, P(mla_decode_graph_shape_t), P(mla_forward_args_t), P(handle)],
    ),
    "mla_decode_graph_get_shape": (
        status,
        [handle, P(mla_decode_graph_shape_t)],
    ),
    "mla_layer_replay": (status, [handle, handle, handle, c_void_p]),
    "mla_decode_graph_stage": (status, [handle, handle, handle, c_void_p]),
    "mla_decode_graph_enqueue": (status, [handle, handle, c_void_p]),
    "mla_decode_graph_destroy": (status, [handle]),
    "mla_kernel_compile_source": (
        status,
        [handle, c_char_p, c_char_p, P(handle)],
    ),
    "mla_kernel_destroy": (status, [handle]),
    "mla_kernel_get_info": (status, [handle, P(mla_kernel_info_t)]),
    "mla_kernel_argument": (status, [handle, c_int32, P(mla_tensor_t)]),
    "mla_kernel_run": (
        status,
        [handle, P(mla_tensor_t), c_size_t, c_void_p],
    ),
}

# The functions that return no status (and so get no error check).
UNCHECKED = frozenset({"mla_status_string", "mla_last_error"})
