#!/usr/bin/env python3
"""Runs one of kscope's pytest suites for ctest.

    run_pytest.py cpu  [pytest args...]   the CPU suite (tests/python, without gpu/)
    run_pytest.py gpu  [pytest args...]   the GPU suite (tests/python/gpu): needs torch and a GPU

Exit code 77 (ctest's SKIP_RETURN_CODE) with the reason on stdout when what the suite needs
is missing, so ctest shows "Skipped", never a silent pass.
"""

import sys


def skip(reason: str) -> None:
    print(f"kscope python tests: SKIPPED: {reason}")
    sys.exit(77)


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in ("cpu", "gpu"):
        print("usage: run_pytest.py cpu|gpu [pytest args...]", file=sys.stderr)
        return 2
    try:
        import pytest
    except ImportError:
        skip("pytest is not installed for " + sys.executable + " (Debian/Ubuntu: apt-get install python3-pytest)")
    if sys.argv[1] == "gpu":
        try:
            import torch
        except ImportError:
            skip("the GPU suite needs PyTorch, which " + sys.executable + " cannot import")
        if not torch.cuda.is_available():
            skip("the GPU suite needs a CUDA device; torch.cuda.is_available() is False")
    return pytest.main(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
