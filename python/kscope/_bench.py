"""Benchmarks of Python callables with kscope's harness (include/kscope/bench/bench.hpp).

    r = kscope.bench(lambda: torch.mm(a, b, out=c), work=(2 * n**3, 3 * 4 * n * n),
                     reference=lambda: torch.matmul(a, b))
    print(r.median_s, r.median_ci_s, r.reference.relative_speed)
    print(r)                                     # the harness's markdown table

The harness is the C++ one, unchanged: warm-up detection, the median's confidence interval,
adaptive stopping, A B B A interleaving with the reference and the ratio's interval, the
output check, and the misuse checks (work that never reaches the timed stream makes the
result invalid, with the reason). Python only supplies the callable through a ctypes
callback.

Streams. With the CUDA timer the harness times the work on one stream: the one given with
`stream=`, else a stream from torch's pool (when torch runs on a GPU), else a non-blocking
stream it creates. While the callable runs, that stream is
torch's current stream (when torch is imported), so torch code needs no change; a callable
that takes one argument receives the stream as an integer handle (torch.cuda.ExternalStream
wraps it). Work launched elsewhere (another stream, the legacy default stream) is not timed
and the result says so.

CUDA graphs. The C++ harness batches short kernels by capturing the callable into a CUDA
graph. A graph captured behind PyTorch's back keeps the addresses of the tensors the
callable allocated, which the caching allocator hands out again after the capture: replaying
it would write into other tensors. So the Python harness batches with a plain loop of calls
(use_graphs=False) unless told otherwise; pass use_graphs=True only for a callable that
allocates nothing.
"""

from __future__ import annotations

import array
import copy
import ctypes
import inspect
import json
import sys
from ctypes import byref, c_double, c_void_p
from dataclasses import dataclass, field
from typing import Optional, Tuple

from . import _native, _streams
from ._native import BENCH_CALL, BENCH_READ_OUTPUT, ERROR_INVALID_ARGUMENT, encode, warn_once

_OPTION_NAMES = ("cache", "target_rel_ci", "level", "min_samples", "min_time_s", "time_budget_s", "max_samples",
                 "launches_per_sample", "min_sample_s", "use_graphs", "hold_launches", "warmup_min_s",
                 "warmup_min_calls", "discard_throttled", "burst")


def _nan(v) -> float:
    return float("nan") if v is None else float(v)


def _interval(v) -> Tuple[float, float]:
    if not isinstance(v, dict):
        return (float("nan"), float("nan"))
    return (_nan(v.get("lo")), _nan(v.get("hi")))


@dataclass(frozen=True)
class OutputCheck:
    """The benchmark's output against the reference's (kscope::output_check)."""
    performed: bool
    passed: bool
    values: int
    max_rel_error: float
    max_abs_error: float
    tolerance: float
    note: str


@dataclass(frozen=True)
class ReferenceResult:
    """The comparison with the reference, sampled in the same run (A B B A)."""
    name: str
    median_s: float
    ratio: float                      # benchmark time / reference time (> 1: slower)
    ratio_ci: Tuple[float, float]
    p_value: float
    verdict: str                      # "faster", "slower", "same", "inconclusive"
    relative_speed: float             # 1 / ratio: 0.72 is "72 % of the reference's speed"
    relative_speed_ci: Tuple[float, float]
    output_check: Optional[OutputCheck]


@dataclass(frozen=True)
class BenchResult:
    """One benchmark run (kscope::bench_result). When `valid` is False the numbers are not
    the benchmark's: `invalid_reason` says why (no GPU, the callable raised, no work
    reached the timed stream, a rate above the device's peak) and the times are NaN."""
    name: str
    valid: bool
    stop_reason: str        # "target_reached", "time_budget", "sample_limit", "error", "invalid"
    stop_message: str
    invalid_reason: str
    median_s: float
    median_ci_s: Tuple[float, float]
    rel_half_width: float
    samples_used: int
    samples_s: Tuple[float, ...]
    launches_per_sample: int
    batching: str
    flops_per_s: float
    bytes_per_s: float
    reference: Optional[ReferenceResult]
    warnings: Tuple[str, ...]
    text: str = field(repr=False)
    json: str = field(repr=False)
    data: dict = field(repr=False, compare=False)
    # The row's one conclusion (docs/bench_schema.md, `benchmarks[].verdict`): "class",
    # "unit", "percent_of_peak", "source", "count", "text", "evidence", ...; None when neither
    # counters nor declared work said anything.
    verdict: Optional[dict] = field(default=None, repr=False, compare=False)

    @property
    def reason(self) -> str:
        return self.invalid_reason

    @property
    def target_reached(self) -> bool:
        return self.stop_reason == "target_reached"

    def __str__(self) -> str:
        return self.text


