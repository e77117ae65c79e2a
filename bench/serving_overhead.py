#!/usr/bin/env python3
"""What instrumenting a serving loop costs: examples/serving under each kscope configuration.

Runs the serving example (closed loop, fixed batch) in three workloads and several kscope
configurations, interleaved (every configuration once per round, rounds repeated), each run
in its own process, and prints the mean steady step time of each configuration relative to
the same workload with no instrumentation: the median ratio over the rounds, with its range.
Cost per eager launch and per graph node is derived from the kernels per step that the
collector counted. Run on the GPU machine by bench/serving_overhead.sh.

  python3 bench/serving_overhead.py --build after=build/examples [--build before=old/examples]
      [--variants graph,eager,gpu] [--configs 'none scopes collector ...'] [--rounds 3]
      [--csv out.csv] [--log-dir logs]

Configurations (environment of the run; `none` runs serving_uninstrumented, the same source
compiled with KSCOPE_DISABLE):
  none        KSCOPE_DISABLE build, KSCOPE_CUPTI=0: no scope, no NVTX, no CUPTI
  scopes      KSCOPE_CUPTI=0: scopes (NVTX ranges, CUDA events), no collector
  collector   the example's enable_cupti(): the activity collector with its defaults
  sampling    + KSCOPE_METRIC_SAMPLING=1 (PM sampling at its default interval)
  sampling-alone, sampling-preset-alone   PM sampling with no collector (KSCOPE_CUPTI=0), at
                      its default rate and at the production preset's
                      (KSCOPE_METRIC_SAMPLING_OPTIONS=interval_us=1000,window_ms=50,decoder_share=5)
  counters    + KSCOPE_COUNTERS=1 (per-scope hardware counters on sampled calls)
  production  KSCOPE_PRODUCTION=1 (the production preset)
  production-steps    the preset, tracing 1 step of every 100: the engine pauses and resumes
                      CUPTI between steps on its own thread (serving --trace-steps 1/100)
  collector-steps     the collector (no PM sampling) with the engine's windows, 1 step of 100
  collector-libsteps  the collector with the library's windows of steps (trace_steps=1/100,
                      step_scope=step): no pause or resume in the engine's code
  production-libsteps the preset with windows of 1 step in 100, the step scope found at run
                      time (trace_steps=1/100, no step_scope)
  collector-paused-deep, production-libsteps-deep   the same with kscope's CUPTI subscription
                      dropped while paused (pause_unsubscribe=1, a probe)
  production-steady   the preset with windows on the collector's timer thread, scaled to the
                      run (10 ms every 1 s; window_thread=1: a probe, it crashed on an H100)
  collector-paused    the collector paused after 1 ms by its timer thread (a probe)
  (ARGS=... in a configuration adds command-line arguments to the example's.)
  name:VAR=value[;VAR=value]   any other configuration (a name starting with bare- runs the
              uninstrumented binary) (configurations are separated by
              blanks), e.g. 'lean:KSCOPE_CUPTI_OPTIONS=sync=0,memcpy=0'; a bare- one with
              CUPTI_ALONE=kinds runs CUPTI alone through bench/cupti_alone_injection.cpp,
              e.g. 'bare-kernel:CUPTI_ALONE=kernel' (the library from $CUPTI_ALONE_LIB)
"""
import argparse
import csv
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

from process_layout import no_randomization_prefix

# Workloads: closed loop (each client sends its next request when its last is done), so
# steps run back to back at a full batch; sizes give a run of about a second.
VARIANTS = {
    # Decode replayed as CUDA graphs: ~75 kernel nodes per step, small kernels.
    "graph": ["--graph", "--hidden", "1024", "--layers", "8", "--batch", "32", "--concurrency", "32",
              "--requests", "256", "--prompt", "64", "--output", "64"],
    # Eager decode: ~300 launches per step of small kernels (launch-bound).
    "eager": ["--hidden", "1024", "--layers", "32", "--batch", "32", "--concurrency", "32",
              "--requests", "192", "--prompt", "64", "--output", "64"],
    # Long kernels: ~220 launches per step of large GEMMs, several ms per step (GPU-bound).
    "gpu": ["--hidden", "8192", "--layers", "24", "--batch", "32", "--concurrency", "32",
            "--requests", "64", "--prompt", "64", "--output", "32"],
}

