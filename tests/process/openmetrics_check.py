#!/usr/bin/env python3
"""kscope's OpenMetrics exposition read by a real parser (docs/openmetrics.md).

    openmetrics_check.py exposition PROGRAM   the hand-built report with hostile scope names
    openmetrics_check.py file PROGRAM         KSCOPE_METRICS in a running program: the file
                                              rewritten while it runs and at exit, an
                                              unwritable path, a bad interval, a fork
    openmetrics_check.py unmodified PROGRAM   the quickstart example, unchanged, run with
                                              KSCOPE_REPORT and KSCOPE_METRICS set: a valid
                                              report and an exposition the parser accepts

PROGRAM is tests/process/openmetrics_program.cpp. The parser is prometheus_client's
OpenMetrics parser (Debian: python3-prometheus-client); without it the test says so and
exits 77, which ctest shows as Skipped.
"""
import os
import subprocess
import sys
import tempfile
import time

try:
    from prometheus_client.openmetrics.parser import text_string_to_metric_families
except ImportError as e:
    print(f"kscope openmetrics_check: SKIPPED: no prometheus_client OpenMetrics parser in "
          f"{sys.executable} ({e}); apt-get install python3-prometheus-client")
    sys.exit(77)

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print(f"FAILED: {what}")


def parse(text):
    """Every family, by name; raises ValueError on anything the parser refuses."""
    return {f.name: f for f in text_string_to_metric_families(text)}


def samples(families, name, **labels):
    out = []
    for f in families.values():
        for s in f.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                out.append(s)
    return out


def run(program, *args, env_extra=None, timeout=60):
    env = dict(os.environ)
    for k in ("KSCOPE_METRICS", "KSCOPE_METRICS_INTERVAL", "RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK",
              "PMI_RANK", "SLURM_PROCID"):
        env.pop(k, None)
    env.update(env_extra or {})
    return subprocess.run([program, *args], env=env, capture_output=True, timeout=timeout)


def check_exposition(program):
    r = run(program, "hand-built")
    check(r.returncode == 0, f"hand-built exits 0 (got {r.returncode}: {r.stderr!r})")
    text = r.stdout.decode("utf-8")  # strict: invalid UTF-8 would raise here
    families = parse(text)
    print(f"parsed {len(families)} families, {sum(len(f.samples) for f in families.values())} samples")
    expected_types = {
        "kscope_build_info": "gauge",
        "kscope_scope_calls": "counter",
        "kscope_scope_host_seconds": "summary",
        "kscope_scope_gpu_seconds": "summary",
        "kscope_scope_kernels": "counter",
        "kscope_scope_copy_bytes": "counter",
        "kscope_scope_host_wait_seconds": "counter",
        "kscope_gpu_busy_ratio": "gauge",
        "kscope_traced_windows": "counter",
        "kscope_traced_seconds": "counter",
        "kscope_traced_ratio": "gauge",
        "kscope_gpu_idle_seconds": "gauge",
        "kscope_gpu_sampled_ratio": "gauge",
        "kscope_scope_sampled_value": "gauge",
    }
    for name, typ in expected_types.items():
        check(name in families and families[name].type == typ, f"{name} is a {typ}")
    check(families["kscope_scope_host_seconds"].unit == "seconds", "host time's unit is seconds")
    check(families["kscope_gpu_busy_ratio"].unit == "ratio", "busy share's unit is ratio")
    for f in families.values():
        check(f.name.startswith("kscope_"), f"{f.name} starts with kscope_")
        check(f.documentation != "", f"{f.name} has HELP")
        check(f.type != "unknown", f"{f.name} has a TYPE")

    build = samples(families, "kscope_build_info")
    check(len(build) == 1 and build[0].value == 1 and
          build[0].labels == {"version": "9.8.7", "device": "NVIDIA H200", "rank": "3"},
          f"build info: {build}")

    # The hostile name comes back exactly, U+FFFD for the invalid byte.
    hostile = 'step/say "hi"\nthen \\ go } # x \ufffd end'
    calls = samples(families, "kscope_scope_calls_total", scope=hostile)
    check(len(calls) == 1 and calls[0].value == 7, f"the hostile scope's calls read back: {calls}")
    quantiles = sorted(s.labels["quantile"] for s in samples(families, "kscope_scope_host_seconds", scope=hostile))
    check(quantiles == ["0.5", "0.99"], f"the hostile scope's p90 (NaN) is left out: {quantiles}")
    count = samples(families, "kscope_scope_host_seconds_count", scope=hostile)
    check(len(count) == 1 and count[0].value == 7, "the hostile scope's count")

    step = samples(families, "kscope_scope_host_seconds", scope="step", quantile="0.5")
    check(len(step) == 1 and abs(step[0].value - 0.002) < 1e-12, f"step's median in seconds: {step}")
    share = samples(families, "kscope_gpu_sampled_ratio", metric="sm__throughput.avg.pct_of_peak_sustained_elapsed")
    check(len(share) == 1 and share[0].value == 0.625, f"a percentage metric as a ratio: {share}")
    for f in families.values():
        for s in f.samples:
            check(s.value == s.value, f"no NaN: {s}")
            check(s.labels.get("rank") == "3", f"every series has the rank: {s}")


