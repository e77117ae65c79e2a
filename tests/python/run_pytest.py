#!/usr/bin/env python3
"""Runs one of kscope's pytest suites for ctest.

    run_pytest.py cpu  [pytest args...]   the CPU suite (tests/python, without gpu/)
    run_pytest.py gpu  [pytest args...]   the GPU suite (tests/python/gpu): needs torch and a GPU

Exit code 77 (ctest's SKIP_RETURN_CODE) with the reason on stdout when what the suite needs
is missing, so ctest shows "Skipped", never a silent pass.
"""

import os
import sys


def skip(reason: str) -> None:
    print(f"kscope python tests: SKIPPED: {reason}")
    sys.exit(77)


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in ("cpu", "gpu"):
        print("usage: run_pytest.py cpu|gpu [pytest args...]", file=sys.stderr)
        return 2
    if sys.argv[1] == "gpu":
        try:
            import torch
        except ImportError:
            skip("the GPU suite needs PyTorch, which " + sys.executable + " cannot import "
                 "(configure with -DKSCOPE_TEST_PYTHON3=<the python that has torch>)")
        if not torch.cuda.is_available():
            skip("the GPU suite needs a CUDA device; torch.cuda.is_available() is False")
    try:
        import pytest
    except ImportError:
        if sys.argv[1] == "gpu":
            # The Python that has torch may have no pytest (and nothing can be installed on a
            # GPU machine without a network): the same checks, run by their own runner.
            print("kscope python tests: no pytest for " + sys.executable + ": running gpu/gpu_checks.py instead")
            sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu"))
            import gpu_checks
            return gpu_checks.main()
        skip("pytest is not installed for " + sys.executable + " (Debian/Ubuntu: apt-get install python3-pytest)")
    return pytest.main(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
