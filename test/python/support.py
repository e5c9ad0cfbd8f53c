"""Helpers of the Python suite: the device under test, seeds, tensors of
each framework on the runtime's device, random batches and layer inputs,
and the tolerances results are held to."""

import math
import os
import zlib
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pytest

import mla
import reference
from mla import DType


def _device_under_test() -> str:
    asked = os.environ.get("MLA_TEST_DEVICE", "")
    if asked in ("cpu", "gpu"):
        return asked
    if asked:
        raise ValueError(f"MLA_TEST_DEVICE must be cpu or gpu, got {asked!r}")
    try:
        import torch
    except ImportError:
        return "cpu"
    return "gpu" if torch.cuda.is_available() else "cpu"


DEVICE = _device_under_test()
ON_GPU = DEVICE == "gpu"
needs_gpu = pytest.mark.skipif(not ON_GPU, reason="needs a CUDA GPU (MLA_TEST_DEVICE=gpu)")
needs_cpu = pytest.mark.skipif(ON_GPU, reason="the CPU runtime's behaviour")

SEED_BASE = int(os.environ.get("MLA_TEST_SEED") or int.from_bytes(os.urandom(4), "little"))


def seed_for(name: str) -> int:
    """The seed of test `name` in this run: fresh each run, replayable
    with MLA_TEST_SEED."""
    return (SEED_BASE * 1_000_003 + zlib.crc32(name.encode())) % 2**32


#: numpy has no bfloat16: bf16 cases run on torch only.
FRAMEWORKS = ("numpy", "torch")


def torch_or_skip() -> Any:
    return pytest.importorskip("torch", reason="torch is not installed")


class NumpyTensors:
    """numpy arrays on a CPU runtime; DeviceBuffers filled from numpy on a
    GPU runtime."""

    name = "numpy"

    def __init__(self, runtime: mla.Runtime):
        self.runtime = runtime

    def tensor(self, values: np.ndarray, dtype: DType) -> Any:
        if dtype is DType.BF16:
            pytest.skip("numpy has no bfloat16")
        host = np.ascontiguousarray(values, dtype=dtype.to_numpy())
        if not self.runtime.is_cuda:
            return host
        buffer = self.runtime.allocate(host.shape, dtype)
        buffer.upload(host)
        return buffer

    def full(self, shape: Sequence[int], value: float, dtype: DType) -> Any:
        return self.tensor(np.full(shape, value), dtype)

    def to_f64(self, tensor: Any) -> np.ndarray:
        if isinstance(tensor, mla.DeviceBuffer):
            self.runtime.synchronize()
            tensor = tensor.download()
        return np.asarray(tensor, dtype=np.float64)

    @staticmethod
    def pointer(tensor: Any) -> int:
        return tensor.data_ptr if isinstance(tensor, mla.DeviceBuffer) else tensor.ctypes.data


class TorchTensors:
    """torch tensors on the runtime's device."""

    name = "torch"

    def __init__(self, runtime: mla.Runtime):
        self.torch = torch_or_skip()
        self.runtime = runtime
        self.device = f"cuda:{runtime.gpu_ordinal}" if runtime.is_cuda else "cpu"

    def tensor(self, values: np.ndarray, dtype: DType) -> Any:
        host = self.torch.from_numpy(np.ascontiguousarray(values, dtype=np.float64))
        return host.to(device=self.device, dtype=dtype.to_torch()).contiguous()

    def full(self, shape: Sequence[int], value: float, dtype: DType) -> Any:
        return self.torch.full(tuple(shape), value, dtype=dtype.to_torch(), device=self.device)

    def to_f64(self, tensor: Any) -> np.ndarray:
        if self.runtime.is_cuda:
            self.torch.cuda.synchronize(self.device)
        return tensor.detach().to(device="cpu", dtype=self.torch.float64).numpy()

    @staticmethod
    def pointer(tensor: Any) -> int:
        return tensor.data_ptr()


