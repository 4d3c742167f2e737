"""The store conformance suite against `LightningStoreClient` talking to a live server.

Each test gets its own server on a background thread and event loop, wrapping a fresh in-memory or
SQLite store built on the suite's fake clock, and a client that reaches it over TCP.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agl_core.store import LightningStore
from agl_core.store.http import BackgroundServer, LightningStoreClient
from agl_core.store.memory import InMemoryLightningStore
from agl_testing.store_conformance import FakeClock, StoreConformance, StoreFactory


def _served(backend: Callable[[FakeClock], LightningStore], servers: list[BackgroundServer]) -> StoreFactory:
    def build(clock: FakeClock) -> LightningStoreClient:
        server = BackgroundServer(lambda: backend(clock))
        servers.append(server)
        return LightningStoreClient(server.start(), retries=2, retry_timeout=5.0)

    return build


@pytest.fixture
def servers() -> Iterator[list[BackgroundServer]]:
    """Servers started by a test, stopped (and their stores closed) after it."""
    started: list[BackgroundServer] = []
    yield started
    for server in started:
        server.stop()


class TestHttpOverMemory(StoreConformance):
    """`LightningStoreClient` -> `LightningStoreServer` -> `InMemoryLightningStore`."""

    @pytest.fixture
    def store_factory(self, servers: list[BackgroundServer]) -> StoreFactory:
        """A client of a fresh server over a fresh in-memory store on the fake clock."""
        return _served(lambda clock: InMemoryLightningStore(clock=clock, scan_debounce_seconds=0), servers)


class TestHttpOverSqlite(StoreConformance):
    """`LightningStoreClient` -> `LightningStoreServer` -> `SqliteLightningStore`."""

    @pytest.fixture
    def store_factory(self, servers: list[BackgroundServer], tmp_path: Path) -> StoreFactory:
        """A client of a fresh server over a fresh SQLite file on the fake clock."""
        from agl_core.store.sqlite import SqliteLightningStore

        def backend(clock: FakeClock) -> LightningStore:
            return SqliteLightningStore.from_uri(
                f"sqlite:///{tmp_path / 'served.db'}", clock=clock, scan_debounce_seconds=0
            )

        return _served(backend, servers)
