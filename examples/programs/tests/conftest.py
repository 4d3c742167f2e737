"""Put examples/programs on the path (the driver, tasks and prompt step the examples share) and decide what
a missing program means: a skip, or with AGL_PROGRAMS_REQUIRED=1 (``make test-programs``) a failure."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def require(available: bool, reason: str) -> None:
    """Skip the test when ``available`` is false, or fail it when programs are required."""
    if available:
        return
    if os.environ.get("AGL_PROGRAMS_REQUIRED") == "1":
        pytest.fail(f"AGL_PROGRAMS_REQUIRED=1 but {reason}")
    pytest.skip(reason)
