"""The one place that loads libkscope_c.so and declares its C functions (ctypes).

Why ctypes and not a compiled extension: one shared library serves every CPython version,
and building it needs no Python headers (docs/python.md, "Design"). Every other module of
the package calls the library through the names defined here.

If the library cannot be loaded the package still imports: scopes and ranges do nothing,
one KscopeWarning says why, and what must return kscope's numbers (report, bench,
diagnose) raises KscopeError with the same reason. An instrumented program keeps running
where kscope is not installed completely.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import warnings
from typing import Optional
from ctypes import POINTER, c_char_p, c_double, c_int, c_size_t, c_uint32, c_void_p

# The C interface version this package speaks (KSCOPE_C_ABI_VERSION in kscope_c.h).
ABI_VERSION = 1

# kscope_status values (include/kscope/c/kscope_c.h).
OK = 0
ERROR_INVALID_ARGUMENT = 1
ERROR_NOT_FOUND = 2
ERROR_ORDER = 3
ERROR_UNAVAILABLE = 4
ERROR_IO = 5
ERROR_LIMIT = 6
ERROR_CALLBACK = 7
ERROR_INTERNAL = 8
WOULD_BLOCK = 9  # kscope_scope_try_close: nothing closed, the plain close may block

# kscope_scope_try_open's answer when the open may block (KSCOPE_SCOPE_WOULD_BLOCK).
SCOPE_WOULD_BLOCK = -2

STATUS_NAMES = {
    OK: "ok",
    ERROR_INVALID_ARGUMENT: "invalid argument",
    ERROR_NOT_FOUND: "not found",
    ERROR_ORDER: "out of order",
    ERROR_UNAVAILABLE: "unavailable",
    ERROR_IO: "i/o error",
    ERROR_LIMIT: "limit reached",
    ERROR_CALLBACK: "callback failed",
    ERROR_INTERNAL: "internal error",
    WOULD_BLOCK: "would block",
}

FORMAT_TEXT = 0
FORMAT_JSON = 1
FORMAT_CSV = 2
FORMAT_HTML = 3
FORMAT_OPENMETRICS = 4

TIMER_CUDA = 0
TIMER_HOST = 1

LIBRARY_NAME = "libkscope_c.so"


class KscopeError(RuntimeError):
    """A kscope call failed; `status` is the kscope_status, the message says why."""

    def __init__(self, message: str, status: int = ERROR_INTERNAL):
        super().__init__(message)
        self.status = status


class KscopeWarning(UserWarning):
    """kscope could not do something it was asked to and carries on without it."""


_warned: set = set()
_warned_lock = threading.Lock()


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _caller_stacklevel() -> int:
    """The stacklevel of the first frame outside this package: the warning then points at
    the user's line (the `with`, the call), however deep inside kscope it was raised."""
    level = 1
    frame = sys._getframe(1)
    while frame is not None and os.path.dirname(os.path.abspath(frame.f_code.co_filename)) == _PACKAGE_DIR:
        frame = frame.f_back
        level += 1
    return level


def warn_once(message: str, stacklevel: Optional[int] = None) -> None:
    """One KscopeWarning per distinct message for the life of the process, pointing at the
    user's code."""
    with _warned_lock:
        if message in _warned:
            return
        _warned.add(message)
    warnings.warn(message, KscopeWarning, stacklevel=_caller_stacklevel() if stacklevel is None else stacklevel)


def _library_candidates():
    explicit = os.environ.get("KSCOPE_LIBRARY")
    if explicit:
        # An explicit path is the only one tried: a stale copy elsewhere must not answer.
        return [explicit]
    here = os.path.dirname(os.path.abspath(__file__))
    return [os.path.join(here, LIBRARY_NAME)]


# Declarations: (name, restype, argtypes).
_charpp = POINTER(c_void_p)  # char** out-parameters: read as a raw address, freed with kscope_free
_sizep = POINTER(c_size_t)

BENCH_CALL = ctypes.CFUNCTYPE(c_int, c_void_p, ctypes.c_size_t)
BENCH_READ_OUTPUT = ctypes.CFUNCTYPE(c_int, c_void_p, c_void_p)

