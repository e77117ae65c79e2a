"""kscope.torch: module scopes through forward hooks, checked with a stand-in torch
(tests/python/fake_torch: nn.Module with torch's hook semantics), so they run without
PyTorch. Each test's scopes are under a root of its own name (the session is the process's).
"""

import os
import sys
import threading

import pytest

import kscope
import kscope.torch as kt
from conftest import find

FAKE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_torch")


def _torch_modules():
    return {k: v for k, v in sys.modules.items() if k == "torch" or k.startswith("torch.")}


@pytest.fixture
def torch():
    """The stand-in torch as `torch` for one test (a real torch imported by other tests is
    put back afterwards)."""
    saved = _torch_modules()
    for k in saved:
        del sys.modules[k]
    sys.path.insert(0, FAKE_DIR)
    try:
        import torch as fake
        assert getattr(fake, "FAKE", False), fake
        yield fake
    finally:
        sys.path.remove(FAKE_DIR)
        for k in _torch_modules():
            del sys.modules[k]
        sys.modules.update(saved)
        kt._default_stream = None


@pytest.fixture(params=["torch2", "legacy"])
def any_torch(request, torch):
    """The stand-in as torch >= 2.1 (always_call) and as torch 1.13 (no always_call)."""
    torch.LEGACY = request.param == "legacy"
    return torch


def models(torch):
    """A small model: embed, two blocks (attn with q and k, an mlp Sequential), head."""
    nn = torch.nn

    class Leaf(nn.Module):
        def __init__(self, fail=False):
            super().__init__()
            self.fail = fail

        def forward(self, x):
            if self.fail:
                raise ValueError("leaf failed")
            return x + 1

    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            self.q = Leaf()
            self.k = Leaf()

        def forward(self, x):
            return self.q(x) + self.k(x)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = Attn()
            self.mlp = nn.Sequential(Leaf(), Leaf())

        def forward(self, x):
            return self.mlp(self.attn(x))

    class Model(nn.Module):
        def __init__(self, blocks=2):
            super().__init__()
            self.embed = Leaf()
            self.layers = nn.ModuleList([Block() for _ in range(blocks)])
            self.head = Leaf()

        def forward(self, x):
            x = self.embed(x)
            for layer in self.layers:
                x = layer(x)
            return self.head(x)

    return Leaf, Attn, Block, Model


def paths_under(report, root):
    return {s["path"]: s for s in report.scopes if s["path"] == root or s["path"].startswith(root + "/")}


FULL = ["", "/embed", "/head"] + [f"/layers.{i}{p}" for i in range(2)
                                  for p in ("", "/attn", "/attn/q", "/attn/k", "/mlp", "/mlp/0", "/mlp/1")]


def test_a_scope_per_module_call_named_by_its_path(torch, name):
    _, _, _, Model = models(torch)
    model = Model()
    expected = model(1)
    scopes = kt.instrument(model, name=name)
    for _ in range(3):
        assert model(1) == expected == 21  # the hooks change nothing
    r = kscope.report()
    got = paths_under(r, name)
    assert sorted(got) == sorted(name + p for p in FULL)
    assert all(s["calls"] == 3 for s in got.values()), {p: s["calls"] for p, s in got.items()}
    # The ModuleList is never called: it has a hook and no scope.
    assert "layers" in scopes.paths and find(r, name + "/layers") is None
    scopes.remove()


def test_nesting_mirrors_the_module_tree(torch, name):
    _, _, _, Model = models(torch)
    model = Model()
    with kt.instrument(model, name=name):
        model(0)
    r = kscope.report()
    for path in FULL[1:]:
        child = find(r, name + path)
        parent = find(r, (name + path).rsplit("/", 1)[0])
        assert child["parent"] == parent["id"] and child["depth"] == parent["depth"] + 1, path
    assert find(r, name)["host_inclusive_ns"] >= find(r, name + "/layers.0")["host_inclusive_ns"]


