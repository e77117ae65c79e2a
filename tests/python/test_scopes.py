"""kscope.scope, the decorator and ranges, checked through the report they produce."""

import asyncio
import glob
import os
import subprocess
import sys
import threading
import time
import warnings

import pytest

import kscope
from conftest import find, has_torch


def test_nested_scopes_count_every_call_and_nest_by_path(name):
    for _ in range(9):
        with kscope.scope(name):
            with kscope.scope("inner"):
                time.sleep(0.002)
    r = kscope.report()
    outer, inner = find(r, name), find(r, name + "/inner")
    assert outer["calls"] == 9 and inner["calls"] == 9
    assert inner["depth"] == outer["depth"] + 1
    assert inner["parent"] == outer["id"]
    # time.sleep(0.002) lasts at least 2 ms; the outer scope holds the inner one.
    assert inner["host_ns"]["min"] >= 2e6
    assert outer["host_inclusive_ns"] >= inner["host_inclusive_ns"]
    assert "  inner" in r.text()  # indented under its parent in the table


def test_decorator_times_each_call_passes_values_and_exceptions_through(name):
    @kscope.scope(name)
    def add(a, b=1):
        if a < 0:
            raise ValueError("negative")
        return a + b

    assert add.__name__ == "add"
    assert [add(i, b=2) for i in range(5)] == [2, 3, 4, 5, 6]
    with pytest.raises(ValueError, match="negative"):
        add(-1)
    # The call that raised was closed too: 6 calls, and the next scope is top level again.
    with kscope.scope(name + "_after"):
        pass
    r = kscope.report()
    assert find(r, name)["calls"] == 6
    assert find(r, name + "_after")["depth"] == 1


def test_work_and_tags_reach_the_report(name):
    for i in range(4):
        with kscope.scope(name, work=(1e6, 3e6), tags={"batch": 8}) as s:
            s.tag("parity", "even" if i % 2 == 0 else "odd")
    s = find(kscope.report(), name)
    assert s["declared_work"]["flops"] == pytest.approx(4e6)
    assert s["declared_work"]["bytes"] == pytest.approx(12e6)
    tags = {(t["key"], t["value"]): t["count"] for t in s["tags"]}
    assert tags == {("batch", "8"): 4, ("parity", "even"): 2, ("parity", "odd"): 2}


def test_set_work_inside_the_block_wins(name):
    with kscope.scope(name, work=(1.0, 1.0)) as s:
        s.set_work(5.0, 7.0)
    w = find(kscope.report(), name)["declared_work"]
    assert (w["flops"], w["bytes"]) == (5.0, 7.0)


def test_a_scope_object_entered_inside_its_own_block_nests(name):
    s = kscope.scope(name)
    with s:
        with s:
            pass
    r = kscope.report()
    assert find(r, name)["calls"] == 1
    assert find(r, name + "/" + name)["calls"] == 1


def test_scopes_on_many_threads_are_all_counted(name):
    def work():
        for _ in range(50):
            with kscope.scope(name):
                pass
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert find(kscope.report(), name)["calls"] == 200


def test_a_range_ends_on_another_thread(name):
    r = kscope.start_range(name, work=(0, 64))
    assert r.active
    t = threading.Thread(target=lambda: (time.sleep(0.003), r.end()))
    t.start()
    t.join()
    assert not r.active
    r.end()  # idempotent
    s = find(kscope.report(), name)
    assert s["cross_thread"] is True and s["calls"] == 1
    assert s["host_ns"]["median"] >= 3e6


def test_a_range_is_a_context_manager_and_ends_when_collected(name):
    with kscope.start_range(name):
        pass
    dropped = kscope.start_range(name)
    del dropped
    assert find(kscope.report(), name)["calls"] == 2


def test_async_def_is_timed_as_a_range(name):
    @kscope.scope(name)
    async def handle(i):
        await asyncio.sleep(0.001)
        return i * 2

    async def main():
        return await asyncio.gather(*(handle(i) for i in range(5)))

    assert asyncio.run(main()) == [0, 2, 4, 6, 8]
    s = find(kscope.report(), name)
    assert s["cross_thread"] is True and s["calls"] == 5


def test_generator_function_is_timed_as_a_range(name):
    @kscope.scope(name)
    def numbers(n):
        yield from range(n)

    assert list(numbers(4)) == [0, 1, 2, 3]
    s = find(kscope.report(), name)
    assert s["cross_thread"] is True and s["calls"] == 1