_PROTOTYPES = [
    ("kscope_c_abi_version", c_int, ()),
    ("kscope_c_version", c_char_p, ()),
    ("kscope_last_error", c_char_p, ()),
    ("kscope_free", None, (c_void_p,)),
    ("kscope_site_register", c_int, (c_char_p, c_size_t, POINTER(c_uint32))),
    ("kscope_scope_open", c_int, (c_uint32,)),
    ("kscope_scope_open_stream", c_int, (c_uint32, c_size_t)),
    ("kscope_scope_open_named", c_int, (c_char_p, c_size_t, c_int, c_size_t)),
    ("kscope_scope_close", c_int, (c_int,)),
    ("kscope_scope_try_open", c_int, (c_uint32,)),
    ("kscope_scope_try_open_stream", c_int, (c_uint32, c_size_t)),
    ("kscope_scope_try_close", c_int, (c_int,)),
    ("kscope_scope_set_work", c_int, (c_int, c_double, c_double)),
    ("kscope_scope_tag", c_int, (c_int, c_char_p, c_size_t, c_char_p, c_size_t)),
    ("kscope_range_start", c_int, (c_uint32, POINTER(c_void_p))),
    ("kscope_range_set_work", c_int, (c_void_p, c_double, c_double)),
    ("kscope_range_end", c_int, (c_void_p,)),
    ("kscope_set_enabled", None, (c_int,)),
    ("kscope_is_enabled", c_int, ()),
    ("kscope_set_nvtx", None, (c_int,)),
    ("kscope_enable_cupti", c_int, (c_char_p,)),
    ("kscope_enable_production", c_int, ()),
    ("kscope_pause_tracing", c_int, ()),
    ("kscope_resume_tracing", c_int, ()),
    ("kscope_enable_metric_sampling", c_int, (c_char_p,)),
    ("kscope_disable_metric_sampling", None, ()),
    ("kscope_enable_counters", c_int, (c_int,)),
    ("kscope_enable_counters_steps", c_int, (c_int, c_int, c_char_p)),
    ("kscope_disable_counters", None, ()),
    ("kscope_session_reset", None, ()),
    ("kscope_session_warn", c_int, (c_char_p, c_size_t)),
    ("kscope_write_trace", c_int, (c_char_p,)),
    ("kscope_report_create", c_int, (POINTER(c_void_p),)),
    ("kscope_report_parse", c_int, (c_char_p, c_size_t, POINTER(c_void_p))),
    ("kscope_report_destroy", None, (c_void_p,)),
    ("kscope_report_format", c_int, (c_void_p, c_int, _charpp, _sizep)),
    ("kscope_report_write", c_int, (c_void_p, c_int, c_char_p)),
    ("kscope_report_verdict", c_int, (c_void_p, c_char_p, c_size_t, _charpp, _sizep)),
    ("kscope_report_add_section", c_int, (c_void_p, c_char_p, c_char_p, c_char_p, c_size_t, c_char_p, c_size_t)),
    ("kscope_diagnose", c_int, (c_void_p, c_char_p, _charpp, _sizep, _charpp, _sizep)),
    ("kscope_diagnose_options", c_int, (_charpp, _sizep)),
    ("kscope_bench_create", c_int, (c_char_p, BENCH_CALL, c_void_p, POINTER(c_void_p))),
    ("kscope_bench_set_stream", c_int, (c_void_p, c_size_t)),
    ("kscope_bench_set_device", c_int, (c_void_p, c_int)),
    ("kscope_bench_set_output", c_int, (c_void_p, BENCH_READ_OUTPUT, c_void_p, c_double)),
    ("kscope_bench_set_reference", c_int, (c_void_p, c_void_p)),
    ("kscope_bench_run", c_int, (c_void_p, c_int, _charpp, _sizep, _charpp, _sizep)),
    ("kscope_bench_destroy", None, (c_void_p,)),
    ("kscope_bench_callback_error", None, (c_char_p, c_size_t)),
    ("kscope_output_put", c_int, (c_void_p, POINTER(c_double), c_size_t)),
]