def test_default_root_name_is_the_class_name(torch, name):
    Leaf, _, _, _ = models(torch)

    class Unusual_Root_For_This_Test(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Leaf()

        def forward(self, x):
            return self.inner(x)

    model = Unusual_Root_For_This_Test()
    with kscope.scope(name):
        with kt.instrument(model) as scopes:
            model(0)
    assert scopes.name == "Unusual_Root_For_This_Test"
    assert find(kscope.report(), name + "/Unusual_Root_For_This_Test/inner")["calls"] == 1


@pytest.mark.parametrize("depth,expected", [
    (0, [""]),
    (1, ["", "/embed", "/head"]),
    (2, ["", "/embed", "/head", "/layers.0", "/layers.1"]),
    (3, ["", "/embed", "/head"] + [f"/layers.{i}{p}" for i in range(2) for p in ("", "/attn", "/mlp")]),
])
def test_max_depth_counts_module_levels_below_the_root(torch, name, depth, expected):
    _, _, _, Model = models(torch)
    model = Model()
    with kt.instrument(model, name=name, max_depth=depth):
        model(0)
    assert sorted(paths_under(kscope.report(), name)) == sorted(name + p for p in expected)


def test_exclude_prunes_a_subtree_by_path_type_or_class_name(torch, name):
    Leaf, Attn, _, Model = models(torch)
    model = Model()
    with kt.instrument(model, name=name + "_path", exclude="layers.*.mlp"):
        model(0)
    got = paths_under(kscope.report(), name + "_path")
    assert not any("/mlp" in p for p in got) and name + "_path/layers.1/attn/k" in got

    with kt.instrument(model, name=name + "_type", exclude=[Attn, "embed"]):
        model(0)
    got = paths_under(kscope.report(), name + "_type")
    assert not any("/attn" in p or "/embed" in p for p in got) and name + "_type/layers.0/mlp/1" in got

    with kt.instrument(model, name=name + "_class", exclude="Leaf"):
        model(0)
    got = sorted(p[len(name + "_class"):] for p in paths_under(kscope.report(), name + "_class"))
    assert got == ["", "/layers.0", "/layers.0/attn", "/layers.0/mlp", "/layers.1", "/layers.1/attn", "/layers.1/mlp"]


def test_include_picks_modules_which_nest_under_the_nearest_one_instrumented(torch, name):
    _, Attn, _, Model = models(torch)
    model = Model()
    with kt.instrument(model, name=name, include="Attn"):
        model(0)
    got = sorted(paths_under(kscope.report(), name))
    # attn's parent module (layers.0) has no scope: attn is named by its path below the root.
    assert got == [name, name + "/layers.0.attn", name + "/layers.1.attn"]

    with kt.instrument(model, name=name + "_b", include=[lambda path, m: path.endswith(".q"), "head"]):
        model(0)
    got = sorted(paths_under(kscope.report(), name + "_b"))
    assert got == [name + "_b", name + "_b/head", name + "_b/layers.0.attn.q", name + "_b/layers.1.attn.q"]


def test_remove_takes_every_hook_away(torch, name):
    _, _, _, Model = models(torch)
    model = Model()
    scopes = kt.instrument(model, name=name)
    assert scopes.active and len(scopes) == len(list(model.modules()))
    model(0)
    scopes.remove()
    scopes.remove()  # idempotent
    assert not scopes.active
    for m in model.modules():
        assert not m._forward_pre_hooks and not m._forward_hooks and not m._forward_hooks_always_called
    model(0)
    assert find(kscope.report(), name)["calls"] == 1
    assert "removed" in repr(scopes)


def test_leaving_the_with_block_removes_the_hooks_even_when_it_raises(torch, name):
    _, _, _, Model = models(torch)
    model = Model()
    with pytest.raises(RuntimeError):
        with kt.instrument(model, name=name):
            model(0)
            raise RuntimeError("user code")
    model(0)
    assert find(kscope.report(), name)["calls"] == 1
    assert all(not m._forward_hooks for m in model.modules())


def test_a_forward_that_raises_leaves_no_scope_open(any_torch, name):
    torch = any_torch
    _, _, _, Model = models(torch)
    model = Model()
    with kt.instrument(model, name=name) as scopes:
        assert scopes.closes_on_exception == (not torch.LEGACY)
        model(0)
        model.layers[1].attn.k.fail = True
        with pytest.raises(ValueError, match="leaf failed"):
            model(0)
        model.layers[1].attn.k.fail = False
        model(0)
        model(0)
    with kscope.scope(name + "_after"):  # top level again: nothing of the model left open
        pass
    r = kscope.report()
    got = paths_under(r, name)
    assert sorted(got) == sorted(name + p for p in FULL), sorted(got)  # nothing nested under a stale scope
    assert got[name]["calls"] == 4 and got[name]["depth"] == 1
    assert got[name + "/layers.1/attn/k"]["calls"] == 4
    assert got[name + "/layers.1/mlp"]["calls"] == 3  # not reached by the call that raised
    assert find(r, name + "_after")["depth"] == 1


def test_an_exception_caught_inside_a_forward_closes_the_scopes_it_left(any_torch, name):
    torch = any_torch
    Leaf, _, _, _ = models(torch)

    class Careful(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.risky = torch.nn.Sequential(Leaf(), Leaf(fail=True))
            self.fallback = Leaf()

        def forward(self, x):
            try:
                return self.risky(x)
            except ValueError:
                return self.fallback(x)

    model = Careful()
    with kt.instrument(model, name=name):
        for _ in range(2):
            assert model(0) == 1
    with kscope.scope(name + "_after"):
        pass
    r = kscope.report()
    got = paths_under(r, name)
    assert find(r, name + "_after")["depth"] == 1  # nothing left open
    assert got[name]["calls"] == 2 and got[name + "/risky/1"]["calls"] == 2
    if torch.LEGACY:
        # torch < 2.1 calls no closing hook for risky and risky/1: their scopes stay open
        # until Careful's closing hook closes them, so fallback runs inside them.
        assert got[name + "/risky/1/fallback"]["calls"] == 2
    else:
        assert sorted(got) == sorted([name, name + "/risky", name + "/risky/0", name + "/risky/1",
                                      name + "/fallback"])
        assert all(s["calls"] == 2 for s in got.values())


def test_a_module_called_twice_and_a_shared_module_nest_by_call(torch, name):
    Leaf, _, _, _ = models(torch)

    class Inner(torch.nn.Module):
        def __init__(self, shared):
            super().__init__()
            self.leaf = Leaf()
            self.shared = shared

        def forward(self, x):
            return self.shared(self.leaf(self.leaf(x)))

    class Outer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.shared = Leaf()             # registered here first: its path is "shared"
            self.inner = Inner(self.shared)  # and called again from inside inner

        def forward(self, x):
            return self.inner(self.shared(x))

    model = Outer()
    with kt.instrument(model, name=name) as scopes:
        for _ in range(3):
            assert model(0) == 4
    assert "inner.shared" not in scopes.paths  # one module, one path (as named_modules gives)
    got = paths_under(kscope.report(), name)
    assert got[name + "/inner/leaf"]["calls"] == 6  # twice per forward, one scope
    assert got[name + "/shared"]["calls"] == 3
    # Called from inside inner, the shared module is named by its own path below the root.
    assert got[name + "/inner/shared"]["calls"] == 3


def test_modules_called_on_two_threads_nest_on_each(torch, name):
    _, _, _, Model = models(torch)
    model = Model()
    errors = []

    def work():
        try:
            for _ in range(50):
                model(0)
        except Exception as e:  # pragma: no cover (reported below)
            errors.append(e)

    with kt.instrument(model, name=name):
        threads = [threading.Thread(target=work) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors
    got = paths_under(kscope.report(), name)
    assert sorted(got) == sorted(name + p for p in FULL)
    assert all(s["calls"] == 100 for s in got.values())


def test_a_compiled_module_is_one_scope_at_its_boundary(torch, name):
    _, _, _, Model = models(torch)
    model = Model()
    compiled = torch.compile(model)
    with kt.instrument(compiled, name=name) as scopes:
        for _ in range(2):
            assert compiled(0) == 17
    assert scopes.compiled == ("",)
    assert sorted(paths_under(kscope.report(), name)) == [name]
    assert find(kscope.report(), name)["calls"] == 2
    # The default name is the original module's class.
    with kt.instrument(compiled) as scopes:
        pass
    assert scopes.name == "Model"


def test_a_compiled_submodule_is_one_scope_and_hooks_traced_inside_do_nothing(torch, name):
    _, _, _, Model = models(torch)
    model = Model()
    model.layers[0] = torch.compile(model.layers[0])
    with kt.instrument(model, name=name) as scopes:
        model(0)
    assert scopes.compiled == ("layers.0",)
    got = sorted(paths_under(kscope.report(), name))
    assert name + "/layers.0" in got and not any(p.startswith(name + "/layers.0/") for p in got)
    assert name + "/layers.1/attn/q" in got

    # Hooks that run inside a compiled region (is_compiling() answers True, as while dynamo
    # traces them) do nothing. (Real torch >= 2.1 calls the compiled module's root hooks
    # outside the region: docs/python.md, "Module scopes".)
    other = Model()
    with kt.instrument(other, name=name + "_later"):
        torch.compile(other)(0)
    assert paths_under(kscope.report(), name + "_later") == {}


def test_a_module_compiled_in_place_gets_its_boundary_scope_back_on_remove(torch, name):
    _, _, _, Model = models(torch)
    model = Model()
    model.compile()
    original = model._compiled_call_impl
    with kt.instrument(model, name=name) as scopes:
        assert model(0) == 17
        assert model._compiled_call_impl is not original
    assert model._compiled_call_impl is original
    assert scopes.compiled == ("",)
    assert sorted(paths_under(kscope.report(), name)) == [name]


def _recording_stream_opens(monkeypatch):
    """The C stream open replaced by a host open that records the stream asked for (the
    stand-in stream handle is no real stream)."""
    from kscope import _scope
    streams = []
    host_open = _scope._open

    def open_stream(site, stream):
        streams.append(stream)
        return host_open(site)
    monkeypatch.setattr(_scope, "_open_stream", open_stream)
    monkeypatch.setattr(kscope._streams, "current_stream_handle", lambda: torch_stream[0])
    return streams


torch_stream = [0x5000]


def test_scopes_follow_the_current_stream_and_record_no_event_during_graph_capture(torch, name, monkeypatch):
    Leaf, _, _, Model = models(torch)
    torch.cuda.AVAILABLE = True
    streams = _recording_stream_opens(monkeypatch)
    model = torch.nn.Sequential(Leaf(), Leaf())
    with kt.instrument(model, name=name):
        model(0)
        assert streams == [0x5000] * 3
        torch.cuda.CAPTURING = True  # torch.cuda.graph(...) capturing on the current stream
        model(0)
        assert streams == [0x5000] * 3  # host-only opens: no CUDA event goes into a capture
        torch.cuda.CAPTURING = False
        model(0)
        assert streams == [0x5000] * 6
    assert find(kscope.report(), name + "/1")["calls"] == 3

    with kt.instrument(model, name=name + "_host", stream=None):
        model(0)
    assert len(streams) == 6
    assert find(kscope.report(), name + "_host/0")["calls"] == 1


def test_without_a_cuda_device_the_scopes_time_the_host_quietly(torch, name, monkeypatch, recwarn):
    Leaf, _, _, _ = models(torch)
    streams = _recording_stream_opens(monkeypatch)
    model = torch.nn.Sequential(Leaf())
    with kt.instrument(model, name=name):
        model(0)
    assert streams == [] and find(kscope.report(), name + "/0")["calls"] == 1
    assert not [w for w in recwarn if issubclass(w.category, kscope.KscopeWarning)]


def test_global_hooks_scope_every_module_named_from_its_root(any_torch, name):
    torch = any_torch
    Leaf, _, _, Model = models(torch)

    class Root_For_Global_Hooks(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = Model()
            self.extra = Leaf()

        def forward(self, x):
            return self.extra(self.model(x))

    root = Root_For_Global_Hooks()
    with kscope.scope(name):
        with kt.instrument_all(max_depth=4) as scopes:
            root(0)
            root(0)
        root(0)  # removed: no scope
    assert scopes.closes_on_exception == (not torch.LEGACY)
    top = name + "/Root_For_Global_Hooks"
    got = paths_under(kscope.report(), top)
    expected = ["", "/extra", "/model", "/model/embed", "/model/head", "/model/layers.0", "/model/layers.1",
                "/model/layers.0/attn", "/model/layers.0/mlp", "/model/layers.1/attn", "/model/layers.1/mlp"]
    assert sorted(got) == sorted(top + p for p in expected)
    assert all(s["calls"] == 2 for s in got.values())
    assert not torch._global_forward_pre_hooks and not torch._global_forward_hooks


def test_global_hooks_close_what_a_raising_forward_left(any_torch, name):
    torch = any_torch
    _, _, _, Model = models(torch)
    model = Model()
    with kscope.scope(name):
        with kt.instrument_all():
            model.head.fail = True
            with pytest.raises(ValueError):
                model(0)
            model.head.fail = False
            model(0)
    got = paths_under(kscope.report(), name + "/Model")
    assert sorted(got) == sorted(name + "/Model" + p for p in FULL)
    assert got[name + "/Model"]["calls"] == 2


def test_step_marks_a_loop_step_as_a_context_manager_and_a_decorator(torch, name):
    @kt.step
    def bare():
        return 1

    @kt.step("token")
    def named():
        return 2

    with kscope.scope(name):
        for _ in range(3):
            with kt.step():
                pass
        assert bare() == 1 and named() == 2
    r = kscope.report()
    assert find(r, name + "/step")["calls"] == 4
    assert find(r, name + "/token")["calls"] == 1


@pytest.mark.parametrize("kwargs,error", [
    (dict(max_depth=-1), ValueError), (dict(max_depth=1.5), ValueError), (dict(max_depth=True), ValueError),
    (dict(include=3), TypeError), (dict(exclude=[None]), TypeError),
])
def test_bad_options_are_refused(torch, kwargs, error):
    _, _, _, Model = models(torch)
    with pytest.raises(error):
        kt.instrument(Model(), **kwargs)


def test_something_that_is_not_a_module_is_refused(torch):
    with pytest.raises(TypeError, match="not a torch.nn.Module"):
        kt.instrument(object())


def test_kscope_torch_is_reachable_from_kscope_without_importing_torch():
    import kscope as k
    assert k.torch is kt
