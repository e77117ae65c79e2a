"""kscope from Python: where did the GPU time go, and how close is it to the hardware limit?

    import kscope
    kscope.enable_cupti()                              # attribute every kernel to its scope
    for step in range(steps):
        with kscope.scope("step"):
            with kscope.scope("decode", stream="current", work=(flops, nbytes)):
                logits = model(tokens)
            with kscope.scope("sample"):
                tokens = sample(logits)
    r = kscope.report()
    print(r.text())
    print(kscope.diagnose(r).text)

The package is a thin layer over kscope's C interface (libkscope_c.so, loaded with ctypes):
the scopes, the CUPTI attribution, the statistics, the report printers, the diagnosis and
the benchmark harness are kscope's C++ code (docs/python.md).
"""

from ._native import KscopeError, KscopeWarning, available, load_error, library_path, version
from ._scope import Range, is_enabled, scope, set_enabled, set_nvtx, start_range
from ._session import (Report, disable_counters, disable_metric_sampling, enable_counters, enable_cupti,
                       enable_metric_sampling, enable_production, load_report, pause_tracing, report, reset,
                       resume_tracing, warn, write_trace)
from ._diagnose import Diagnosis, Evidence, Finding, diagnose
from ._diagnose import options as diagnose_options
from ._bench import Benchmark, BenchResult, OutputCheck, ReferenceResult, bench

__version__ = "0.1.0"

if not available():
    from ._native import warn_once as _warn_once
    _warn_once(f"kscope: {load_error}; scopes do nothing, report(), diagnose() and bench() raise KscopeError",
               stacklevel=2)


def __getattr__(name):
    # kscope.torch (module scopes for PyTorch) on first use: importing kscope imports no torch.
    if name == "torch":
        import importlib
        return importlib.import_module(".torch", __name__)
    raise AttributeError(f"module 'kscope' has no attribute {name!r}")


__all__ = [
    "scope", "Range", "start_range", "set_enabled", "is_enabled", "set_nvtx",
    "enable_cupti", "enable_production", "pause_tracing", "resume_tracing",
    "enable_metric_sampling", "disable_metric_sampling",
    "enable_counters", "disable_counters", "reset", "warn", "write_trace",
    "report", "Report", "load_report",
    "diagnose", "diagnose_options", "Diagnosis", "Finding", "Evidence",
    "bench", "Benchmark", "BenchResult", "ReferenceResult", "OutputCheck",
    "KscopeError", "KscopeWarning", "available", "load_error", "library_path", "version",
]
