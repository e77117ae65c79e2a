"""Scopes and cross-thread ranges from Python.

    with kscope.scope("decode", stream=torch.cuda.current_stream(), work=(flops, bytes)):
        logits = model(tokens)

    @kscope.scope("sample")
    def sample(logits): ...

A scope is kscope::scope underneath (include/kscope/scope/scope.hpp): host time, an NVTX
range, CUDA events on the stream when one is given, and the node kernels launched inside
are attributed to. Its name is registered with the library once (a site id, cached here
by name), so opening and closing is one C call each (two while per-scope counters are on:
the call that keeps the GIL declines, and the one that lets it go opens or closes).

Scopes never raise into the instrumented program: a bad stream, a tag on a closed scope,
scopes closed out of order give one KscopeWarning per kind of problem, and a defined
result (a host-only scope, nothing tagged, the scopes above closed first).
"""

from __future__ import annotations

import functools
import inspect
import threading
from ctypes import byref, c_uint32, c_void_p

from . import _native, _streams
from ._native import ERROR_INTERNAL, ERROR_LIMIT, OK, SCOPE_WOULD_BLOCK, WOULD_BLOCK, encode, warn_once

_lib = _native.lib

# name -> site id (0: the library refused to register it: such a name opens by its text).
_sites: dict = {}
_sites_lock = threading.Lock()


def _register(name: str) -> int:
    with _sites_lock:
        site = _sites.get(name)
        if site is not None:
            return site
        site = 0
        if _lib is not None:
            out = c_uint32()
            data = encode(name)
            status = _lib.kscope_site_register(data, len(data), byref(out))
            if status == OK:
                site = out.value
            else:
                warn_once(f"kscope: {_native.last_error()}")
                if status != ERROR_LIMIT:
                    return 0
        _sites[name] = site
        return site


def _site_of(name) -> int:
    site = _sites.get(name)
    return site if site is not None else _register(name)


# _open, _open_stream and _close keep the GIL and do nothing when that could block (per-scope
# counters on: _native.hot_functions); the _blocking ones let it go, and are what _opened and
# _closed fall back to.
if _lib is not None:
    _open, _open_stream, _close = _native.hot_functions()
    _open_blocking = _lib.kscope_scope_open
    _open_stream_blocking = _lib.kscope_scope_open_stream
    _close_blocking = _lib.kscope_scope_close
    _open_named = _lib.kscope_scope_open_named
else:  # no library: scopes open nothing (the import already warned)
    def _open(site):
        return 0

    def _open_stream(site, stream):
        return 0

    def _open_named(name, size, has_stream, stream):
        return 0

    def _close(handle):
        return OK

    _open_blocking, _open_stream_blocking, _close_blocking = _open, _open_stream, _close


def _name_text(name) -> str:
    if isinstance(name, str):
        return name
    if isinstance(name, bytes):
        return name.decode("utf-8", "replace")
    return str(name)


def _work_pair(work, what):
    """(flops, bytes) as floats; NaN for a part not declared."""
    nan = float("nan")
    if work is None:
        return nan, nan
    try:
        flops, nbytes = work
        return (nan if flops is None else float(flops)), (nan if nbytes is None else float(nbytes))
    except (TypeError, ValueError):
        warn_once(f"kscope: {what}: work must be (flops, bytes), got {work!r}; not declared")
        return nan, nan


def _report_status(status: int = ERROR_INTERNAL) -> None:
    """One warning for a failed call (the library's last error names it)."""
    if status != OK:
        warn_once(f"kscope: {_native.last_error()}")


def _opened_nothing() -> None:
    """An open that failed (-1; 0 is a disabled kscope, nothing to say): one warning."""
    warn_once(f"kscope: {_native.last_error()}")


def _opened(handle: int, site: int, stream=None) -> int:
    """The scope handle after a hot open that opened nothing (handle <= 0), else 0. An open
    that would have blocked is made again through the call that lets the GIL go; a failed
    one warns once."""
    if handle == SCOPE_WOULD_BLOCK:
        handle = _open_blocking(site) if stream is None else _open_stream_blocking(site, stream)
        if handle > 0:
            return handle
    if handle < 0:
        _opened_nothing()
    return 0


def _closed(status: int, handle: int) -> None:
    """After a hot close that did not close (status != OK): a close that would have blocked
    is made again through the call that lets the GIL go; a failed one warns once."""
    if status == WOULD_BLOCK:
        status = _close_blocking(handle)
    _report_status(status)


