"""GPU scenarios for test_torch_gpu.py, each run in a fresh interpreter (CUPTI can be
subscribed once per process, and torch.profiler must meet kscope in a known state):

    python3 scenarios.py NAME      prints one JSON line, the scenario's measurements, last

Every scenario runs a small transformer-like decode loop in PyTorch (embedding, attention,
MLP, logits, sampling), its phases marked with kscope scopes on torch's current stream and,
inside each scope, a pair of torch.cuda.Event timings of the same work.
"""

import json
import sys
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


def step(model, timer, extra_nvtx=False):
    with Phase(timer, "embed", extra_nvtx):
        x = F.embedding(model.tokens, model.embedding)
    for layer in model.layers:
        with Phase(timer, "attention", extra_nvtx):
            q, k, v = F.linear(x, layer["qkv"]).view(BATCH, SEQ, 3, HEADS, HIDDEN // HEADS).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + F.linear(a.transpose(1, 2).reshape(BATCH, SEQ, HIDDEN), layer["out"])
        with Phase(timer, "mlp", extra_nvtx):
            x = x + F.linear(F.gelu(F.linear(x, layer["fc1"])), layer["fc2"])
    with Phase(timer, "logits", extra_nvtx):
        logits = F.linear(x[:, -1], model.head)
    with Phase(timer, "sample", extra_nvtx):
        return torch.argmax(logits, dim=-1)


def run_loop(model, top, steps, extra_nvtx=False):
    timer = PhaseTimer()
    for _ in range(steps):
        with kscope.scope(top):
            step(model, timer, extra_nvtx)
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


def attribution():
    """Each phase's GPU time: kscope's events and CUPTI's attribution against torch's events;
    again with torch's NVTX ranges, record_function and emit_nvtx around every op."""
    started = kscope.enable_cupti()
    model = Model()
    with torch.inference_mode():
        run_loop(model, "warmup", 3)            # cuBLAS handles, kernels loaded
        torch.cuda.synchronize()
        kscope.reset()
        plain = run_loop(model, "plain", 10)
        with torch.autograd.profiler.emit_nvtx():
            noisy = run_loop(model, "nvtx", 10, extra_nvtx=True)
        torch.cuda.synchronize()
    r = kscope.report()
    return dict(cupti_started=started, cupti_status=r.data["cupti"]["status"],
                unscoped=r.data["cupti"]["counters"]["unscoped"],
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


def bench():
    """kscope.bench on torch work: the median against torch's own event timing, the
    reference and its output check, and a callable that launches on another stream."""
    n = 4096
    a = torch.randn(n, n, device=DEVICE, dtype=DTYPE)
    b = torch.randn(n, n, device=DEVICE, dtype=DTYPE)
    c = torch.empty(n, n, device=DEVICE, dtype=DTYPE)
    work = (2.0 * n ** 3, 3.0 * 2 * n * n)
    mm = kscope.bench(lambda: torch.mm(a, b, out=c), name="mm_out", work=work, dtype="fp16",
                      reference=lambda: torch.matmul(a, b), output=lambda: c[:64, :64],
                      reference_output=lambda: torch.matmul(a, b)[:64, :64], tolerance=1e-2)
    # torch's own timing of the same call, on a stream of its own, 200 calls after warm-up.
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        for _ in range(20):
            torch.mm(a, b, out=c)
        times = []
        for _ in range(200):
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            torch.mm(a, b, out=c)
            end.record()
            times.append((begin, end))
        torch.cuda.synchronize()
    torch_median_s = sorted(bb.elapsed_time(e) for bb, e in times)[100] * 1e-3

    other = torch.cuda.Stream()

    def elsewhere():
        with torch.cuda.stream(other):  # not the stream the harness times
            torch.mm(a, b, out=c)

    wrong = kscope.bench(elsewhere, name="elsewhere", time_budget_s=3)
    given = kscope.bench(lambda: torch.mm(a, b, out=c), name="on_given_stream", stream=s, time_budget_s=5)
    return dict(valid=mm.valid, reason=mm.invalid_reason, median_s=mm.median_s, ci=mm.median_ci_s,
                torch_median_s=torch_median_s, flops_per_s=mm.flops_per_s,
                reference_verdict=mm.reference.verdict if mm.reference else "",
                reference_ratio=mm.reference.ratio if mm.reference else float("nan"),
                check_performed=bool(mm.reference and mm.reference.output_check and
                                     mm.reference.output_check.performed),
                check_passed=bool(mm.reference and mm.reference.output_check and mm.reference.output_check.passed),
                wrong_valid=wrong.valid, wrong_stop=wrong.stop_reason, wrong_reason=wrong.invalid_reason,
                given_valid=given.valid, given_median_s=given.median_s, text=mm.text)


def production():
    """The production preset on the loop: the collector runs, the report and the diagnosis
    come out, whatever metric sampling can do here."""
    started = kscope.enable_production()
    model = Model()
    with torch.inference_mode():
        timer = run_loop(model, "step", 10)
        torch.cuda.synchronize()
    r = kscope.report()
    d = kscope.diagnose(r, step_names=["step"])
    return dict(started=started, cupti_status=r.data["cupti"]["status"], warnings=r.warnings,
                phases=phase_numbers(r, "step", timer), findings=list(d.kinds()), diagnosis=d.text)


SCENARIOS = dict(attribution=attribution, profiler_first=profiler_first, kscope_first=kscope_first,
                 bench=bench, production=production)

if __name__ == "__main__":
    result = SCENARIOS[sys.argv[1]]()
    print(json.dumps(result, default=float))
