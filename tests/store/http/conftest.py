"""Fixtures of the HTTP store tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agl_core.store.http import BackgroundServer
from agl_core.store.memory import InMemoryLightningStore

TOKEN = "s3cret-token"


@pytest.fixture
def server() -> Iterator[BackgroundServer]:
    """A server over a fresh in-memory store, on a background thread, without a token."""
    with BackgroundServer(InMemoryLightningStore, max_body_bytes=1024 * 1024) as running:
        yield running


@pytest.fixture
def token_server() -> Iterator[BackgroundServer]:
    """A server over a fresh in-memory store that requires the bearer token `TOKEN`."""
    with BackgroundServer(InMemoryLightningStore, token=TOKEN) as running:
        yield running
