"""python -m kscope run: a program left as it is, run with kscope on, its report written at
exit. Each test runs the command in a fresh interpreter on a small script of its own."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT

FAKE_TORCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_torch")


def run_kscope(args, cwd, extra_path=(), env=None, timeout=120):
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join([os.path.join(ROOT, "python"), *extra_path])
    environment.pop("KSCOPE_REPORT", None)
    if env:
        environment.update(env)
    return subprocess.run([sys.executable, "-m", "kscope", "run", *args], cwd=cwd, env=environment,
                          capture_output=True, text=True, timeout=timeout)


def write(path, text):
    path.write_text(textwrap.dedent(text))
    return path


SCRIPT = """
    import atexit, json, sys, threading, time
    import kscope

    print(json.dumps({"argv": sys.argv, "name": __name__, "path0": sys.path[0]}))
    for _ in range(4):
        with kscope.scope("work"):
            time.sleep(0.001)

    def late():
        time.sleep(0.2)
        with kscope.scope("late_thread"):  # a thread still running when the script ends
            pass
    threading.Thread(target=late).start()

    @atexit.register
    def the_programs_own_exit_handler():
        with kscope.scope("at_exit"):
            pass

    if "--fail" in sys.argv:
        raise RuntimeError("the script failed")
    sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 0)
