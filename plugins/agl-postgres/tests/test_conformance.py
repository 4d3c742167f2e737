"""The core `LightningStore` conformance suite on PostgreSQL (a fresh schema per test)."""

from __future__ import annotations

import pytest

from agl_core.testing.store_conformance import StoreConformance, StoreFactory
from agl_postgres import PostgresLightningStore


class TestPostgresStore(StoreConformance):
    """The whole contract, including 8 threads racing over 2,000 rollouts with 10 spans each."""

    @pytest.fixture
    def store_factory(self, postgres_uri: str, schema: str) -> StoreFactory:
        """A store on a fresh schema, opened through its URI."""
        return lambda clock: PostgresLightningStore.from_uri(
            f"{postgres_uri}?schema={schema}", clock=clock, scan_debounce_seconds=0
        )
