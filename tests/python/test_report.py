"""kscope.report() and the session switches: kscope's own printers through the C interface,
files, reading a report back, and what happens where there is no GPU."""

import json
import os
import subprocess
import sys
import warnings

import pytest

import kscope
from conftest import find, gpu_present


def test_the_report_in_every_format(name):
    for _ in range(3):
        with kscope.scope(name, work=(2e6, 4e6)):
            pass
    r = kscope.report()
    data = r.data
    assert data["schema"] == "kscope.report/2"
    assert r.to_dict() == data and r.to_dict() is not data
    assert json.loads(r.json()) == data
    assert find(r, name)["calls"] == 3
    assert r.scopes is data["scopes"]
    assert r.text().startswith("kscope ")
    assert str(r) == r.text()
    assert name in r.csv()
    assert r.html().startswith("<!DOCTYPE html>") and name in r.html()
    assert r.openmetrics().rstrip().endswith("# EOF")
    assert repr(r).startswith("<kscope.Report: ")


def test_a_section_of_your_own_in_every_format(name, tmp_path):
    with kscope.scope(name):
        pass
    r = kscope.report()
    before = r.data  # parsed before the section: add_section drops the cached JSON
    assert before["sections"] == []
    r.add_section("queue", "Request queue", "peak 12 requests\n", {"peak": 12, "by_minute": [3, 12]})
    assert "section queue: Request queue" in r.text()
    assert r.data["sections"] == [{"key": "queue", "heading": "Request queue",
                                   "data": {"peak": 12, "by_minute": [3, 12]}}]
    assert 'data-section="queue"' in r.html()
    r.write_json(tmp_path / "r.json")
    back = kscope.load_report(tmp_path / "r.json")  # no reader for "queue" here: kept as written
    assert back.data["sections"][0]["data"] == {"peak": 12, "by_minute": [3, 12]}
    assert "peak = 12" in back.text()
    with pytest.raises(ValueError, match="already"):
        r.add_section("queue", "Again", "", 1)
    with pytest.raises(ValueError, match="not a section key"):
        r.add_section("Bad Key", "", "", 1)
    with pytest.raises(ValueError, match="cannot be written as JSON"):
        r.add_section("nan_data", "", "", float("nan"))
    with pytest.raises(ValueError, match="NUL"):
        r.add_section("nul\0key", "", "", 1)
    with pytest.raises(TypeError):
        r.add_section("typed", "", 5, 1)
    assert len(r.data["sections"]) == 1


def test_files_and_reading_a_report_back(name, tmp_path):
    with kscope.scope(name):
        pass
    r = kscope.report()
    r.write_json(tmp_path / "r.json")
    r.write_html(tmp_path / "r.html")
    r.write_text(tmp_path / "r.txt")
    r.write_csv(tmp_path / "r.csv")
    r.write_trace(tmp_path / "r.trace.json")
    kscope.write_trace(str(tmp_path / "s.trace.json"))
    assert (tmp_path / "r.txt").read_text() == r.text()
    assert name in (tmp_path / "r.html").read_text()
    trace = json.loads((tmp_path / "r.trace.json").read_text())
    assert any(e.get("name") == name for e in trace["traceEvents"])
    back = kscope.load_report(tmp_path / "r.json")
    assert [s["path"] for s in back.scopes] == [s["path"] for s in r.scopes]
    assert find(back, name)["calls"] == 1