"""


def report_paths(path):
    with open(path) as f:
        data = json.load(f)
    assert data["schema"] == "kscope.report/2"
    return {s["path"]: s for s in data["scopes"]}


def test_the_report_is_written_at_exit_with_the_scripts_exit_code_and_arguments(tmp_path):
    script = write(tmp_path / "prog.py", SCRIPT)
    out = run_kscope(["--no-cupti", "--report", "run.json", str(script), "7", "--flag", "-x"], cwd=tmp_path)
    assert out.returncode == 7, out.stderr
    seen = json.loads(out.stdout.splitlines()[0])
    assert seen["argv"] == [str(script), "7", "--flag", "-x"]  # the script's own options untouched
    assert seen["name"] == "__main__"
    assert seen["path0"] == str(tmp_path)
    scopes = report_paths(tmp_path / "run.json")
    assert scopes["work"]["calls"] == 4
    # Written after the program's threads ended and its own exit handlers ran.
    assert scopes["late_thread"]["calls"] == 1
    assert scopes["at_exit"]["calls"] == 1
    assert "kscope: wrote" in out.stderr


def test_a_script_that_raises_exits_1_and_still_gets_its_report(tmp_path):
    script = write(tmp_path / "prog.py", SCRIPT)
    out = run_kscope(["--no-cupti", "-o", str(tmp_path / "r.json"), str(script), "--fail"], cwd=tmp_path)
    assert out.returncode == 1
    assert "RuntimeError: the script failed" in out.stderr
    assert report_paths(tmp_path / "r.json")["work"]["calls"] == 4


@pytest.mark.parametrize("fmt,suffix,marker", [
    ("html", ".html", "<html"), ("csv", ".csv", "path,depth,calls"), ("json", ".json", '"kscope.report/2"'),
    ("text", ".txt", "scope "), ("openmetrics", ".prom", "# EOF"),
])
def test_each_format_by_option_or_by_suffix(tmp_path, fmt, suffix, marker):
    script = write(tmp_path / "prog.py", SCRIPT)
    by_suffix = tmp_path / ("by_suffix" + suffix)
    assert run_kscope(["--no-cupti", "--report", str(by_suffix), str(script)], cwd=tmp_path).returncode == 0
    by_option = tmp_path / "by_option.out"
    assert run_kscope(["--no-cupti", "--format", fmt, "--report", str(by_option), str(script)],
                      cwd=tmp_path).returncode == 0
    for path in (by_suffix, by_option):
        text = path.read_text()
        assert marker in text, (path, text[:300])
        assert "work" in text


def test_without_a_path_the_text_report_and_diagnosis_go_to_stdout(tmp_path):
    script = write(tmp_path / "prog.py", SCRIPT)
    out = run_kscope(["--no-cupti", "--diagnose", str(script)], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "scope " in out.stdout and "work" in out.stdout
    assert "Diagnosis" in out.stdout
    # The report comes after everything the program printed.
    assert out.stdout.index('"argv"') < out.stdout.index("work ")


def test_a_module_runs_with_dash_m(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    write(package / "tool.py", """
        import sys, kscope
        with kscope.scope("tool_work"):
            print("tool", __name__, sys.argv[1:])
        sys.exit(3)
    """)
    out = run_kscope(["--no-cupti", "--report", "m.json", "-m", "pkg.tool", "a", "--b"], cwd=tmp_path,
                     extra_path=[str(tmp_path)])
    assert out.returncode == 3, out.stderr
    assert "tool __main__ ['a', '--b']" in out.stdout
    assert report_paths(tmp_path / "m.json")["tool_work"]["calls"] == 1


def test_options_after_the_script_are_the_scripts(tmp_path):
    script = write(tmp_path / "prog.py", SCRIPT)
    out = run_kscope(["--no-cupti", "--", str(script), "--report", "not_ours.json"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.splitlines()[0])["argv"][1:] == ["--report", "not_ours.json"]
    assert not (tmp_path / "not_ours.json").exists()


def test_the_collector_that_cannot_start_says_so_and_the_program_runs(tmp_path):
    script = write(tmp_path / "prog.py", SCRIPT)
    out = run_kscope(["--report", "c.json", str(script)], cwd=tmp_path)  # --cupti is the default
    assert out.returncode == 0, out.stderr
    assert report_paths(tmp_path / "c.json")["work"]["calls"] == 4
    data = json.loads((tmp_path / "c.json").read_text())
    if data["context"].get("gpu") is None:
        assert "kscope run: kscope.enable_cupti:" in out.stderr  # one line, not a traceback
        assert "Traceback" not in out.stderr


def test_modules_gives_every_torch_module_a_scope(tmp_path):
    write(tmp_path / "model.py", """
        import sys, torch

        class Leaf(torch.nn.Module):
            def forward(self, x):
                return x + 1

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.body = torch.nn.Sequential(Leaf(), Leaf())
                self.head = Leaf()

            def forward(self, x):
                return self.head(self.body(x))

        net = Net()
        for _ in range(3):
            assert net(0) == 3
    """)
    out = run_kscope(["--no-cupti", "--modules", "--report", "mod.json", "model.py"], cwd=tmp_path,
                     extra_path=[FAKE_TORCH])
    assert out.returncode == 0, out.stderr
    scopes = report_paths(tmp_path / "mod.json")
    assert {p: s["calls"] for p, s in scopes.items()} == {"Net": 3, "Net/body": 3, "Net/body/0": 3,
                                                          "Net/body/1": 3, "Net/head": 3}
    out = run_kscope(["--no-cupti", "--module-depth", "1", "--report", "d.json", "model.py"], cwd=tmp_path,
                     extra_path=[FAKE_TORCH])
    assert out.returncode == 0, out.stderr
    assert sorted(report_paths(tmp_path / "d.json")) == ["Net", "Net/body", "Net/head"]


def test_usage_errors_exit_2(tmp_path):
    assert run_kscope([], cwd=tmp_path).returncode == 2
    out = run_kscope(["--no-cupti", str(tmp_path / "missing.py")], cwd=tmp_path)
    assert out.returncode == 2 and "no such script" in out.stderr
    assert run_kscope(["--format", "pdf", "x.py"], cwd=tmp_path).returncode == 2
    help_text = run_kscope(["--help"], cwd=tmp_path)
    assert help_text.returncode == 0 and "--report" in help_text.stdout


def test_without_the_library_the_program_still_runs_and_keeps_its_exit_code(tmp_path):
    script = write(tmp_path / "prog.py", SCRIPT)
    out = run_kscope(["--no-cupti", "--report", "none.json", str(script), "5"], cwd=tmp_path,
                     env={"KSCOPE_LIBRARY": str(tmp_path / "no_such_libkscope_c.so")})
    assert out.returncode == 5
    assert "kscope run: no report:" in out.stderr
    assert not (tmp_path / "none.json").exists()


ENV_SCRIPT = """
    import json, os
    names = ("CUDA_INJECTION64_PATH", "KSCOPE_INJECTION", "KSCOPE_CUPTI_OPTIONS")
    print(json.dumps({name: os.environ.get(name) for name in names}))