BASE_CONFIGS = {
    "none": {"KSCOPE_CUPTI": "0"},
    "scopes": {"KSCOPE_CUPTI": "0"},
    "collector": {},
    "sampling": {"KSCOPE_METRIC_SAMPLING": "1"},
    # PM sampling alone (no collector), at its default rate and at the production preset's
    # (one sample per ms, 50 ms windows, the decoder at most 5 % of a core): what the
    # sampler itself costs, apart from the collector it usually comes with.
    "sampling-alone": {"KSCOPE_CUPTI": "0", "KSCOPE_METRIC_SAMPLING": "1"},
    "sampling-preset-alone": {"KSCOPE_CUPTI": "0", "KSCOPE_METRIC_SAMPLING": "1",
                              "KSCOPE_METRIC_SAMPLING_OPTIONS": "interval_us=1000,window_ms=50,decoder_share=5"},
    "counters": {"KSCOPE_COUNTERS": "1"},
    "production": {"KSCOPE_PRODUCTION": "1"},
    # The preset's steady state in a run of a few seconds: its windows (100 ms in every 10 s)
    # scaled to 10 ms in every 1 s, the same 1 % traced, so the first window is not a fifth of
    # the run (bench/RESULTS.md, "tracing in windows").
    # Windows on the collector's timer are off unless window_thread=1 (cupti_options::
    # window_thread): these two are probes of that path.
    "production-steady": {"KSCOPE_PRODUCTION": "1", "KSCOPE_CUPTI_OPTIONS": "window_ms=10,period_ms=1000,window_thread=1"},
    # The collector paused after its first millisecond: what a pause leaves per launch.
    "collector-paused": {"KSCOPE_CUPTI_OPTIONS": "window_ms=1,period_ms=86400000,window_thread=1"},
    # The preset with the engine's own windows: 1 % of the steps traced, paused between steps
    # on the launching thread (the way windows gave true records on an H100).
    "production-steps": {"KSCOPE_PRODUCTION": "1", "ARGS": "--trace-steps 1/100"},
    # The collector alone with the engine's windows (no PM sampling): against production-steps
    # it prices the preset's sampling, against collector-paused the traced 1 %.
    "collector-steps": {"ARGS": "--trace-steps 1/100"},
    # The same windows kept by the library (cupti_options::trace_steps): paused and resumed at
    # the close of the engine's outermost "step" scope, with no code in the engine.
    "collector-libsteps": {"KSCOPE_CUPTI_OPTIONS": "trace_steps=1/100,step_scope=step"},
    # Paused the same way, with kscope's CUPTI subscription dropped while paused
    # (cupti_options::pause_unsubscribe, a probe): what the subscription alone costs a launch.
    "collector-paused-deep": {"KSCOPE_CUPTI_OPTIONS": "window_ms=1,period_ms=86400000,window_thread=1,pause_unsubscribe=1"},
    "production-libsteps-deep": {"KSCOPE_PRODUCTION": "1", "KSCOPE_CUPTI_OPTIONS": "trace_steps=1/100,pause_unsubscribe=1"},
    # The preset with those windows, the step scope found at run time (none named).
    "production-libsteps": {"KSCOPE_PRODUCTION": "1", "KSCOPE_CUPTI_OPTIONS": "trace_steps=1/100"},
}

STEP_LINE = re.compile(r"step time\s+mean ([0-9.]+) us\s+p50 ([0-9.]+) us\s+p99 ([0-9.]+) us\s+max ([0-9.]+) us\s+"
                       r"\((\d+) steady steps of (\d+)\)")
# "1.0 copies" or, in windows, "1.0 device-to-host copies".
WORK_LINE = re.compile(r"GPU work per step\s+([0-9.]+) kernels, ([0-9.]+) (?:[a-z-]+ )?copies")
ATTRIBUTION = re.compile(r"attribution: (\d+) records in (\d+) ms of CPU")