def test_interleaved_blocks_warn_once_and_keep_the_tree_a_tree(name):
    def gen(label):
        with kscope.scope(label):
            yield
            yield

    a, b = gen(name + "_a"), gen(name + "_b")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        next(a)
        next(b)        # b opens inside a
        for g in (a, b):
            for _ in g:  # a closes first: b is closed with it; b's own close then finds nothing
                pass
    messages = [str(w.message) for w in caught if issubclass(w.category, kscope.KscopeWarning)]
    assert any("closed while scopes opened after it were open" in m for m in messages), messages
    assert any("not open" in m for m in messages), messages
    # The thread's current scope is the root again.
    with kscope.scope(name + "_next"):
        pass
    r = kscope.report()
    assert find(r, name + "_next")["depth"] == 1
    assert find(r, name + "_a/" + name + "_b")["calls"] == 1


def test_a_bad_stream_warns_and_times_the_host(name):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with kscope.scope(name, stream=object()):
            pass
    assert any("not a stream kscope knows" in str(w.message) for w in caught)
    s = find(kscope.report(), name)
    assert s["calls"] == 1 and s["gpu_calls"] == 0


def test_current_stream_without_a_gpu_warns_and_times_the_host(name):
    if has_torch():
        import torch
        if torch.cuda.is_available():
            pytest.skip("torch sees a GPU here: 'current' is its current stream")
        expected = "torch sees no CUDA device"
    else:
        expected = "needs PyTorch"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with kscope.scope(name, stream="current"):
            pass
    assert any(expected in str(w.message) for w in caught), [str(w.message) for w in caught]
    s = find(kscope.report(), name)
    assert s["calls"] == 1 and s["gpu_calls"] == 0


def test_disabled_scopes_record_nothing(name):
    kscope.set_enabled(False)
    try:
        assert not kscope.is_enabled()
        with kscope.scope(name):
            pass
    finally:
        kscope.set_enabled(True)
    assert kscope.is_enabled()
    assert find(kscope.report(), name) is None


def test_names_of_any_text_are_kept_and_a_slash_is_escaped(name):
    odd = name + " dé/code ✓"
    with kscope.scope(odd):
        pass
    with kscope.scope(name.encode() + b"_bytes"):
        pass
    long_name = name + "_" + "x" * 300
    with kscope.scope(long_name):
        pass
    r = kscope.report()
    assert find(r, odd.replace("/", "\\/"))["name"] == odd
    assert find(r, name + "_bytes") is not None
    assert find(r, long_name)["calls"] == 1


def test_a_scope_reports_what_it_is(name):
    s = kscope.scope(name)
    assert repr(s) == f"kscope.scope({name!r}, closed)"
    with s:
        assert repr(s) == f"kscope.scope({name!r}, open)"
    assert s.name == name


def test_tags_and_work_set_before_the_block_apply_to_every_call(name):
    s = kscope.scope(name)
    s.tag("phase", "decode")
    s.set_work(10.0, 20.0)
    for _ in range(3):
        with s:
            pass
    r = find(kscope.report(), name)
    assert r["tags"] == [{"key": "phase", "value": "decode", "count": 3}]
    assert (r["declared_work"]["flops"], r["declared_work"]["bytes"]) == (30.0, 60.0)


def test_a_problem_warns_once_however_often_it_happens(name):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(5):
            with kscope.scope(name, stream=object()):
                pass
    assert len([w for w in caught if issubclass(w.category, kscope.KscopeWarning)]) == 1
    assert find(kscope.report(), name)["calls"] == 5


def test_a_scope_that_may_block_opens_and_closes_through_the_calls_that_let_the_gil_go(name, monkeypatch):
    # The library's hot calls (through PyDLL, the GIL kept) answer "would block" while
    # per-scope counters are on; the scope then makes the plain calls (through CDLL, the
    # GIL let go). Here the hot calls always say so.
    from kscope import _native, _scope
    calls = []
    open_blocking, open_stream_blocking, close_blocking = (
        _scope._open_blocking, _scope._open_stream_blocking, _scope._close_blocking)
    monkeypatch.setattr(_scope, "_open", lambda site: _native.SCOPE_WOULD_BLOCK)
    monkeypatch.setattr(_scope, "_open_stream", lambda site, stream: _native.SCOPE_WOULD_BLOCK)
    monkeypatch.setattr(_scope, "_close", lambda handle: _native.WOULD_BLOCK)
    monkeypatch.setattr(_scope, "_open_blocking", lambda site: calls.append("open") or open_blocking(site))
    monkeypatch.setattr(_scope, "_open_stream_blocking",
                        lambda site, stream: calls.append("open_stream") or open_stream_blocking(site, stream))
    monkeypatch.setattr(_scope, "_close_blocking", lambda handle: calls.append("close") or close_blocking(handle))

    @kscope.scope(name)
    def decorated():
        return 5

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with kscope.scope(name):
            pass
        assert decorated() == 5
        with kscope.scope(name, stream=0, work=(1.0, 2.0)):
            pass
    assert not [str(w.message) for w in caught if issubclass(w.category, kscope.KscopeWarning)]
    assert calls == ["open", "close", "open", "close", "open_stream", "close"]
    assert find(kscope.report(), name)["calls"] == 3


