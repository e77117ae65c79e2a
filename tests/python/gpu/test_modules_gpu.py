"""kscope.torch's module scopes on a GPU: a scope per module call whose GPU time agrees with
torch.cuda.Event timings of the same calls, and the kernels of a torch.compile'd module and
of a replayed CUDA graph attributed to the scopes they belong to.

Each scenario runs in a fresh interpreter (CUPTI is subscribed once per process):

    python3 test_modules_gpu.py SCENARIO      prints one JSON line, the scenario's numbers, last
    python3 test_modules_gpu.py               runs every check without pytest (exit 1 on a failure)

Skipped, with the reason, without torch or a CUDA device.
"""

import json
import os
import subprocess
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
CALLS = 20       # measured forwards per scenario, after the warm-up
AGREEMENT = 0.03  # the bound: each scope's GPU time within 3 % of torch's events
# cudaEventElapsedTime resolves about 0.5 us: two pairs of one call may differ by ~1 us.
EVENT_RESOLUTION_NS = 1000.0

if __name__ != "__main__":
    import pytest

    torch = pytest.importorskip("torch", reason="kscope python gpu tests: SKIPPED: PyTorch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("kscope python gpu tests: SKIPPED: no CUDA device (torch.cuda.is_available() is False)",
                    allow_module_level=True)


# ---- the scenarios (run in their own interpreter) -------------------------------------------


def _model(torch):
    """GPU-bound: every module launches about a millisecond or more of work on an H100 (fp16
    matmuls of 8192 x 4096 x 16384, a GELU over 128 M elements), far above the host's cost of
    a hook, so the GPU queue never runs dry and each scope's events bracket only GPU work."""
    nn = torch.nn

    class MLP(nn.Module):
        def __init__(self, hidden):
            super().__init__()
            self.up = nn.Linear(hidden, 4 * hidden)
            self.act = nn.GELU()
            self.down = nn.Linear(4 * hidden, hidden)

        def forward(self, x):
            return self.down(self.act(self.up(x)))

    class Model(nn.Module):
        def __init__(self, hidden=4096, layers=2):
            super().__init__()
            self.blocks = nn.ModuleList(MLP(hidden) for _ in range(layers))
            self.head = nn.Linear(hidden, hidden)

        def forward(self, x):
            for block in self.blocks:
                x = x + block(x)
            return self.head(x)

    model = Model().to("cuda", torch.float16).eval()
    x = torch.randn(8192, 4096, device="cuda", dtype=torch.float16)
    return model, x


def _event_hooks(torch, model):
    """torch.cuda.Event pairs around every module call, from hooks registered before
    kscope's: kscope's pre-hook goes first among pre-hooks and its closing hook last, so
    kscope's pair brackets torch's. Returns {path: [(begin, end), ...]}."""
    pairs = {}
    for path, module in model.named_modules():
        def pre(m, args, path=path):
            begin = torch.cuda.Event(enable_timing=True)
            begin.record()
            pairs.setdefault(path, []).append([begin, None])

        def post(m, args, out, path=path):
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            pairs[path][-1][1] = end
        module.register_forward_pre_hook(pre)
        module.register_forward_hook(post)
    return pairs


def _activity(scope):
    a = (scope or {}).get("gpu_activity") or {}
    return dict(kernel_count=a.get("kernel_count", 0), busy_ns=a.get("busy_ns", 0),
                graph_capture=[dict(captured_in=g.get("captured_in"), kernels=g.get("kernels"))
                               for g in a.get("graph_capture") or []])


def _scope_path(path):
    """The scope path of a module path of _model's Model: the ModuleList is never called, so
    a block is named by its path below the root (`blocks.0`), and its parts below it."""
    if not path:
        return "Model"
    parts = path.split(".")
    if parts[0] == "blocks":
        parts = ["blocks." + parts[1]] + parts[2:]
    return "/".join(["Model"] + parts)