def parse_config(text):
    if text in BASE_CONFIGS:
        return text, dict(BASE_CONFIGS[text]), text == "none"
    if ":" not in text:
        raise SystemExit(f"serving_overhead: unknown configuration '{text}' (known: {', '.join(BASE_CONFIGS)}, "
                         "or name:VAR=value;VAR=value)")
    name, assignments = text.split(":", 1)
    # A name starting with "bare-" runs the uninstrumented binary (e.g. CUPTI alone,
    # injected with CUDA_INJECTION64_PATH, on a loop kscope does not watch).
    bare = name.startswith("bare-")
    env = {}
    for item in assignments.split(";"):
        if "=" not in item:
            raise SystemExit(f"serving_overhead: '{item}' in '{text}' is not VAR=value")
        key, value = item.split("=", 1)
        env[key] = value
    if bare:
        env.setdefault("KSCOPE_CUPTI", "0")
        # CUPTI alone (bench/cupti_alone_injection.cpp): serving_overhead.sh builds the
        # injection library and names it in CUPTI_ALONE_LIB.
        if "CUPTI_ALONE" in env and "CUDA_INJECTION64_PATH" not in env:
            lib = os.environ.get("CUPTI_ALONE_LIB", "")
            if not lib:
                raise SystemExit(f"serving_overhead: '{text}' sets CUPTI_ALONE but CUPTI_ALONE_LIB names no library "
                                 "(bench/serving_overhead.sh builds it)")
            env["CUDA_INJECTION64_PATH"] = lib
    return name, env, bare


def run_once(binary, args, env_extra, timeout, log_path, pin=""):
    env = dict(os.environ)
    for key in ("KSCOPE_CUPTI", "KSCOPE_METRIC_SAMPLING", "KSCOPE_COUNTERS", "KSCOPE_PRODUCTION",
                "KSCOPE_CUPTI_OPTIONS", "KSCOPE_METRIC_SAMPLING_OPTIONS"):
        env.pop(key, None)
    env.update(env_extra)
    start = time.monotonic()
    try:
        prefix = ["taskset", "-c", pin] if pin else []
        prefix += no_randomization_prefix()
        p = subprocess.run(prefix + [binary] + args + ["--quiet"], env=env, capture_output=True, text=True,
                           timeout=timeout)
        out, code = p.stdout + p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        out += f"\nserving_overhead: killed after {timeout} s\n"
        code = "timeout"
    wall = time.monotonic() - start
    if log_path:
        with open(log_path, "w") as f:
            f.write(" ".join(f"{k}={v}" for k, v in env_extra.items()) + " " + binary + " " + " ".join(args) + "\n")
            f.write(out)
    m = STEP_LINE.search(out)
    w = WORK_LINE.search(out)
    at = ATTRIBUTION.search(out)
    return {
        "code": code,
        "wall_s": wall,
        "mean_us": float(m.group(1)) if m else float("nan"),
        "p50_us": float(m.group(2)) if m else float("nan"),
        "p99_us": float(m.group(3)) if m else float("nan"),
        "max_us": float(m.group(4)) if m else float("nan"),
        "kernels_per_step": float(w.group(1)) if w else float("nan"),
        "attribution_ms": float(at.group(2)) if at else float("nan"),
    }