def test_each_scope_has_one_verdict_from_a_report_of_either_schema():
    # kscope.report/2: the sampled L2 at 76 % decided; the counters' stand-in is evidence under it.
    v2 = {"schema": "kscope.report/2", "scopes": [
        {"path": "transpose", "verdict": {
            "class": "memory-bound", "unit": "L2", "percent_of_peak": 76,
            "metric": "lts__throughput.avg.pct_of_peak_sustained_elapsed", "source": "sampled metrics",
            "count": 40, "count_of": "samples", "text": "memory-bound (L2): L2 76%",
            "evidence": [
                {"source": "sampled metrics", "percent_of_peak": 76, "metric": "lts__throughput.avg.pct_of_peak_sustained_elapsed",
                 "count": 40, "count_of": "samples", "agrees": True,
                 "facts": [{"metric": "lts__throughput.avg.pct_of_peak_sustained_elapsed", "value": 76, "unit": "%"}]},
                {"source": "hardware counters", "percent_of_peak": 22.6, "metric": "lts__t_sectors.avg.pct_of_peak_sustained_elapsed",
                 "count": 4, "count_of": "profiled calls", "agrees": False,
                 "facts": [{"metric": "lts__t_sectors.avg.pct_of_peak_sustained_elapsed", "value": 22.6, "unit": "%"}]}],
            "missing": []}},
        {"path": "tokenize", "verdict": None}]}
    r = kscope.Report.from_json(json.dumps(v2))
    v = r.verdict("transpose")
    assert (v["class"], v["unit"], v["percent_of_peak"], v["source"], v["count"]) == \
        ("memory-bound", "L2", 76, "sampled metrics", 40)
    assert [e["source"] for e in v["evidence"]] == ["sampled metrics", "hardware counters"]
    assert v["evidence"][1]["agrees"] is False
    assert r.find("transpose")["verdict"] == v
    assert r.verdict("tokenize") is None
    with pytest.raises(KeyError):
        r.verdict("no/such/scope")
    # A kscope.report/1 file written before verdicts: its placement's limiter and hint.
    v1 = {"schema": "kscope.report/1", "scopes": [
        {"path": "decode", "declared_work": {"flops": 1e9, "bytes": 4e9, "calls": 10},
         "roofline": {"roof": "fp32 plain", "flops_per_s": 1e12, "bytes_per_s": 4e12, "intensity": 0.25,
                      "roof_flops_per_s": 1.2e12, "fraction_of_roof": 0.83, "limiter": "memory",
                      "hint": "memory-bound: 83% of the DRAM roof"}}]}
    old = kscope.Report.from_json(json.dumps(v1))
    assert old.data["schema"] == "kscope.report/2"
    assert old.verdict("decode")["class"] == "memory-bound"
    assert old.verdict("decode")["source"] == "declared work"
    assert "limiter" not in old.find("decode")["roofline"]


def test_what_is_not_a_report_is_refused_with_the_reason(tmp_path):
    with pytest.raises(ValueError, match="report"):
        kscope.Report.from_json('{"schema": "something else"}')
    with pytest.raises(ValueError):
        kscope.Report.from_json("not json at all")
    with pytest.raises(kscope.KscopeError) as e:
        kscope.report().write_json(tmp_path / "no-such-dir" / "r.json")
    assert str(tmp_path / "no-such-dir") in str(e.value) or e.value.status == 5


def test_a_warning_reaches_the_report_once():
    kscope.warn("py30 test warning")
    kscope.warn("py30 test warning")
    assert kscope.report().warnings.count("py30 test warning") == 1


def test_reset_forgets_the_samples(name):
    with kscope.scope(name):
        pass
    assert find(kscope.report(), name)["calls"] == 1
    kscope.reset()
    after = find(kscope.report(), name)
    assert after is None or after["calls"] == 0
    with kscope.scope(name):  # scopes keep working after a reset
        pass
    assert find(kscope.report(), name)["calls"] == 1


def test_cupti_options_are_checked():
    with pytest.raises(ValueError, match="graphs"):
        kscope.enable_cupti("graphs=sideways")
    with pytest.raises(ValueError):
        kscope.enable_cupti({"buffers": 0})


