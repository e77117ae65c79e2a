#!/usr/bin/env python3
"""What watching a PyTorch eager loop costs, per op, and which CUDA calls a torch op makes.

Why (issue 41): a PyTorch eager loop of ~300 small element-wise ops per step pays +6.5 us per
op with kscope's CUPTI activity collector on, where the C++ eager loop pays +1.3 us per
launch. This runs such a loop under each configuration, each run in its own process,
interleaved over rounds, and a census of every runtime / driver API call the loop makes per
op (bench/cupti_callback_census.cpp), so the cost can be split between kscope, CUPTI itself
and what torch calls besides the launch.

The loop (one step): a "step" scope holding 5 "block<i>" scopes, each holding a "pre" and a
"post" scope; 300 ops on 4096-element float32 tensors: per block 2 x 7 chains of 4
element-wise ops (mul, add, relu, sigmoid / tanh, mul, add, relu), then a sum and an amax
reduction, each added back (add / sub with alpha): 60 ops, one kernel each.
torch.cuda.synchronize() ends the step (timed with it), under torch.inference_mode().
Warm-up steps are discarded; each run reports its median step.

  python3 bench/torch_overhead.py [--configs 'none scopes collector ...'] [--rounds 4]
      [--steps 150] [--warmup 30] [--log-dir logs] [--csv out.csv] [--md out.md]

Run on the GPU machine by bench/torch_overhead.sh, which builds the injection libraries
(CUPTI_ALONE_LIB, CENSUS_LIB) and libkscope_c.so (KSCOPE_LIBRARY, PYTHONPATH=python).

Configurations (separated by blanks; each sets the run's environment):
  none            no kscope imported, no CUPTI (the baseline)
  scopes          kscope scopes (16 per step, host-only), KSCOPE_CUPTI=0
  collector       scopes + kscope.enable_cupti() (the activity collector, its defaults)
  production      scopes + kscope.enable_production() (the production preset)
  collector-steps, production-steps   the same, tracing 1 step of every 100 (the library's
                  windows of steps: KSCOPE_CUPTI_OPTIONS=trace_steps=1/100,step_scope=step)
  production-steps-deep   the same, kscope's CUPTI subscription dropped while paused (a probe)
  bare-kernel     no kscope; CUPTI alone with kernel activity only
                  (CUDA_INJECTION64_PATH=$CUPTI_ALONE_LIB, CUPTI_ALONE=kernel)
  torch-profiler  no kscope; torch.profiler.profile(activities=[CUDA]) around the loop
                  (Kineto's CUPTI, for reference)
  census          scopes, no collector, with the census injection (CENSUS_LIB): run once,
                  first, not timed; calls per op of every API call in the timed steps
  name:VAR=value[;VAR=value]   any other, e.g. 'nosync:KSCOPE_CUPTI_OPTIONS=sync=0',
                  'bare-kinds:CUPTI_ALONE=kernel,memcpy,memset,sync',
                  'census-bare:TORCH_OVERHEAD_SCOPES=0', 'off:TORCH_OVERHEAD_COLLECT=none;KSCOPE=0'.
                  Defaults by name: bare-* as bare-kernel (no kscope; CUPTI_ALONE gets the
                  library), census* as census, any other as collector; then the VARs.
                  TORCH_OVERHEAD_SCOPES=0/1: kscope scopes or none; TORCH_OVERHEAD_COLLECT=
                  none|cupti|production|profiler; TORCH_OVERHEAD_STREAM=current: stream scopes;
                  TORCH_OVERHEAD_START=early: the collector started before torch makes its
                  CUDA context (default: after, as an engine does); =driver: started by the
                  driver inside cuInit, kscope's library being the CUDA injection library; CUPTI_ALONE_ATTACH=late:
                  CUPTI alone attached where kscope starts (the library loaded with ctypes
                  and its InitializeInjection called), not by the driver at its start.
                  Early against late tells whether attaching to a running context is what
                  a paused collector leaves behind.

Table: per configuration the median over rounds of each run's median step, the range of
those round medians, the ratio to `none` of the same round (median [min-max] over rounds),
and the added time per op over `none` and over `scopes` (median over rounds of the same
round's difference / ops per step). Exit 77 when torch or CUDA is missing (the reason is
printed).
"""
import argparse
import csv
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

