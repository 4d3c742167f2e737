"""The runner actor: one agl runner in a Ray worker process, talking to the run's store over the network."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from typing import Any

from agl_core.execution import RunnerBundle, ThreadingEvent
from agl_core.store import LightningStore

__all__ = ["RunnerActor", "StoreUnreachableError"]

logger = logging.getLogger(__name__)


class StoreUnreachableError(RuntimeError):
    """A runner actor could not reach the run's store; the run stops instead of retrying forever."""


class RunnerActor:
    """Runs one runner bundle on rollouts from the store at ``store_uri`` until asked to stop.

    Wrapped with ``ray.remote`` by the strategy (an async actor: ``stop`` and ``info`` are served while
    ``run`` works). ``run`` checks the store first and raises `StoreUnreachableError` within
    ``connect_timeout`` seconds when it does not answer. ``stop`` asks the runner to finish its rollout;
    after ``grace`` seconds it is cancelled, which reports its in-flight attempt as failed.
    """

    def __init__(self) -> None:
        self._event = ThreadingEvent()

    async def run(
        self,
        bundle: RunnerBundle,
        store_uri: str,
        worker_id: int,
        *,
        connect_timeout: float,
        grace: float,
    ) -> int:
        """Run the bundle as worker ``worker_id``; returns the worker id once the runner has stopped."""
        from agl_core.store.uri import open_store

        store: LightningStore = open_store(store_uri)
        try:
            await _check_store(store, store_uri, connect_timeout)
            work = asyncio.ensure_future(bundle(store, worker_id, self._event))
            while not work.done():
                await asyncio.wait({work}, timeout=0.05)
                if self._event.is_set() and not work.done():
                    await asyncio.wait({work}, timeout=grace)
                    if not work.done():
                        work.cancel()
                        await asyncio.wait({work}, timeout=grace)
                    break
            if work.done() and not work.cancelled():
                work.result()
        finally:
            await store.close()
        return worker_id

    async def stop(self) -> None:
        """Ask the runner to stop after its current rollout."""
        self._event.set()

    async def info(self) -> dict[str, Any]:
        """Where this actor runs: process id and host name."""
        return {"pid": os.getpid(), "host": socket.gethostname()}


async def _check_store(store: LightningStore, store_uri: str, timeout: float) -> None:
    try:
        await asyncio.wait_for(store.statistics(), timeout)
    except Exception as exc:
        raise StoreUnreachableError(
            f"Runner actor on {socket.gethostname()} cannot reach the store at {store_uri} within "
            f"{timeout:.0f} s ({type(exc).__name__}: {exc}). The driver must serve it on an address the "
            "cluster's nodes can reach: set server_host to the driver's cluster IP, or pass store_uri with a "
            "database every node can open (postgresql://, mongodb://)."
        ) from exc