"""


def test_attach_driver_runs_the_program_and_leaves_its_environment_as_it_was(tmp_path):
    # --attach driver makes kscope's library the CUDA injection library for the driver's start
    # (done before the program runs); the program and its children then see none of it.
    script = write(tmp_path / "env.py", ENV_SCRIPT)
    out = run_kscope(["--attach", "driver", "--cupti-options", "sync=0", "--report", "run.json", str(script)],
                     cwd=tmp_path, env={"KSCOPE_CUPTI_OPTIONS": "memset=0"})
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.splitlines()[0])
    assert seen == {"CUDA_INJECTION64_PATH": None, "KSCOPE_INJECTION": None, "KSCOPE_CUPTI_OPTIONS": "memset=0"}
    assert (tmp_path / "run.json").exists()


def test_production_takes_the_collectors_options_late_and_leaves_the_environment_as_it_was(tmp_path):
    # The preset has no options argument: --cupti-options reaches its collector through
    # KSCOPE_CUPTI_OPTIONS during the start only (an option it does not know is named in the
    # report's warnings, GPU or not), and the program sees the variable as the user set it.
    script = write(tmp_path / "env.py", ENV_SCRIPT)
    out = run_kscope(["--production", "--cupti-options", "no_such_option=1", "--report", "run.json", str(script)],
                     cwd=tmp_path, env={"KSCOPE_CUPTI_OPTIONS": "memset=0"})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.splitlines()[0])["KSCOPE_CUPTI_OPTIONS"] == "memset=0"
    with open(tmp_path / "run.json") as f:
        warnings = json.dumps(json.load(f).get("warnings", []))
    assert "no_such_option=1" in warnings, warnings


def test_attach_driver_with_another_injection_library_attaches_late_and_says_so(tmp_path):
    script = write(tmp_path / "env.py", ENV_SCRIPT)
    theirs = str(tmp_path / "their_injection.so")  # never loaded: no driver starts here, or it fails to load
    out = run_kscope(["--attach", "driver", "--no-cupti", str(script)], cwd=tmp_path,
                     env={"CUDA_INJECTION64_PATH": theirs})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.splitlines()[0])["CUDA_INJECTION64_PATH"] == theirs  # scopes only: untouched
    out = run_kscope(["--attach", "driver", str(script)], cwd=tmp_path, env={"CUDA_INJECTION64_PATH": theirs})
    assert "CUDA_INJECTION64_PATH already names" in out.stderr
    assert json.loads(out.stdout.splitlines()[0])["CUDA_INJECTION64_PATH"] == theirs


def test_attach_takes_late_or_driver_only(tmp_path):
    script = write(tmp_path / "env.py", ENV_SCRIPT)
    out = run_kscope(["--attach", "early", str(script)], cwd=tmp_path)
    assert out.returncode == 2
    assert "--attach" in out.stderr


INJECTION_SCRIPT = """
    import ctypes, json, os, sys
    import kscope
    libc = ctypes.CDLL(None)
    libc.getenv.restype = ctypes.c_char_p
    os.environ["KSCOPE_INJECTION"] = sys.argv[1]
    os.environ["CUDA_INJECTION64_PATH"] = kscope.library_path
    rc = ctypes.CDLL(kscope.library_path).InitializeInjection()  # as the driver calls it
    data = kscope.report().data
    print(json.dumps({"rc": rc,
                      "left": [n for n in ("KSCOPE_INJECTION", "CUDA_INJECTION64_PATH") if libc.getenv(n.encode())],
                      "status": data.get("cupti", {}).get("status", ""),
                      "warnings": [w for w in data.get("warnings", []) if "KSCOPE_INJECTION" in w]}))
"""


@pytest.mark.parametrize("mode", ["cupti", "production", "bogus"])
def test_the_injection_entry_clears_its_variables_and_never_fails_the_program(tmp_path, mode):
    # What the driver calls inside cuInit when CUDA_INJECTION64_PATH names libkscope_c.so. Here,
    # with no driver started: nothing may hang or crash, the variables are gone from the process's
    # environment (children inherit none), and a mode not understood is named in the report.
    script = write(tmp_path / "inject.py", INJECTION_SCRIPT)
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.path.join(ROOT, "python")
    out = subprocess.run([sys.executable, str(script), mode], cwd=tmp_path, env=environment,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.splitlines()[-1])
    assert seen["rc"] == 1
    assert seen["left"] == []
    if mode == "bogus":
        assert seen["warnings"] and "'bogus'" in seen["warnings"][0], seen
    else:
        assert seen["warnings"] == []
        if not os.path.exists("/dev/nvidia0"):  # no GPU: the collector did not claim to run
            assert "attached at the driver's start" not in seen["status"], seen
