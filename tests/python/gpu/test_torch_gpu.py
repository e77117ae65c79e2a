"""kscope from PyTorch on a GPU (tests/python/gpu/scenarios.py, one fresh interpreter each).

Skipped, with the reason, without torch or a CUDA device (run_pytest.py gpu says so to ctest).
"""

import json
import math
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="kscope python gpu tests: SKIPPED: PyTorch is not installed")
if not torch.cuda.is_available():
    pytest.skip("kscope python gpu tests: SKIPPED: no CUDA device (torch.cuda.is_available() is False)",
                allow_module_level=True)

HERE = os.path.dirname(os.path.abspath(__file__))
HEAVY = ("attention", "mlp")  # about a millisecond per call: launch gaps are far under 2 %


def run_scenario(name, timeout=600):
    out = subprocess.run([sys.executable, os.path.join(HERE, "scenarios.py"), name], capture_output=True,
                         text=True, timeout=timeout, env=dict(os.environ))
    assert out.returncode == 0, f"scenario {name} failed:\n{out.stdout[-4000:]}\n{out.stderr[-4000:]}"
    result = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"\n[{name}] " + json.dumps({k: v for k, v in result.items() if k not in ("text", "diagnosis")},
                                     indent=1, default=str))
    return result


def relative(a, b):
    return abs(a - b) / b


def events_agree(n):
    """kscope's event pair brackets torch's inside the same scope: the two differ by the
    GPU's time to process two event records, about a microsecond per call. Within 2 %, or
    within 2 us per call for the phases of a few microseconds (embed, sample)."""
    return abs(n["kscope_event_ns"] - n["torch_event_ns"]) <= max(0.02 * n["torch_event_ns"], 2000.0 * n["calls"])


@pytest.fixture(scope="module")
def attribution():
    return run_scenario("attribution")


@pytest.mark.parametrize("run", ["plain", "nvtx"])
def test_each_phase_gpu_time_agrees_with_torch_events(attribution, run):
    assert attribution["cupti_started"], attribution["cupti_status"]
    for phase, n in attribution[run].items():
        assert n["calls"] == n["torch_calls"] > 0, (phase, n)
        assert n["gpu_calls"] == n["calls"], (phase, n)  # every call timed by events
        assert events_agree(n), (phase, n)
        assert n["kernel_count"] > 0 and n["kernel_count"] % n["calls"] == 0, (phase, n)
    for phase in HEAVY:
        n = attribution[run][phase]
        # CUPTI's attribution (by correlation id to the scope open at each launch): the
        # kernels' busy time of the phase is its event time, within 2 %.
        assert relative(n["busy_ns"], n["torch_event_ns"]) < 0.02, (phase, n)


def test_torch_nvtx_ranges_do_not_move_attribution(attribution):
    for phase in attribution["plain"]:
        plain, noisy = attribution["plain"][phase], attribution["nvtx"][phase]
        assert plain["kernel_count"] // plain["calls"] == noisy["kernel_count"] // noisy["calls"], phase
    assert attribution["unscoped"] == 0
    assert "attention" in attribution["text"]


def test_torch_profiler_first_gets_one_message_and_event_times():
    r = run_scenario("profiler_first")
    if not r["cupti_started"]:
        assert len(r["warnings"]) == 1, r["warnings"]
        assert "CUPTI" in r["warnings"][0]
        assert r["cupti_status"], r
    for phase, n in r["phases"].items():
        assert n["gpu_calls"] == n["calls"] > 0, (phase, n)
        assert events_agree(n), (phase, n)


def test_kscope_first_keeps_attributing_while_torch_profiler_runs():
    r = run_scenario("kscope_first")
    assert r["cupti_started"]
    for phase in HEAVY:
        n = r["phases"][phase]
        assert n["kernel_count"] > 0, (phase, n, r["profiler_error"])
        assert events_agree(n), (phase, n)


def test_bench_times_torch_work_like_torch_events_and_catches_the_wrong_stream():
    r = run_scenario("bench")
    assert r["valid"], r["reason"]
    # The harness's median and torch's own event timing of the same torch.mm agree.
    assert relative(r["median_s"], r["torch_median_s"]) < 0.05, r
    lo, hi = r["ci"]
    assert lo <= r["median_s"] <= hi
    assert r["flops_per_s"] > 0
    assert r["reference_verdict"] in ("faster", "slower", "same", "inconclusive")
    assert math.isfinite(r["reference_ratio"])
    assert r["check_performed"] and r["check_passed"], r
    # Work launched on another stream never reaches the timed one: invalid, with the reason.
    assert not r["wrong_valid"]
    assert r["wrong_stop"] == "invalid"
    assert "no work reached" in r["wrong_reason"], r["wrong_reason"]
    assert r["given_valid"]
    assert relative(r["given_median_s"], r["median_s"]) < 0.05, r


def test_production_preset_reports_and_diagnoses():
    r = run_scenario("production")
    assert r["started"], r["cupti_status"]
    for phase in HEAVY:
        assert r["phases"][phase]["kernel_count"] > 0
    assert "Diagnosis" in r["diagnosis"]