def _output_check(v) -> Optional[OutputCheck]:
    if not isinstance(v, dict):
        return None
    return OutputCheck(bool(v.get("performed")), bool(v.get("passed", True)), int(v.get("values") or 0),
                       _nan(v.get("max_rel_error")), _nan(v.get("max_abs_error")), _nan(v.get("tolerance")),
                       v.get("note", ""))


def _result(doc: dict, text: str, as_json: str) -> BenchResult:
    b = doc["benchmarks"][0]
    m = b.get("measurement") or {}
    t = m.get("time_s") or {}
    rates = b.get("rates") or {}
    reference = None
    ref = b.get("reference")
    if isinstance(ref, dict):
        c = ref.get("comparison") or {}
        rt = (ref.get("measurement") or {}).get("time_s") or {}
        has_check = (ref.get("output_check") or {}).get("performed") or (ref.get("output_check") or {}).get("note")
        reference = ReferenceResult(
            name=ref.get("name", ""), median_s=_nan(rt.get("median")), ratio=_nan(c.get("ratio")),
            ratio_ci=_interval(c.get("ratio_ci")), p_value=_nan(c.get("p_value")), verdict=c.get("verdict", ""),
            relative_speed=_nan(c.get("relative_speed")), relative_speed_ci=_interval(c.get("relative_speed_ci")),
            output_check=_output_check(ref.get("output_check")) if has_check else None)
    return BenchResult(
        name=b.get("name", ""), valid=bool(b.get("valid")), stop_reason=b.get("stop_reason", ""),
        stop_message=b.get("stop_message", ""), invalid_reason=b.get("invalid_reason", ""),
        median_s=_nan(t.get("median")), median_ci_s=_interval(t.get("median_ci")),
        rel_half_width=_nan(t.get("rel_half_width")), samples_used=int(t.get("n") or 0),
        samples_s=tuple(_nan(x) for x in m.get("samples_s") or ()),
        launches_per_sample=int(m.get("launches_per_sample") or 0), batching=m.get("batching", ""),
        flops_per_s=_nan((rates.get("flops_per_s") or {}).get("median")),
        bytes_per_s=_nan((rates.get("bytes_per_s") or {}).get("median")),
        reference=reference, warnings=tuple(b.get("warnings") or ()), text=text, json=as_json, data=doc,
        verdict=b.get("verdict") if isinstance(b.get("verdict"), dict) else None)