# How a scope opens. Plain (host-only, nothing declared) is the fast path: one C call.
_PLAIN = 0
_GENERAL = 1  # a stream, the current stream, work, tags or a name without a site


class scope:
    """A timed phase: a context manager and a decorator.

        with kscope.scope("prefill", stream=s, work=(2 * n, 12 * n), tags={"batch": 8}) as sc:
            sc.tag("dtype", "bf16")
            run_prefill(s)

    stream: None (host time only), a torch.cuda.Stream (or anything with .cuda_stream or
    .ptr), an integer cudaStream_t, or True / "current" for torch's current stream when the
    scope opens. work: (flops, bytes) of one call, placed on the roofline. tags: a dict of
    key -> value (values are turned into text).

    One object serves one `with` block at a time on one thread; a decorated function opens
    a scope of its own per call, on any thread. On an `async def` or a generator function
    the decorator times each call as a cross-thread range instead (their bodies interleave
    with other code on the thread, which a nested scope cannot).
    """

    __slots__ = ("_site", "_name", "_mode", "_handle", "_outer", "_stream", "_current", "_work", "_tags")

    def __init__(self, name, stream=None, work=None, tags=None):
        try:
            site = _sites.get(name)
        except TypeError:  # an unhashable name: its text names the scope
            name = _name_text(name)
            site = None
        if site is None:
            if type(name) is not str:
                name = _name_text(name)
            site = _site_of(name)
        self._site = site
        self._name = name
        self._handle = 0
        self._outer = None
        if stream is None and work is None and not tags and site:
            # The plain case sets no more than it reads: the general members stay unset
            # until _make_general (each store is a few ns of every inline `with`).
            self._mode = _PLAIN
            return
        self._make_general(stream, work, tags)

    def _make_general(self, stream=None, work=None, tags=None):
        self._mode = _GENERAL
        self._current = _streams.wants_current(stream)
        self._stream = None if self._current else _streams.stream_handle(stream)
        self._work = None if work is None else _work_pair(work, f"scope {self.name!r}")
        self._tags = dict(tags) if tags else None

    @property
    def name(self) -> str:
        return self._name if type(self._name) is str else _name_text(self._name)

    def __enter__(self):
        if self._handle:  # the same object entered again inside its own block
            if self._outer is None:
                self._outer = []
            self._outer.append(self._handle)
        if self._mode == _PLAIN:
            handle = _open(self._site)
            self._handle = handle if handle > 0 else _opened(handle, self._site)
            return self
        handle = self._open_general()
        self._handle = handle
        if handle and (self._work is not None or self._tags is not None):
            self._declare(handle)
        return self

    def __exit__(self, exc_type, exc, tb):
        handle = self._handle
        self._handle = self._outer.pop() if self._outer else 0
        if handle:
            status = _close(handle)
            if status:
                _closed(status, handle)
        return False

    def _open_general(self) -> int:
        """The handle of the scope opened, or 0."""
        stream = _streams.current_stream_handle() if self._current else self._stream
        if self._site:
            handle = _open(self._site) if stream is None else _open_stream(self._site, stream)
            return handle if handle > 0 else _opened(handle, self._site, stream)
        data = encode(self._name)
        handle = _open_named(data, len(data), 0 if stream is None else 1, stream or 0)  # CDLL: may block
        if handle > 0:
            return handle
        if handle < 0:
            _opened_nothing()
        return 0

    def _declare(self, handle):
        if self._work is not None:
            if _lib.kscope_scope_set_work(handle, self._work[0], self._work[1]):
                _report_status()
        if self._tags is not None:
            for key, value in self._tags.items():
                _tag(handle, key, value)

    def tag(self, key, value) -> "scope":
        """Attaches key=value to the open call (or to every call, before the block)."""
        if self._handle:
            _tag(self._handle, key, value)
        else:
            if self._mode == _PLAIN:
                self._make_general()
            if self._tags is None:
                self._tags = {}
            self._tags[key] = value
        return self

    def set_work(self, flops=None, bytes=None) -> "scope":  # noqa: A002 (the C++ name)
        """The work of one call: flops and bytes (None: not declared); the last call wins."""
        work = _work_pair((flops, bytes), f"scope {self.name!r}")
        if self._handle:
            if _lib.kscope_scope_set_work(self._handle, work[0], work[1]):
                _report_status()
        elif self._mode == _PLAIN:
            self._make_general(work=work)
        else:
            self._work = work
        return self

    def __call__(self, fn):
        if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn) or inspect.isgeneratorfunction(fn):
            return _range_decorator(self, fn)
        site = self._site
        if self._mode != _PLAIN:
            # The general path: a fresh scope object per call (thread-safe, no shared handle).
            name, work, tags = self._name, self._work, self._tags
            stream = True if self._current else self._stream

            @functools.wraps(fn)
            def general(*args, **kwargs):
                with scope(name, stream=stream, work=work, tags=tags):
                    return fn(*args, **kwargs)
            return general

        @functools.wraps(fn)
        def host_only(*args, **kwargs):
            handle = _open(site)
            if handle <= 0:
                handle = _opened(handle, site)
            try:
                return fn(*args, **kwargs)
            finally:
                if handle:
                    status = _close(handle)
                    if status:
                        _closed(status, handle)
        return host_only

    def __repr__(self):
        state = "open" if self._handle else "closed"
        return f"kscope.scope({self.name!r}, {state})"


