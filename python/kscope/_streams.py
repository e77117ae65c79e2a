"""What a `stream=` argument means: a CUDA stream handle as an integer, or None.

kscope takes streams as raw handles (cudaStream_t as an integer), so it works with any
library that exposes one: torch.cuda.Stream and ExternalStream (`.cuda_stream`), CuPy
(`.ptr`), or an integer. torch is never imported here unless the caller asks for torch's
current stream; a torch stream object passed in means torch is imported already.
"""

from __future__ import annotations

import sys

from ._native import warn_once

# A stream argument asking for the current stream when the scope opens (torch's notion of
# it: torch.cuda.current_stream()).
CURRENT = "current"


def wants_current(stream) -> bool:
    return stream is True or (isinstance(stream, str) and stream == CURRENT)


def current_stream_handle():
    """torch.cuda.current_stream().cuda_stream, or None (with one warning) without torch
    or a GPU."""
    torch = sys.modules.get("torch")
    if torch is None:
        try:
            import torch  # noqa: F811  (asked for torch's current stream: torch is the program's)
        except ImportError:
            warn_once("kscope: stream='current' needs PyTorch (torch.cuda.current_stream()); "
                      "these scopes time the host only")
            return None
    try:
        if not torch.cuda.is_available():
            warn_once("kscope: stream='current' but torch sees no CUDA device; these scopes time the host only")
            return None
        return int(torch.cuda.current_stream().cuda_stream)
    except Exception as e:  # a broken CUDA setup must not break the program
        warn_once(f"kscope: torch's current stream is unavailable ({e}); these scopes time the host only")
        return None


def stream_handle(stream):
    """The handle of `stream` (not the current-stream request), or None with one warning
    for something that is not a stream."""
    if stream is None or stream is False:
        return None
    if isinstance(stream, bool):
        return None
    if isinstance(stream, int):
        if 0 <= stream < (1 << 64):
            return stream
        warn_once(f"kscope: stream handle {stream} is not a cudaStream_t value; this scope times the host only")
        return None
    for attribute in ("cuda_stream", "ptr"):  # torch.cuda.Stream / ExternalStream; CuPy
        value = getattr(stream, attribute, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    warn_once(f"kscope: {type(stream).__name__} is not a stream kscope knows (a torch.cuda.Stream, "
              f"an object with .cuda_stream or .ptr, an integer handle, or 'current'); "
              f"this scope times the host only")
    return None


def resolve(stream):
    """A stream argument resolved now: a handle or None."""
    if wants_current(stream):
        return current_stream_handle()
    return stream_handle(stream)
