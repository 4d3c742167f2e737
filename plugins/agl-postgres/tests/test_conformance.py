"""The core `LightningStore` conformance suite on PostgreSQL.

Every test gets an empty store: one schema for the class, emptied (``TRUNCATE``) before each test,
which is much faster than migrating a new schema per test; `test_plugin` covers fresh schemas.
"""

from __future__ import annotations

import uuid

import asyncpg
import pytest
from agl_postgres import PostgresLightningStore

from agl_testing.clock import FakeClock
from agl_testing.store_conformance import StoreConformance, StoreFactory

_TABLES = "rollouts, attempts, spans, span_counters, resources, workers, meta"


@pytest.fixture(scope="session")
def conformance_schema() -> str:
    """The schema the conformance tests share (emptied before each)."""
    return f"agl_conformance_{uuid.uuid4().hex[:8]}"


class TestPostgresStore(StoreConformance):
    """The whole contract. The thread race runs on 500 rollouts here (CI time); `test_concurrency`
    races 8 processes over 2,000."""

    concurrency_rollouts = 500

    @pytest.fixture
    def store_factory(self, postgres_uri: str, conformance_schema: str) -> StoreFactory:
        """An empty store on the shared schema, opened through its URI."""

        async def build(clock: FakeClock) -> PostgresLightningStore:
            conn = await asyncpg.connect(postgres_uri)
            try:
                if await conn.fetchval("SELECT 1 FROM pg_namespace WHERE nspname = $1", conformance_schema):
                    tables = ", ".join(f"{conformance_schema}.{t.strip()}" for t in _TABLES.split(","))
                    await conn.execute(
                        f"TRUNCATE {tables} RESTART IDENTITY; "
                        f"ALTER SEQUENCE {conformance_schema}.queue_positions RESTART"
                    )
            finally:
                await conn.close()
            return PostgresLightningStore.from_uri(
                f"{postgres_uri}?schema={conformance_schema}", clock=clock, scan_debounce_seconds=0
            )

        return build