def _tag(handle, key, value):
    k = encode(key)
    v = encode(value)
    _report_status(_lib.kscope_scope_tag(handle, k, len(k), v, len(v)))


class Range:
    """A request's life, from start_range() to end() on any thread (kscope::range).

        r = kscope.start_range("request")        # accepting thread
        ...
        r.end()                                  # worker thread

    Kernels are not attributed to a range (it is on no thread's stack). A range still open
    when the object is garbage collected ends then. Also a context manager.
    """

    __slots__ = ("_handle", "_name", "__weakref__")

    def __init__(self, name):
        self._name = _name_text(name)
        self._handle = None
        if _lib is None:
            return
        site = _site_of(self._name)
        if not site:
            return
        out = c_void_p()
        status = _lib.kscope_range_start(site, byref(out))
        if status != OK:
            _report_status(status)
            return
        self._handle = out.value

    @property
    def name(self) -> str:
        return self._name

    @property
    def active(self) -> bool:
        return self._handle is not None

    def set_work(self, flops=None, bytes=None) -> "Range":  # noqa: A002
        if self._handle is not None:
            f, b = _work_pair((flops, bytes), f"range {self._name!r}")
            _report_status(_lib.kscope_range_set_work(self._handle, f, b))
        return self

    def end(self) -> None:
        """Ends the range now (idempotent)."""
        handle, self._handle = self._handle, None
        if handle is not None and _lib is not None:
            _lib.kscope_range_end(handle)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.end()
        return False

    def __del__(self):
        try:
            self.end()
        except Exception:  # interpreter shutdown: the library may be gone
            pass

    def __repr__(self):
        return f"kscope.Range({self._name!r}, {'active' if self.active else 'ended'})"


def start_range(name, work=None) -> Range:
    """Starts a cross-thread range under the scope open on this thread."""
    r = Range(name)
    if work is not None:
        r.set_work(*_work_pair(work, f"range {r.name!r}"))
    return r


def _range_decorator(sc: scope, fn):
    name = sc.name
    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def coroutine(*args, **kwargs):
            r = Range(name)
            try:
                return await fn(*args, **kwargs)
            finally:
                r.end()
        return coroutine
    if inspect.isasyncgenfunction(fn):
        @functools.wraps(fn)
        async def async_generator(*args, **kwargs):
            r = Range(name)
            try:
                async for item in fn(*args, **kwargs):
                    yield item
            finally:
                r.end()
        return async_generator

    @functools.wraps(fn)
    def generator(*args, **kwargs):
        r = Range(name)
        try:
            return (yield from fn(*args, **kwargs))
        finally:
            r.end()
    return generator


def set_enabled(on: bool) -> None:
    """Turns every scope in the process on or off (also KSCOPE=0 in the environment)."""
    if _lib is not None:
        _lib.kscope_set_enabled(1 if on else 0)


def is_enabled() -> bool:
    return bool(_lib is not None and _lib.kscope_is_enabled())


def set_nvtx(on: bool) -> None:
    """NVTX ranges for scopes (on by default; about a nanosecond each with no tool attached)."""
    if _lib is not None:
        _lib.kscope_set_nvtx(1 if on else 0)
