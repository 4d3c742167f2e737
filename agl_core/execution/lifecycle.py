"""Running one bundle coroutine until it finishes or the shared stop event asks it to wind down."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from agl_core.execution.events import ExecutionEvent

__all__ = ["BundleAbandonedError", "run_until_stopped", "wait_for_event"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


class BundleAbandonedError(RuntimeError):
    """A bundle ignored cancellation for its whole grace period and was left behind."""


async def wait_for_event(event: ExecutionEvent, poll_interval: float) -> None:
    """Return once ``event`` is set, checking it every ``poll_interval`` seconds without blocking the loop."""
    while not event.is_set():
        await asyncio.sleep(poll_interval)


async def _cancel_and_wait(task: asyncio.Future[Any], grace: float, name: str) -> bool:
    """Cancel ``task`` and wait up to ``grace`` seconds; True when it finished."""
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=grace)
    if not done:
        logger.error("%s did not stop within %.1f s of being cancelled; abandoning it.", name, grace)
        return False
    if not task.cancelled():
        task.exception()  # mark it retrieved; callers that need it call task.result()
    return True


async def run_until_stopped(
    work: Awaitable[T],
    event: ExecutionEvent,
    *,
    graceful_delay: float,
    poll_interval: float,
    name: str = "bundle",
) -> T | None:
    """Await ``work``; once ``event`` is set, give it ``graceful_delay`` seconds, then cancel it.

    A cancelled bundle gets another ``graceful_delay`` seconds to unwind (a runner uses it to report its
    in-flight attempt); if it still runs it is abandoned with an error log and `BundleAbandonedError`.
    If the caller itself is cancelled (Ctrl-C), the bundle is cancelled the same way and the cancellation
    propagates. Exceptions of ``work`` propagate; a bundle stopped by the event returns None.
    """
    task: asyncio.Future[T] = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=poll_interval)
            if done:
                return task.result()
            if event.is_set():
                break
        done, _ = await asyncio.wait({task}, timeout=graceful_delay)
        if done:
            return task.result()
        logger.info("%s still running %.1f s after the stop request; cancelling it.", name, graceful_delay)
        if not await _cancel_and_wait(task, graceful_delay, name):
            raise BundleAbandonedError(f"{name} did not stop after cancellation.")
        if task.cancelled():
            return None
        return task.result()
    except asyncio.CancelledError:
        if not task.done():
            await _cancel_and_wait(task, graceful_delay, name)
        raise
