"""`RunnerActorPool`: starts, watches, replaces, scales and stops the runner actors of one run."""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import ray
from ray.exceptions import RayActorError

from agl_core.execution import RunnerBundle
from agl_core.store import LightningStore
from agl_ray.actor import RunnerActor, StoreUnreachableError

__all__ = ["RunnerActorPool", "fail_active_attempts"]

logger = logging.getLogger(__name__)

_TICK_SECONDS = 0.1
_ACTIVE_ATTEMPT = ("preparing", "running")


@dataclass
class _Member:
    """One started actor: its handle, the future of its ``run`` call, and whether we asked it to stop."""

    handle: Any
    done: asyncio.Future[Any]
    stopping: bool = False


async def fail_active_attempts(store: LightningStore, worker_names: Iterable[str]) -> list[str]:
    """Mark ``failed`` every active latest attempt owned by one of ``worker_names``; returns rollout ids.

    The store then retries those rollouts per their ``RolloutConfig`` (or fails them when out of attempts).
    """
    names = set(worker_names)
    failed: list[str] = []
    if not names:
        return failed
    for rollout in await store.query_rollouts(status_in=["preparing", "running"]):
        attempt = getattr(rollout, "attempt", None) or await store.get_latest_attempt(rollout.rollout_id)
        if attempt is None or attempt.worker_id not in names or attempt.status not in _ACTIVE_ATTEMPT:
            continue
        await store.update_attempt(rollout.rollout_id, attempt.attempt_id, status="failed")
        failed.append(rollout.rollout_id)
    return failed


def worker_name(worker_id: int) -> str:
    """The store's id of runner worker ``worker_id`` (agl runners report as ``Worker-<id>``)."""
    return f"Worker-{worker_id}"


class RunnerActorPool:
    """Keeps ``desired`` runner actors working against ``store_uri``.

    * An actor that dies (``ray.kill``, a crashed node, an exception) has its in-flight attempt marked
      failed at once and is replaced, at most ``max_restarts`` times over the run.
    * An actor whose runner returns on its own (``max_rollouts`` reached) is not replaced.
    * `scale` changes ``desired``: new actors start; surplus ones (newest first) finish their rollout
      and stop.
    * An actor that cannot reach the store is fatal: `supervise` raises its `StoreUnreachableError`.
    """

    def __init__(
        self,
        bundle: RunnerBundle,
        store: LightningStore,
        store_uri: str,
        *,
        actor_options: Mapping[str, Any],
        max_restarts: int,
        connect_timeout: float,
        grace: float,
        first_worker_id: int = 0,
    ) -> None:
        self.store = store
        self.store_uri = store_uri
        self.max_restarts = max_restarts
        self.connect_timeout = connect_timeout
        self.grace = grace
        self.desired = 0
        self.deaths = 0
        self.replaced = 0
        self.started = 0
        self.live_counts: list[int] = []
        self._actor_cls = ray.remote(RunnerActor).options(**actor_options)
        self._bundle_ref = ray.put(bundle)
        self._members: dict[int, _Member] = {}
        self._ids = itertools.count(first_worker_id)
        self._worker_ids: list[int] = []
        self._closing = False

    # -------------------------------------------------------------------------------- queries

    def handles(self) -> dict[int, Any]:
        """Actor handles of the running members, by worker id."""
        return {wid: m.handle for wid, m in self._members.items() if not m.done.done()}

    def active(self) -> list[int]:
        """Worker ids of members that are working (not stopping)."""
        return [wid for wid, m in self._members.items() if not m.stopping and not m.done.done()]

    # -------------------------------------------------------------------------------- control

    def scale(self, n_runners: int) -> None:
        """Set the number of runner actors; applied by `supervise` within a tick."""
        self.desired = n_runners

    async def supervise(self, *, stop_when_idle: bool) -> None:
        """Watch the members until cancelled (or, with ``stop_when_idle``, until none is left to run)."""
        while True:
            await self._reap()
            if not self._closing:
                self._reconcile()
            count = len(self.active())
            if not self.live_counts or self.live_counts[-1] != count:
                self.live_counts.append(count)
            if not self._members and self.desired <= 0 and stop_when_idle:
                return
            if not self._members and self.deaths > self.max_restarts:
                raise RuntimeError(
                    "Every runner actor died and the restart budget is spent "
                    f"(max_restarts={self.max_restarts}, {self.deaths} deaths); see the actor logs."
                )
            await asyncio.sleep(_TICK_SECONDS)

    async def close(self) -> None:
        """Stop every member: ask, wait ``2 * grace`` (+ slack), kill the rest, fail their active attempts."""
        self._closing = True
        for member in self._members.values():
            if not member.stopping:
                member.stopping = True
                member.handle.stop.remote()
        pending = [m.done for m in self._members.values() if not m.done.done()]
        if pending:
            await asyncio.wait(pending, timeout=2 * self.grace + self.connect_timeout)
        for member in self._members.values():
            ray.kill(member.handle, no_restart=True)
        if self._members:
            await asyncio.wait([m.done for m in self._members.values()], timeout=self.grace)
        for member in self._members.values():
            if not member.done.done():
                member.done.cancel()
            elif not member.done.cancelled():
                member.done.exception()  # retrieved: deaths at shutdown are expected
        self._members.clear()
        failed = await fail_active_attempts(self.store, map(worker_name, self._worker_ids))
        if failed:
            logger.warning("Marked %d in-flight attempt(s) of stopped actors failed: %s", len(failed), failed)

    # -------------------------------------------------------------------------------- internals

    def _start(self) -> None:
        worker_id = next(self._ids)
        handle = self._actor_cls.remote()
        ref = handle.run.remote(
            self._bundle_ref,
            self.store_uri,
            worker_id,
            connect_timeout=self.connect_timeout,
            grace=self.grace,
        )
        self._members[worker_id] = _Member(handle, asyncio.wrap_future(ref.future()))
        self._worker_ids.append(worker_id)
        self.started += 1
        logger.info("Started runner actor %s.", worker_name(worker_id))

    def _reconcile(self) -> None:
        active = self.active()
        for _ in range(self.desired - len(active)):
            self._start()
        for worker_id in sorted(active, reverse=True)[: max(0, len(active) - self.desired)]:
            member = self._members[worker_id]
            member.stopping = True
            member.handle.stop.remote()
            logger.info("Scaling down: %s finishes its rollout and stops.", worker_name(worker_id))

    async def _reap(self) -> None:
        for worker_id, member in list(self._members.items()):
            if not member.done.done():
                continue
            del self._members[worker_id]
            error = member.done.exception() if not member.done.cancelled() else None
            if error is None:
                ray.kill(member.handle, no_restart=True)
                if not member.stopping:  # its runner finished on its own (max_rollouts)
                    self.desired = max(0, self.desired - 1)
                continue
            if isinstance(error, StoreUnreachableError):
                raise error
            self.deaths += 1
            kind = "died" if isinstance(error, RayActorError) else f"failed ({type(error).__name__}: {error})"
            started = time.monotonic()
            failed = await fail_active_attempts(self.store, [worker_name(worker_id)])
            logger.warning(
                "Runner actor %s %s; marked its in-flight attempt(s) %s failed in %.2f s.",
                worker_name(worker_id),
                kind,
                failed or "(none)",
                time.monotonic() - started,
            )
            ray.kill(member.handle, no_restart=True)
            if member.stopping:
                continue
            if self.deaths > self.max_restarts:
                logger.error(
                    "Not replacing %s: max_restarts=%d reached.", worker_name(worker_id), self.max_restarts
                )
                self.desired = max(0, self.desired - 1)
                continue
            self.replaced += 1