from process_layout import no_randomization_prefix

SIZE = 4096          # elements per tensor
BLOCKS = 5           # block scopes per step
CHAIN = 7            # 4-op chains per half block
OPS_PER_BLOCK = 2 * 4 * CHAIN + 4   # two halves of chains; a sum and an amax, each added back
OPS_PER_STEP = BLOCKS * OPS_PER_BLOCK  # 300
SCOPES_PER_STEP = 1 + 3 * BLOCKS       # 16

ENV_SCOPES = "TORCH_OVERHEAD_SCOPES"
ENV_COLLECT = "TORCH_OVERHEAD_COLLECT"
ENV_STREAM = "TORCH_OVERHEAD_STREAM"
ENV_START = "TORCH_OVERHEAD_START"
ENV_LATE_CUPTI = "CUPTI_ALONE_LATE_LIB"  # set by parse_config for CUPTI_ALONE_ATTACH=late

BASE_CONFIGS = {
    "none": {ENV_SCOPES: "0", ENV_COLLECT: "none", "KSCOPE_CUPTI": "0"},
    "scopes": {ENV_SCOPES: "1", ENV_COLLECT: "none", "KSCOPE_CUPTI": "0"},
    "collector": {ENV_SCOPES: "1", ENV_COLLECT: "cupti"},
    "production": {ENV_SCOPES: "1", ENV_COLLECT: "production"},
    # Windows of steps kept by the library (cupti_options::trace_steps): 1 step of every 100
    # traced, paused and resumed at the close of the loop's outermost "step" scope.
    "collector-steps": {ENV_SCOPES: "1", ENV_COLLECT: "cupti", "KSCOPE_CUPTI_OPTIONS": "trace_steps=1/100,step_scope=step"},
    "production-steps": {ENV_SCOPES: "1", ENV_COLLECT: "production",
                         "KSCOPE_CUPTI_OPTIONS": "trace_steps=1/100,step_scope=step"},
    # The same, kscope's CUPTI subscription dropped while paused (pause_unsubscribe, a probe).
    "production-steps-deep": {ENV_SCOPES: "1", ENV_COLLECT: "production",
                              "KSCOPE_CUPTI_OPTIONS": "trace_steps=1/100,step_scope=step,pause_unsubscribe=1"},
    # CUPTI detached between windows (cupti_options::pause_detach): a late-attached CUPTI that is
    # only switched off still costs every op (bench/RESULTS.md, session 23).
    "collector-steps-detach": {ENV_SCOPES: "1", ENV_COLLECT: "cupti",
                               "KSCOPE_CUPTI_OPTIONS": "trace_steps=1/100,step_scope=step,pause_detach=1"},
    # PM sampling alone, GPU-wide: KSCOPE_CUPTI=0 keeps enable_metric_sampling() from starting
    # the collector it uses for attribution (without it, this row measured both, started before
    # torch initialized CUDA; "sampling-collector" is that row).
    "sampling": {ENV_SCOPES: "1", ENV_COLLECT: "none", "KSCOPE_CUPTI": "0", "KSCOPE_METRIC_SAMPLING": "1"},
    "sampling-collector": {ENV_SCOPES: "1", ENV_COLLECT: "none", "KSCOPE_METRIC_SAMPLING": "1"},
    "bare-kernel": {ENV_SCOPES: "0", ENV_COLLECT: "none", "KSCOPE_CUPTI": "0", "CUPTI_ALONE": "kernel"},
    "torch-profiler": {ENV_SCOPES: "0", ENV_COLLECT: "profiler", "KSCOPE_CUPTI": "0"},
    "census": {ENV_SCOPES: "1", ENV_COLLECT: "none", "KSCOPE_CUPTI": "0", "CENSUS": "1"},
}

# Variables a run must not inherit from the caller (each configuration sets its own).
CLEARED = ("KSCOPE", "KSCOPE_CUPTI", "KSCOPE_METRIC_SAMPLING", "KSCOPE_COUNTERS", "KSCOPE_PRODUCTION",
           "KSCOPE_CUPTI_OPTIONS", "KSCOPE_REPORT", "KSCOPE_METRICS", "CUDA_INJECTION64_PATH", "CUPTI_ALONE",
           "CENSUS", "CENSUS_OUT", "CENSUS_OPS", "CENSUS_DOMAINS", ENV_SCOPES, ENV_COLLECT, ENV_START, "KSCOPE_INJECTION",
           "CUPTI_ALONE_ATTACH", ENV_LATE_CUPTI)
