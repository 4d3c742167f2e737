"""The core `LightningStore` conformance suite on PostgreSQL (a fresh schema per test)."""

from __future__ import annotations

import pytest
from agl_postgres import PostgresLightningStore

from agl_core.testing.store_conformance import StoreConformance, StoreFactory


class TestPostgresStore(StoreConformance):
    """The whole contract. The thread race runs on 500 rollouts here (CI time); `test_concurrency` races
    8 processes over 2,000."""

    concurrency_rollouts = 500

    @pytest.fixture
    def store_factory(self, postgres_uri: str, schema: str) -> StoreFactory:
        """A store on a fresh schema, opened through its URI."""
        return lambda clock: PostgresLightningStore.from_uri(
            f"{postgres_uri}?schema={schema}", clock=clock, scan_debounce_seconds=0
        )
