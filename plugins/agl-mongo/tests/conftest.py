"""Fixtures: an nx-27017 server started for the session, and a fresh database name per test."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from tests.nx_server import NxServer

os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def nx_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NxServer]:
    """An in-memory nx-27017 server for the whole session, killed at the end."""
    server = NxServer(tmp_path_factory.mktemp("nx-27017")).start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture(scope="session")
def mongo_uri(nx_server: NxServer) -> str:
    """The URI of the session's nx-27017 server."""
    return nx_server.uri


@pytest.fixture
def database() -> str:
    """A database name no other test uses."""
    return f"agl_test_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def real_mongo_uri() -> str:
    """``AGL_TEST_MONGO_URI`` (a real MongoDB), or skip the test when it is not set."""
    uri = os.environ.get("AGL_TEST_MONGO_URI")
    if not uri:
        pytest.skip("AGL_TEST_MONGO_URI is not set (point it at a MongoDB server to run these tests)")
    return uri
