"""Fixtures: a real in-memory store, a WeaveTracer on it, and a guard that fails any non-local connection."""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from agl_core.store.memory import InMemoryLightningStore

if TYPE_CHECKING:
    from agl_weave.tracer import WeaveTracer

_LOCAL_HOSTS = {"127.0.0.1", "::1", "localhost"}


def pytest_configure(config: pytest.Config) -> None:
    """Weave reports a usage session to Sentry at exit unless this is off; set before weave is imported."""
    os.environ.setdefault("WANDB_ERROR_REPORTING", "false")


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every test runs offline: a lookup or connection to anything but this machine fails and is listed."""
    attempts: list[str] = []
    real_getaddrinfo = socket.getaddrinfo
    real_connect = socket.socket.connect

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host not in _LOCAL_HOSTS and host is not None:
            attempts.append(f"lookup {host}")
            raise socket.gaierror(f"offline test: no lookup of {host}")
        return real_getaddrinfo(host, *args, **kwargs)

    def connect(self: socket.socket, address: Any) -> Any:
        host = address[0] if isinstance(address, tuple) else address
        if isinstance(host, str) and host not in _LOCAL_HOSTS and self.family != socket.AF_UNIX:
            attempts.append(f"connect {address}")
            raise OSError(f"offline test: no connection to {address}")
        return real_connect(self, address)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(socket.socket, "connect", connect)
    yield attempts
    assert attempts == [], f"network access attempted: {attempts}"


@pytest.fixture
async def store() -> AsyncIterator[InMemoryLightningStore]:
    """A fresh in-memory store."""
    store = InMemoryLightningStore()
    yield store
    await store.close()


@pytest.fixture
def tracer(store: InMemoryLightningStore) -> Iterator[WeaveTracer]:
    """A WeaveTracer initialized for worker 0 on ``store`` (torn down after the test)."""
    from agl_weave.tracer import WeaveTracer

    tracer = WeaveTracer(flush_timeout=30.0)
    tracer.init_worker(0, store)
    yield tracer
    tracer.teardown_worker(0)


async def new_attempt(store: InMemoryLightningStore) -> tuple[str, str]:
    """Create a rollout with its first attempt; return (rollout_id, attempt_id)."""
    attempted = await store.start_rollout(input={"task": "test"})
    return attempted.rollout_id, attempted.attempt.attempt_id
