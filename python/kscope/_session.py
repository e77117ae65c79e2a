"""The session: what to collect, and the report of what was collected.

    kscope.enable_cupti()                # every kernel attributed to the scope that launched it
    ...
    r = kscope.report()
    print(r.text())
    r.write_html("run.html"); r.write_json("run.json"); r.write_trace("run.trace.json")
    r.data["scopes"][0]["host_ns"]["median"]

The report is kscope::session_report (include/kscope/report/data.hpp), kept on the C side;
its text, JSON (kscope.report/2, docs/report_schema.md), CSV and HTML come from kscope's
own printers, so Python prints exactly what a C++ program does.
"""

from __future__ import annotations

import json
import os
from ctypes import byref, c_void_p

from . import _native
from ._native import (ERROR_INVALID_ARGUMENT, ERROR_UNAVAILABLE, FORMAT_CSV, FORMAT_HTML, FORMAT_JSON,
                      FORMAT_OPENMETRICS, FORMAT_TEXT, OK, KscopeError, encode, warn_once)


def _enable(status: int, what: str) -> bool:
    """True when started; False with one KscopeWarning naming why (kscope keeps working
    without it); ValueError for options kscope does not understand."""
    if status == OK:
        return True
    message = _native.last_error()
    if status == ERROR_INVALID_ARGUMENT:
        raise ValueError(f"kscope.{what}: {message}")
    if status == ERROR_UNAVAILABLE:
        warn_once(f"kscope.{what}: {message}")
        return False
    raise KscopeError(f"kscope.{what}: {message}", status)


def _cupti_options_text(options) -> bytes | None:
    if options is None:
        return None
    if isinstance(options, dict):
        def word(v):
            if isinstance(v, bool):
                return "1" if v else "0"
            return str(v)
        return encode(",".join(f"{k}={word(v)}" for k, v in options.items()))
    return encode(options)


def enable_cupti(options=None) -> bool:
    """Starts the CUPTI activity collector: every kernel, copy and memset is attributed to
    the scope open on the launching thread (by correlation id, so other tools' NVTX ranges,
    torch's included, change nothing). `options`: KSCOPE_CUPTI_OPTIONS text
    ("graphs=node,sync=0") or a dict of the same keys.

    False, with one KscopeWarning, when CUPTI cannot run: not installed, no GPU, or owned
    by another tool (Nsight Systems or Compute, torch.profiler): scopes then keep their
    CUDA-event times and the report says why.
    """
    lib = _native.require()
    return _enable(lib.kscope_enable_cupti(_cupti_options_text(options)), "enable_cupti")


def enable_production() -> bool:
    """The production preset: the collector tracing every launch with CUDA graphs sampled,
    and GPU metrics sampled at a low rate (kscope::production_options).
    True when the collector runs."""
    lib = _native.require()
    return _enable(lib.kscope_enable_production(), "enable_production")


def pause_tracing() -> bool:
    """Stops the activity collector recording launches until resume_tracing(): tracing in
    windows the program chooses (around the steps it wants traced). The report then says
    its GPU figures rest on the traced windows. True when paused; False, with one warning,
    when the collector is not running."""
    lib = _native.require()
    return _enable(lib.kscope_pause_tracing(), "pause_tracing")


def resume_tracing() -> bool:
    """Records launches again after pause_tracing(): a new traced window."""
    lib = _native.require()
    return _enable(lib.kscope_resume_tracing(), "resume_tracing")


def enable_metric_sampling(step_scopes=()) -> bool:
    """GPU metrics sampled while running (CUPTI PM sampling), shared among the scopes whose
    kernels ran; `step_scopes`: names whose calls get per-step distributions."""
    lib = _native.require()
    if isinstance(step_scopes, (str, bytes)):
        step_scopes = [step_scopes]
    names = [_native.encode(s) for s in step_scopes]
    if any(b"\n" in n for n in names):
        raise ValueError("kscope.enable_metric_sampling: a step scope name holds a newline")
    text = b"\n".join(names) if names else None
    return _enable(lib.kscope_enable_metric_sampling(text), "enable_metric_sampling")


def disable_metric_sampling() -> None:
    _native.require().kscope_disable_metric_sampling()