def eager():
    """A scope per module, each module's GPU time from kscope's events against torch's."""
    import torch
    import kscope
    import kscope.torch
    started = kscope.enable_cupti()
    model, x = _model(torch)
    pairs = _event_hooks(torch, model)
    scopes = kscope.torch.instrument(model, name="Model")
    with torch.inference_mode():
        for _ in range(3):  # cuBLAS handles, kernels loaded
            model(x)
        torch.cuda.synchronize()
        kscope.reset()
        pairs.clear()
        for _ in range(CALLS):
            model(x)
        torch.cuda.synchronize()
    r = kscope.report()
    modules = {}
    for path, calls in pairs.items():
        s = r.find(_scope_path(path))
        modules[path] = dict(found=s is not None, calls=s["calls"] if s else 0, gpu_calls=s["gpu_calls"] if s else 0,
                             kscope_event_ns=s["gpu_total_ns"] if s else 0.0,
                             torch_calls=len(calls), torch_event_ns=sum(b.elapsed_time(e) for b, e in calls) * 1e6,
                             **_activity(s))
    scopes.remove()
    return dict(cupti_started=started, cupti_status=r.data["cupti"]["status"], modules=modules,
                scope_paths=[s["path"] for s in r.scopes], text=r.text())


def compiled():
    """torch.compile(model) instrumented: one scope at the compiled boundary, holding the
    compiled graph's kernels. Also what happens when the model is instrumented first and
    compiled afterwards (recorded, not checked: it depends on how dynamo treats the hooks)."""
    import torch
    import kscope
    import kscope.torch
    started = kscope.enable_cupti()
    model, x = _model(torch)
    try:
        compiled_model = torch.compile(model)
        with torch.inference_mode():
            compiled_model(x)
            torch.cuda.synchronize()
    except Exception as e:  # no compiler toolchain (triton, a C compiler) on this machine
        return dict(compile_error=f"{type(e).__name__}: {e}")
    scopes = kscope.torch.instrument(compiled_model, name="Compiled")
    with torch.inference_mode():
        for _ in range(2):
            compiled_model(x)
        torch.cuda.synchronize()
        kscope.reset()
        for _ in range(CALLS):
            compiled_model(x)
        torch.cuda.synchronize()
    scopes.remove()
    r = kscope.report()
    boundary = r.find("Compiled")
    result = dict(cupti_started=started, compiled_paths=list(scopes.compiled),
                  calls=boundary["calls"] if boundary else 0, gpu_calls=boundary["gpu_calls"] if boundary else 0,
                  boundary=_activity(boundary),
                  inside=[s["path"] for s in r.scopes if s["path"].startswith("Compiled/")])

    # Instrumented first, compiled afterwards.
    later_model, _ = _model(torch)
    later_scopes = kscope.torch.instrument(later_model, name="Later")
    later = torch.compile(later_model)
    with torch.inference_mode():
        with kscope.scope("outer"):
            later(x)
            torch.cuda.synchronize()
        kscope.reset()
        with kscope.scope("outer"):
            for _ in range(3):
                later(x)
            torch.cuda.synchronize()
    later_scopes.remove()
    r = kscope.report()
    result["instrumented_then_compiled"] = {s["path"]: dict(calls=s["calls"], **_activity(s))
                                            for s in r.scopes if s["path"].startswith("outer")}
    return result