# (TORCH_OVERHEAD_STREAM is inherited: set for the whole run, every scope is a stream scope.)

RESULT = re.compile(r"^RESULT (\{.*\})$", re.M)
# bench/cupti_alone_injection.cpp's line at exit.
ALONE = re.compile(r"cupti-alone: (\S*): (\d+) records \(kernel (\d+),.*?(\d+) dropped")


# ---------------------------------------------------------------------------------------
# The child: one configuration, one process.

class NullScope:
    """The `none` configuration's scope: a reused object with an empty `with`."""
    __slots__ = ()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_NULL = NullScope()


def null_scope(name, **kwargs):
    return _NULL


def make_step(torch, scope, x, w, b, stream):
    """One step: 300 ops under 16 scopes (the structure OPS_PER_STEP counts)."""
    relu, sigmoid, tanh = torch.relu, torch.sigmoid, torch.tanh
    names = [f"block{i}" for i in range(BLOCKS)]
    kw = {"stream": stream} if stream else {}

    def step():
        with scope("step", **kw):
            h = x
            for name in names:
                with scope(name, **kw):
                    with scope("pre", **kw):
                        for _ in range(CHAIN):
                            h = h * w
                            h = h + b
                            h = relu(h)
                            h = sigmoid(h)
                    with scope("post", **kw):
                        for _ in range(CHAIN):
                            h = tanh(h)
                            h = h * 0.5
                            h = h + 0.25
                            h = relu(h)
                        s = h.sum()
                        h = h.add(s, alpha=1e-4)
                        m = h.amax()
                        h = h.sub(m, alpha=1e-4)
        return h

    return step


