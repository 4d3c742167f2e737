"""Live progress of a training run, read from the store: a `rich` display on a terminal, log lines otherwise.

`ProgressReporter` polls the store (it never touches runners): rollout counts by status, throughput, and
the mean final reward per resources version over a sample of the rollouts that finished since the last
poll. Polling adapts to the store: when one poll takes long (a very large store), the next one waits
proportionally longer, so the display never costs the loop more than about 2% of the store's time.
"""

from __future__ import annotations

import logging
import sys
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

from agl_core.utils.loop_thread import Ticker

if TYPE_CHECKING:
    from rich.console import RenderableType

    from agl_core.store.base import LightningStore
    from agl_core.types.status import RolloutStatus

__all__ = ["ProgressReporter", "ProgressSnapshot", "RewardStats"]

logger = logging.getLogger(__name__)

_UNFINISHED: tuple[RolloutStatus, ...] = ("queuing", "requeuing", "preparing", "running")
_LOAD_FACTOR = 50.0
"""The wait after a poll is at least this many times the poll's own duration (caps the overhead at ~2%)."""
_THROUGHPUT_WINDOW_SECONDS = 10.0


@dataclass
class RewardStats:
    """Final rewards seen for one resources version (a sample of its finished rollouts)."""

    count: int = 0
    total: float = 0.0
    rollouts: int = 0

    @property
    def mean(self) -> float | None:
        """Mean reward, or None when no sampled rollout reported one."""
        return self.total / self.count if self.count else None


@dataclass
class ProgressSnapshot:
    """What one poll of the store found."""

    elapsed: float
    queued: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    cancelled: int = 0
    throughput: float = 0.0
    """Rollouts finished per second over the last few seconds."""
    rewards: dict[str, RewardStats] = field(default_factory=dict)
    first_error: str | None = None
    """``rollout_id: Type: message`` of the first failed rollout's recorded exception (None: no failure)."""

    @property
    def all_failed(self) -> bool:
        """Every finished rollout failed (and at least one finished)."""
        return self.failed > 0 and self.failed == self.finished

    @property
    def finished(self) -> int:
        """Succeeded, failed and cancelled rollouts."""
        return self.succeeded + self.failed + self.cancelled

    def line(self) -> str:
        """A one-line summary for logs."""
        parts = [
            f"[agl] {self.elapsed:7.1f}s",
            f"queued {self.queued}",
            f"running {self.running}",
            f"succeeded {self.succeeded}",
            f"failed {self.failed}",
            f"cancelled {self.cancelled}",
            f"{self.throughput:.1f} rollouts/s",
        ]
        for version, stats in self.rewards.items():
            mean = "n/a" if stats.mean is None else f"{stats.mean:.4g}"
            parts.append(f"reward[{version}] {mean} (n={stats.count})")
        if self.failed and self.first_error:
            lead = "every rollout failed" if self.all_failed else "first failure"
            parts.append(f"{lead}; first error: {self.first_error}")
        return " | ".join(parts)


async def _first_error(store: LightningStore) -> str | None:
    """``rollout_id: Type: message`` of the earliest failed rollout's recorded exception, if any."""
    from agl_core.semconv import AGL_EXCEPTION

    failed = await store.query_rollouts(status_in=["failed"], limit=1)
    for rollout in failed:
        for span in await store.query_spans(rollout.rollout_id, "latest"):
            if span.name == AGL_EXCEPTION:
                attributes = span.attributes or {}
                kind = attributes.get("exception.type", "error")
                message = str(attributes.get("exception.message", "")).splitlines()
                return f"{rollout.rollout_id}: {kind}: {message[0] if message else ''}".rstrip(": ")
        return f"{rollout.rollout_id}: no exception recorded (`agl doctor {rollout.rollout_id}` explains)"
    return None