def enable_counters(kernel_replay: bool = False, step_scope: str = None, whole_steps: bool = True) -> bool:
    """Hardware counters per scope: a step's first calls and then every 100th are profiled
    (one one-pass metric group per step; kernel_replay=True: every metric by kernel replay,
    slow). A step is a call of the scope named step_scope, or of the outermost scope of
    each thread when it is None; its kernels are each counted in the scope that launched
    them. whole_steps=False profiles each scope's calls on their own (no step_scope then).
    Profiled calls stay out of every timing statistic."""
    if step_scope is not None and not isinstance(step_scope, str):
        raise TypeError("step_scope must be a scope name (str) or None, not %s" % type(step_scope).__name__)
    if step_scope and "\0" in step_scope:
        raise ValueError("step_scope must not hold a NUL character")
    if step_scope and not whole_steps:
        raise ValueError("step_scope names what a whole step is: it needs whole_steps=True")
    lib = _native.require()
    name = step_scope.encode("utf-8") if step_scope else None
    return _enable(lib.kscope_enable_counters_steps(1 if kernel_replay else 0, 1 if whole_steps else 0, name),
                   "enable_counters")


def disable_counters() -> None:
    _native.require().kscope_disable_counters()


def reset() -> None:
    """Forgets every sample, tag, warning and GPU record so far (scopes keep working)."""
    _native.require().kscope_session_reset()


def warn(message: str) -> None:
    """A warning shown once in later reports."""
    data = encode(message)
    _native.check(_native.require().kscope_session_warn(data, len(data)), "kscope.warn")


def write_trace(path) -> None:
    """The Chrome trace / Perfetto JSON of the session so far: host scopes per thread, the
    GPU records per stream, arrows from each scope to its kernels."""
    _native.check(_native.require().kscope_write_trace(encode(os.fspath(path))), "kscope.write_trace")