def child(args):
    scopes_on = os.environ.get(ENV_SCOPES, "0") == "1"
    collect = os.environ.get(ENV_COLLECT, "none")
    stream = os.environ.get(ENV_STREAM, "")
    info = {"scopes": scopes_on, "collect": collect, "ops_per_step": OPS_PER_STEP,
            "scopes_per_step": SCOPES_PER_STEP if scopes_on else 0}
    try:
        import torch
    except ImportError as e:
        print(f"SKIP: torch not importable ({e})", flush=True)
        return 77
    if not torch.cuda.is_available():
        print(f"SKIP: torch {torch.__version__} sees no CUDA device (torch.version.cuda {torch.version.cuda})",
              flush=True)
        return 77
    start = os.environ.get(ENV_START, "late")
    if start not in ("early", "late", "driver"):
        print(f"ERROR: {ENV_START}={start}: early, late or driver", flush=True)
        return 2

    kscope = None
    if scopes_on or collect in ("cupti", "production"):
        import kscope
        if not kscope.available():
            print(f"ERROR: kscope's library is not loaded: {kscope.load_error}", flush=True)
            return 3
        info["kscope_library"] = kscope.library_path

    def start_collector():
        if collect == "cupti":
            info["collector_started"] = bool(kscope.enable_cupti())
        elif collect == "production":
            info["collector_started"] = bool(kscope.enable_production())

    info["collector_start"] = start
    if start == "early":  # before torch initializes CUDA (get_device_name() below does)
        info["torch_cuda_initialized_at_start"] = torch.cuda.is_initialized()
        start_collector()
    info.update(torch=torch.__version__, torch_cuda=torch.version.cuda, gpu=torch.cuda.get_device_name())

    dev = torch.device("cuda")
    torch.manual_seed(0)
    x = torch.randn(SIZE, device=dev)
    w = torch.rand(SIZE, device=dev)
    b = torch.rand(SIZE, device=dev)
    torch.cuda.synchronize()

    # Started after CUDA is up and before the warm-up (an engine's order): the warm-up steps
    # then cover the collector's first records too.
    if start != "early":
        start_collector()
    late_cupti = os.environ.get(ENV_LATE_CUPTI, "")
    if late_cupti:  # CUPTI alone, attached where kscope would start
        import ctypes
        info["cupti_alone_attach"] = "late"
        info["cupti_alone_initialized"] = ctypes.CDLL(late_cupti).InitializeInjection()
    profiler = None
    if collect == "profiler":
        from torch.profiler import ProfilerActivity, profile
        profiler = profile(activities=[ProfilerActivity.CUDA])
        profiler.__enter__()

    census = None
    if os.environ.get("CENSUS") == "1":
        path = os.environ.get("CUDA_INJECTION64_PATH", "")
        try:
            import ctypes
            census = ctypes.CDLL(path)
            census.census_window_begin
            census.census_window_end.argtypes = (ctypes.c_ulonglong,)
        except (OSError, AttributeError) as e:
            print(f"census: cannot reach the census library's window functions at '{path}' ({e}); "
                  "whole-process counts only", flush=True)
            census = None
        os.environ["CENSUS_OPS"] = str((args.warmup + args.steps) * OPS_PER_STEP)  # read by the library at exit

    scope = kscope.scope if (kscope is not None and scopes_on) else null_scope
    step = make_step(torch, scope, x, w, b, stream if scopes_on else "")
    sync = torch.cuda.synchronize
    clock = time.perf_counter_ns
    import gc
    times = []
    launch_times = []  # the step's host part: where the launches' cost shows (the rest is waiting for the GPU)
    with torch.inference_mode():
        for i in range(args.warmup):
            step()
            sync()
        gc.collect()
        if census is not None:
            census.census_window_begin()
        for i in range(args.steps):
            t0 = clock()
            step()
            t1 = clock()
            sync()
            times.append(clock() - t0)
            launch_times.append(t1 - t0)
        if census is not None:
            census.census_window_end(args.steps * OPS_PER_STEP)

    if profiler is not None:
        t0 = time.monotonic()
        profiler.__exit__(None, None, None)
        info["profiler_stop_s"] = round(time.monotonic() - t0, 3)
        try:  # raw Kineto events: no FunctionEvent tree built
            info["profiler_events"] = len(profiler.profiler.kineto_results.events())
        except Exception as e:  # noqa: BLE001 (an API that moves between torch versions)
            info["profiler_events"] = f"unknown ({type(e).__name__})"
    sampling_on = os.environ.get("KSCOPE_METRIC_SAMPLING", "") not in ("", "0")
    if collect in ("cupti", "production") or (kscope is not None and sampling_on):
        try:
            t0 = time.monotonic()
            data = kscope.report().data
            cupti = data.get("cupti", {})
            counters = cupti.get("counters", {})
            info["cupti_status"] = cupti.get("status", "")
            info["kernel_records"] = counters.get("kernel_records")
            info["dropped_by_cupti"] = counters.get("dropped_by_cupti")
            info["unscoped"] = counters.get("unscoped")
            k = counters.get("kernel_records")
            if isinstance(k, int):
                info["kernels_per_step"] = round(k / (args.warmup + args.steps), 2)
            sampled = data.get("sampled_metrics") or {}
            if sampled or collect == "production" or sampling_on:  # a row about sampling says whether it ran
                info["sampling_status"] = sampled.get("status", "not started")
                info["sampling_running"] = sampled.get("running")
                info["samples"] = sampled.get("samples")
                info["sampling_windows"] = sampled.get("windows")
                info["sampling_coverage"] = sampled.get("coverage")
            info["report_s"] = round(time.monotonic() - t0, 3)
        except Exception as e:  # noqa: BLE001 (the timing stands without it)
            info["report_error"] = f"{type(e).__name__}: {e}"

    us = sorted(t / 1e3 for t in times)
    info.update(steps=len(us), warmup=args.warmup, median_us=statistics.median(us), mean_us=statistics.fmean(us),
                p10_us=us[len(us) // 10], p90_us=us[(9 * len(us)) // 10], min_us=us[0], max_us=us[-1])
    info["launch_median_us"] = statistics.median(t / 1e3 for t in launch_times) if launch_times else None
    print("RESULT " + json.dumps(info), flush=True)
    return 0


# ---------------------------------------------------------------------------------------
# The parent: every configuration, interleaved.

def parse_config(text):
    """(name, env, untimed)."""
    if text in BASE_CONFIGS:
        env = dict(BASE_CONFIGS[text])
        name = text
    else:
        if ":" not in text:
            raise SystemExit(f"torch_overhead: unknown configuration '{text}' (known: {', '.join(BASE_CONFIGS)}, "
                             "or name:VAR=value;VAR=value)")
        name, assignments = text.split(":", 1)
        if name.startswith("bare-"):
            env = dict(BASE_CONFIGS["bare-kernel"])
            env.pop("CUPTI_ALONE")
        elif name.startswith("census"):
            env = dict(BASE_CONFIGS["census"])
        else:
            env = dict(BASE_CONFIGS["collector"])
        for item in assignments.split(";"):
            if not item:
                continue
            if "=" not in item:
                raise SystemExit(f"torch_overhead: '{item}' in '{text}' is not VAR=value")
            key, value = item.split("=", 1)
            env[key] = value
    if "CUPTI_ALONE" in env and "CUDA_INJECTION64_PATH" not in env:
        lib = os.environ.get("CUPTI_ALONE_LIB", "")
        if not lib or not os.path.exists(lib):
            raise SystemExit(f"torch_overhead: '{text}' sets CUPTI_ALONE but CUPTI_ALONE_LIB names no library "
                             f"('{lib}'; bench/torch_overhead.sh builds it)")
        if env.get("CUPTI_ALONE_ATTACH", "early") not in ("early", "late"):
            raise SystemExit(f"torch_overhead: '{text}': CUPTI_ALONE_ATTACH is early (the driver's start) or late")
        if env.get("CUPTI_ALONE_ATTACH") == "late":
            env[ENV_LATE_CUPTI] = lib
        else:
            env["CUDA_INJECTION64_PATH"] = lib
    if "CUPTI_ALONE_ATTACH" in env and ("CUPTI_ALONE" not in env or ENV_LATE_CUPTI not in env and
                                         env.get("CUPTI_ALONE_ATTACH") == "late"):
        raise SystemExit(f"torch_overhead: '{text}': CUPTI_ALONE_ATTACH=late needs CUPTI_ALONE and no "
                         "CUDA_INJECTION64_PATH of its own")
    if env.get(ENV_START, "late") not in ("early", "late", "driver"):
        raise SystemExit(f"torch_overhead: '{text}': {ENV_START} is early, late or driver")
    if env.get(ENV_START) == "driver":
        # kscope's library as the CUDA injection library: the driver starts the collector inside
        # cuInit (src/kscope_c.cpp, InitializeInjection), as `python -m kscope run --attach driver`.
        lib = os.environ.get("KSCOPE_LIBRARY", "")
        if env.get(ENV_COLLECT) not in ("cupti", "production") or not lib or "CUDA_INJECTION64_PATH" in env:
            raise SystemExit(f"torch_overhead: '{text}': {ENV_START}=driver needs the collector or the preset, "
                             "KSCOPE_LIBRARY and no other injection library")
        env["CUDA_INJECTION64_PATH"] = lib
        env["KSCOPE_INJECTION"] = env[ENV_COLLECT]
    untimed = env.get("CENSUS") == "1"
    if untimed and "CUDA_INJECTION64_PATH" not in env:
        lib = os.environ.get("CENSUS_LIB", "")
        if not lib or not os.path.exists(lib):
            raise SystemExit(f"torch_overhead: '{text}' is a census but CENSUS_LIB names no library "
                             f"('{lib}'; bench/torch_overhead.sh builds it)")
        env["CUDA_INJECTION64_PATH"] = lib
    return name, env, untimed


def run_child(python, name, env_extra, a, log_path, pin, timeout):
    env = dict(os.environ)
    for key in CLEARED:
        env.pop(key, None)
    env.update(env_extra)
    env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    # Every process laid out alike: one hash seed, and no address randomization where setarch
    # can turn it off. In session 16 the uninstrumented loop's median step moved 2358-3689 us
    # between processes of one run (+-22 %), wider than most of what is measured here.
    env.setdefault("PYTHONHASHSEED", "0")
    cmd = [python, os.path.abspath(__file__), "--child", "--steps", str(a.steps), "--warmup", str(a.warmup)]
    if a.fixed_layout:
        cmd = no_randomization_prefix() + cmd
    if pin:
        cmd = ["taskset", "-c", pin] + cmd
    start = time.monotonic()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        out, code = p.stdout + p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        out += f"\ntorch_overhead: killed after {timeout:.0f} s\n"
        code = "timeout"
    wall = time.monotonic() - start
    if log_path:
        with open(log_path, "w") as f:
            f.write(" ".join(f"{k}={v}" for k, v in env_extra.items()) + " " + " ".join(cmd) + "\n")
            f.write(out)
    m = RESULT.search(out)
    res = json.loads(m.group(1)) if m else {}
    alone = ALONE.search(out)
    if alone:
        res["alone_kinds"] = alone.group(1)
        res["alone_kernels"] = int(alone.group(3))
        res["alone_dropped"] = int(alone.group(4))
        if m and res.get("steps"):
            res["kernels_per_step"] = round(int(alone.group(3)) / (res["steps"] + res.get("warmup", 0)), 2)
    res["code"] = code
    res["wall_s"] = round(wall, 2)
    if not m or code != 0:
        res["error"] = why_failed(out, code)
    return res


def why_failed(out, code):
    """The line that says why a run failed: its ERROR / SKIP line, a Python exception, else its last line."""
    lines = [line.strip() for line in out.strip().splitlines() if line.strip()]
    pick = [line for line in lines if re.match(r"^(ERROR|SKIP|torch_overhead):", line)] or \
        [line for line in lines if re.match(r"^[A-Za-z_.]*(Error|Exception)\b", line)] or lines[-1:]
    text = pick[-1] if pick else "no output"
    return f"exit {code}: " + (text if len(text) <= 240 else text[:237] + "...")


def median(values):
    values = [v for v in values if v == v]
    return statistics.median(values) if values else float("nan")


def census_section(path, top):
    """The census file's summary lines and its first `top` table rows."""
    if not path or not os.path.exists(path):
        return [f"census: no file ({os.path.basename(path) if path else 'not run'})"]
    lines = open(path, errors="replace").read().splitlines()
    out, rows = [], 0
    for line in lines:
        if line.startswith("| ") and not line.startswith("| #") and not line.startswith("|---"):
            rows += 1
            if rows > top:
                continue
        out.append(line)
    if rows > top:
        out.append(f"... {rows - top} more rows in {os.path.basename(path)}")
    return out


def fmt(v, spec=".1f"):
    return format(v, spec) if isinstance(v, (int, float)) and v == v else "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    # bare-launch-cb and collector-driver split what is left of the per-op cost once the
    # records are gone (a paused collector still cost 90 % of a tracing one, bench/RESULTS.md
    # session 15): CUPTI alone with the launch callbacks only (no activity kind), and the
    # collector hooking the driver's launch calls only (a torch launch makes a runtime and a
    # driver call, each with a callback).
    ap.add_argument("--configs", default="census none scopes collector production bare-kernel "
                    "bare-launch-cb:CUPTI_ALONE=runtime,driver collector-driver:KSCOPE_CUPTI_OPTIONS=runtime_api=0")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--steps", type=int, default=150, help="timed steps per run")
    ap.add_argument("--warmup", type=int, default=30, help="discarded steps per run")
    ap.add_argument("--timeout", type=float, default=120, help="seconds per run")
    ap.add_argument("--python", default=sys.executable, help="the interpreter of the runs (one with torch)")
    ap.add_argument("--no-fixed-layout", dest="fixed_layout", action="store_false",
                    help="leave address randomization on in the runs (default: off via setarch -R where it exists)")
    ap.add_argument("--pin", default="auto", help="cores to run on (taskset -c); auto: 2-7 with 8+ cores; '' off")
    ap.add_argument("--deadline", type=float, default=0,
                    help="seconds this run may take (0: no limit): no round starts that would end past it")
    ap.add_argument("--census-top", type=int, default=30)
    ap.add_argument("--log-dir", default="")
    ap.add_argument("--csv", default="")
    ap.add_argument("--md", default="", help="also write the table and the census here")
    a = ap.parse_args()
    if a.child:
        return child(a)

    configs = [parse_config(c) for c in a.configs.split()]
    timed = [c for c in configs if not c[2]]
    once = [c for c in configs if c[2]]
    if a.log_dir:
        os.makedirs(a.log_dir, exist_ok=True)
    # Pinned to the same cores every run, as bench/serving_overhead.py (its note: which
    # cores a run landed on moved the same loop's median step by up to 30 %).
    pin = a.pin
    if pin == "auto":
        pin = "2-7" if shutil.which("taskset") and (os.cpu_count() or 0) >= 8 else ""
    print(f"torch_overhead: {OPS_PER_STEP} ops and {SCOPES_PER_STEP} scopes per step, {SIZE} floats per tensor; "
          f"{a.warmup} warm-up + {a.steps} timed steps per run; {a.rounds} rounds; pinned to '{pin or 'none'}'; "
          f"address randomization {'off' if a.fixed_layout and no_randomization_prefix() else 'on'}, PYTHONHASHSEED=0; "
          f"python {a.python}", flush=True)

    started = time.monotonic()

    def timeout():  # a run never outlives the deadline by much
        if a.deadline <= 0:
            return a.timeout
        return min(a.timeout, max(30.0, a.deadline - (time.monotonic() - started)))

    rows = []
    census_files = {}
    census_runs = {}
    # The census first: it answers the first question even if the timed rounds run out of time.
    for name, env, _ in once:
        env = dict(env)
        out = os.path.join(a.log_dir or ".", f"census_{name}.txt")
        env["CENSUS_OUT"] = out
        census_files[name] = out
        log = os.path.join(a.log_dir, f"{name}.log") if a.log_dir else ""
        res = run_child(a.python, name, env, a, log, pin, timeout())
        census_runs[name] = res
        rows.append(dict(round="once", config=name, **res))
        print(f"census {name}: exit {res['code']}, {res['wall_s']} s, median step {fmt(res.get('median_us'))} us "
              f"(census on: not comparable){'  ' + res['error'] if 'error' in res else ''}", flush=True)
        if res["code"] == 77:
            print(res.get("error", ""))
            return 77
    census_s = time.monotonic() - started

    results = {}  # config -> [res per round]
    rounds_done = 0
    stopped = ""
    for r in range(a.rounds):
        # Whole rounds only: a round cut short would leave configurations without their pair.
        if a.deadline > 0 and r > 0:
            elapsed = time.monotonic() - started
            per_round = (elapsed - census_s) / r
            if elapsed + 1.1 * per_round > a.deadline:
                stopped = (f"stopped after {r} of {a.rounds} rounds: the next would end past the {a.deadline:.0f} s "
                           f"deadline ({elapsed:.0f} s spent, {per_round:.0f} s a round)")
                print(f"torch_overhead: {stopped}", flush=True)
                break
        # Rotated each round, so no configuration always runs first or after the same one.
        order = timed[r % len(timed):] + timed[:r % len(timed)] if timed else []
        for name, env, _ in order:
            log = os.path.join(a.log_dir, f"r{r}_{name}.log") if a.log_dir else ""
            res = run_child(a.python, name, env, a, log, pin, timeout())
            res["round"] = r
            results.setdefault(name, {})[r] = res
            rows.append(dict(config=name, **res))
            extra = ""
            if "kernels_per_step" in res:
                extra += f"  kernels/step {res['kernels_per_step']}"
            if "collector_started" in res:
                extra += f"  collector {'on' if res['collector_started'] else 'NOT STARTED'}"
            if "error" in res:
                extra += f"  [{res['error']}]"
            print(f"round {r} {name:>15}: median {fmt(res.get('median_us'), '9.1f')} us  p90 "
                  f"{fmt(res.get('p90_us'), '9.1f')}  exit {res['code']}  {res['wall_s']:.1f} s{extra}", flush=True)
            if res["code"] == 77 and r == 0:
                print(f"torch_overhead: {res.get('error', 'skipped')}")
                return 77
        rounds_done = r + 1

    if a.csv and rows:
        keys = []
        for row in rows:
            keys += [k for k in row if k not in keys]
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys)
            w.writeheader()
            w.writerows(rows)

    md = []
    first = next((res for runs in results.values() for res in runs.values() if "gpu" in res), {})
    md.append(f"torch {first.get('torch', '?')} (CUDA {first.get('torch_cuda', '?')}), {first.get('gpu', '?')}; "
              f"{OPS_PER_STEP} ops, {SCOPES_PER_STEP} scopes per step (host-only"
              f"{'' if not os.environ.get(ENV_STREAM) else ', stream ' + os.environ[ENV_STREAM]}); "
              f"{a.warmup} + {a.steps} steps per run, {rounds_done} interleaved rounds, one process per run; "
              f"{time.monotonic() - started:.0f} s")
    if stopped:
        md.append(f"NOTE: {stopped}")
    md.append("")
    md.append("| configuration | median step | round medians [min-max] | ratio to none, median [min-max] | "
              "+us/op vs none | +us/op vs scopes | notes |")
    md.append("|---|---:|---:|---:|---:|---:|---|")

    def round_values(name):
        return {r: res.get("median_us", float("nan")) for r, res in results.get(name, {}).items()
                if res.get("code") == 0}

    base = round_values("none")
    scopes = round_values("scopes")
    for name, _, _ in timed:
        vals = round_values(name)
        runs = results.get(name, {})
        notes = []
        failed = [f"r{r}: exit {res['code']}" for r, res in runs.items() if res.get("code") != 0]
        if failed:
            notes.append("; ".join(failed))
        started = [res.get("collector_started") for res in runs.values() if "collector_started" in res]
        if started and not all(started):
            notes.append(f"collector NOT started in {started.count(False)} run(s)")
        kps = median([res["kernels_per_step"] for res in runs.values() if isinstance(res.get("kernels_per_step"), (int, float))])
        if kps == kps:
            notes.append(f"{kps:g} kernels/step ({'CUPTI alone' if any('alone_kernels' in res for res in runs.values()) else 'kscope'})")
        host = median([res["launch_median_us"] for res in runs.values()
                       if isinstance(res.get("launch_median_us"), (int, float))])
        if host == host:
            notes.append(f"host part {host:.0f} us")
        sampled = [res for res in runs.values() if "sampling_status" in res]
        if sampled:
            running = [res for res in sampled if res.get("sampling_running")]
            samples = median([res["samples"] for res in sampled if isinstance(res.get("samples"), (int, float))])
            notes.append(f"PM sampling running in {len(running)}/{len(sampled)} run(s), "
                         f"{samples:g} samples (median)" if running else
                         f"PM sampling NOT running: {sampled[0]['sampling_status']}")
        dropped = sum((res.get("dropped_by_cupti") or 0) + (res.get("alone_dropped") or 0) for res in runs.values())
        if dropped:
            notes.append(f"{dropped} records dropped by CUPTI")
        ev = [res.get("profiler_events") for res in runs.values() if "profiler_events" in res]
        if ev:
            stop = median([res.get("profiler_stop_s", float("nan")) for res in runs.values()])
            notes.append(f"profiler events {ev[0]}, stop {stop:.1f} s")
        if not vals:
            md.append(f"| {name} | - | - | - | - | - | {'; '.join(notes) or 'no result'} |")
            continue
        m = median(list(vals.values()))
        spread = f"[{min(vals.values()):.1f}-{max(vals.values()):.1f}]"
        ratios = [vals[r] / base[r] for r in vals if r in base]
        ratio = f"{median(ratios):.3f} [{min(ratios):.3f}-{max(ratios):.3f}]" if ratios else "-"
        per_none = median([(vals[r] - base[r]) / OPS_PER_STEP for r in vals if r in base])
        per_scopes = median([(vals[r] - scopes[r]) / OPS_PER_STEP for r in vals if r in scopes])
        md.append(f"| {name} | {m:.1f} us | {spread} | {ratio} | {fmt(per_none, '+.2f')} | "
                  f"{fmt(per_scopes, '+.2f')} | {'; '.join(notes)} |")

    for name, path in census_files.items():
        md.append("")
        md.append(f"Census `{name}` (bench/cupti_callback_census.cpp; every runtime/driver API call, API_ENTER, "
                  f"in the {a.steps} timed steps, per op = calls / {a.steps * OPS_PER_STEP} ops; top {a.census_top}):")
        md.append("")
        res = census_runs.get(name, {})
        if res.get("code") != 0:
            md.append(f"census run failed: {res.get('error', 'exit ' + str(res.get('code')))}")
        md += census_section(path, a.census_top)
    text = "\n".join(md)
    print()
    print(text)
    if a.md:
        with open(a.md, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
