"""The CUDA stream a call is queued on.

`stream=` takes a torch.cuda.Stream (or anything with an integer
`cuda_stream`, as torch's ExternalStream), an integer CUstream handle, or
None. None means what torch code around the call would use: torch's
current stream on the runtime's GPU, so that a call inside
`with torch.cuda.stream(s):` or `torch.cuda.graph(g)` is ordered with the
torch work around it. Without torch in the process (or before torch has
touched CUDA, when its current stream can only be the default one) it is
the legacy default stream, NULL. CPU runtimes ignore streams.
"""

import sys
from typing import Any, Optional


def stream_handle(stream: Any, runtime: Any) -> Optional[int]:
    """The CUstream to pass for `stream` on `runtime` (None: NULL)."""
    if not runtime.is_cuda:
        return None
    if stream is None:
        torch = sys.modules.get("torch")
        if torch is None or not torch.cuda.is_initialized():
            return None
        # torch's own raw lookup where it has one (as Triton uses it): the
        # public current_stream() builds a Stream object per call, a few
        # microseconds of every step.
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        if raw is not None:
            return raw(runtime.gpu_ordinal) or None
        return torch.cuda.current_stream(runtime.gpu_ordinal).cuda_stream or None
    if isinstance(stream, int):
        return stream or None
    handle = getattr(stream, "cuda_stream", None)
    if isinstance(handle, int):
        return handle or None
    raise TypeError(
        f"stream must be a torch.cuda.Stream, an integer CUstream or None, "
        f"got {type(stream).__name__}"
    )