def make_framework(name: str, runtime: mla.Runtime) -> Any:
    return NumpyTensors(runtime) if name == "numpy" else TorchTensors(runtime)


# Tolerances.
#
# Inputs are drawn in the tested dtype, so the float64 reference sees
# exactly what the library sees; errors come from the library's own
# roundings and arithmetic. A value rounded to a format of p significand
# bits is off by at most the unit roundoff u = 2^-p (bf16: p = 8, f16: 11,
# f32: 24). Along any path of the layer a result goes through at most four
# roundings to the activation dtype (decode: the absorbed query, the latent
# output, the projected output; prefill: the up-projected keys and values,
# the merged output), so its relative error is at most about 4u; over many
# values the errors are independent, which keeps the relative L2 norm of
# the error below that bound. f32 arithmetic adds accumulation error over
# sums of up to ~2^10 terms (pairwise / vectorized: ~log2(n) u each) and
# the exp of the softmax; 2^-16 (~1.5e-5) bounds it with room.
UNIT_ROUNDOFF = {DType.F32: 2.0**-24, DType.F16: 2.0**-11, DType.BF16: 2.0**-8}
F32_FLOOR = 2.0**-16


def output_tolerance(dtype: DType) -> float:
    """The relative L2 error allowed for a layer output of `dtype`."""
    return max(4 * UNIT_ROUNDOFF[dtype], F32_FLOOR)


def lse_tolerance(dtype: DType, lse: np.ndarray) -> float:
    """The absolute error allowed for LSE values near `lse`. Log-sum-exp
    moves by at most the largest error of the scores that dominate it; a
    score's factors are rounded once each to the activation dtype (the
    absorbed query or the up-projected key), which moves it by at most
    2u of the magnitude of its terms, here within the LSE's own."""
    finite = np.abs(lse[np.isfinite(lse)])
    magnitude = max(float(finite.max()) if finite.size else 0.0, 1.0)
    return max(2 * UNIT_ROUNDOFF[dtype] * magnitude, F32_FLOOR)


# Small dims (every one a multiple of 16) on 16-token pages keep the CPU
# fast.
SMALL_DIMS = dict(
    num_heads=4,
    kv_lora_rank=64,
    qk_nope_head_dim=32,
    qk_rope_head_dim=16,
    v_head_dim=32,
    block_size=16,
)


# Batches.


@dataclass
class Batch:
    """A batch's requests (decodes first) on a paged cache with shuffled
    pages, and its metadata."""

    query_lens: List[int]
    seq_lens: List[int]
    block_table: np.ndarray
    num_cache_blocks: int
    block_size: int
    num_decodes: int
    decode_query_len: int
    padding: int
    metadata: mla.BatchMetadata

    @property
    def num_tokens(self) -> int:
        return sum(self.query_lens)

    @property
    def rows(self) -> int:
        """Rows of the token-indexed tensors: the tokens, then padding."""
        return self.num_tokens + self.padding


def make_batch(
    rng: np.random.Generator,
    decode_seq_lens: Sequence[int],
    decode_query_len: int,
    prefills: Sequence[Tuple[int, int]],
    block_size: int,
    padding: int = 0,
    spare_pages: int = 3,
) -> Batch:
    """Decodes of `decode_query_len` new tokens over `decode_seq_lens`, then
    prefills of (query_len, seq_len); every request's pages drawn at random
    from a cache with `spare_pages` unused ones; `padding` padded tokens
    (slot -1) after the real ones."""
    query_lens = [decode_query_len] * len(decode_seq_lens) + [q for q, _ in prefills]
    seq_lens = list(decode_seq_lens) + [s for _, s in prefills]
    pages_needed = [math.ceil(s / block_size) for s in seq_lens]
    num_cache_blocks = sum(pages_needed) + spare_pages
    pages = rng.permutation(num_cache_blocks)
    width = max(pages_needed, default=0) + 1
    block_table = np.zeros((len(seq_lens), width), dtype=np.int32)
    start = 0
    for b, count in enumerate(pages_needed):
        block_table[b, :count] = pages[start : start + count]
        start += count
    metadata = mla.BatchMetadata.from_lengths(
        query_lens, seq_lens, block_table, block_size, num_slots=sum(query_lens) + padding
    )
    return Batch(
        query_lens=query_lens,
        seq_lens=seq_lens,
        block_table=block_table,
        num_cache_blocks=num_cache_blocks,
        block_size=block_size,
        num_decodes=len(decode_seq_lens),
        decode_query_len=decode_query_len if decode_seq_lens else 0,
        padding=padding,
        metadata=metadata,
    )