def graph():
    """An instrumented model captured into a torch CUDA graph and replayed: the capture
    succeeds (the module scopes record no CUDA event into it), and the replayed kernels go
    to the scope open at the replay, which names the module scopes that captured them."""
    import torch
    import kscope
    import kscope.torch
    started = kscope.enable_cupti()
    model, x = _model(torch)
    scopes = kscope.torch.instrument(model, name="Model")
    with torch.inference_mode():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up off the default stream, as torch asks before a capture
            for _ in range(3):
                model(x)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        capture_error = ""
        try:
            with kscope.scope("capture"):
                with torch.cuda.graph(g):
                    model(x)
            torch.cuda.synchronize()
        except Exception as e:
            capture_error = f"{type(e).__name__}: {e}"
        if not capture_error:
            for _ in range(CALLS):
                with kscope.scope("replay", stream="current"):
                    g.replay()
            torch.cuda.synchronize()
            model(x)  # eager again after the capture: stream scopes time it
            torch.cuda.synchronize()
    scopes.remove()
    deep_error = _deep_capture(torch, kscope)
    r = kscope.report()
    replay = r.find("replay")
    captured = {s["path"]: dict(calls=s["calls"], gpu_calls=s["gpu_calls"]) for s in r.scopes
                if s["path"].startswith("capture/")}
    after = r.find("Model/head")
    return dict(cupti_started=started, capture_error=capture_error, deep_capture_error=deep_error,
                replay=_activity(replay),
                replay_calls=replay["calls"] if replay else 0, captured=captured,
                eager_after=dict(calls=after["calls"], gpu_calls=after["gpu_calls"]) if after else None,
                warnings=r.warnings)


def _deep_capture(torch, kscope):
    """A capture with more module scopes than a thread's record ring holds (1024): the ring
    fills during the capture, and kscope then reads the finished CUDA events of the calls
    before it. Under torch's default global capture mode a call the driver deems unsafe
    (an event query) would invalidate the capture. Returns the capture's error, or ""."""
    class AddOne(torch.nn.Module):
        def forward(self, x):
            return x + 1

    deep = torch.nn.Sequential(*[AddOne() for _ in range(700)])
    y = torch.zeros(1024, device="cuda")
    scopes = kscope.torch.instrument(deep, name="Deep")
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):  # stream scopes: CUDA events pending in kscope's recorder
                deep(y)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            deep(y)
        g.replay()
        torch.cuda.synchronize()
        return ""
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    finally:
        scopes.remove()


SCENARIOS = {"eager": eager, "compiled": compiled, "graph": graph}


# ---- the checks --------------------------------------------------------------------------

_results = {}


def run_scenario(name, timeout=900):
    if name in _results:
        return _results[name]
    out = subprocess.run([sys.executable, os.path.abspath(__file__), name], capture_output=True, text=True,
                         timeout=timeout, env=dict(os.environ))
    assert out.returncode == 0, f"scenario {name} failed:\n{out.stdout[-4000:]}\n{out.stderr[-4000:]}"
    result = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"\n[{name}] " + json.dumps({k: v for k, v in result.items() if k != "text"}, indent=1, default=str))
    _results[name] = result
    return result


def check_a_scope_per_module_within_3_percent_of_torch_events():
    e = run_scenario("eager")
    assert e["cupti_started"], e["cupti_status"]
    called = {p: m for p, m in e["modules"].items() if m["torch_calls"]}
    # Every module torch called has its scope (the ModuleList is never called: none).
    assert set(called) == {"", "blocks.0", "blocks.0.up", "blocks.0.act", "blocks.0.down", "blocks.1",
                           "blocks.1.up", "blocks.1.act", "blocks.1.down", "head"}, sorted(called)
    for path, m in called.items():
        assert m["found"], (path, e["scope_paths"])
        assert m["calls"] == m["torch_calls"] == CALLS and m["gpu_calls"] == CALLS, (path, m)
        difference = m["kscope_event_ns"] - m["torch_event_ns"]
        # kscope's pair brackets torch's: never shorter (less the events' resolution).
        assert difference >= -EVENT_RESOLUTION_NS * m["calls"], (path, m)
        assert abs(difference) <= AGREEMENT * m["torch_event_ns"], (
            path, f"kscope {m['kscope_event_ns']:.0f} ns, torch {m['torch_event_ns']:.0f} ns: "
                  f"{100 * difference / m['torch_event_ns']:.2f} %", m)
        # CUPTI attributed each module's own kernels to it (gpu_activity excludes the children's):
        # a block launches nothing itself, its up, act and down do; the root adds the residuals.
        if path in ("blocks.0", "blocks.1"):
            assert m["kernel_count"] == 0, (path, m)
        else:
            assert m["kernel_count"] > 0, (path, m)
    # A leaf's kernels run inside its events: their busy time cannot exceed the events' (1 %
    # for the two clocks), and the matmuls keep the GPU busy for most of it.
    for path in ("blocks.0.up", "blocks.1.down", "head"):
        m = called[path]
        assert 0.9 * m["torch_event_ns"] <= m["busy_ns"] <= 1.01 * m["torch_event_ns"], (path, m)
    # Nesting mirrors the module tree.
    assert "Model/blocks.0/up" in e["scope_paths"] and "Model/blocks.1/act" in e["scope_paths"]


