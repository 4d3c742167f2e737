"""Fixtures of the runner tests."""

from __future__ import annotations

import pytest

from agl_core.store.memory import InMemoryLightningStore


@pytest.fixture
def store() -> InMemoryLightningStore:
    """A fresh in-memory store (watchdog scans at every call)."""
    return InMemoryLightningStore(scan_debounce_seconds=0)