def random_weights(rng: np.random.Generator, tensors: Any, config: mla.LayerConfig) -> Dict[str, Any]:
    """kv_b_proj [Lkv, N, P + V] drawn in the activation dtype, and W_UK_T /
    W_UV taken from it as an engine does; also its float64 values."""
    n, lkv = config.num_heads, config.kv_lora_rank
    p, v = config.qk_nope_head_dim, config.v_head_dim
    dtype = config.activation_dtype
    kv_b_proj = tensors.tensor(rng.uniform(-1, 1, (lkv, n, p + v)) / math.sqrt(lkv), dtype)
    exact = tensors.to_f64(kv_b_proj)
    return {
        "kv_b_proj": kv_b_proj,
        "w_uk_t": tensors.tensor(exact[:, :, :p].transpose(1, 2, 0), dtype),
        "w_uv": tensors.tensor(exact[:, :, p:].transpose(1, 0, 2), dtype),
        "kv_b_proj_f64": exact,
    }


SENTINEL = 7.0


def random_step(
    rng: np.random.Generator,
    tensors: Any,
    config: mla.LayerConfig,
    rows: int,
    num_cache_blocks: int,
    decode_lse_shape: Optional[Tuple[int, int, int]] = None,
) -> Dict[str, Any]:
    """One step's tensors: random q, kv_c, k_pe of `rows` rows and a random
    cache (the context earlier steps wrote); output and, if its shape is
    given, the decode LSE filled with SENTINEL. "f64" holds the float64
    values of them all."""
    n, lkv, r = config.num_heads, config.kv_lora_rank, config.qk_rope_head_dim
    act = config.activation_dtype
    step = {
        "q": tensors.tensor(rng.uniform(-1, 1, (rows, n, config.qk_head_dim)), act),
        "kv_c": tensors.tensor(rng.uniform(-1, 1, (rows, lkv)), act),
        "k_pe": tensors.tensor(rng.uniform(-1, 1, (rows, r)), act),
        "kv_cache": tensors.tensor(
            rng.uniform(-1, 1, (num_cache_blocks, config.block_size, lkv + r)), config.cache_dtype
        ),
        "output": tensors.full((rows, n, config.v_head_dim), SENTINEL, act),
    }
    if decode_lse_shape is not None:
        step["decode_lse"] = tensors.full(decode_lse_shape, SENTINEL, DType.F32)
    step["f64"] = {name: tensors.to_f64(value) for name, value in step.items()}
    return step


def random_batch_step(rng: np.random.Generator, tensors: Any, config: mla.LayerConfig, batch: Batch) -> Dict[str, Any]:
    """random_step sized for `batch`, with the decode LSE when the config
    asks for it."""
    lse_shape = None
    if config.needs_decode_lse and batch.num_decodes:
        lse_shape = (batch.num_decodes, config.num_heads, batch.decode_query_len)
    return random_step(rng, tensors, config, batch.rows, batch.num_cache_blocks, lse_shape)