def check_compiled_module_kernels_in_its_boundary_scope():
    c = run_scenario("compiled")
    if c.get("compile_error"):
        _skip(f"torch.compile does not work here: {c['compile_error']}")
    assert c["cupti_started"]
    assert c["compiled_paths"] == [""]
    assert c["calls"] == CALLS and c["gpu_calls"] == CALLS, c
    assert c["boundary"]["kernel_count"] > 0, c
    assert c["inside"] == [], c  # the compiled region is one scope


def check_cuda_graph_kernels_go_to_the_replaying_scope():
    g = run_scenario("graph")
    assert g["capture_error"] == "", g["capture_error"]  # instrumenting does not break the capture
    # Nor one with more scopes than a thread's record ring holds (kscope drains it mid-capture).
    assert g["deep_capture_error"] == "", g["deep_capture_error"]
    assert g["cupti_started"]
    assert g["replay_calls"] == CALLS
    assert g["replay"]["kernel_count"] > 0, g
    # The module scopes open during the capture: host time only (no event into the capture).
    assert g["captured"].get("capture/Model/blocks.0/up", {}).get("calls") == 1, g["captured"]
    assert all(v["gpu_calls"] == 0 for v in g["captured"].values()), g["captured"]
    # The replay's kernels were built inside the module scopes: the report says which.
    built_in = {x["captured_in"] for x in g["replay"]["graph_capture"]}
    assert any(p.startswith("capture/Model/") for p in built_in), g["replay"]
    # After the capture, eager calls are timed on their stream again.
    assert g["eager_after"] and g["eager_after"]["gpu_calls"] >= 1, g


def _skip(reason):
    if "pytest" in sys.modules:
        import pytest
        pytest.skip(reason)
    raise _Skipped(reason)


class _Skipped(Exception):
    pass


CHECKS = [check_a_scope_per_module_within_3_percent_of_torch_events,
          check_compiled_module_kernels_in_its_boundary_scope,
          check_cuda_graph_kernels_go_to_the_replaying_scope]


# ---- pytest ----------------------------------------------------------------------------------


def test_a_scope_per_module_within_3_percent_of_torch_events():
    check_a_scope_per_module_within_3_percent_of_torch_events()


def test_compiled_module_kernels_in_its_boundary_scope():
    check_compiled_module_kernels_in_its_boundary_scope()


def test_cuda_graph_kernels_go_to_the_replaying_scope():
    check_cuda_graph_kernels_go_to_the_replaying_scope()


# ---- without pytest ---------------------------------------------------------------------------


def main(argv):
    if len(argv) > 1:
        print(json.dumps(SCENARIOS[argv[1]](), default=str))
        return 0
    try:
        import torch
    except ImportError:
        print("kscope python gpu tests: SKIPPED: PyTorch is not installed")
        return 77
    if not torch.cuda.is_available():
        print("kscope python gpu tests: SKIPPED: no CUDA device")
        return 77
    failed = 0
    for check in CHECKS:
        try:
            check()
            print(f"PASS {check.__name__}")
        except _Skipped as s:
            print(f"SKIP {check.__name__}: {s}")
        except Exception:
            failed += 1
            print(f"FAIL {check.__name__}\n{traceback.format_exc()}")
    print(f"{len(CHECKS) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
