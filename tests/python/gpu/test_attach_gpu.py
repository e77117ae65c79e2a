"""When the activity collector attaches to a PyTorch program, on a GPU: `python -m kscope run
--attach driver` (kscope's library as the CUDA injection library, the collector started by the
driver inside cuInit), and tracing in windows with CUPTI detached between them (pause_detach).
Each runs the command on a small torch loop in a fresh interpreter and reads its JSON report.

Skipped, with the reason, without torch or a CUDA device.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch", reason="kscope python gpu tests: SKIPPED: PyTorch is not installed")
if not torch.cuda.is_available():
    pytest.skip("kscope python gpu tests: SKIPPED: no CUDA device (torch.cuda.is_available() is False)",
                allow_module_level=True)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
STEPS = 20

# Three element-wise kernels a step (eager torch fuses nothing): x * 2, + 1, relu.
LOOP = f"""
    import torch
    import kscope
    x = torch.ones(1 << 16, device="cuda")
    torch.cuda.synchronize()
    for _ in range({STEPS}):
        with kscope.scope("step"):
            y = (x * 2 + 1).relu()
            torch.cuda.synchronize()
"""


def run_loop(tmp_path, args):
    script = tmp_path / "loop.py"
    script.write_text(textwrap.dedent(LOOP))
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join([os.path.join(ROOT, "python"), environment.get("PYTHONPATH", "")])
    for name in ("KSCOPE_REPORT", "KSCOPE_CUPTI_OPTIONS", "KSCOPE_PRODUCTION", "KSCOPE_CUPTI", "KSCOPE_INJECTION",
                 "CUDA_INJECTION64_PATH"):
        environment.pop(name, None)
    out = subprocess.run([sys.executable, "-m", "kscope", "run", *args, "--report", "run.json", str(script)],
                         cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-4000:]
    with open(tmp_path / "run.json") as f:
        data = json.load(f)
    step = next((s for s in data["scopes"] if s["path"] == "step"), None)
    assert step is not None, [s["path"] for s in data["scopes"]]
    return data, step, out


def test_attached_at_the_drivers_start_every_kernel_goes_to_its_scope(tmp_path):
    data, step, _ = run_loop(tmp_path, ["--attach", "driver"])
    status = data["cupti"]["status"]
    # The driver called kscope's InitializeInjection: on a GPU machine a collector that did not
    # start there is a failure, never a pass.
    assert "attached at the driver's start" in status, status
    assert step["calls"] == STEPS
    assert (step.get("gpu_activity") or {}).get("kernel_count") == 3 * STEPS, step
    assert data["cupti"]["counters"]["unattributed"] == 0, data["cupti"]["counters"]


def test_windows_with_cupti_detached_between_them_attribute_every_traced_step(tmp_path):
    data, step, _ = run_loop(tmp_path, ["--cupti-options", "trace_steps=1/4,step_scope=step,pause_detach=1"])
    status = data["cupti"]["status"]
    assert "CUPTI detached at " in status, status
    detaches = int(status.split("CUPTI detached at ", 1)[1].split()[0])
    assert detaches >= 3, status  # 20 steps, a window of 1 in every 4: a pause every 4 steps
    kernels = (step.get("gpu_activity") or {}).get("kernel_count", 0)
    assert kernels > 0 and kernels % 3 == 0, step  # whole steps only: nothing cut at a detach
    assert kernels < 3 * STEPS, step  # steps between windows made no record
    assert data["cupti"]["counters"]["unattributed"] == 0, data["cupti"]["counters"]