def expected_step(step: Dict[str, Any], weights: Dict[str, Any], config: mla.LayerConfig, batch: Batch):
    """The float64 reference of `step`: (cache after, out [T, N, V], lse
    [N, T])."""
    f64 = step["f64"]
    md = batch.metadata
    return reference.mla_step(
        f64["q"],
        f64["kv_c"],
        f64["k_pe"],
        f64["kv_cache"],
        weights["kv_b_proj_f64"],
        np.asarray(md.query_start_loc[: md.num_reqs + 1]),
        np.asarray(batch.seq_lens),
        batch.block_table,
        np.asarray(md.slot_mapping),
        config.softmax_scale,
    )


# FP8 caches: an encoder and decoder independent of the library's bit
# arithmetic, and the float64 reference of a step over such a cache.


def fp8_values(dtype):
    """The value of every code, 0 to 255 (NaN for NaN codes)."""
    mantissa_bits, bias = (3, 7) if dtype is DType.FP8_E4M3 else (2, 15)
    values = np.empty(256)
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        e, m = (code & 0x7F) >> mantissa_bits, code & ((1 << mantissa_bits) - 1)
        top = (1 << (7 - mantissa_bits)) - 1
        if dtype is DType.FP8_E4M3 and e == top and m == 7:
            values[code] = np.nan
        elif dtype is DType.FP8_E5M2 and e == top:
            values[code] = sign * np.inf if m == 0 else np.nan
        elif e == 0:
            values[code] = sign * m * 2.0 ** (1 - bias - mantissa_bits)
        else:
            values[code] = sign * (1 + m / (1 << mantissa_bits)) * 2.0 ** (e - bias)
    return values


def fp8_encode(x, dtype):
    """Nearest finite code of each value (ties to the even code),
    saturating, the sign kept (a negative value that rounds to zero is
    -0, as IEEE rounding and the hardware's cvt give): a search over the
    table, independent of the library's bit arithmetic."""
    table = fp8_values(dtype)
    finite = np.flatnonzero(np.isfinite(table))
    candidates = table[finite]
    x = np.asarray(x, dtype=np.float64).ravel()
    distance = np.abs(x[:, None] - candidates[None, :])
    best = distance.min(axis=1, keepdims=True)
    ties = distance == best
    # Among equally near codes the even one; between +0 and -0 the one
    # with x's sign.
    wrong_sign = (finite[None, :] >> 7) != np.signbit(x)[:, None]
    score = np.where(ties, (finite[None, :] & 1) * 2 + wrong_sign, 99)
    return finite[np.argmin(score, axis=1)].astype(np.uint8)


def fp8_step_reference(batch: "Batch", q: np.ndarray, new_rows: np.ndarray, codes_after: np.ndarray,
                       cache_dtype: DType, scale: float, kv_b_proj_f64: np.ndarray, rope_dim: int,
                       softmax_scale: float) -> np.ndarray:
    """The step's output [T, N, V] in float64 over the cache after the step
    (`codes_after`, uint8), dequantized as code x scale in f32: decodes
    attend over their new tokens as quantized, prefills over their new
    tokens unquantized (`new_rows`, kv_c | k_pe), as vLLM's do."""
    dequantized = (fp8_values(cache_dtype)[codes_after].astype(np.float32) * np.float32(scale)).astype(np.float64)
    starts = np.concatenate([[0], np.cumsum(batch.query_lens)])
    rows = int(starts[-1])
    want = np.zeros((rows, q.shape[1], kv_b_proj_f64.shape[2] - (q.shape[2] - rope_dim)))
    for b, seq_len in enumerate(batch.seq_lens):
        start, stop = starts[b], starts[b + 1]
        context = seq_len - (stop - start)
        cached = reference.gather_context(dequantized, batch.block_table[b], seq_len)
        fresh = cached[context:] if b < batch.num_decodes else new_rows[start:stop]
        latent = np.concatenate([cached[:context], fresh])
        want[start:stop], _ = reference.attention(np.asarray(q[start:stop], np.float64), latent, kv_b_proj_f64,
                                                  rope_dim, softmax_scale)
    return want
