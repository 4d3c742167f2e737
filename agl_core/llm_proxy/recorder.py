"""Getting records to the store without slowing agents down.

* :class:`SequenceAllocator` issues one span sequence id per request. Requests that arrive together
  share one ``get_many_span_sequence_ids`` call, so a remote store costs one round trip per burst, and
  the call runs while the backend is generating, so the id is issued before the agent sees the answer
  and orders the exchange before any span the agent records afterwards.
* :class:`SpanRecorder` turns finished exchanges into spans and writes them with ``add_many_spans`` from
  a background task; an exchange whose id could not be allocated goes with id 0 (the store numbers it).
  Store failures are logged, counted in :class:`ProxyStats` and retried span by span; nothing is
  dropped without being counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from agl_core.llm_proxy.recording import Exchange, build_span
from agl_core.llm_proxy.stats import ProxyStats
from agl_core.utils.http_guard import log_limited

if TYPE_CHECKING:
    from agl_core.store.base import LightningStore
    from agl_core.types import Span

__all__ = ["SequenceAllocator", "SpanRecorder"]

logger = logging.getLogger(__name__)

StoreGetter = Callable[[], "LightningStore | None"]


class SequenceAllocator:
    """Coalesces sequence-id requests into batched ``get_many_span_sequence_ids`` calls.

    One batch is in flight at a time, so ids of one rollout are issued in request order.
    """

    def __init__(self, get_store: StoreGetter, stats: ProxyStats) -> None:
        self._get_store = get_store
        self._stats = stats
        self._pending: list[tuple[str, str, asyncio.Future[int | None]]] = []
        self._task: asyncio.Task[None] | None = None

    def allocate(self, rollout_id: str, attempt_id: str) -> asyncio.Future[int | None]:
        """A future resolving to the next sequence id, or None when the store failed (counted)."""
        future: asyncio.Future[int | None] = asyncio.get_running_loop().create_future()
        self._pending.append((rollout_id, attempt_id, future))
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._drain())
        return future

    async def _drain(self) -> None:
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                store = self._get_store()
                ids: list[int | None]
                try:
                    if store is None:
                        raise RuntimeError("no store is set on the proxy")
                    got = await store.get_many_span_sequence_ids([(r, a) for r, a, _ in batch])
                    ids = list(got)
                    if len(ids) != len(batch):
                        raise RuntimeError(
                            f"the store returned {len(ids)} sequence ids for {len(batch)} requests"
                        )
                except Exception as exc:
                    self._stats.sequence_id_errors += len(batch)
                    self._stats.note_store_error(exc)
                    log_limited(
                        logger,
                        logging.WARNING,
                        "seq_alloc",
                        "Could not allocate %d span sequence id(s): %s",
                        len(batch),
                        exc,
                    )
                    ids = [None] * len(batch)
                for (_, _, future), seq in zip(batch, ids, strict=True):
                    if not future.done():
                        future.set_result(seq)
        finally:
            self._task = None
            if self._pending:  # cancelled mid-way: resolve the rest so no handler waits forever
                for _, _, future in self._pending:
                    if not future.done():
                        future.set_result(None)
                self._pending = []


class SpanRecorder:
    """Background writer of ``agl.llm_proxy.request`` spans.

    Args:
        get_store: Returns the store to write to at the time of writing (it may change while running).
        stats: Counters to update.
        batch_size: Most spans per ``add_many_spans`` call.
        max_pending: Exchanges held at most; beyond that new ones are dropped, counted and logged.
        flush_interval: Seconds a queued span may wait for more to share its store call (0: write at once).
    """

    def __init__(
        self,
        get_store: StoreGetter,
        stats: ProxyStats,
        *,
        batch_size: int = 256,
        max_pending: int = 100_000,
        flush_interval: float = 0.02,
    ) -> None:
        if batch_size < 1 or max_pending < 1:
            raise ValueError(f"batch_size and max_pending must be >= 1, got {batch_size} and {max_pending}")
        if flush_interval < 0:
            raise ValueError(f"flush_interval must be >= 0, got {flush_interval}")
        self._flush_interval = flush_interval
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._get_store = get_store
        self._stats = stats
        self._batch_size = batch_size
        self._max_pending = max_pending
        self._queue: deque[Exchange] = deque()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._submitted = 0
        self._settled = 0
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._warned_full = False

    def start(self) -> None:
        """Start the writer task on the running loop."""
        if self._task is None:
            self._wake = asyncio.Event()
            self._loop = asyncio.get_running_loop()
            self._task = self._loop.create_task(self._run(), name="agl-llm-proxy-recorder")

    def reserve(self) -> None:
        """Announce an exchange that will be submitted (or released) later, so :meth:`flush` waits for it.

        Called when a recorded request starts: a streamed answer reaches the agent before its exchange is
        submitted, and a flush issued in between must still include it.
        """
        self._submitted += 1

    def release(self) -> None:
        """Withdraw a reservation that will not be submitted."""
        self._settled += 1
        self._notify()

    def submit(self, exchange: Exchange, *, reserved: bool = False) -> None:
        """Queue one finished exchange (``reserved``: announced with :meth:`reserve`); never blocks."""
        if len(self._queue) >= self._max_pending:
            self._stats.spans_dropped += 1
            if reserved:
                self.release()
            if not self._warned_full:
                self._warned_full = True
                logger.warning(
                    "LLM proxy span queue is full (%d pending); dropping new spans until the store catches "
                    "up. Check the store (stats()['last_store_error']) or raise max_pending.",
                    self._max_pending,
                )
            return
        self._queue.append(exchange)
        if not reserved:
            self._submitted += 1
        self._stats.spans_queued += 1
        # Write when a batch is full, else at most flush_interval later: one store call (and one wake-up
        # of the writer) then covers every span that arrived meanwhile.
        if len(self._queue) >= self._batch_size or self._flush_interval == 0 or self._loop is None:
            self._wake.set()
        elif self._timer is None:
            self._timer = self._loop.call_later(self._flush_interval, self._wake.set)

    @property
    def pending(self) -> int:
        """Exchanges queued and not yet written (or failed)."""
        return self._submitted - self._settled

    async def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything submitted so far is written or counted as failed; False on timeout."""
        target = self._submitted
        if self._settled >= target:
            return True
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((target, future))
        self._wake.set()
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout)
        except asyncio.TimeoutError:
            return False
        return True

    async def stop(self, timeout: float) -> None:
        """Flush (bounded by ``timeout`` seconds) and stop; spans still queued are counted as dropped."""
        if self._task is None:
            return
        flushed = await self.flush(timeout)
        task, self._task = self._task, None
        task.cancel()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        with contextlib.suppress(asyncio.CancelledError):
            await task
        if not flushed and self._queue:
            lost = len(self._queue)
            self._stats.spans_dropped += lost
            self._settled += lost
            self._queue.clear()
            logger.warning(
                "LLM proxy stopped with %d span(s) not written within %.1fs; they are lost.", lost, timeout
            )
        self._notify()

    def _notify(self) -> None:
        settled = self._settled
        remaining = []
        for target, future in self._waiters:
            if target <= settled or self._task is None:
                if not future.done():
                    future.set_result(None)
            else:
                remaining.append((target, future))
        self._waiters = remaining

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            while self._queue:
                count = min(len(self._queue), self._batch_size)
                batch = [self._queue.popleft() for _ in range(count)]
                try:
                    await self._write(batch)
                except asyncio.CancelledError:  # stop() gave up waiting: the batch's fate is unknown
                    self._stats.spans_dropped += count
                    self._settled += count
                    logger.warning("LLM proxy stopped while writing %d span(s); they may be lost.", count)
                    raise
                except Exception:  # never let the writer die; _write counts what it could not store
                    logger.exception("LLM proxy span writer failed on a batch of %d", len(batch))
                self._settled += count
                self._notify()
            self._notify()

    async def _write(self, batch: list[Exchange]) -> None:
        store = self._get_store()
        if store is None:
            self._stats.spans_dropped += len(batch)
            log_limited(
                logger,
                logging.WARNING,
                "no_store",
                "LLM proxy has no store; %d span(s) were not recorded (call set_store()).",
                len(batch),
            )
            return
        spans: list[Span] = []
        for exchange in batch:
            try:
                span = build_span(exchange, exchange.sequence_id or 0)  # 0: the store numbers it
                spans.append(span)
                self._stats.note_usage(span.attributes)
            except Exception as exc:
                self._stats.spans_failed += 1
                log_limited(
                    logger,
                    logging.WARNING,
                    "span_build",
                    "Could not build the span of a %s request: %s",
                    exchange.operation,
                    exc,
                )
        if not spans:
            return
        try:
            await store.add_many_spans(spans)
            self._stats.spans_written += len(spans)
            return
        except Exception as exc:
            self._stats.note_store_error(exc)
            log_limited(
                logger,
                logging.WARNING,
                "batch_rejected",
                "Store rejected a batch of %d LLM proxy span(s) (%s); retrying them one by one.",
                len(spans),
                exc,
            )
        for span in spans:
            try:
                await store.add_span(span)
                self._stats.spans_written += 1
            except Exception as exc:
                self._stats.spans_failed += 1
                self._stats.note_store_error(exc)
                log_limited(
                    logger,
                    logging.WARNING,
                    "span_rejected",
                    "Store rejected the LLM proxy span of rollout %r attempt %r: %s",
                    span.rollout_id,
                    span.attempt_id,
                    exc,
                )