class Report:
    """A kscope report (kscope::session_report), made by kscope.report() or read back with
    Report.load(path) / Report.from_json(text).

    text(), json(), csv(), html(), openmetrics(): the report in each format, as kscope's
    C++ printers give it. data / to_dict(): the JSON as Python objects (docs/report_schema.md).
    """

    def __init__(self, _handle):
        self._handle = _handle
        self._json = None
        self._data = None

    @classmethod
    def _create(cls) -> "Report":
        lib = _native.require()
        handle = c_void_p()
        _native.check(lib.kscope_report_create(byref(handle)), "kscope.report")
        return cls(handle.value)

    @classmethod
    def from_json(cls, text) -> "Report":
        """A report read back from kscope.report/2 (or /1) JSON text (ValueError if it is not one)."""
        lib = _native.require()
        data = encode(text)
        handle = c_void_p()
        status = lib.kscope_report_parse(data, len(data), byref(handle))
        if status == ERROR_INVALID_ARGUMENT:
            raise ValueError(f"kscope.Report.from_json: {_native.last_error()}")
        _native.check(status, "kscope.Report.from_json")
        return cls(handle.value)

    @classmethod
    def load(cls, path) -> "Report":
        """A report saved with write_json (or by a C++ program, or `kscope merge`)."""
        with open(path, "rb") as f:
            return cls.from_json(f.read())

    def __del__(self):
        handle, self._handle = getattr(self, "_handle", None), None
        lib = _native.lib
        if handle and lib is not None:
            try:
                lib.kscope_report_destroy(handle)
            except Exception:  # interpreter shutdown
                pass

    def _format(self, fmt: int, what: str) -> str:
        return _native.text_call(_native.lib.kscope_report_format, self._handle, fmt, what=what)

    def text(self) -> str:
        return self._format(FORMAT_TEXT, "Report.text")

    def json(self) -> str:
        """kscope.report/2 JSON (docs/report_schema.md)."""
        if self._json is None:
            self._json = self._format(FORMAT_JSON, "Report.json")
        return self._json

    def csv(self) -> str:
        return self._format(FORMAT_CSV, "Report.csv")

    def html(self) -> str:
        return self._format(FORMAT_HTML, "Report.html")

    def openmetrics(self) -> str:
        """The report as live metrics in the OpenMetrics text format (docs/openmetrics.md)."""
        return self._format(FORMAT_OPENMETRICS, "Report.openmetrics")

    def to_dict(self) -> dict:
        """The JSON as a fresh dict (yours to change)."""
        return json.loads(self.json())

    @property
    def data(self) -> dict:
        """The JSON as a dict, parsed once (do not change it: use to_dict() for a copy)."""
        if self._data is None:
            self._data = self.to_dict()
        return self._data

    @property
    def scopes(self) -> list:
        """data["scopes"]: one dict per scope, depth first."""
        return self.data.get("scopes", [])

    @property
    def warnings(self) -> list:
        return self.data.get("warnings", [])

    def find(self, path: str):
        """The scope dict whose path is `path` ("step/decode"), or None."""
        for s in self.scopes:
            if s.get("path") == path:
                return s
        return None

    def verdict(self, path: str):
        """The one verdict of the scope at `path` ("step/decode"), as a dict (docs/report_schema.md,
        `scopes[].verdict`): "class" ("memory-bound", ...), "unit" ("L2", ...), "percent_of_peak",
        "metric", "source", "count" and "count_of" (the calls or samples it rests on), "text",
        "evidence" (every source's numbers, the deciding one first) and "missing". None when the
        scope has none (a host-only scope); KeyError when the report has no scope at `path`.
        Each scope dict of `scopes` carries the same under its "verdict" key."""
        data = encode(path)
        try:
            text = _native.text_call(_native.lib.kscope_report_verdict, self._handle, data, len(data),
                                     what="Report.verdict")
        except _native.KscopeError as e:
            if e.status == _native.ERROR_NOT_FOUND:
                raise KeyError(path) from None
            raise
        return json.loads(text)

    def add_section(self, key: str, heading: str, text: str, data=None) -> None:
        """Adds a section of your own to this report (report/section.hpp): every format prints
        it under `key` (1-64 of a-z 0-9 _ -, not a name of the report's own sections): `text`
        in text() and html(), `data` (anything json.dumps takes) as its "data" in json().
        ValueError for a bad or repeated key, or data json cannot write.

            r = kscope.report()
            r.add_section("queue", "Request queue", f"peak {peak} requests\n", {"peak": peak})
        """
        if not isinstance(key, str) or not isinstance(heading, str) or not isinstance(text, str):
            raise TypeError("Report.add_section: key, heading and text must be str")
        for name, value in (("key", key), ("heading", heading)):
            if "\0" in value:
                raise ValueError(f"Report.add_section: the {name} holds a NUL character")
        try:
            payload = json.dumps(data, allow_nan=False).encode("utf-8")
        except (TypeError, ValueError) as e:
            raise ValueError(f"Report.add_section: data cannot be written as JSON: {e}") from None
        body = encode(text)
        status = _native.lib.kscope_report_add_section(self._handle, encode(key), encode(heading), body, len(body),
                                                       payload, len(payload))
        if status == ERROR_INVALID_ARGUMENT:
            raise ValueError(_native.last_error())
        _native.check(status, "Report.add_section")
        self._json = None  # the cached JSON no longer holds everything
        self._data = None

    def _write(self, fmt: int, path, what: str) -> None:
        _native.check(_native.lib.kscope_report_write(self._handle, fmt, encode(os.fspath(path))), what)

    def write_text(self, path) -> None:
        self._write(FORMAT_TEXT, path, "Report.write_text")

    def write_json(self, path) -> None:
        self._write(FORMAT_JSON, path, "Report.write_json")

    def write_csv(self, path) -> None:
        self._write(FORMAT_CSV, path, "Report.write_csv")

    def write_html(self, path) -> None:
        """HTML with the SVG roofline."""
        self._write(FORMAT_HTML, path, "Report.write_html")

    def write_trace(self, path) -> None:
        """The session's Chrome trace (kscope.write_trace): the trace is the session's
        recent events, not this report's summary."""
        write_trace(path)

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return f"<kscope.Report: {len(self.scopes)} scopes>"


def report() -> Report:
    """The session's report now: every scope closed so far on every thread, summarized
    (warm-up-aware medians with intervals), with the GPU activity CUPTI attributed."""
    return Report._create()


def load_report(path) -> Report:
    return Report.load(path)