def _takes_stream(fn) -> bool:
    """Whether fn needs one positional argument (the stream)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    required = [p for p in params if p.default is p.empty and
                p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(required) >= 1


def _torch():
    """torch when the program imported it (the harness never imports it itself)."""
    return sys.modules.get("torch")


def _torch_stream(device: int):
    """A stream of torch's for the harness to time on, when torch runs on a GPU: torch's
    caching allocator keeps blocks per stream, so the stream the callable allocates on must
    be one torch manages (the harness's own would be destroyed after the run). Non-blocking,
    like the harness's: work on the legacy default stream is still not timed."""
    torch = _torch()
    if torch is None:
        return None
    try:
        if not torch.cuda.is_available():
            return None
        return torch.cuda.Stream(device=device if device >= 0 else None)
    except Exception:  # the harness creates its own and says what is wrong with CUDA
        return None


class _Call:
    """The ctypes callback around one Python callable: runs it with the harness's stream as
    torch's current stream, and turns an exception into a failure the harness reports (the
    exception itself is raised again once the run is over)."""

    def __init__(self, fn, label: str):
        self.fn = fn
        self.label = label
        self.takes_stream = _takes_stream(fn)
        self.error: Optional[BaseException] = None
        self._torch_stream = None
        self._torch_handle = None
        self.c_function = BENCH_CALL(self._call)

    def _stream_context(self, handle: int):
        torch = _torch()
        if torch is None or not handle:
            return None
        if self._torch_handle != handle:
            self._torch_stream = torch.cuda.ExternalStream(handle)
            self._torch_handle = handle
        return torch.cuda.stream(self._torch_stream)

    def _call(self, user, handle):
        if self.error is not None:  # failed once: the harness is stopping; do not repeat it
            return 1
        try:
            context = self._stream_context(handle)
            if context is None:
                self.fn(handle) if self.takes_stream else self.fn()
            else:
                with context:
                    self.fn(handle) if self.takes_stream else self.fn()
            return 0
        except BaseException as e:  # noqa: B902 (KeyboardInterrupt too: raised again after the run)
            self.error = e
            message = encode(f"{self.label} raised {type(e).__name__}: {e}")
            _native.lib.kscope_bench_callback_error(message, len(message))
            return 1


def _as_doubles(values):
    """An object the C side can read as doubles: (address, count, keep-alive)."""
    torch = _torch()
    if torch is not None and isinstance(values, torch.Tensor):
        flat = values.detach().reshape(-1).to(device="cpu", dtype=torch.float64).contiguous()
        return flat.data_ptr(), flat.numel(), flat
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(values, numpy.ndarray):
        flat = numpy.ascontiguousarray(values, dtype=numpy.float64).reshape(-1)
        return flat.ctypes.data, flat.size, flat
    if isinstance(values, (int, float)):
        values = [values]
    buffer = array.array("d", (float(v) for v in values))
    address, count = buffer.buffer_info()
    return address, count, buffer


class _Output:
    """The ctypes output reader around a Python callable returning a tensor, an array, a
    sequence of numbers or one number."""

    def __init__(self, read, label: str):
        self.read = read
        self.label = label
        self.error: Optional[BaseException] = None
        self.c_function = BENCH_READ_OUTPUT(self._read)

    def _read(self, user, sink):
        try:
            address, count, keep = _as_doubles(self.read())
            status = _native.lib.kscope_output_put(sink, ctypes.cast(address, ctypes.POINTER(c_double)), count)
            del keep
            return 0 if status == 0 else 1
        except BaseException as e:  # noqa: B902
            self.error = e
            message = encode(f"{self.label} output reader raised {type(e).__name__}: {e}")
            _native.lib.kscope_bench_callback_error(message, len(message))
            return 1


class Benchmark:
    """A benchmark recipe; run() samples it anew each time. kscope.bench(fn, ...) is
    Benchmark(fn, ...).run().

    fn: the callable (no argument, or the stream handle as an int).
    name, dtype, shape, params: what it computes, printed with every number.
    work: (flops, bytes) of one call: rates and the roofline placement.
    stream: where the CUDA timer times it (a torch.cuda.Stream, an int handle, "current");
        default: a new stream from torch's pool when torch runs on a GPU, else one of the
        harness's (both non-blocking).
    reference: a callable or a Benchmark to compare with (A B B A, the ratio's interval).
    output, tolerance: a callable returning this benchmark's output (tensor, array, numbers)
        for the check against the reference's output (reference_output=, or the reference
        Benchmark's own output=); tolerance on the max relative error (None: report only).
    timer: "cuda" (CUDA events; needs a GPU) or "host" (the steady clock around the calls,
        for host code, or to try the harness without a GPU).
    device: the CUDA device to run on (default: torch's current device when torch is
        imported, else the runtime's current one).
    **options: bench_options' members: target_rel_ci, time_budget_s, min_samples,
        min_time_s, max_samples, cache ("hot"/"cold"), launches_per_sample, use_graphs
        (default False, see the module's comment), hold_launches, warmup_min_s,
        warmup_min_calls, level, min_sample_s, discard_throttled, burst.
    """

    def __init__(self, fn, *, name=None, work=None, dtype=None, shape=None, params=None, stream=None,
                 reference=None, output=None, tolerance=None, reference_output=None, timer="cuda",
                 device=None, **options):
        if not callable(fn):
            raise TypeError(f"kscope.bench: fn must be callable, got {type(fn).__name__}")
        unknown = [k for k in options if k not in _OPTION_NAMES]
        if unknown:
            raise TypeError(f"kscope.bench: unknown option(s) {', '.join(unknown)} (known: "
                            f"{', '.join(_OPTION_NAMES)})")
        if timer not in ("cuda", "host"):
            raise ValueError(f"kscope.bench: timer must be 'cuda' or 'host', got {timer!r}")
        if reference is not None and not (callable(reference) or isinstance(reference, Benchmark)):
            raise TypeError("kscope.bench: reference must be a callable or a kscope.Benchmark")
        self.fn = fn
        self.name = name if name is not None else getattr(fn, "__name__", "python")
        if self.name == "<lambda>":
            self.name = "lambda"
        self.work = work
        self.dtype = dtype
        self.shape = shape
        self.params = dict(params) if params else {}
        self.stream = stream
        self.reference = reference
        self.output = output
        self.tolerance = tolerance
        self.reference_output = reference_output
        self.timer = timer
        self.device = device
        self.options = dict(options)
        self.options.setdefault("use_graphs", False)

    def _spec(self) -> dict:
        spec: dict = {"name": str(self.name)}
        if self.dtype is not None:
            spec["dtype"] = str(self.dtype)
        if self.shape is not None:
            spec["shape"] = [int(d) for d in self.shape]
        if self.params:
            spec["params"] = {str(k): (v if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v))
                              for k, v in self.params.items()}
        if self.work is not None:
            flops, nbytes = self.work
            spec["work"] = [None if flops is None else float(flops), None if nbytes is None else float(nbytes)]
        spec["options"] = self.options
        return spec

    def _create(self, lib, call: _Call, output: Optional[_Output], tolerance):
        handle = c_void_p()
        text = encode(json.dumps(self._spec(), allow_nan=False))
        status = lib.kscope_bench_create(text, call.c_function, None, byref(handle))
        if status == ERROR_INVALID_ARGUMENT:
            raise ValueError(f"kscope.bench: {_native.last_error()}")
        _native.check(status, "kscope.bench")
        if output is not None:
            _native.check(lib.kscope_bench_set_output(handle.value, output.c_function, None,
                                                      _nan(tolerance)), "kscope.bench")
        return handle.value

    def _device(self) -> int:
        if self.device is not None:
            return int(self.device)
        torch = _torch()
        if torch is not None:
            try:
                if torch.cuda.is_available():
                    return int(torch.cuda.current_device())
            except Exception:
                pass
        return -1

    def run(self) -> BenchResult:
        lib = _native.require()
        reference = self.reference
        if reference is not None:
            # A copy: the caller's Benchmark is theirs (a reference runs on this one's timer,
            # stream and options, as in C++; its own are not used).
            reference = copy.copy(reference) if isinstance(reference, Benchmark) else \
                Benchmark(reference, name=getattr(reference, "__name__", "reference"))
            if reference.output is None:
                reference.output = self.reference_output
            if reference.name in ("<lambda>", "lambda"):
                reference.name = "reference"

        call = _Call(self.fn, self.name)
        output = _Output(self.output, self.name) if self.output is not None else None
        ref_call = _Call(reference.fn, reference.name) if reference is not None else None
        ref_output = (_Output(reference.output, reference.name)
                      if reference is not None and reference.output is not None else None)
        handles = []
        try:
            device = self._device() if self.timer == "cuda" else -1
            bench_handle = self._create(lib, call, output, self.tolerance)
            handles.append(bench_handle)
            stream_owner = self.stream if self.timer == "cuda" else None
            if stream_owner is None and self.timer == "cuda":
                stream_owner = _torch_stream(device)
            if stream_owner is not None:
                stream = _streams.resolve(stream_owner)
                if stream is not None:
                    _native.check(lib.kscope_bench_set_stream(bench_handle, stream), "kscope.bench")
            if reference is not None:
                ref_handle = reference._create(lib, ref_call, ref_output, None)
                handles.append(ref_handle)
                _native.check(lib.kscope_bench_set_reference(bench_handle, ref_handle), "kscope.bench")
            if device >= 0:
                _native.check(lib.kscope_bench_set_device(bench_handle, device), "kscope.bench")
            timer = _native.TIMER_HOST if self.timer == "host" else _native.TIMER_CUDA
            as_json, text = _native.two_text_call(lib.kscope_bench_run, bench_handle, timer, what="kscope.bench")
        finally:
            for h in handles:
                lib.kscope_bench_destroy(h)
        # The callable's own exception, not the harness's summary of it.
        for failed in (call, ref_call, output, ref_output):
            if failed is not None and failed.error is not None:
                raise failed.error
        result = _result(json.loads(as_json), text, as_json)
        if not result.valid and self.timer == "cuda" and result.invalid_reason.startswith(
                ("no GPU", "kscope was built without CUDA", "the CUDA timer could not start")):
            warn_once(f"kscope.bench needs a GPU with timer='cuda' ({result.invalid_reason}); "
                      "timer='host' times host code with the same statistics")
        return result

    def __repr__(self):
        return f"kscope.Benchmark({self.name!r}, timer={self.timer!r})"


def bench(fn, **kwargs) -> BenchResult:
    """Times fn with kscope's harness and returns a BenchResult (see Benchmark for the
    arguments). Raises what fn (or an output reader) raised; a run that cannot time
    anything (no GPU for timer='cuda') returns an invalid result saying why."""
    return Benchmark(fn, **kwargs).run()
