"""The serving diagnosis (include/kscope/verdict/diagnose.hpp) as Python objects.

    d = kscope.diagnose(kscope.report(), step_names=["generate_step"])
    for f in d:                                   # largest cost first
        print(f.kind, f.cost_ms_per_step, [(e.metric, e.value) for e in f.evidence])
    print(d.text)                                 # as `kscope diagnose run.json` prints it

The rules run in C++ (kscope::diagnose); the findings come back as kscope.diagnosis/1 JSON
and are turned into frozen dataclasses here, so Python and C++ never disagree.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Optional, Tuple

from . import _native
from ._native import ERROR_INVALID_ARGUMENT, encode
from ._session import Report, report as _session_report

_option_defaults: Optional[dict] = None


def options() -> dict:
    """Every option kscope.diagnose takes, with its default: names lists (which scopes play
    which role) and numbers (thresholds; None: unknown). They come from the one list the
    C++ options are declared in (KSCOPE_DIAGNOSE_OPTIONS), through the native library."""
    global _option_defaults
    if _option_defaults is None:
        lib = _native.require()
        _option_defaults = json.loads(_native.text_call(lib.kscope_diagnose_options, what="kscope.diagnose options"))
    return dict(_option_defaults)


def _number(value) -> float:
    return float("nan") if value is None else float(value)


@dataclass(frozen=True)
class Evidence:
    """One number a finding rests on: metric ("gpu_time.busy_share"), value, unit
    ("share", "ns", "bytes", ...)."""
    metric: str
    value: float
    unit: str


@dataclass(frozen=True)
class Finding:
    """One finding: what is wrong (kind, title), the numbers (evidence), the sentence that
    names them (text), what to try (suggestion) and what it costs: cost_ms_per_step and
    cost_share of cost_basis ("wall time", "step time", "step p99", "kernel time"); NaN
    when the report lacks the numbers."""
    kind: str
    title: str
    text: str
    suggestion: str
    cost_ms_per_step: float
    cost_share: float
    cost_basis: str
    evidence: Tuple[Evidence, ...]

    def evidence_value(self, metric: str) -> Optional[float]:
        """The value of one evidence metric, or None when the finding has none."""
        for e in self.evidence:
            if e.metric == metric:
                return e.value
        return None

    @property
    def cost_known(self) -> bool:
        return not math.isnan(self.cost_share)


@dataclass(frozen=True)
class Diagnosis:
    """The findings, largest cost first (iterable, indexable; false when there are none),
    with the text kscope prints for them and the kscope.diagnosis/1 JSON."""
    findings: Tuple[Finding, ...]
    text: str
    json: str

    def __iter__(self):
        return iter(self.findings)

    def __len__(self):
        return len(self.findings)

    def __getitem__(self, i):
        return self.findings[i]

    def __bool__(self):
        return bool(self.findings)

    def __str__(self):
        return self.text

    def kinds(self) -> Tuple[str, ...]:
        return tuple(f.kind for f in self.findings)


def _options_json(given: dict) -> Optional[bytes]:
    if not given:
        return None
    known = options()
    out = {}
    for key, value in given.items():
        if key not in known:
            raise TypeError(f"kscope.diagnose: unknown option {key!r} (known: {', '.join(known)})")
        if isinstance(known[key], list):
            if isinstance(value, (str, bytes)):
                value = [value]
            out[key] = [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in value]
        else:
            # NaN is not JSON: an unknown number is null.
            out[key] = None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)
    return encode(json.dumps(out))


def _finding(f: dict) -> Finding:
    return Finding(
        kind=f.get("kind", ""),
        title=f.get("title", ""),
        text=f.get("text", ""),
        suggestion=f.get("suggestion", ""),
        cost_ms_per_step=_number(f.get("cost_ms_per_step")),
        cost_share=_number(f.get("cost_share")),
        cost_basis=f.get("cost_basis", ""),
        evidence=tuple(Evidence(e.get("metric", ""), _number(e.get("value")), e.get("unit", ""))
                       for e in f.get("evidence", [])),
    )


def diagnose(report: Optional[Report] = None, **options) -> Diagnosis:
    """What is wrong with a serving loop, from its report alone (the session's report now
    when none is given). Options are kscope::diagnose_options' members: step_names,
    prefill_names, decode_names, sync_names, kv_names, weight_names (names of the scopes
    that play each role, or their "phase" tag) and the thresholds (low_busy_share, ...,
    host_link_bytes_per_s)."""
    lib = _native.require()
    if report is None:
        report = _session_report()
    if not isinstance(report, Report):
        raise TypeError(f"kscope.diagnose: expected a kscope.Report, got {type(report).__name__} "
                        "(kscope.report(), or kscope.Report.load(path))")
    options_text = _options_json(options)
    try:
        as_json, as_text = _native.two_text_call(lib.kscope_diagnose, report._handle, options_text,
                                                 what="kscope.diagnose")
    except _native.KscopeError as e:
        if e.status == ERROR_INVALID_ARGUMENT:
            raise ValueError(str(e)) from None
        raise
    doc = json.loads(as_json)
    return Diagnosis(tuple(_finding(f) for f in doc.get("findings", [])), as_text, as_json)