@pytest.mark.skipif(gpu_present(), reason="a GPU is present: these features may start here")
def test_without_a_gpu_every_feature_says_why_and_the_program_goes_on():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert kscope.enable_cupti({"sync": False}) is False
        assert kscope.enable_production() is False
        assert kscope.enable_metric_sampling(["step"]) is False
        assert kscope.pause_tracing() is False  # no collector: nothing to pause, said
        assert kscope.resume_tracing() is False
    messages = [str(w.message) for w in caught if issubclass(w.category, kscope.KscopeWarning)]
    assert any(m.startswith("kscope.pause_tracing: ") and "not running" in m for m in messages), messages
    assert any(m.startswith("kscope.enable_cupti: ") and "GPU" in m for m in messages), messages
    assert any(m.startswith("kscope.enable_metric_sampling: ") for m in messages), messages
    # The warning points at this file, the caller's line, not inside the package.
    assert all(w.filename == __file__ for w in caught if issubclass(w.category, kscope.KscopeWarning))
    kscope.disable_metric_sampling()
    assert kscope.report().data["context"]["gpu"] is None


def test_version_and_library():
    assert kscope.available()
    assert kscope.__version__ == kscope.version()
    assert kscope.library_path.endswith("libkscope_c.so")


def test_without_the_library_scopes_do_nothing_and_reports_say_why(tmp_path):
    # A fresh interpreter with the library pointed at nothing: importing works, one warning
    # says why, scopes run, report() raises KscopeError with the same reason.
    program = (
        "import warnings\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    import kscope\n"
        "assert not kscope.available()\n"
        "assert any('could not be loaded' in str(w.message) for w in caught), caught\n"
        "with kscope.scope('x', stream=0, work=(1, 2)) as s:\n"
        "    s.tag('k', 'v')\n"
        "@kscope.scope('f')\n"
        "def f(): return 3\n"
        "assert f() == 3\n"
        "kscope.start_range('r').end()\n"
        "try:\n"
        "    kscope.report()\n"
        "except kscope.KscopeError as e:\n"
        "    assert 'could not be loaded' in str(e)\n"
        "    print('ok')\n")
    env = dict(os.environ, KSCOPE_LIBRARY=str(tmp_path / "missing" / "libkscope_c.so"),
               PYTHONPATH=os.path.dirname(os.path.dirname(kscope.__file__)))
    out = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_counters_switch_on_and_off_without_disturbing_the_program(tmp_path):
    # In a fresh interpreter: per-scope counters profile later scopes' calls, which would
    # change the other tests' counts here.
    program = (
        "import kscope\n"
        "started = kscope.enable_counters()\n"
        "assert started in (True, False)\n"
        "for _ in range(3):\n"
        "    with kscope.scope('c'):\n"
        "        pass\n"
        "kscope.disable_counters()\n"
        "s = kscope.report().find('c')\n"
        "assert s['calls'] + s['profiled_calls'] == 3, s\n"
        "print('ok')\n")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(kscope.__file__)))
    out = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_kscope_report_writes_the_report_when_python_exits(tmp_path):
    # The library's own exit handler (KSCOPE_REPORT) serves a Python program unchanged.
    path = tmp_path / "exit.json"
    program = "import kscope\nfor _ in range(3):\n    with kscope.scope('at_exit'):\n        pass\n"
    env = dict(os.environ, KSCOPE_REPORT=str(path), PYTHONPATH=os.path.dirname(os.path.dirname(kscope.__file__)))
    out = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert kscope.load_report(path).find("at_exit")["calls"] == 3


def test_counters_take_a_step_scope_and_refuse_one_without_whole_steps(tmp_path):
    # In a fresh interpreter, as above. A step scope goes through to the library (its status
    # names it when the counters start); one without whole steps, or not a name, is refused.
    program = (
        "import kscope\n"
        "try:\n"
        "    kscope.enable_counters(step_scope='decode', whole_steps=False)\n"
        "    raise SystemExit('no ValueError')\n"
        "except ValueError as e:\n"
        "    assert 'whole_steps' in str(e), e\n"
        "try:\n"
        "    kscope.enable_counters(step_scope=3)\n"
        "    raise SystemExit('no TypeError')\n"
        "except TypeError:\n"
        "    pass\n"
        "started = kscope.enable_counters(step_scope='decode')\n"
        "if started:\n"
        "    status = kscope.report().data['counters']['status']\n"
        "    assert \"the calls of 'decode'\" in status, status\n"
        "kscope.disable_counters()\n"
        "print('ok')\n")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(kscope.__file__)))
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", program], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