def _load():
    """(library, hot library, path, None) or (None, None, None, why)."""
    problems = []
    for path in _library_candidates():
        if not os.path.exists(path):
            problems.append(f"{path}: no such file")
            continue
        try:
            # CDLL (not PyDLL): calls release the GIL, so other Python threads run while a
            # report is built or a benchmark samples; callbacks take it back.
            lib = ctypes.CDLL(path)
        except OSError as e:
            problems.append(f"{path}: {e}")
            continue
        try:
            for name, restype, argtypes in _PROTOTYPES:
                fn = getattr(lib, name)
                fn.restype = restype
                fn.argtypes = argtypes
        except AttributeError as e:
            return None, None, None, f"{path} lacks a function this package needs ({e}): rebuild kscope"
        version = lib.kscope_c_abi_version()
        if version != ABI_VERSION:
            return None, None, None, (f"{path} speaks C interface version {version}, this package version "
                                f"{ABI_VERSION}: install the package and the library from one build")
        return lib, ctypes.PyDLL(path), path, None
    return None, None, None, ("kscope's native library could not be loaded (" + "; ".join(problems) +
                        "). Build and install it with CMake (docs/python.md), or point KSCOPE_LIBRARY "
                        "at libkscope_c.so")


lib, _hot_lib, library_path, load_error = _load()


def hot_functions():
    """(try_open, try_open_stream, try_close) for scopes, the cheapest calls ctypes makes:
    through PyDLL, which keeps the GIL (letting it go and taking it back costs more than
    the call), and without declared argument types for open and close (small ints need no
    conversion objects: kscope_scope_handle is an int for this reason).

    Keeping the GIL is safe only for a call that cannot block, and a scope's open and close
    block while per-scope counters are on (CUPTI setup, a device synchronization, decoding:
    milliseconds, and forever if queued GPU work holds a host callback that needs the GIL).
    So these are the try calls, which then do nothing and answer SCOPE_WOULD_BLOCK or
    WOULD_BLOCK; the caller makes the plain call through `lib` (CDLL), which lets the GIL
    go. The library decides, from the counter hook itself, since counters start from C++
    and from KSCOPE_COUNTERS as well as from Python."""
    open_scope = _hot_lib.kscope_scope_try_open
    open_stream = _hot_lib.kscope_scope_try_open_stream
    open_stream.argtypes = (c_uint32, c_size_t)  # a stream handle is a 64-bit address
    close = _hot_lib.kscope_scope_try_close
    return open_scope, open_stream, close


def available() -> bool:
    """Whether libkscope_c.so is loaded (False: scopes do nothing; `load_error` says why)."""
    return lib is not None


def require():
    """The library, or KscopeError saying why it is missing."""
    if lib is None:
        raise KscopeError(load_error, ERROR_UNAVAILABLE)
    return lib


def last_error() -> str:
    if lib is None:
        return load_error
    text = lib.kscope_last_error()
    return text.decode("utf-8", "replace") if text else ""


def error_for(status: int, what: str = "") -> KscopeError:
    message = last_error() or STATUS_NAMES.get(status, f"status {status}")
    return KscopeError(f"{what}: {message}" if what else message, status)


def check(status: int, what: str = "") -> None:
    if status != OK:
        raise error_for(status, what)


def encode(text) -> bytes:
    """Text for the C side: str as UTF-8 (unencodable characters replaced, never an
    error), bytes as they are, anything else by its str()."""
    if isinstance(text, bytes):
        return text
    if not isinstance(text, str):
        text = str(text)
    return text.encode("utf-8", "replace")


def take_text(address: int, size: int) -> str:
    """A buffer the library allocated, as str; freed here."""
    if not address:
        return ""
    try:
        return ctypes.string_at(address, size).decode("utf-8", "replace")
    finally:
        lib.kscope_free(address)


def text_call(fn, *args, what: str) -> str:
    """Calls fn(*args, char** out, size_t* size) and returns the text."""
    out = c_void_p()
    size = c_size_t()
    check(fn(*args, ctypes.byref(out), ctypes.byref(size)), what)
    return take_text(out.value, size.value)


def two_text_call(fn, *args, what: str):
    """Calls fn(*args, char** a, size_t*, char** b, size_t*) and returns both texts."""
    a, a_size, b, b_size = c_void_p(), c_size_t(), c_void_p(), c_size_t()
    check(fn(*args, ctypes.byref(a), ctypes.byref(a_size), ctypes.byref(b), ctypes.byref(b_size)), what)
    first = take_text(a.value, a_size.value)
    return first, take_text(b.value, b_size.value)


def version() -> str:
    """kscope's version ("0.1.0"), from the library when loaded."""
    if lib is None:
        return "unknown (native library not loaded)"
    return lib.kscope_c_version().decode()
