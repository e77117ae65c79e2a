"""kscope.diagnose: the C++ rules (verdict/diagnose.hpp) through the C interface, as
frozen dataclasses; the same findings as `kscope diagnose` prints for the same file."""

import dataclasses
import json
import math
import os
import subprocess

import pytest

import kscope


def summary(p50, p99, n=100):
    return {"n": n, "warmup": 0, "median": p50, "mean": p50, "stddev": 0.1 * p50, "min": 0.9 * p50,
            "max": 1.1 * p99, "mad": 0.01 * p50, "p90": p50 + 0.5 * (p99 - p50), "p99": p99,
            "median_ci": {"lo": 0.98 * p50, "hi": 1.02 * p50, "level": 0.95}, "outliers": 0, "steady": True}


def scope_entry(template, id_, parent, name, path, depth, calls, p50, p99):
    s = json.loads(json.dumps(template))
    s.update(id=id_, parent=parent, name=name, path=path, depth=depth, calls=calls,
             host_ns=summary(p50, p99), host_inclusive_ns=p50 * calls, host_exclusive_ns=p50 * calls,
             samples_kept=calls, tags=[], gpu_activity=None)
    return s


def copies(count=0, nbytes=0, ns=0):
    return {"count": count, "bytes": nbytes, "ns": ns}


def activity(kernels, busy_ns, d2h=None):
    a = {"kernel_count": kernels, "kernel_ns": int(busy_ns), "busy_ns": int(busy_ns), "idle_ns": 0,
         "first_start_ns": 0, "last_end_ns": int(busy_ns), "memcpy_h2d": copies(), "memcpy_d2h": d2h or copies(),
         "memcpy_d2d": copies(), "memcpy_other": copies(), "memset": copies(), "comm_kernel_count": 0, "comm_ns": 0}
    return a


def gpu_entry(id_, path, calls, busy, gaps, kernels_per_call, d2h_per_call):
    return {"id": id_, "path": path, "gpu_ns": busy * calls, "share_of_gpu": None, "kernel_count": 0,
            "calls_seen": calls, "busy_per_call_ns": summary(busy, 1.2 * busy),
            "gaps_per_call_ns": summary(gaps, 1.2 * gaps), "kernels_per_call": kernels_per_call,
            "d2h_per_call": d2h_per_call, "max_gap_ns": gaps}


def cpu_bound_serving_loop(name, busy_share):
    """A real report of this process, its scopes and GPU timeline replaced by a serving loop
    whose GPU idles while the host schedules (100 steps of 10 ms)."""
    with kscope.scope(name):
        pass
    doc = kscope.report().to_dict()
    template = next(s for s in doc["scopes"] if s["path"] == name)
    doc["scopes"] = [
        scope_entry(template, 1, 0, "step", "step", 1, 100, 10e6, 11e6),
        scope_entry(template, 2, 1, "schedule", "step/schedule", 2, 100, 0.5e6, 0.6e6),
        scope_entry(template, 3, 1, "decode", "step/decode", 2, 100, 8e6, 9e6),
        scope_entry(template, 4, 1, "retire", "step/retire", 2, 100, 0.5e6, 0.6e6),
        scope_entry(template, 5, 1, "d2h", "step/d2h", 2, 100, 0.2e6, 0.3e6),
    ]
    doc["scopes"][2]["gpu_activity"] = activity(5000, 800e6)
    doc["scopes"][4]["gpu_activity"] = activity(0, 0, d2h=copies(100, 6400, 200000))
    gaps = [("step/schedule", 3_000_000, 2), ("step/schedule", 3_000_000, 2), ("step/decode", 100_000, 3)]
    doc["gpu_time"] = {
        "window_start_ns": 0, "window_end_ns": 1_000_000_000, "wall_ns": 1e9, "busy_ns": busy_share * 1e9,
        "busy_share": busy_share, "host_intervals": 500, "host_intervals_overwritten": 0, "gpu_events": 5000,
        "gpu_events_overwritten": 0, "calls_before_gpu_ring": 0, "gpu_events_unmatched": 0,
        "idle_gaps": [{"start_ns": 10_000_000 * (i + 1), "ns": ns, "open_scope": path, "open_scope_id": id_}
                      for i, (path, ns, id_) in enumerate(gaps)],
        "idle_by_scope": [{"scope": "step/schedule", "scope_id": 2, "ns": 6e6, "gaps": 2},
                          {"scope": "step/decode", "scope_id": 3, "ns": 1e5, "gaps": 1}],
        "scopes": [gpu_entry(1, "step", 100, 3e6, 1e6, 20, 1), gpu_entry(2, "step/schedule", 100, 0, 0, 0, 0),
                   gpu_entry(3, "step/decode", 100, 3e6, 0.1e6, 20, 0)],
    }
    return doc


