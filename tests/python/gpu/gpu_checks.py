"""The checks of kscope's PyTorch GPU suite, runnable with or without pytest.

    python3 gpu_checks.py        runs every check, prints each result, exits 1 if one failed

test_torch_gpu.py wraps the same functions for pytest; run_pytest.py falls back to this
runner where the Python that has torch has no pytest (a GPU machine's Python often lacks it,
and nothing can be installed there). Each scenario runs in a fresh interpreter
(scenarios.py): CUPTI can be subscribed once per process, and torch.profiler must meet
kscope in a known state.
"""

import json
import math
import os
import subprocess
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
HEAVY = ("attention", "mlp")  # about a millisecond per call: launch gaps are far under 2 %

_results = {}


def run_scenario(name, timeout=600):
    """The scenario's measurements (run once per process, then kept)."""
    if name in _results:
        return _results[name]
    out = subprocess.run([sys.executable, os.path.join(HERE, "scenarios.py"), name], capture_output=True,
                         text=True, timeout=timeout, env=dict(os.environ))
    assert out.returncode == 0, f"scenario {name} failed:\n{out.stdout[-4000:]}\n{out.stderr[-4000:]}"
    result = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"\n[{name}] " + json.dumps({k: v for k, v in result.items() if k not in ("text", "diagnosis")},
                                     indent=1, default=str))
    _results[name] = result
    return result


def relative(a, b):
    return abs(a - b) / b


def events_agree(n):
    """kscope's event pair brackets torch's inside the same scope: the two differ by the
    GPU's time to process two event records, about a microsecond per call. Within 2 %, or
    within 2 us per call for the phases of a few microseconds (embed, sample)."""
    return abs(n["kscope_event_ns"] - n["torch_event_ns"]) <= max(0.02 * n["torch_event_ns"], 2000.0 * n["calls"])


def check_phase_times(run):
    """Each phase's GPU time from kscope's events and from CUPTI's attribution against
    torch.cuda.Event timings; `run` is "plain" or "nvtx" (torch's NVTX ranges around)."""
    a = run_scenario("attribution")
    assert a["cupti_started"], a["cupti_status"]
    for phase, n in a[run].items():
        assert n["calls"] == n["torch_calls"] > 0, (phase, n)
        assert n["gpu_calls"] == n["calls"], (phase, n)  # every call timed by events
        assert events_agree(n), (phase, n)
        assert n["kernel_count"] > 0 and n["kernel_count"] % n["calls"] == 0, (phase, n)
    for phase in HEAVY:
        n = a[run][phase]
        # CUPTI's attribution (by correlation id to the scope open at each launch): the
        # kernels' busy time of the phase is its event time, within 2 %.
        assert relative(n["busy_ns"], n["torch_event_ns"]) < 0.02, (phase, n)


def check_nvtx_does_not_move_attribution():
    a = run_scenario("attribution")
    for phase in a["plain"]:
        plain, noisy = a["plain"][phase], a["nvtx"][phase]
        assert plain["kernel_count"] // plain["calls"] == noisy["kernel_count"] // noisy["calls"], phase
    assert a["unscoped"] == 0, a["unscoped"]
    assert "attention" in a["text"]


def check_profiler_first():
    """torch.profiler owns CUPTI first: one message, and kscope's event times."""
    r = run_scenario("profiler_first")
    if not r["cupti_started"]:
        assert len(r["warnings"]) == 1, r["warnings"]
        assert "CUPTI" in r["warnings"][0], r["warnings"]
        assert r["cupti_status"], r
    for phase, n in r["phases"].items():
        assert n["gpu_calls"] == n["calls"] > 0, (phase, n)
        assert events_agree(n), (phase, n)


def check_kscope_first():
    """kscope owns CUPTI first; torch.profiler afterwards: attribution keeps working."""
    r = run_scenario("kscope_first")
    assert r["cupti_started"]
    for phase in HEAVY:
        n = r["phases"][phase]
        assert n["kernel_count"] > 0, (phase, n, r["profiler_error"])
        assert events_agree(n), (phase, n)


def check_bench():
    """kscope.bench on torch.mm against torch's own event timing; the reference and its
    output check; a callable launching on another stream is invalid, with the reason."""
    r = run_scenario("bench")
    assert r["valid"], r["reason"]
    assert relative(r["median_s"], r["torch_median_s"]) < 0.05, r
    lo, hi = r["ci"]
    assert lo <= r["median_s"] <= hi, r
    assert r["flops_per_s"] > 0
    assert r["reference_verdict"] in ("faster", "slower", "same", "inconclusive"), r
    assert math.isfinite(r["reference_ratio"]), r
    assert r["check_performed"] and r["check_passed"], r
    assert not r["wrong_valid"], r
    assert r["wrong_stop"] == "invalid", r
    assert "no work reached" in r["wrong_reason"], r["wrong_reason"]
    assert r["given_valid"], r
    assert relative(r["given_median_s"], r["median_s"]) < 0.05, r


def check_production():
    r = run_scenario("production")
    assert r["started"], r["cupti_status"]
    for phase in HEAVY:
        assert r["phases"][phase]["kernel_count"] > 0, (phase, r["phases"][phase])
    assert "Diagnosis" in r["diagnosis"]


CHECKS = [
    ("phase GPU times agree with torch.cuda.Event", lambda: check_phase_times("plain")),
    ("phase GPU times agree with torch.cuda.Event under torch's NVTX ranges", lambda: check_phase_times("nvtx")),
    ("torch's NVTX ranges do not move attribution", check_nvtx_does_not_move_attribution),
    ("torch.profiler first: one message, event times", check_profiler_first),
    ("kscope first, torch.profiler after: attribution holds", check_kscope_first),
    ("kscope.bench on torch.mm", check_bench),
    ("the production preset", check_production),
]


def main():
    failed = 0
    for title, check in CHECKS:
        try:
            check()
            print(f"PASSED {title}")
        except Exception:  # report every check, then fail the run
            failed += 1
            print(f"FAILED {title}\n{traceback.format_exc()}")
    print(f"kscope python gpu checks: {len(CHECKS) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        import torch
    except ImportError:
        print("kscope python gpu tests: SKIPPED: PyTorch is not installed")
        sys.exit(77)
    if not torch.cuda.is_available():
        print("kscope python gpu tests: SKIPPED: no CUDA device (torch.cuda.is_available() is False)")
        sys.exit(77)
    sys.exit(main())
