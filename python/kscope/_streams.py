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


# The getter of torch's current stream once torch answered with a GPU: the public
# torch.cuda.current_stream() builds a Stream object on every call (most of a stream='current'
# scope's cost on an H100 host: 18.7 us against 8.2 us with a stream passed in), while torch's
# own raw getter (torch._C._cuda_getCurrentRawStream, which Triton's launcher uses too) returns
# the handle alone. Taken only when it agrees with the public answer; else the public one.
_current_getter = None


def _make_current_getter(torch):
    public = lambda: int(torch.cuda.current_stream().cuda_stream)  # noqa: E731
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    device = getattr(torch._C, "_cuda_getDevice", None)
    if raw is None or device is None:
        return public
    try:
        fast = lambda: int(raw(device()))  # noqa: E731
        if fast() == public():
            return fast
    except Exception:
        pass
    return public


def current_stream_handle():
    """torch.cuda.current_stream().cuda_stream, or None (with one warning) without torch
    or a GPU."""
    global _current_getter
    if _current_getter is not None:
        try:
            return _current_getter()
        except Exception as e:  # a broken CUDA setup must not break the program
            warn_once(f"kscope: torch's current stream is unavailable ({e}); these scopes time the host only")
            return None
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
        getter = _make_current_getter(torch)
        handle = getter()
        _current_getter = getter
        return handle
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
