"""The `LightningStore` conformance suite run against the bundled in-memory and SQLite stores."""

from __future__ import annotations

from pathlib import Path

import pytest

from agl_core.store.memory import InMemoryLightningStore
from agl_core.store.sqlite import SqliteLightningStore
from agl_testing.store_conformance import FakeClock, StoreConformance, StoreFactory


class TestInMemoryStore(StoreConformance):
    """`InMemoryLightningStore` (thread-safe default) against the whole contract."""

    @pytest.fixture
    def store_factory(self) -> StoreFactory:
        """A fresh in-memory store on the fake clock, scanning before every guarded call."""
        return lambda clock: InMemoryLightningStore(clock=clock, scan_debounce_seconds=0)


class TestSqliteStore(StoreConformance):
    """`SqliteLightningStore` on a fresh database file against the whole contract."""

    @pytest.fixture
    def store_factory(self, tmp_path: Path) -> StoreFactory:
        """A fresh SQLite store in the test's temporary directory, opened through its URI."""

        def build(clock: FakeClock) -> SqliteLightningStore:
            return SqliteLightningStore.from_uri(
                f"sqlite:///{tmp_path / 'conformance.db'}", clock=clock, scan_debounce_seconds=0
            )

        return build
