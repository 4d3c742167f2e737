"""Shared test setup: single-threaded torch (small ops are far faster on a busy 2-core machine)."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
