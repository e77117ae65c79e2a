"""GPU scenarios for test_torch_gpu.py, each run in a fresh interpreter (CUPTI can be
subscribed once per process, and torch.profiler must meet kscope in a known state):

    python3 scenarios.py NAME      prints one JSON line, the scenario's measurements, last

Every scenario runs a small transformer-like decode loop in PyTorch (embedding, attention,
MLP, logits, sampling), its phases marked with kscope scopes on torch's current stream and,
inside each scope, a pair of torch.cuda.Event timings of the same work.
"""

import collections
import json
import os
import sys
import tempfile
import time
import warnings

import torch
import torch.nn.functional as F

import kscope

DEVICE = "cuda"
DTYPE = torch.float16
# Large enough that every heavy phase runs for about a millisecond on an H100, so the
# GPU's own launch latency between kernels (about a microsecond each) stays far below 2 %.
BATCH, SEQ, HIDDEN, HEADS, VOCAB, LAYERS = 8, 512, 4096, 32, 32000, 2
PHASES = ("embed", "attention", "mlp", "logits", "sample")


class Model:
    def __init__(self):
        g = torch.Generator(device=DEVICE).manual_seed(0)

        def weight(*shape):
            return (torch.randn(*shape, device=DEVICE, generator=g) * 0.02).to(DTYPE)

        self.embedding = weight(VOCAB, HIDDEN)
        self.layers = [dict(qkv=weight(3 * HIDDEN, HIDDEN), out=weight(HIDDEN, HIDDEN),
                            fc1=weight(4 * HIDDEN, HIDDEN), fc2=weight(HIDDEN, 4 * HIDDEN)) for _ in range(LAYERS)]
        self.head = weight(VOCAB, HIDDEN)
        self.tokens = torch.randint(0, VOCAB, (BATCH, SEQ), device=DEVICE, generator=g)


class PhaseTimer:
    """torch.cuda.Event pairs per phase, recorded inside the phase's kscope scope."""

    def __init__(self):
        self.pairs = {p: [] for p in PHASES}

    def start(self, phase):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        self.pairs[phase].append((begin, end))

    def stop(self, phase):
        self.pairs[phase][-1][1].record()

    def totals_ns(self):
        torch.cuda.synchronize()
        return {p: sum(b.elapsed_time(e) for b, e in pairs) * 1e6 for p, pairs in self.pairs.items()}

    def calls(self):
        return {p: len(pairs) for p, pairs in self.pairs.items()}


class Phase:
    """A kscope stream scope (torch's current stream) around torch's own event pair."""

    def __init__(self, timer, phase, extra_nvtx):
        self.timer, self.phase, self.extra_nvtx = timer, phase, extra_nvtx
        self.scope = kscope.scope(phase, stream="current")
        self.record_function = None

    def __enter__(self):
        self.scope.__enter__()
        if self.extra_nvtx:  # other tools' ranges inside kscope's: attribution must not move
            torch.cuda.nvtx.range_push("nvtx_" + self.phase)
            self.record_function = torch.autograd.profiler.record_function("rf_" + self.phase)
            self.record_function.__enter__()
        self.timer.start(self.phase)
        return self

    def __exit__(self, *exc):
        self.timer.stop(self.phase)
        if self.extra_nvtx:
            self.record_function.__exit__(*exc)
            torch.cuda.nvtx.range_pop()
        self.scope.__exit__(*exc)
        return False