# Run in a fresh interpreter over libkscope_c_testing.so, whose fake counter hook profiles
# every call of one scope and makes its open and close take SLEEP_MS each.
_GIL_PROGRAM = r'''
import ctypes, threading, time
import kscope
from kscope import _native

assert kscope.available(), kscope.load_error
testing = ctypes.CDLL(_native.library_path)  # the library the package loaded
testing.kscope_testing_fake_counters.argtypes = (ctypes.c_char_p, ctypes.c_uint, ctypes.c_uint)
SLEEP_MS = 300
NAME = "gil_profiled"


def with_block():
    with kscope.scope(NAME):
        pass


@kscope.scope(NAME)
def decorated():
    pass


def general():
    with kscope.scope(NAME, stream=0, work=(1.0, 2.0)):
        pass


def longest_stall(fn):
    """Runs fn on another thread; how long this thread went without running at most
    meanwhile, and how long fn took."""
    done = threading.Event()

    def run():
        fn()
        done.set()

    worker = threading.Thread(target=run)
    start = last = time.perf_counter()
    longest = 0.0
    worker.start()
    while not done.is_set():
        now = time.perf_counter()
        longest = max(longest, now - last)
        last = now
    worker.join()
    return longest, time.perf_counter() - start


for label, fn in (("with", with_block), ("decorator", decorated), ("stream and work", general)):
    testing.kscope_testing_fake_counters(NAME.encode(), SLEEP_MS, SLEEP_MS)
    stall, took = longest_stall(fn)
    testing.kscope_testing_fake_counters(None, 0, 0)
    opened, closed = ctypes.c_int(), ctypes.c_int()
    testing.kscope_testing_fake_counter_calls(ctypes.byref(opened), ctypes.byref(closed))
    assert (opened.value, closed.value) == (1, 1), (label, opened.value, closed.value)
    assert took >= 2 * SLEEP_MS / 1000, (label, took)
    # With the GIL held through the profiled open or close, this thread would stop SLEEP_MS.
    assert stall < SLEEP_MS / 2000, f"{label}: this thread stopped {stall * 1e3:.0f} ms during a profiled call"
assert kscope.report().find(NAME)["profiled_calls"] == 3
print("ok")
'''


def _testing_library():
    path = os.environ.get("KSCOPE_TESTING_LIBRARY")
    if not path:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        built = sorted(glob.glob(os.path.join(root, "build*", "tests", "c_abi", "libkscope_c_testing.so")),
                       key=os.path.getmtime)
        path = built[-1] if built else None
    if not path or not os.path.exists(path):
        pytest.skip("needs libkscope_c_testing.so (the c_abi tests' library; ctest sets KSCOPE_TESTING_LIBRARY)")
    return path


def test_other_threads_run_while_a_scope_is_profiled_by_the_counters():
    # A profiled call's open and close take milliseconds (CUPTI, a device synchronization,
    # decoding) and may wait for GPU work holding a host callback that needs the GIL: they
    # must run with the GIL let go, whatever started the counters.
    env = dict(os.environ, KSCOPE_LIBRARY=_testing_library(),
               PYTHONPATH=os.path.dirname(os.path.dirname(kscope.__file__)))
    out = subprocess.run([sys.executable, "-c", _GIL_PROGRAM], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip() == "ok"


class _FakeStream:
    def __init__(self, handle):
        self.cuda_stream = handle


class _FakeTorch:
    """The parts of torch the current-stream getter reads: the public current_stream()
    and torch._C's raw getter, answering `raw` (None: torch._C lacks it)."""

    def __init__(self, public, raw):
        self.public_calls = 0
        outer = self

        class _Cuda:
            @staticmethod
            def current_stream():
                outer.public_calls += 1
                return _FakeStream(public)

        class _C:
            pass

        if raw is not None:
            _C._cuda_getCurrentRawStream = staticmethod(lambda device: raw)
            _C._cuda_getDevice = staticmethod(lambda: 0)
        self.cuda = _Cuda
        self._C = _C


def test_the_current_stream_comes_from_torchs_raw_getter_only_when_it_agrees():
    from kscope import _streams

    agreeing = _FakeTorch(public=0x1234, raw=0x1234)
    getter = _streams._make_current_getter(agreeing)
    calls = agreeing.public_calls
    assert getter() == 0x1234 and getter() == 0x1234
    assert agreeing.public_calls == calls  # the raw getter answers; no Stream object is built

    disagreeing = _FakeTorch(public=0x1234, raw=0x9999)
    assert _streams._make_current_getter(disagreeing)() == 0x1234  # the public answer wins

    without_raw = _FakeTorch(public=0x42, raw=None)
    getter = _streams._make_current_getter(without_raw)
    before = without_raw.public_calls
    assert getter() == 0x42 and without_raw.public_calls == before + 1