class _Sampler:
    """Tracks which rollouts finished between polls and reads the final reward of a sample of them."""

    def __init__(self, max_reads: int) -> None:
        self.max_reads = max_reads
        self.previous: set[str] = set()
        self.rewards: dict[str, RewardStats] = {}

    async def update(self, store: LightningStore, unfinished_ids: set[str]) -> None:
        from agl_core.emitter import find_final_reward

        newly_finished = sorted(self.previous - unfinished_ids)[: self.max_reads]
        self.previous = unfinished_ids
        if not newly_finished:
            return
        rollouts = await store.query_rollouts(rollout_id_in=newly_finished, status_in=["succeeded"])
        latest = None
        for rollout in rollouts:
            version = rollout.resources_id
            if version is None:
                if latest is None:
                    update = await store.get_latest_resources()
                    latest = update.resources_id if update is not None else "none"
                version = latest
            stats = self.rewards.setdefault(version, RewardStats())
            stats.rollouts += 1
            spans = await store.query_spans(rollout.rollout_id, "latest")
            reward = find_final_reward(list(spans))
            if reward is not None:
                stats.count += 1
                stats.total += reward


class ProgressReporter:
    """Shows the run's progress until :meth:`stop`.

    The store is polled every ``refresh_seconds`` (longer for a large, slow-to-query store). On a terminal
    (``stream.isatty()``) a `rich` live table shows each poll; otherwise a plain line is written every
    ``log_seconds``. A final line is always written at stop.

    Args:
        store: The store of the run (its algorithm-side view).
        refresh_seconds: Shortest time between two polls of the live display.
        log_seconds: Time between two plain lines when the stream is not a terminal.
        stream: Where to write (default: standard output).
        live: Force the live display on or off (default: when ``stream`` is a terminal).
        max_reward_reads: Most finished rollouts whose spans are read per poll.
    """

    def __init__(
        self,
        store: LightningStore,
        *,
        refresh_seconds: float = 0.5,
        log_seconds: float = 10.0,
        stream: TextIO | None = None,
        live: bool | None = None,
        max_reward_reads: int = 32,
    ) -> None:
        if refresh_seconds <= 0 or log_seconds <= 0:
            raise ValueError("refresh_seconds and log_seconds must be > 0.")
        self.store = store
        self.stream: TextIO = stream if stream is not None else sys.stdout
        self.live = _isatty(self.stream) if live is None else live
        self.interval = refresh_seconds
        self.log_seconds = log_seconds
        self._last_line = float("-inf")
        self._sampler = _Sampler(max_reward_reads)
        self._history: deque[tuple[float, int]] = deque()
        self._start = time.monotonic()
        self._ticker = Ticker(
            "agl-progress", self._poll_and_show, delay=self._next_wait, on_error=_poll_failed
        )
        self._display: Any = None
        self._first_error: str | None = None
        self.last: ProgressSnapshot | None = None

    # ------------------------------------------------------------------------------ polling

    async def poll(self) -> ProgressSnapshot:
        """Read the store once and return the snapshot (also kept as :attr:`last`)."""
        store = self.store
        unfinished = await store.query_rollouts(status_in=list(_UNFINISHED))
        stats = await store.statistics()
        failed = (await store.query_rollouts(status_in=["failed"], limit=1)).total
        cancelled = (await store.query_rollouts(status_in=["cancelled"], limit=1)).total
        counts = dict.fromkeys(_UNFINISHED, 0)
        for rollout in unfinished:
            counts[rollout.status] = counts.get(rollout.status, 0) + 1
        await self._sampler.update(store, {r.rollout_id for r in unfinished})
        if failed and self._first_error is None:
            self._first_error = await _first_error(store)
        now = time.monotonic()
        queued = counts["queuing"] + counts["requeuing"]
        running = counts["preparing"] + counts["running"]
        finished = max(0, stats["total_rollouts"] - len(unfinished))
        snapshot = ProgressSnapshot(
            elapsed=now - self._start,
            queued=queued,
            running=running,
            succeeded=max(0, finished - failed - cancelled),
            failed=failed,
            cancelled=cancelled,
            throughput=self._throughput(now, finished),
            rewards={k: RewardStats(v.count, v.total, v.rollouts) for k, v in self._sampler.rewards.items()},
            first_error=self._first_error,
        )
        self.last = snapshot
        return snapshot

    def _throughput(self, now: float, finished: int) -> float:
        history = self._history
        history.append((now, finished))
        while len(history) > 2 and now - history[0][0] > _THROUGHPUT_WINDOW_SECONDS:
            history.popleft()
        if len(history) < 2:
            elapsed = now - self._start
            return finished / elapsed if elapsed > 0 else 0.0
        (t0, f0), (t1, f1) = history[0], history[-1]
        return (f1 - f0) / (t1 - t0) if t1 > t0 else 0.0

    # ------------------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Start polling: on its own thread for a thread-safe store, else as a task on the running loop."""
        if self._ticker.running:
            return
        self._start = self._last_line = time.monotonic()
        if self.live:
            self._display = _LiveDisplay(self.stream)
        self._ticker.start(threaded=bool(self.store.capabilities.get("thread_safe", False)))

    async def stop(self) -> None:
        """Stop polling, show the final state and write a final line."""
        await self._ticker.stop(10.0)
        snapshot: ProgressSnapshot | None
        try:
            snapshot = await self.poll()
        except Exception as exc:  # the store may be closing; the run itself is what matters
            logger.debug("Final progress poll failed: %r", exc)
            snapshot = self.last
        if self._display is not None:
            if snapshot is not None:
                self._display.update(render(snapshot))
            self._display.close()
            self._display = None
        if snapshot is not None:
            self._write(snapshot.line())

    def _show(self, snapshot: ProgressSnapshot) -> None:
        if self._display is not None:
            self._display.update(render(snapshot))
            return
        now = time.monotonic()
        if now - self._last_line >= self.log_seconds:
            self._last_line = now
            self._write(snapshot.line())

    def _write(self, line: str) -> None:
        try:
            self.stream.write(line + "\n")
            self.stream.flush()
        except (OSError, ValueError):  # closed stream at interpreter exit
            pass

    def _next_wait(self, poll_seconds: float) -> float:
        return max(self.interval, poll_seconds * _LOAD_FACTOR)

    async def _poll_and_show(self) -> None:
        self._show(await self.poll())