def step(model, timer, extra_nvtx=False, after_layer=None):
    with Phase(timer, "embed", extra_nvtx):
        x = F.embedding(model.tokens, model.embedding)
    for layer in model.layers:
        with Phase(timer, "attention", extra_nvtx):
            q, k, v = F.linear(x, layer["qkv"]).view(BATCH, SEQ, 3, HEADS, HIDDEN // HEADS).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + F.linear(a.transpose(1, 2).reshape(BATCH, SEQ, HIDDEN), layer["out"])
        with Phase(timer, "mlp", extra_nvtx):
            x = x + F.linear(F.gelu(F.linear(x, layer["fc1"])), layer["fc2"])
        if after_layer is not None:
            after_layer()
    with Phase(timer, "logits", extra_nvtx):
        logits = F.linear(x[:, -1], model.head)
    with Phase(timer, "sample", extra_nvtx):
        return torch.argmax(logits, dim=-1)


def run_loop(model, top, steps, extra_nvtx=False, after_layer=None):
    timer = PhaseTimer()
    for _ in range(steps):
        with kscope.scope(top):
            step(model, timer, extra_nvtx, after_layer)
    return timer


def phase_numbers(report, top, timer):
    torch_ns = timer.totals_ns()
    calls = timer.calls()
    out = {}
    for p in PHASES:
        s = report.find(f"{top}/{p}")
        activity = s.get("gpu_activity") or {}
        out[p] = dict(calls=s["calls"], torch_calls=calls[p], gpu_calls=s["gpu_calls"],
                      kscope_event_ns=s["gpu_total_ns"], torch_event_ns=torch_ns[p],
                      busy_ns=activity.get("busy_ns", 0), kernel_ns=activity.get("kernel_ns", 0),
                      kernel_count=activity.get("kernel_count", 0))
    return out


def waits(call):
    """`call` (which waits for the device) inside a scope of its own.

    kscope's collector attributes host synchronizations (cudaDeviceSynchronize, stream and
    event syncs: CUPTI's SYNCHRONIZATION records, the report's host_sync) to the scope open
    at the call, like launches, and counts one made with no scope open in
    cupti.counters.unscoped. torch.cuda.synchronize() is such a call, and emit_nvtx makes
    one on entry and one on exit (torch.autograd.profiler.emit_nvtx.__enter__/__exit__):
    with the final synchronize, three waits outside every scope, as many as the H100 run's
    3 unscoped records, where no kernel of the scenario ran outside a scope."""
    with kscope.scope("waits"):
        return call()


def unscoped_work(report, trace_path):
    """What the report says about the records attributed to "(unscoped)": the counters, the
    (unscoped) node's activity (kernels, copies, memsets, host waits) and, from the trace,
    the names of its kernels, copies and memsets (host waits have no trace event)."""
    counters = report.data["cupti"]["counters"]
    node = report.find("(unscoped)") or {}
    activity = node.get("gpu_activity") or {}
    copies = sum((activity.get(f"memcpy_{d}") or {}).get("count", 0) for d in ("h2d", "d2h", "d2d", "other"))
    out = dict(unscoped=counters.get("unscoped"), unattributed=counters.get("unattributed"),
               unattributed_evicted=counters.get("unattributed_evicted"),
               kernel_count=activity.get("kernel_count", 0), memcpy_count=copies,
               memset_count=(activity.get("memset") or {}).get("count", 0),
               host_sync=activity.get("host_sync") or {}, names={}, trace_error="")
    try:
        kscope.write_trace(trace_path)
        with open(trace_path) as f:
            trace = json.load(f)
        events = trace.get("traceEvents", []) if isinstance(trace, dict) else trace
        names = collections.Counter(f'{e.get("cat")}: {e.get("name")}' for e in events
                                    if e.get("ph") == "X" and (e.get("args") or {}).get("scope") == "(unscoped)")
        out["names"] = dict(names.most_common(20))
    except Exception as e:  # the numbers above stand without the names
        out["trace_error"] = f"{type(e).__name__}: {e}"
    return out


def attribution():
    """Each phase's GPU time: kscope's events and CUPTI's attribution against torch's events;
    again with torch's NVTX ranges, record_function and emit_nvtx around every op. After the
    reset every launch and every host wait is made inside a scope (waits()), so nothing may
    be unscoped; `unscoped_work` says what is, if anything."""
    started = kscope.enable_cupti()
    model = Model()
    with torch.inference_mode():
        run_loop(model, "warmup", 3)            # cuBLAS handles, kernels loaded
        torch.cuda.synchronize()
        kscope.reset()
        plain = run_loop(model, "plain", 10)
        nvtx = torch.autograd.profiler.emit_nvtx()
        waits(nvtx.__enter__)                   # torch.cuda.synchronize() inside
        try:
            noisy = run_loop(model, "nvtx", 10, extra_nvtx=True)
        finally:
            waits(lambda: nvtx.__exit__(None, None, None))  # and again
        waits(torch.cuda.synchronize)
    r = kscope.report()
    with tempfile.TemporaryDirectory() as tmp:
        unscoped = unscoped_work(r, os.path.join(tmp, "attribution_trace.json"))
    return dict(cupti_started=started, cupti_status=r.data["cupti"]["status"],
                unscoped=r.data["cupti"]["counters"]["unscoped"], unscoped_work=unscoped,
                plain=phase_numbers(r, "plain", plain), nvtx=phase_numbers(r, "nvtx", noisy),
                findings=list(kscope.diagnose(r).kinds()), text=r.text())


def _profiled_loop(model):
    timer = run_loop(model, "step", 5)
    torch.cuda.synchronize()
    return timer


def profiler_first():
    """torch.profiler owns CUPTI first: kscope says so once and keeps its event times."""
    model = Model()
    with torch.inference_mode():
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                torch.profiler.ProfilerActivity.CUDA]) as prof:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                started = kscope.enable_cupti()
            timer = _profiled_loop(model)
    r = kscope.report()
    kernels_seen_by_torch = sum(1 for e in prof.events() if getattr(e, "device_type", None) is not None
                                and "cuda" in str(e.device_type).lower())
    return dict(cupti_started=started,
                warnings=[str(w.message) for w in caught if issubclass(w.category, kscope.KscopeWarning)],
                cupti_status=r.data["cupti"]["status"], report_warnings=r.warnings,
                phases=phase_numbers(r, "step", timer), torch_cuda_events=kernels_seen_by_torch)