def test_a_cpu_bound_loop_gets_one_finding_with_its_evidence(name, tmp_path):
    doc = cpu_bound_serving_loop(name, 0.3)
    path = tmp_path / "serving.json"
    path.write_text(json.dumps(doc))
    d = kscope.diagnose(kscope.Report.load(path))
    assert d.kinds() == ("cpu/launch-bound",)
    f = d[0]
    assert isinstance(f, kscope.Finding) and dataclasses.is_dataclass(f)
    assert f.evidence_value("gpu_time.busy_share") == pytest.approx(0.3)  # the input, carried as evidence
    assert all(isinstance(e, kscope.Evidence) for e in f.evidence)
    assert "step/schedule" in f.text
    assert f.cost_known and f.cost_basis and math.isfinite(f.cost_ms_per_step)
    assert json.loads(d.json)["findings"][0]["kind"] == f.kind
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.kind = "other"
    # The same file through the kscope tool (an independent reader and printer) says the same.
    cli = os.environ.get("KSCOPE_CLI")
    if cli and os.path.exists(cli):
        out = subprocess.run([cli, "diagnose", str(path)], capture_output=True, text=True, check=True).stdout
        assert out.strip() == d.text.strip()


def test_a_busy_gpu_gives_no_finding(name):
    d = kscope.diagnose(kscope.Report.from_json(json.dumps(cpu_bound_serving_loop(name, 0.97))))
    assert not d and len(d) == 0 and list(d) == []
    assert "no problem found" in d.text


def test_options_reach_the_rules(name):
    r = kscope.Report.from_json(json.dumps(cpu_bound_serving_loop(name, 0.3)))
    assert kscope.diagnose(r, step_names=["step"]).kinds() == ("cpu/launch-bound",)
    # Busy 30 % of the time is not "idle" when idle means under 20 %.
    assert kscope.diagnose(r, low_busy_share=0.2).kinds() == ()


def test_a_host_only_report_says_what_could_not_be_checked(name):
    with kscope.scope(name):
        pass
    d = kscope.diagnose()  # the session's report now
    assert not d
    assert "without a GPU timeline" in d.text or "no problem found" in d.text


def test_the_options_come_from_their_one_declaration_with_defaults():
    o = kscope.diagnose_options()
    assert o["step_names"] == ["step"]
    assert o["low_busy_share"] == 0.5
    assert o["host_link_bytes_per_s"] is None
    r = kscope.report()
    for key, value in o.items():  # each one is taken by name
        kscope.diagnose(r, **{key: value})
    kscope.diagnose(r, host_link_bytes_per_s=float("nan"))  # NaN: unknown, sent as null


def test_bad_options_and_arguments_are_clear_errors():
    r = kscope.report()
    with pytest.raises(TypeError, match="unknown option 'stepnames'"):
        kscope.diagnose(r, stepnames=["x"])
    with pytest.raises(ValueError, match="min_step_calls"):
        kscope.diagnose(r, min_step_calls=-3)
    with pytest.raises(TypeError, match="expected a kscope.Report"):
        kscope.diagnose({"scopes": []})
