"""Fixtures: a throwaway PostgreSQL cluster (or ``AGL_TEST_POSTGRES_URI``) and a schema per test."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
from agl_postgres.testing import PgCluster

os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    """A private cluster for the tests that stop and restart a server (never an external one)."""
    cluster = PgCluster().init().start()
    try:
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture(scope="session")
def postgres_uri(request: pytest.FixtureRequest) -> str:
    """``AGL_TEST_POSTGRES_URI`` when set, else the URI of the session's throwaway cluster."""
    uri = os.environ.get("AGL_TEST_POSTGRES_URI")
    if uri:
        return uri
    cluster: PgCluster = request.getfixturevalue("pg_cluster")
    return cluster.uri


@pytest.fixture
def schema() -> str:
    """A schema name no other test uses."""
    return f"agl_test_{uuid.uuid4().hex[:12]}"