def kscope_first():
    """kscope owns CUPTI first; torch.profiler starts afterwards: the program goes on and
    kscope's attribution keeps working."""
    started = kscope.enable_cupti()
    model = Model()
    with torch.inference_mode():
        try:
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]):
                timer = _profiled_loop(model)
            profiler_error = ""
        except Exception as e:  # torch's own error, reported rather than hidden
            profiler_error = f"{type(e).__name__}: {e}"
            timer = _profiled_loop(model)
    r = kscope.report()
    return dict(cupti_started=started, profiler_error=profiler_error, phases=phase_numbers(r, "step", timer))


def torch_loop(call, seconds, burst_calls=200, chunk=50):
    """torch's own timing of `call` on torch's current stream: a torch.cuda.Event pair around
    every call, the calls back to back for `seconds` of wall time (the host waits for the
    chunk before the previous one, so the GPU never runs dry). Returns the median of the
    first `burst_calls` calls after 20 of warm-up (a do_bench-style loop: the first tens of
    milliseconds of load, after the GPU idled) and the median of the calls enqueued after
    the first second (under continuous load, when the power controller has set the SM clock:
    kscope's default, sustained, measurement waits for the same, managed_min_time_s = 1 s)."""
    pairs, enqueued, chunks = [], [], []
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(chunk):
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            call()
            end.record()
            pairs.append((begin, end))
            enqueued.append(time.perf_counter() - t0)
        chunks.append(pairs[-1][1])
        if len(chunks) >= 2:
            chunks[-2].synchronize()
    torch.cuda.synchronize()
    times = [b.elapsed_time(e) * 1e-3 for b, e in pairs]
    burst = sorted(times[20:20 + burst_calls]) or sorted(times)
    # (On a GPU so slow that no call was enqueued after the first second: the later half.)
    sustained = sorted(t for t, at in zip(times, enqueued) if at >= 1.0) or sorted(times[len(times) // 2:])
    return dict(burst_median_s=burst[len(burst) // 2], sustained_median_s=sustained[len(sustained) // 2],
                sustained_calls=len(sustained), calls=len(times))


def bench_numbers(result):
    """The settings and clocks of a kscope.bench result (its JSON), to compare like with like."""
    b = result.data["benchmarks"][0]
    m = b.get("measurement") or {}
    clock = m.get("sm_clock_mhz") or {}
    return dict(cache=(b.get("settings") or {}).get("cache"), median_s=result.median_s,
                sm_clock_mhz=clock.get("median"), sm_clock_min_mhz=clock.get("min"), sm_clock_max_mhz=clock.get("max"),
                clock_managed=m.get("clock_managed"), measured_span_s=m.get("measured_span_s"),
                launches_per_sample=result.launches_per_sample, stop=result.stop_reason)


def bench():
    """kscope.bench on torch work: the median against torch's own event timing, hot against
    cold L2, the reference and its output check, and a callable that launches on another
    stream.

    Like with like: torch's loop runs the call back to back, so the L2 holds what the
    previous call left (hot): kscope's benchmark is asked for cache="hot" (its default), and
    a second one for cache="cold" (the L2 overwritten before every sample, never faster).
    kscope's default measurement is the sustained one (at least a second under load, at
    the clock the power controller holds for a heavy kernel), so torch's loop is compared
    after a second of continuous load too (torch_loop), right before kscope's run; its
    first 200 calls (the old do_bench-style loop, at the boost clock) are kept as
    torch_burst_median_s, for the record only."""
    n = 4096
    a = torch.randn(n, n, device=DEVICE, dtype=DTYPE)
    b = torch.randn(n, n, device=DEVICE, dtype=DTYPE)
    c = torch.empty(n, n, device=DEVICE, dtype=DTYPE)
    work = (2.0 * n ** 3, 3.0 * 2 * n * n)
    # torch's own timing of the same call, on a stream of its own, right before kscope's run.
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        loop = torch_loop(lambda: torch.mm(a, b, out=c), seconds=1.5)
    mm = kscope.bench(lambda: torch.mm(a, b, out=c), name="mm_out", work=work, dtype="fp16", cache="hot",
                      reference=lambda: torch.matmul(a, b), output=lambda: c[:64, :64],
                      reference_output=lambda: torch.matmul(a, b)[:64, :64], tolerance=1e-2)
    cold = kscope.bench(lambda: torch.mm(a, b, out=c), name="mm_out_cold", work=work, dtype="fp16", cache="cold",
                        time_budget_s=5)

    other = torch.cuda.Stream()

    def elsewhere():
        with torch.cuda.stream(other):  # not the stream the harness times
            torch.mm(a, b, out=c)

    wrong = kscope.bench(elsewhere, name="elsewhere", time_budget_s=3)
    given = kscope.bench(lambda: torch.mm(a, b, out=c), name="on_given_stream", stream=s, time_budget_s=5)
    return dict(valid=mm.valid, reason=mm.invalid_reason, median_s=mm.median_s, ci=mm.median_ci_s,
                torch_median_s=loop["sustained_median_s"], torch_burst_median_s=loop["burst_median_s"],
                torch_loop=loop, hot=bench_numbers(mm), cold=bench_numbers(cold),
                cold_valid=cold.valid, cold_reason=cold.invalid_reason, cold_median_s=cold.median_s,
                flops_per_s=mm.flops_per_s,
                reference_verdict=mm.reference.verdict if mm.reference else "",
                reference_ratio=mm.reference.ratio if mm.reference else float("nan"),
                check_performed=bool(mm.reference and mm.reference.output_check and
                                     mm.reference.output_check.performed),
                check_passed=bool(mm.reference and mm.reference.output_check and mm.reference.output_check.passed),
                wrong_valid=wrong.valid, wrong_stop=wrong.stop_reason, wrong_reason=wrong.invalid_reason,
                given_valid=given.valid, given_median_s=given.median_s, text=mm.text)


# The host's check of a layer's output after the debugging synchronize (production_sync):
# long enough that the GPU's idle time it causes (about 1 ms per layer, 2 per step against
# about 6 ms of GPU work on an H100) is far above diagnose_sync_idle_share (5 % of the wall).
LAYER_CHECK_S = 0.001


def host_check(seconds):
    """Host work of a known length (the thread spins): a check of a layer's output."""
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


def check_layer():
    """A debugging synchronize after a layer, in a scope of its own inside the step (not a
    sync point: diagnose_options' sync_names are "d2h" and "sampling"), then the host's
    check: the GPU idles while the host is in it."""
    with kscope.scope("layer_check"):
        torch.cuda.synchronize()
        host_check(LAYER_CHECK_S)


def diagnosed(r, started, timer):
    """What a production scenario returns: the collector, the sampler, the GPU-time account,
    the phases and the diagnosis (kinds, and each finding's kind and text)."""
    d = kscope.diagnose(r, step_names=["step"])
    sampled = r.data.get("sampled_metrics") or {}
    gpu_time = r.data.get("gpu_time") or {}
    return dict(started=started, cupti_status=r.data["cupti"]["status"], warnings=r.warnings,
                sampled_running=sampled.get("running", False), sampled_status=sampled.get("status", ""),
                busy_share=gpu_time.get("busy_share"), wall_ns=gpu_time.get("wall_ns"),
                unknown_reason=gpu_time.get("unknown_reason", ""),
                phases=phase_numbers(r, "step", timer), findings=list(d.kinds()),
                finding_texts=[f"[{f.kind}] {f.text}" for f in d], diagnosis=d.text)


def warm_up(model):
    """Two steps outside the loop's scope (cuBLAS handles, kernels loaded), then a reset: the
    report's GPU-time window holds the loop alone, not the start-up's idle GPU."""
    run_loop(model, "warmup", 2)
    torch.cuda.synchronize()
    kscope.reset()


def production():
    """The production preset on the loop, a healthy one: the GPU runs behind the host (no
    synchronize inside the step, no copy to the host), so the diagnosis must find nothing,
    on a GPU-time account that is whole."""
    started = kscope.enable_production()
    model = Model()
    with torch.inference_mode():
        warm_up(model)
        timer = run_loop(model, "step", 10)
        torch.cuda.synchronize()
    return diagnosed(kscope.report(), started, timer)


def production_sync():
    """The production preset on the loop with a debugging synchronize after every layer,
    inside the step, and 1 ms of host work after it (check_layer): the known truth is one
    finding, a host sync in the step, in 'step/layer_check'."""
    started = kscope.enable_production()
    model = Model()
    with torch.inference_mode():
        warm_up(model)
        timer = run_loop(model, "step", 10, after_layer=check_layer)
        torch.cuda.synchronize()
    return diagnosed(kscope.report(), started, timer)


SCENARIOS = dict(attribution=attribution, profiler_first=profiler_first, kscope_first=kscope_first,
                 bench=bench, production=production, production_sync=production_sync)

if __name__ == "__main__":
    result = SCENARIOS[sys.argv[1]]()
    print(json.dumps(result, default=float))
