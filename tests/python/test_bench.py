"""kscope.bench: the C++ harness timing Python callables. On the CPU through the host
timer (the same sampler, stopping rule, reference comparison and output check as the CUDA
timer); the CUDA timer without a GPU says that it needs one."""

import math
import warnings

import pytest

import kscope
from conftest import gpu_present

QUICK = dict(timer="host", time_budget_s=3.0, min_time_s=0.05, target_rel_ci=0.05)


def spin(n):
    total = 0
    for i in range(n):
        total += i
    return total


def test_host_timer_gives_a_median_with_its_interval():
    r = kscope.bench(lambda: spin(300), name="spin300", work=(300.0, 2400.0), dtype="int", shape=(300,),
                     params={"n": 300, "kind": "py"}, **QUICK)
    assert isinstance(r, kscope.BenchResult)
    assert r.valid, r.invalid_reason
    assert r.stop_reason in ("target_reached", "time_budget")
    lo, hi = r.median_ci_s
    assert lo <= r.median_s <= hi
    assert 0 < r.median_s < 0.01
    assert r.samples_used >= 20 and len(r.samples_s) >= r.samples_used
    assert r.flops_per_s == pytest.approx(300.0 / r.median_s)
    assert r.bytes_per_s == pytest.approx(2400.0 / r.median_s)
    assert "spin300" in r.text and str(r) == r.text
    b = r.data["benchmarks"][0]
    assert b["params"] == {"n": 300, "kind": "py"} and b["shape"] == [300] and b["dtype"] == "int"
    assert b["settings"]["use_graphs"] is False  # the Python default (see _bench.py)
    assert any("timed on the host" in w for w in r.warnings)
    # No counters and no roofs to place the work under: the row concludes nothing.
    assert r.data["schema"] == "kscope.bench/2"
    assert r.verdict is None and b["verdict"] is None


def test_the_reference_ratio_and_its_interval():
    r = kscope.bench(lambda: spin(200), name="short", reference=lambda: spin(800), **QUICK)
    assert r.valid, r.invalid_reason
    ref = r.reference
    assert isinstance(ref, kscope.ReferenceResult)
    # Four times the work: the benchmark is much faster than its reference.
    assert ref.verdict == "faster"
    assert ref.ratio < 0.6
    # The ratio is the ratio of the medians, the interval Hodges-Lehmann's for the shift of the
    # log times (stats.hpp: compare): two estimators of one ratio, which agree while the two
    # timings differ only in scale. On a loaded machine one can be bimodal and they part (a
    # CI run once printed 0.228 against [0.237, 0.250]); the result must then say so.
    assert ref.ratio_ci[0] <= ref.ratio_ci[1]
    if not ref.ratio_ci[0] <= ref.ratio <= ref.ratio_ci[1]:
        assert any("differ in shape" in w and f"{ref.ratio:.3f}" in w for w in r.warnings), r.warnings
    assert ref.relative_speed == pytest.approx(1 / ref.ratio)
    assert ref.median_s > r.median_s
    assert ref.output_check is None


def test_the_output_check_passes_and_fails_with_the_error():
    same = kscope.bench(lambda: None, output=lambda: [1.0, 2.0, 3.0], tolerance=1e-9,
                        reference=lambda: None, reference_output=lambda: (1.0, 2.0, 3.0), **QUICK)
    assert same.reference.output_check.performed and same.reference.output_check.passed
    assert same.reference.output_check.values == 3
    off = kscope.bench(lambda: None, output=lambda: [1.0, 2.0, 3.5], tolerance=1e-3,
                       reference=kscope.Benchmark(lambda: None, name="ref", output=lambda: [1.0, 2.0, 3.0]),
                       **QUICK)
    check = off.reference.output_check
    assert check.performed and not check.passed
    assert check.max_rel_error == pytest.approx(0.5 / 3.0)
    assert any("output check failed" in w for w in off.warnings)
    assert off.reference.name == "ref"


def test_a_callable_that_raises_raises_after_the_run():
    calls = []

    def broken():
        calls.append(1)
        raise ZeroDivisionError("py30 boom")

    with pytest.raises(ZeroDivisionError, match="py30 boom"):
        kscope.bench(broken, **QUICK)
    assert len(calls) == 1  # called once: the harness stops, Python is not called again

    def bad_output():
        raise KeyError("no output")

    with pytest.raises(KeyError):
        kscope.bench(lambda: None, output=bad_output, reference=lambda: None,
                     reference_output=lambda: [1.0], **QUICK)


def test_a_callable_taking_one_argument_gets_the_stream_handle():
    seen = []
    r = kscope.bench(lambda stream: seen.append(stream), **QUICK)
    assert r.valid
    assert seen and all(s == 0 for s in seen)  # the host timer has no stream


@pytest.mark.skipif(gpu_present(), reason="a GPU is present: the CUDA timer runs here")
def test_the_cuda_timer_without_a_gpu_says_it_needs_one():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = kscope.bench(lambda: None, time_budget_s=1.0)
    assert not r.valid
    assert r.stop_reason == "error"
    assert r.reason.startswith(("no GPU", "kscope was built without CUDA")), r.reason
    assert math.isnan(r.median_s)
    assert any("needs a GPU" in str(w.message) for w in caught if issubclass(w.category, kscope.KscopeWarning))


def test_misuse_is_a_clear_python_error():
    with pytest.raises(TypeError, match="callable"):
        kscope.bench(42)
    with pytest.raises(TypeError, match="unknown option"):
        kscope.bench(lambda: None, budget=3)
    with pytest.raises(ValueError, match="timer"):
        kscope.bench(lambda: None, timer="gpu")
    with pytest.raises(ValueError, match="cache"):
        kscope.bench(lambda: None, cache="lukewarm", **QUICK)
    with pytest.raises(TypeError, match="reference"):
        kscope.bench(lambda: None, reference=3, **QUICK)


def test_outputs_may_be_torch_tensors_or_numpy_arrays():
    torch = pytest.importorskip("torch", reason="torch is not installed here")
    numpy = pytest.importorskip("numpy", reason="numpy is not installed here")
    want = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    got = want.clone()
    got[2, 3] = 22.0  # 11 -> 22: a relative error of 1 at the largest entry
    r = kscope.bench(lambda: None, output=lambda: got.t(), tolerance=1e-6,  # a non-contiguous view
                     reference=lambda: None, reference_output=lambda: numpy.arange(12.0).reshape(3, 4).T, **QUICK)
    check = r.reference.output_check
    assert check.performed and check.values == 12
    assert not check.passed
    assert check.max_abs_error == pytest.approx(11.0)
