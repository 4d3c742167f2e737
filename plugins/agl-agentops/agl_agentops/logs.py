"""AgentOps' session log upload (what ``print`` wrote during a trace), off the rollout's thread.

AgentOps captures ``print`` output in a buffer and its own span processor uploads it
(``POST /v4/logs/upload/``) synchronously inside ``on_end`` of the root span -- on the agent's thread,
with a 30 s timeout. :class:`LogUploadProcessor` takes the buffer when an AgentOps trace (session span)
ends and uploads it on its own worker thread through a bounded queue, with a timeout per request.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import TYPE_CHECKING

import requests
from opentelemetry.sdk.trace import SpanProcessor

from agl_agentops.exporter import AgentOpsAuthError

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

    from agl_agentops.exporter import TokenSource

__all__ = ["LOGS_PATH", "LogUploadProcessor", "take_agentops_log_buffer"]

logger = logging.getLogger("agl_core.tracer.agentops.logs")

LOGS_PATH = "/v4/logs/upload/"
"""AgentOps' log upload route (JSON ``{"body": text}``, header ``Trace-Id``)."""
SESSION_KIND_ATTRIBUTE = "agentops.span.kind"
SESSION_KIND = "session"


def take_agentops_log_buffer() -> str:
    """Return and clear what AgentOps' ``print`` capture buffered (empty when capture is off)."""
    from agentops.logging import instrument_logging

    buffer = instrument_logging._log_buffer
    content = str(buffer.getvalue())
    if content:
        buffer.seek(0)
        buffer.truncate()
    return content


class LogUploadProcessor(SpanProcessor):
    """Uploads AgentOps' captured log when a session span ends, on a background thread.

    Args:
        endpoint: AgentOps API base URL.
        auth: Supplies the JWT.
        timeout: Seconds per upload request.
        max_pending: Uploads waiting at most; beyond that new ones are dropped with a warning.
    """

    def __init__(self, *, endpoint: str, auth: TokenSource, timeout: float, max_pending: int = 64) -> None:
        self.url = endpoint.rstrip("/") + LOGS_PATH
        self._auth = auth
        self._timeout = timeout
        self._queue: queue.Queue[tuple[int, str] | None] = queue.Queue(max_pending)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.uploaded = 0
        self.failed = 0

    def on_end(self, span: ReadableSpan) -> None:
        """Queue the captured log of a finished AgentOps session (never blocks)."""
        attributes = span.attributes or {}
        if attributes.get(SESSION_KIND_ATTRIBUTE) != SESSION_KIND or span.context is None:
            return
        content = take_agentops_log_buffer()
        if not content:
            return
        self._start()
        try:
            self._queue.put_nowait((span.context.trace_id, content))
        except queue.Full:
            self.failed += 1
            logger.warning(
                "AgentOps log upload queue is full; the log of trace %032x is dropped.", span.context.trace_id
            )

    def shutdown(self) -> None:
        """Let queued uploads finish (each bounded by the timeout) and stop the worker."""
        thread = self._thread
        if thread is None:
            return
        try:
            self._queue.put(None, timeout=self._timeout)
        except queue.Full:
            logger.warning("AgentOps log upload queue did not drain; stopping without the pending uploads.")
            return
        thread.join(self._timeout * (self._queue.qsize() + 2))
        self._thread = None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Uploads are asynchronous; nothing to do here."""
        return True

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="agl-agentops-logs", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:  # shutdown
                return
            trace_id, content = item
            try:
                self._upload(trace_id, content)
                self.uploaded += 1
            except (AgentOpsAuthError, requests.RequestException, RuntimeError) as exc:
                self.failed += 1
                logger.warning("AgentOps log upload of trace %032x failed: %s", trace_id, exc)

    def _upload(self, trace_id: int, content: str) -> None:
        headers = {"Authorization": f"Bearer {self._auth.token()}", "Trace-Id": str(trace_id)}
        response = requests.post(self.url, json={"body": content}, headers=headers, timeout=self._timeout)
        if response.status_code != 200:
            raise RuntimeError(f"{self.url} answered HTTP {response.status_code}")
