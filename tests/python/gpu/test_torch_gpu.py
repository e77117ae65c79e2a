"""kscope from PyTorch on a GPU: gpu_checks.py's checks under pytest (each scenario runs in a
fresh interpreter, tests/python/gpu/scenarios.py).

Skipped, with the reason, without torch or a CUDA device (run_pytest.py gpu says so to ctest).
"""

import os
import sys

import pytest

torch = pytest.importorskip("torch", reason="kscope python gpu tests: SKIPPED: PyTorch is not installed")
if not torch.cuda.is_available():
    pytest.skip("kscope python gpu tests: SKIPPED: no CUDA device (torch.cuda.is_available() is False)",
                allow_module_level=True)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_checks  # noqa: E402


@pytest.mark.parametrize("run", ["plain", "nvtx"])
def test_each_phase_gpu_time_agrees_with_torch_events(run):
    gpu_checks.check_phase_times(run)


def test_torch_nvtx_ranges_do_not_move_attribution():
    gpu_checks.check_nvtx_does_not_move_attribution()


def test_torch_profiler_first_gets_one_message_and_event_times():
    gpu_checks.check_profiler_first()


def test_kscope_first_keeps_attributing_while_torch_profiler_runs():
    gpu_checks.check_kscope_first()


def test_bench_times_torch_work_like_torch_events_and_catches_the_wrong_stream():
    gpu_checks.check_bench()


def test_production_preset_finds_nothing_in_a_healthy_loop():
    gpu_checks.check_production()


def test_production_preset_finds_the_host_sync_of_a_loop_that_synchronizes_every_layer():
    gpu_checks.check_production_sync()