def _poll_failed(exc: Exception) -> bool:
    logger.debug("Progress poll failed: %r", exc)
    return True


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def render(snapshot: ProgressSnapshot) -> RenderableType:
    """The `rich` table of a snapshot."""
    from rich.console import Group
    from rich.table import Table

    counts = Table(title=f"agl fit — {snapshot.elapsed:.0f}s", title_justify="left", expand=False)
    for name in ("queued", "running", "succeeded", "failed", "cancelled", "rollouts/s"):
        counts.add_column(name, justify="right")
    counts.add_row(
        str(snapshot.queued),
        str(snapshot.running),
        f"[green]{snapshot.succeeded}[/green]",
        f"[red]{snapshot.failed}[/red]" if snapshot.failed else "0",
        str(snapshot.cancelled),
        f"{snapshot.throughput:.1f}",
    )
    if snapshot.failed and snapshot.first_error:
        lead = "every rollout failed" if snapshot.all_failed else "first failure"
        counts.caption = f"{lead}; first error: {snapshot.first_error}"
        counts.caption_justify = "left"
    if not snapshot.rewards:
        return counts
    rewards = Table(title="mean final reward by resources version (sampled)", title_justify="left")
    rewards.add_column("resources")
    rewards.add_column("rollouts", justify="right")
    rewards.add_column("with reward", justify="right")
    rewards.add_column("mean reward", justify="right")
    for version, stats in _sorted_rewards(snapshot.rewards):
        mean = "n/a" if stats.mean is None else f"{stats.mean:.4g}"
        rewards.add_row(version, str(stats.rollouts), str(stats.count), mean)
    return Group(counts, rewards)


def _sorted_rewards(rewards: dict[str, RewardStats]) -> Sequence[tuple[str, RewardStats]]:
    return sorted(rewards.items())


class _LiveDisplay:
    """A `rich.live.Live` refreshed by hand (no refresh thread of its own)."""

    def __init__(self, stream: TextIO) -> None:
        from rich.console import Console
        from rich.live import Live

        self._live = Live(console=Console(file=stream), auto_refresh=False, transient=False)
        self._live.start()

    def update(self, renderable: RenderableType) -> None:
        self._live.update(renderable, refresh=True)

    def close(self) -> None:
        self._live.stop()
