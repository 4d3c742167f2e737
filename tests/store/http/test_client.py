"""`LightningStoreClient` behaviour that the conformance suite does not cover: transport, retries,
pickling, several event loops, long waits, URI opening."""

from __future__ import annotations

import asyncio
import pickle
import threading
import time
from typing import Any

import pytest

from agl_core.store import RolloutNotFoundError, open_store
from agl_core.store.http import (
    BackgroundServer,
    LightningStoreClient,
    StoreServerError,
    StoreUnavailableError,
)
from agl_core.store.memory import InMemoryLightningStore
from agl_core.types import Span

from ._support import free_port


class FaultyStore(InMemoryLightningStore):
    """An in-memory store whose `statistics` fails and whose calls are counted."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.calls: dict[str, int] = {}

    async def statistics(self) -> Any:
        self.calls["statistics"] = self.calls.get("statistics", 0) + 1
        raise RuntimeError("disk on fire")

    async def _apply_rollout_update(self, update: Any) -> Any:
        self.calls["update_rollout"] = self.calls.get("update_rollout", 0) + 1
        return await super()._apply_rollout_update(update)


def test_open_store_opens_http_uris(server: BackgroundServer) -> None:
    store = open_store(server.endpoint, timeout=5.0)
    assert isinstance(store, LightningStoreClient)
    assert store.capabilities == {
        "thread_safe": True,
        "async_safe": True,
        "zero_copy": True,
        "otlp_traces": True,
    }
    assert store.otlp_traces_endpoint() == server.endpoint + "/v1/traces"


def test_client_pickles_only_its_configuration(server: BackgroundServer) -> None:
    client = LightningStoreClient(server.endpoint, token="t", timeout=7.0, retries=3)

    async def use(c: LightningStoreClient) -> str:
        try:
            return (await c.enqueue_rollout("p")).rollout_id
        finally:
            await c.close()

    asyncio.run(use(client))  # it has open connections now
    clone = pickle.loads(pickle.dumps(client))
    assert (clone.url, clone.token, clone.timeout, clone.retries) == (server.endpoint, "t", 7.0, 3)
    assert asyncio.run(use(clone)).startswith("ro-")


def test_server_fault_is_retried_twice_then_raised() -> None:
    faulty = FaultyStore()
    with BackgroundServer(faulty) as served:
        client = LightningStoreClient(served.endpoint, backoff=(0.01, 0.02))

        async def main() -> None:
            try:
                with pytest.raises(StoreServerError, match="disk on fire"):
                    await client.statistics()
            finally:
                await client.close()

        asyncio.run(main())
    assert faulty.calls["statistics"] == 3


def test_client_errors_are_not_retried() -> None:
    faulty = FaultyStore()
    with BackgroundServer(faulty) as served:
        client = LightningStoreClient(served.endpoint, backoff=(0.01, 0.02))

        async def main() -> None:
            try:
                with pytest.raises(RolloutNotFoundError) as caught:
                    await client.update_rollout("ro-absent", status="failed")
                assert caught.value.rollout_id == "ro-absent"
                assert isinstance(caught.value, KeyError) and isinstance(caught.value, ValueError)
            finally:
                await client.close()

        asyncio.run(main())
    assert faulty.calls["update_rollout"] == 1


def test_unreachable_server_raises_store_unavailable_within_the_budget() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    client = LightningStoreClient(url, retries=50, retry_timeout=0.5, backoff=(0.01, 0.05))

    async def main() -> float:
        start = time.monotonic()
        try:
            with pytest.raises(StoreUnavailableError, match=url.replace(".", r"\.")):
                await client.enqueue_rollout("x")
        finally:
            await client.close()
        return time.monotonic() - start

    assert asyncio.run(main()) < 5.0


def test_client_reconnects_after_a_server_restart_on_the_same_port() -> None:
    port = free_port()
    store = InMemoryLightningStore()
    first = BackgroundServer(store, port=port)
    first.start()
    client = LightningStoreClient(first.endpoint, retry_timeout=30.0, backoff=(0.02, 0.2))
    restarted = threading.Event()

    def restart() -> None:
        first.stop()
        time.sleep(0.3)  # the outage the client must ride out
        second.start()
        restarted.set()

    second = BackgroundServer(store, port=port)

    async def main() -> None:
        try:
            before = await client.enqueue_rollout("before")
            thread = threading.Thread(target=restart)
            thread.start()
            await asyncio.sleep(0.05)
            after = await client.enqueue_rollout("after")  # retried until the new server answers
            thread.join(30)
            assert restarted.is_set()
            ids = {r.rollout_id for r in await client.query_rollouts()}
            assert {before.rollout_id, after.rollout_id} <= ids
        finally:
            await client.close()

    try:
        asyncio.run(main())
    finally:
        second.stop()
        first.stop()


def test_one_client_serves_several_threads_and_event_loops(server: BackgroundServer) -> None:
    client = LightningStoreClient(server.endpoint)
    errors: list[BaseException] = []

    def worker(index: int) -> None:
        async def run() -> None:
            for n in range(20):
                rollout = await client.start_rollout({"thread": index, "n": n})
                span = Span.from_attributes(
                    attributes={"i": n},
                    rollout_id=rollout.rollout_id,
                    attempt_id=rollout.attempt.attempt_id,
                    sequence_id=1,
                )
                assert len(await client.add_many_spans([span])) == 1

        try:
            asyncio.run(run())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors
    stats = asyncio.run(client.statistics())
    assert (stats["total_rollouts"], stats["total_spans"]) == (80, 80)
    asyncio.run(client.close())


def test_wait_for_rollouts_long_polls_past_the_server_cap() -> None:
    """A 3 s wait over a server that caps one poll at 0.5 s returns when the rollout finishes."""
    with BackgroundServer(InMemoryLightningStore(), max_wait_seconds=0.5) as served:
        client = LightningStoreClient(served.endpoint)

        async def main() -> None:
            try:
                started = await client.start_rollout("slow")

                async def finish_later() -> None:
                    await asyncio.sleep(1.2)  # longer than two server polls
                    await client.update_attempt(started.rollout_id, "latest", status="succeeded")

                finisher = asyncio.create_task(finish_later())
                done = await client.wait_for_rollouts(
                    rollout_ids=[started.rollout_id, "ro-unknown"], timeout=10
                )
                await finisher
                assert [(r.rollout_id, r.status) for r in done] == [(started.rollout_id, "succeeded")]
                # Unknown ids alone are not waited for, even without a timeout.
                assert await asyncio.wait_for(client.wait_for_rollouts(rollout_ids=["ro-unknown"]), 10) == []
            finally:
                await client.close()

        asyncio.run(main())


def test_add_many_spans_is_one_request_and_returns_only_new_spans(server: BackgroundServer) -> None:
    client = LightningStoreClient(server.endpoint)

    async def main() -> None:
        try:
            started = await client.start_rollout("s")
            spans = [
                Span.from_attributes(
                    attributes={"n": n},
                    rollout_id=started.rollout_id,
                    attempt_id=started.attempt.attempt_id,
                    sequence_id=n,
                )
                for n in range(1, 301)
            ]
            assert await client.add_many_spans(spans[:100]) == spans[:100]
            assert await client.add_many_spans(spans) == spans[100:]
            page = await client.query_spans(started.rollout_id)
            assert page.total == 300
        finally:
            await client.close()

    asyncio.run(main())
