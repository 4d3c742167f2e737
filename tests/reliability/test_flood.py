"""Flood: thousands of bad requests over keep-alive connections get 4xx answers, never a 5xx, and a
failing store writes one traceback, not one per request."""

from __future__ import annotations

import asyncio
import collections
import io
import logging
import time

import aiohttp

from agl_core.store.http import BackgroundServer
from agl_core.store.memory import InMemoryLightningStore

from .conftest import report

BAD_REQUESTS = 2000
CONNECTIONS = 50
HUGE = str(2**63)


def _bad_request(index: int) -> tuple[str, str, dict[str, str], bytes | None]:
    kind = index % 5
    if kind == 0:
        return "GET", f"/v1/agl/rollouts?limit={HUGE}", {}, None
    if kind == 1:
        return "POST", "/v1/agl/queues/rollouts/enqueue", {"Content-Type": "text/plain"}, b"{}"
    if kind == 2:
        return "POST", "/v1/agl/queues/rollouts/enqueue", {"Content-Type": "application/json"}, b"{"
    if kind == 3:
        body = b'{"rollouts":[{"input":' + b"[" * 150 + b"]" * 150 + b"}]}"
        return "POST", "/v1/agl/queues/rollouts/enqueue", {"Content-Type": "application/json"}, body
    return "GET", "/v1/agl/rollouts?offset=-1", {}, None


async def _flood(endpoint: str, count: int) -> collections.Counter[int]:
    statuses: collections.Counter[int] = collections.Counter()
    connector = aiohttp.TCPConnector(limit=CONNECTIONS)
    async with aiohttp.ClientSession(endpoint, connector=connector) as session:
        queue: asyncio.Queue[int] = asyncio.Queue()
        for index in range(count):
            queue.put_nowait(index)

        async def worker() -> None:
            while not queue.empty():
                method, path, headers, body = _bad_request(queue.get_nowait())
                async with session.request(method, path, headers=headers, data=body) as response:
                    await response.read()
                    statuses[response.status] += 1

        await asyncio.gather(*(worker() for _ in range(CONNECTIONS)))
    return statuses


def test_flood_of_bad_requests_gets_only_4xx() -> None:
    with BackgroundServer(InMemoryLightningStore) as server:
        started = time.perf_counter()
        statuses = asyncio.run(_flood(server.endpoint, BAD_REQUESTS))
        seconds = time.perf_counter() - started
    report("flood", requests=BAD_REQUESTS, statuses=dict(statuses), seconds=round(seconds, 2))
    assert sum(statuses.values()) == BAD_REQUESTS
    assert all(400 <= status < 500 for status in statuses), statuses


class _FailingStore(InMemoryLightningStore):
    """A store whose query fails the way a server fault does (the flood's 500 path)."""

    async def _query_rollouts(self, query: object, where: object) -> object:  # type: ignore[override]
        raise RuntimeError("disk on fire")


def test_flood_of_server_faults_logs_one_traceback() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    server_logger = logging.getLogger("agl_core.store.http.server")
    server_logger.addHandler(handler)
    try:
        with BackgroundServer(_FailingStore) as server:
            count = BAD_REQUESTS // 3
            statuses = asyncio.run(_flood_path(server.endpoint, "/v1/agl/rollouts", count))
    finally:
        server_logger.removeHandler(handler)
    logged = stream.getvalue()
    report("fault-flood", requests=count, statuses=dict(statuses), log_bytes=len(logged.encode()))
    assert statuses == {500: count}
    assert logged.count("Traceback") == 1


async def _flood_path(endpoint: str, path: str, count: int) -> collections.Counter[int]:
    statuses: collections.Counter[int] = collections.Counter()
    async with aiohttp.ClientSession(endpoint, connector=aiohttp.TCPConnector(limit=CONNECTIONS)) as session:

        async def one() -> None:
            async with session.get(path) as response:
                await response.read()
                statuses[response.status] += 1

        for start in range(0, count, CONNECTIONS):
            await asyncio.gather(*(one() for _ in range(min(CONNECTIONS, count - start))))
    return statuses