def read(path):
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def check_file(program):
    with tempfile.TemporaryDirectory(prefix="kscope_openmetrics_") as tmp:
        # 1. Rewritten while it runs, and once more at exit with every call.
        path = os.path.join(tmp, "engine.prom")
        env = dict(os.environ)
        for k in ("RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"):
            env.pop(k, None)
        env.update({"KSCOPE_METRICS": path, "KSCOPE_METRICS_INTERVAL": "0.2"})
        p = subprocess.Popen([program, "run", "1.2"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        seen_while_running = None
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline and seen_while_running is None:
            if os.path.exists(path):
                seen_while_running = read(path)
            time.sleep(0.02)
        out, err = p.communicate(timeout=60)
        check(p.returncode == 0, f"run exits 0 (got {p.returncode}: {err!r})")
        check(err == b"", f"nothing on stderr: {err!r}")
        check(seen_while_running is not None, "the file was written while the program ran")
        if seen_while_running is not None:
            families = parse(seen_while_running)
            check("kscope_scope_calls" in families, "the file written while running parses and has calls")
        final = parse(read(path))
        calls = samples(final, "kscope_scope_calls_total", scope="om_process/step")
        expected = int(out.decode().strip())
        check(len(calls) == 1 and calls[0].value == expected,
              f"the file written at exit has every call of om_process/step ({expected}): {calls}")
        outer = samples(final, "kscope_scope_calls_total", scope="om_process")
        check(len(outer) == 1 and outer[0].value == 1, f"and main's own scope, closed before exit: {outer}")
        leftovers = [n for n in os.listdir(tmp) if n != "engine.prom"]
        check(leftovers == [], f"no temporary file left: {leftovers}")

        # 2. A path that cannot be written: one line on stderr, the program unaffected.
        bad = os.path.join(tmp, "no such directory", "engine.prom")
        r = run(program, "run", "0.6", env_extra={"KSCOPE_METRICS": bad, "KSCOPE_METRICS_INTERVAL": "0.1"})
        lines = r.stderr.decode(errors="replace").splitlines()
        check(r.returncode == 0, f"an unwritable path: the program exits 0 (got {r.returncode})")
        check(r.stdout.strip() != b"", "an unwritable path: the program ran to its end")
        check(len(lines) == 1 and "KSCOPE_METRICS" in lines[0] and bad in lines[0]
              and "No such file or directory" in lines[0],
              f"an unwritable path: one line naming it: {lines}")

        # 3. A bad interval: one line naming the variable and the value; the default is used
        #    (no periodic file in 0.5 s), and the file is written at exit.
        path3 = os.path.join(tmp, "interval.prom")
        r = run(program, "run", "0.5", env_extra={"KSCOPE_METRICS": path3, "KSCOPE_METRICS_INTERVAL": "fast"})
        lines = r.stderr.decode(errors="replace").splitlines()
        check(r.returncode == 0, f"a bad interval: the program exits 0 (got {r.returncode})")
        check(len(lines) == 1 and 'KSCOPE_METRICS_INTERVAL="fast"' in lines[0] and "default" in lines[0],
              f"a bad interval: one line naming it: {lines}")
        check(os.path.exists(path3) and "om_process/step" in read(path3), "a bad interval: the file at exit")

        # 4. fork(): the child's exit neither hangs nor writes the parent's file.
        path4 = os.path.join(tmp, "fork.prom")
        r = run(program, "fork", "1.0", env_extra={"KSCOPE_METRICS": path4, "KSCOPE_METRICS_INTERVAL": "0.2"})
        check(r.returncode == 0, f"fork: the program exits 0 (got {r.returncode}: {r.stderr!r})")
        text = read(path4) if os.path.exists(path4) else ""
        check("om_child_only" not in text and "om_process/step" in text, "fork: the file is the parent's")
        parse(text)


def check_unmodified(program):
    """A program that knows nothing of either switch (examples/quickstart.cu, built as it
    is) writes its report and its metrics at exit from the environment alone."""
    import json
    with tempfile.TemporaryDirectory() as d:
        report_path = os.path.join(d, "run.json")
        metrics_path = os.path.join(d, "metrics.prom")
        env = {"KSCOPE_REPORT": report_path, "KSCOPE_METRICS": metrics_path, "KSCOPE_METRICS_INTERVAL": "1"}
        for k in ("KSCOPE", "KSCOPE_CUPTI", "KSCOPE_PRODUCTION"):
            os.environ.pop(k, None)
        # The quickstart writes its own report files into its working directory: the
        # temporary one, so the build tree stays clean.
        env_full = dict(os.environ)
        env_full.update(env)
        r = subprocess.run([program], env=env_full, cwd=d, capture_output=True, timeout=120)
        check(r.returncode == 0, f"the quickstart exits 0 (got {r.returncode}: {r.stderr[-400:]!r})")
        stderr = r.stderr.decode(errors="replace")
        check(report_path in stderr, f"one line on stderr says where the report went ({stderr[-400:]!r})")
        check(os.path.exists(report_path), "KSCOPE_REPORT: the report file exists")
        if os.path.exists(report_path):
            with open(report_path, encoding="utf-8") as f:
                report = json.load(f)
            check(str(report.get("schema", "")).startswith("kscope.report/"),
                  f"the report's schema is a kscope report ({report.get('schema')!r})")
            names = {s.get("name") for s in report.get("scopes", [])}
            for scope in ("request", "tokenize", "sample"):
                check(scope in names, f"the report has the quickstart's scope {scope!r} (has {sorted(names)[:12]})")
            request = [s for s in report.get("scopes", []) if s.get("name") == "request"]
            check(bool(request) and request[0].get("calls", 0) > 0, "the request scope has calls")
        check(os.path.exists(metrics_path), "KSCOPE_METRICS: the metrics file exists")
        if os.path.exists(metrics_path):
            families = parse(read(metrics_path))
            calls = samples(families, "kscope_scope_calls_total", scope="request")
            check(len(calls) == 1 and calls[0].value > 0,
                  f"the exposition counts the request scope's calls ({[c.value for c in calls]})")
            if request:
                check(len(calls) == 1 and calls[0].value == request[0].get("calls"),
                      "the exposition and the report agree on the request scope's calls")
        leftovers = [n for n in os.listdir(d) if ".tmp" in n or n.startswith(".")]
        check(not leftovers, f"no half-written file is left behind ({leftovers})")


def main():
    modes = {"exposition": check_exposition, "file": check_file, "unmodified": check_unmodified}
    if len(sys.argv) != 3 or sys.argv[1] not in modes:
        print(__doc__)
        return 2
    try:
        modes[sys.argv[1]](sys.argv[2])
    except ValueError as e:  # the parser refused the text
        failures.append(f"the parser refused it: {e}")
        print(f"FAILED: the parser refused it: {e}")
    if failures:
        print(f"kscope openmetrics_check {sys.argv[1]}: {len(failures)} failure(s)")
        return 1
    print(f"kscope openmetrics_check {sys.argv[1]}: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
