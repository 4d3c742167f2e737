"""One open ``trace_context``: its identity, its span buffer and the background sender to the store.

Finished spans are handed over from any thread (``on_span_end`` only appends to a deque and, when the
sender sleeps, wakes it). The sender is an asyncio task on the loop that opened the context: it takes
everything queued, converts it and writes one ``add_many_spans`` batch, whose spans the store numbers
(sequence id 0 asks it to); while a batch is in flight the next one accumulates. ``close``
drains the queue within a deadline, so every span ended inside the context is in the store when the
context returns. A store failure is logged, counted in the :class:`TraceExportReport` and the spans are
kept for ``get_last_trace()`` -- never dropped silently.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import threading
from collections import deque
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from agl_core.types import Span
from agl_core.types.tracer import with_identity_resource

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

    from agl_core.store.base import LightningStore

__all__ = ["TraceBinding", "TraceExportReport", "current_binding"]

logger = logging.getLogger(__name__)

LOCAL_ROLLOUT_ID = "rollout-dummy"
LOCAL_ATTEMPT_ID = "attempt-dummy"

_CURRENT_BINDING: contextvars.ContextVar[TraceBinding | None] = contextvars.ContextVar(
    "agl_trace_binding", default=None
)


def current_binding() -> TraceBinding | None:
    """The trace binding open in the current context, or None."""
    return _CURRENT_BINDING.get()


class TraceExportReport(BaseModel):
    """How the spans of one ``trace_context`` reached the store.

    ``ok`` is True when every recorded span was stored (or there is no store to send to).
    """

    rollout_id: str | None = None
    attempt_id: str | None = None
    spans_recorded: int = 0
    """Spans that ended and were attributed to this trace."""
    spans_stored: int = 0
    """Spans the store acknowledged."""
    spans_failed: int = 0
    """Spans that could not be written (kept locally; see ``errors``)."""
    late_spans: int = 0
    """Spans that ended after the context had exited (sent anyway when the loop still runs)."""
    timed_out: bool = False
    """The bounded flush on exit ran out of time."""
    errors: list[str] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No failure, no timeout, no late span."""
        return not (self.spans_failed or self.timed_out or self.late_spans or self.errors)


