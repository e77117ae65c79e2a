"""Shared setup of kscope's Python tests.

Under ctest, PYTHONPATH and KSCOPE_LIBRARY point at the source tree's package and the build
tree's libkscope_c.so. Run by hand (`python3 -m pytest tests/python`), the package comes
from the source tree and the library from the most recent build directory in it.
"""

import glob
import json
import os
import re
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

if not os.environ.get("PYTHONPATH"):
    sys.path.insert(0, os.path.join(ROOT, "python"))
if not os.environ.get("KSCOPE_LIBRARY"):
    built = sorted(glob.glob(os.path.join(ROOT, "build*", "python", "libkscope_c.so")), key=os.path.getmtime)
    if built:
        os.environ["KSCOPE_LIBRARY"] = built[-1]

import kscope  # noqa: E402  (after the paths above)


@pytest.fixture
def name(request):
    """A scope name of this test's own, so that tests never read each other's scopes from
    the one process-wide session."""
    return "t_" + re.sub(r"\W+", "_", request.node.name)


def find(report, path):
    """The scope dict at `path` in a report, or None."""
    return report.find(path)


def gpu_present() -> bool:
    """Whether kscope sees a usable GPU (its report's context describes one)."""
    return kscope.report().data["context"].get("gpu") is not None


def has_torch() -> bool:
    try:
        import torch  # noqa: F401
        return True
    except ImportError:
        return False


def load_json(path):
    with open(path) as f:
        return json.load(f)


@pytest.fixture(autouse=True)
def fresh_warnings():
    """kscope warns once per distinct message per process; each test starts afresh so that
    it sees the warnings its own calls give."""
    kscope._native._warned.clear()
    yield
