"""What ``/health`` reports: whether the served store answers a read right now (issue 34)."""

from __future__ import annotations

import asyncio
import time

from agl_core.store.base import LightningStore

__all__ = ["StoreProbe"]

_PROBE_ID = "ro-agl-health-probe"


class StoreProbe:
    """One cheap read of the store (a rollout lookup by an id that never exists), at most once per `every`.

    Args:
        every: Seconds a result is reused, so health checks cost the store at most one read per interval.
        timeout: Seconds the read may take before the store counts as unavailable.
    """

    def __init__(self, every: float = 1.0, timeout: float = 5.0) -> None:
        self.every = every
        self.timeout = timeout
        self._at = float("-inf")
        self._problem: str | None = None

    async def problem(self, store: LightningStore) -> str | None:
        """Why the store cannot answer a read (``"ConnectionRefusedError: ..."``), or None when it can."""
        now = time.monotonic()
        if now - self._at < self.every:
            return self._problem
        try:
            await asyncio.wait_for(store.get_rollout_by_id(_PROBE_ID), self.timeout)
            problem = None
        except asyncio.TimeoutError:
            problem = f"the store did not answer a read within {self.timeout:g} s"
        except Exception as exc:
            problem = f"{type(exc).__name__}: {exc}"
        self._at, self._problem = time.monotonic(), problem
        return problem
