"""The core `LightningStore` conformance suite against nx-27017 and, when configured, a real MongoDB."""

from __future__ import annotations

import pytest

from agl_mongo.store import MongoLightningStore
from agl_testing.store_conformance import StoreConformance, StoreFactory


class TestMongoStoreOnNx(StoreConformance):
    """The whole contract on the nx-27017 server the tests start.

    The race over 8 threads x 2,000 rollouts x 10 spans is run by `test_concurrency` with 8
    processes; here it runs smaller (nx-27017 serves about 1,300 calls a second).
    """

    concurrency_rollouts = 200

    @pytest.fixture
    def store_factory(self, mongo_uri: str, database: str) -> StoreFactory:
        """A store on a fresh database, opened through its URI."""
        return lambda clock: MongoLightningStore.from_uri(
            mongo_uri, database=database, clock=clock, scan_debounce_seconds=0
        )


class TestMongoStoreOnRealMongo(StoreConformance):
    """The whole contract on the MongoDB server named by ``AGL_TEST_MONGO_URI`` (skipped without it)."""

    @pytest.fixture
    def store_factory(self, real_mongo_uri: str, database: str) -> StoreFactory:
        """A store on a fresh database of the real server."""
        return lambda clock: MongoLightningStore.from_uri(
            real_mongo_uri, database=database, clock=clock, scan_debounce_seconds=0
        )
