"""One process layout for every timed run of the overhead benchmarks (serving_overhead.py,
torch_overhead.py): address randomization off where `setarch -R` is allowed (a container's
seccomp filter may refuse it), so that processes of one configuration do not differ by where
their code and heap landed. Session 15's eager serving baseline moved 0.81-1.45 between rounds
and session 16's torch baseline +-22 % between processes."""
import os
import shutil
import subprocess

_works = None


def no_randomization_prefix():
    """['setarch', <machine>, '-R'] where that runs here, else []."""
    global _works
    if _works is None:
        _works = False
        if shutil.which("setarch"):
            try:
                _works = subprocess.run(["setarch", os.uname().machine, "-R", "true"],
                                        capture_output=True, timeout=10).returncode == 0
            except (OSError, subprocess.SubprocessError):
                pass
    return ["setarch", os.uname().machine, "-R"] if _works else []