def median(values):
    values = [v for v in values if v == v]
    return statistics.median(values) if values else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", action="append", required=True,
                    help="NAME=DIR[@config+config] holding serving and serving_uninstrumented (only those configurations)")
    ap.add_argument("--variants", default="graph,eager,gpu")
    ap.add_argument("--configs", default="none scopes collector sampling counters production",
                    help="configurations separated by blanks")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--once", default="", help="'build:config:variant ...': run that pair in the first round only "
                    "(and that configuration of that build in no other workload), e.g. a configuration that takes "
                    "minutes")
    ap.add_argument("--pin", default="auto", help="cores to run on (taskset -c); auto: 2-7 with 8+ cores; '' off")
    ap.add_argument("--csv", default="")
    ap.add_argument("--log-dir", default="")
    a = ap.parse_args()

    builds = []
    allowed = {}  # build -> configurations it runs (all when not given)
    for b in a.build:
        name, _, directory = b.partition("=")
        directory, _, only = directory.partition("@")
        builds.append((name, directory))
        if only:
            allowed[name] = set(only.split("+"))
    once = set(a.once.split()) if a.once else set()  # "build:config:variant": first round only
    variants = [v for v in a.variants.split(",") if v]
    for v in variants:
        if v not in VARIANTS:
            raise SystemExit(f"serving_overhead: unknown variant '{v}' (known: {', '.join(VARIANTS)})")
    configs = [parse_config(c) for c in a.configs.split()]
    if a.log_dir:
        os.makedirs(a.log_dir, exist_ok=True)
    # Pinned to the same cores every run: on the H200 host the same uninstrumented loop's
    # median step moved 1.95-2.53 ms between processes unpinned and 1.90-1.94 ms pinned to
    # cores 2-7 (bench/RESULTS.md), the difference being which cores a run landed on.
    pin = a.pin
    if pin == "auto":
        pin = "2-7" if shutil.which("taskset") and (os.cpu_count() or 0) >= 8 else ""

    results = {}  # (build, variant, config) -> list of runs
    rows = []
    for r in range(a.rounds):
        for variant in variants:
            for build, directory in builds:
                for name, env, uninstrumented in configs:
                    if build in allowed and name not in allowed[build]:
                        continue
                    if f"{build}:{name}:{variant}" in once and r > 0:
                        continue
                    if any(o.startswith(f"{build}:{name}:") for o in once) and f"{build}:{name}:{variant}" not in once:
                        continue
                    binary = os.path.join(directory, "serving_uninstrumented" if uninstrumented else "serving")
                    log = os.path.join(a.log_dir, f"{build}_{variant}_{name}_{r}.log") if a.log_dir else ""
                    run_env = dict(env)
                    extra_args = run_env.pop("ARGS", "").split() if not uninstrumented else []
                    res = run_once(binary, VARIANTS[variant] + extra_args, run_env, a.timeout, log, pin)
                    results.setdefault((build, variant, name), []).append(res)
                    rows.append(dict(round=r, build=build, variant=variant, config=name, **res))
                    print(f"round {r} {build:>7} {variant:>5} {name:>12}: mean {res['mean_us']:9.1f} us  "
                          f"p99 {res['p99_us']:9.1f}  max {res['max_us']:10.1f}  kernels/step "
                          f"{res['kernels_per_step']:6.1f}  attribution {res['attribution_ms']:.0f} ms  exit {res['code']}  {res['wall_s']:.1f} s", flush=True)

    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
            w.writeheader()
            w.writerows(rows)

    # Ratios per round against the same build's (or the first build's) uninstrumented run
    # of the same round: interleaving makes each round's pair see the same machine state.
    print()
    print("| build | workload | configuration | mean step | ratio to none (median [min-max] over rounds) | "
          "p99 step | max step | kernels/step | added per kernel |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for variant in variants:
        kernels = median([res["kernels_per_step"] for (b, v, c), runs in results.items() if v == variant
                          for res in runs])
        for build, _ in builds:
            base_build = build if (build, variant, "none") in results else next(
                (b for b, _ in builds if (b, variant, "none") in results), builds[0][0])
            base = results.get((base_build, variant, "none"))
            for name, _, _ in configs:
                runs = results.get((build, variant, name), [])
                if not runs:
                    continue
                means = [res["mean_us"] for res in runs]
                ratios = []
                if base:
                    for i, res in enumerate(runs):
                        if i < len(base) and base[i]["mean_us"] == base[i]["mean_us"] and res["mean_us"] == res["mean_us"]:
                            ratios.append(res["mean_us"] / base[i]["mean_us"])
                m = median(means)
                ratio = median(ratios)
                spread = f"[{min(ratios):.3f}-{max(ratios):.3f}]" if ratios else ""
                base_mean = median([res["mean_us"] for res in base]) if base else float("nan")
                per_kernel = (m - base_mean) / kernels if kernels == kernels and kernels > 0 else float("nan")
                failed = [str(res["code"]) for res in runs if res["code"] != 0]
                note = f" (exit {', '.join(failed)})" if failed else ""
                print(f"| {build} | {variant} | {name}{note} | {m:.1f} us | {ratio:.3f} {spread} | "
                      f"{median([r['p99_us'] for r in runs]):.1f} us | {median([r['max_us'] for r in runs]):.1f} us | "
                      f"{kernels:.1f} | {per_kernel:+.2f} us |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