class TraceBinding:
    """Buffer and sender of one trace context (see the module docstring)."""

    def __init__(
        self,
        *,
        name: str | None,
        rollout_id: str | None,
        attempt_id: str | None,
        store: LightningStore | None,
        batch_size: int,
    ) -> None:
        self.name = name
        self.rollout_id = rollout_id
        self.attempt_id = attempt_id
        self.store = store if rollout_id is not None else None
        self.batch_size = batch_size
        self.closed = False
        self._recorded = self._stored = self._failed = self._late = 0
        self._timed_out = False
        self._errors: list[str] = []
        self._pending: deque[ReadableSpan] = deque()
        self._in_flight: list[ReadableSpan] = []
        self._spans: list[Span] = []
        self._lock = threading.Lock()
        self._local_sequence = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._wakeup: asyncio.Event | None = None
        self._sender: asyncio.Task[None] | None = None
        self._sleeping = False
        self._closing = False

    # ------------------------------------------------------------------ lifecycle (loop thread)

    def open(self) -> contextvars.Token[TraceBinding | None]:
        """Bind to the running loop, start the sender (when there is a store), make this binding current."""
        if self.store is not None:
            self._loop = asyncio.get_running_loop()
            self._loop_thread = threading.get_ident()
            self._wakeup = asyncio.Event()
            self._start_sender()
        return _CURRENT_BINDING.set(self)

    async def close(self, token: contextvars.Token[TraceBinding | None], timeout: float) -> None:
        """Stop being current and flush: return once every queued span is stored or ``timeout`` passed."""
        _CURRENT_BINDING.reset(token)
        self.closed = True
        self._closing = True
        sender = self._sender
        if sender is None:
            return
        self._wake()
        try:
            await asyncio.wait_for(asyncio.shield(sender), timeout)
        except asyncio.TimeoutError:
            sender.cancel()
            self._timed_out = True
            left = self._take(len(self._pending))
            self._keep_local(left, f"flush timed out after {timeout:.1f}s")
            logger.error(
                "agl tracer: %d span(s) of rollout %s attempt %s did not reach the store within %.1fs; they "
                "are kept in get_last_trace() but are missing from the store.",
                len(left),
                self.rollout_id,
                self.attempt_id,
                timeout,
            )

    # ------------------------------------------------------------------ span intake (any thread)

    def on_span_end(self, span: ReadableSpan) -> None:
        """Queue a finished span; wakes the sender if it sleeps. Never raises."""
        self._pending.append(span)
        with self._lock:
            self._recorded += 1
            if self.closed:
                self._late += 1
        if self.store is None:
            return
        if self.closed:
            self._send_late(span)
        elif self._sleeping:
            self._wake()

    def export_report(self) -> TraceExportReport:
        """A snapshot of how this trace's spans reached the store."""
        with self._lock:
            return TraceExportReport(
                rollout_id=self.rollout_id,
                attempt_id=self.attempt_id,
                spans_recorded=self._recorded,
                spans_stored=self._stored,
                spans_failed=self._failed,
                late_spans=self._late,
                timed_out=self._timed_out,
                errors=list(self._errors),
            )

    def spans(self) -> list[Span]:
        """Converted spans in end order; spans not sent to a store are converted with local sequence ids."""
        if self.store is None:
            self._keep_local(self._take(len(self._pending)), None)
        with self._lock:
            return list(self._spans)

    def snapshot(self) -> list[Span]:
        """The spans ended so far, while the context is still open (for hooks such as ``on_trace_end``).

        Spans the store has acknowledged come first with their sequence ids; spans still on their way get
        provisional local sequence ids (the store assigns the final ones). Nothing is taken off the queue.
        """
        if self.store is None:
            return self.spans()
        with self._lock:
            done = list(self._spans)
            waiting = list(self._in_flight) + list(self._pending.copy())  # copy(): atomic under the GIL
            sequence = self._local_sequence
        rollout_id = self.rollout_id or LOCAL_ROLLOUT_ID
        attempt_id = self.attempt_id or LOCAL_ATTEMPT_ID
        for readable in waiting:
            sequence += 1
            try:
                done.append(Span.from_opentelemetry(readable, rollout_id, attempt_id, sequence))
            except Exception:
                logger.debug("agl tracer: span %r could not be converted for a snapshot", readable.name)
        return done

    # ------------------------------------------------------------------ internals

    def _wake(self) -> None:
        wakeup, loop = self._wakeup, self._loop
        if wakeup is None or loop is None:
            return
        if threading.get_ident() == self._loop_thread:
            wakeup.set()
            return
        # A closed loop raises RuntimeError; close() or the late path accounts for the spans then.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(wakeup.set)

    def _start_sender(self) -> None:
        if self._sender is None or self._sender.done():
            assert self._loop is not None
            self._sender = self._loop.create_task(self._run(), name=f"agl-span-sender-{self.rollout_id}")

    def _send_late(self, span: ReadableSpan) -> None:
        logger.warning(
            "agl tracer: span %r ended after trace_context of rollout %s attempt %s exited; sending it late.",
            span.name,
            self.rollout_id,
            self.attempt_id,
        )
        loop = self._loop
        try:
            if loop is None or loop.is_closed():
                raise RuntimeError("event loop closed")
            loop.call_soon_threadsafe(self._start_sender)
        except RuntimeError:
            self._keep_local(self._take(len(self._pending)), "span ended after its event loop closed")

    def _take(self, limit: int) -> list[ReadableSpan]:
        batch: list[ReadableSpan] = []
        pending = self._pending
        while pending and len(batch) < limit:
            batch.append(pending.popleft())
        self._in_flight = batch
        return batch

    async def _run(self) -> None:
        assert self._wakeup is not None
        while True:
            self._wakeup.clear()
            self._sleeping = True
            if not self._pending:
                if self._closing:
                    self._sleeping = False
                    return
                await self._wakeup.wait()
            self._sleeping = False
            while self._pending:
                batch = self._take(self.batch_size)
                try:
                    await self._send(batch)
                except Exception as exc:  # a bug or an unexpected store behaviour: never kill the sender
                    logger.exception("agl tracer: sending %d span(s) failed unexpectedly", len(batch))
                    self._record_failure(len(batch), f"unexpected error while sending: {exc!r}")

    async def _send(self, batch: list[ReadableSpan]) -> None:
        store, rollout_id, attempt_id = self.store, self.rollout_id, self.attempt_id
        assert store is not None and rollout_id is not None and attempt_id is not None
        converted = [
            span
            for span in (self._convert(readable, rollout_id, attempt_id, 0) for readable in batch)
            if span is not None
        ]  # sequence id 0: the store numbers them; until it answers they hold provisional local ids
        with self._lock:
            first = len(self._spans)
            for span in converted:
                self._local_sequence += 1
                self._spans.append(self._numbered(span, self._local_sequence))
            self._in_flight = []
        try:
            stored = {span.span_id: span for span in await store.add_many_spans(converted)}
        except Exception as exc:
            self._record_failure(len(converted), f"add_many_spans failed: {exc!r}")
            logger.error(
                "agl tracer: the store rejected %d span(s) of rollout %s attempt %s: %r; they are kept in "
                "get_last_trace() and counted in get_last_export_report().",
                len(converted),
                rollout_id,
                attempt_id,
                exc,
            )
            return
        with self._lock:
            for position, span in enumerate(converted, first):
                if span.span_id in stored:
                    self._spans[position] = span = stored[span.span_id]
                    self._local_sequence = max(self._local_sequence, span.sequence_id)
            self._stored += len(converted)

    def _record_failure(self, count: int, error: str) -> None:
        with self._lock:
            self._failed += count
            self._errors.append(f"{count} span(s) not stored: {error}")

    def _convert(self, span: ReadableSpan, rollout_id: str, attempt_id: str, sequence_id: int) -> Span | None:
        try:
            converted = Span.from_opentelemetry(
                span, rollout_id=rollout_id, attempt_id=attempt_id, sequence_id=sequence_id
            )
            return with_identity_resource(converted)  # as 0.3's OTLP export to HTTP stores did
        except Exception as exc:
            logger.exception("agl tracer: span %r could not be converted", span.name)
            self._record_failure(1, f"span {span.name!r} could not be converted: {exc!r}")
            return None

    @staticmethod
    def _numbered(span: Span, sequence_id: int) -> Span:
        return with_identity_resource(span.model_copy(update={"sequence_id": sequence_id}))

    def _keep_local(self, batch: list[ReadableSpan], error: str | None) -> None:
        """Convert spans with local sequence ids (no store round-trip) and record why, if it is a failure."""
        self._in_flight = []
        if not batch:
            return
        rollout_id = self.rollout_id or LOCAL_ROLLOUT_ID
        attempt_id = self.attempt_id or LOCAL_ATTEMPT_ID
        for readable in batch:
            with self._lock:
                self._local_sequence += 1
                sequence_id = self._local_sequence
            span = self._convert(readable, rollout_id, attempt_id, sequence_id)
            if span is not None:
                with self._lock:
                    self._spans.append(span)
        if error is not None:
            self._record_failure(len(batch), error)
