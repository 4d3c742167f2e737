"""One Weave client per process, shared by every `WeaveTracer` worker; each call routed to its rollout.

Weave keeps one global client per process (``weave.init``), so runners of one process (the shared-memory
strategy's workers, each with its own tracer) cannot each have their own. The router owns the process's
managed trace server: the first tracer worker to start instruments Weave with it and calls ``weave.init``,
the last one to stop ends the client and restores Weave. Every ``trace_context`` registers the Weave trace
it opens (its root call's trace id) with a sink; the server's call notifications are handed to the sink of
their trace, so concurrent rollouts never mix and calls outside any rollout are dropped.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING, Any, Protocol

import weave

from agl_core.tracer.weave import random_project_name
from agl_weave.instrumentation import instrument_weave, is_weave_instrumented, uninstrument_weave
from agl_weave.server import CallListener, InMemoryWeaveTraceServer, StartListener

if TYPE_CHECKING:
    from weave.trace.settings import UserSettings
    from weave.trace.weave_client import WeaveClient
    from weave.vendor.weave_server_sdk.types.call_read_response import Call

__all__ = ["CallSink", "WeaveCallRouter", "WeaveTracerManagedTraceServer", "get_router"]

logger = logging.getLogger(__name__)


class CallSink(Protocol):
    """Where the calls of one Weave trace go (a ``trace_context``); called on Weave's worker threads."""

    def call_started(self, call_id: str) -> None:
        """A call of the trace started."""

    def call_completed(self, call: Call) -> None:
        """A call of the trace completed."""


class WeaveTracerManagedTraceServer(InMemoryWeaveTraceServer):
    """A trace server whose calls go to two callbacks and are not kept (Agent Lightning 0.3's class).

    ``partial_call_callback(start)`` runs when a call's start arrives before its end,
    ``complete_call_callback(call)`` once per completed call.
    """

    def __init__(self, partial_call_callback: StartListener, complete_call_callback: CallListener) -> None:
        super().__init__()
        self.partial_call_callback = partial_call_callback
        self.complete_call_callback = complete_call_callback
        self.add_call_listener(self._forget_after(complete_call_callback), on_start=partial_call_callback)

    def _forget_after(self, callback: CallListener) -> CallListener:
        def on_complete(call: Call) -> None:
            with self._lock:
                self.calls.pop(call.id, None)
            callback(call)

        return on_complete


def client_uses(client: WeaveClient, server: InMemoryWeaveTraceServer) -> bool:
    """Whether ``client`` writes to ``server`` (directly or through Weave's caching middleware)."""
    current: Any = client.server
    while current is not None:
        if current is server:
            return True
        current = getattr(current, "_next_trace_server", None)
    return False


class WeaveCallRouter:
    """The process's managed Weave trace server and client, shared by tracer workers (see the module)."""

    def __init__(self) -> None:
        self.server = WeaveTracerManagedTraceServer(self._started, self._completed)
        self._lock = threading.Lock()
        self._sinks: dict[str, CallSink] = {}
        self._users = 0
        self._instrumented = False
        self._project: str | None = None

    # -- workers ---------------------------------------------------------------------------------

    def instrument(self) -> None:
        """Instrument Weave with this router's server (``RuntimeError`` if Weave is already instrumented)."""
        instrument_weave(self.server)
        self._instrumented = True

    def uninstrument(self) -> None:
        """Undo :meth:`instrument`."""
        uninstrument_weave()
        self._instrumented = False

    def acquire(self, project_name: str | None, settings: UserSettings, *, instrument: bool) -> str:
        """A tracer worker starts; returns the Weave project its calls go to.

        The first worker of the process instruments Weave (``instrument``) and ``weave.init``-s
        ``project_name`` (a random ``agl/weave-...`` when None); later workers share that client (a
        different explicit project gets a warning). Raises ``RuntimeError`` when ``weave.init`` fails.
        """
        with self._lock:
            if self._users == 0:
                project = project_name or random_project_name()
                if instrument and not self._instrumented:
                    self.instrument()
                elif not is_weave_instrumented():
                    logger.warning(
                        "Weave is not instrumented: weave.init will use W&B's servers and no call reaches "
                        "the WeaveTracer. Call tracer.instrument(worker_id) before init_worker."
                    )
                try:
                    weave.init(project, settings=settings)
                except Exception as exc:
                    if instrument and self._instrumented:
                        self.uninstrument()
                    raise RuntimeError(f"Failed to initialize Weave for project {project!r}: {exc}") from exc
                self._project = project
            elif project_name is not None and project_name != self._project:
                logger.warning(
                    "Weave has one client per process: this worker records into project %r, not %r.",
                    self._project,
                    project_name,
                )
            self._users += 1
            assert self._project is not None
            return self._project

    def release(self, *, uninstrument: bool) -> None:
        """A tracer worker stops: the last one ends the Weave client and restores Weave (``uninstrument``)."""
        with self._lock:
            if self._users == 0:
                return
            self._users -= 1
            if self._users:
                return
            client = weave.get_client()
            if client is not None and client_uses(client, self.server):
                weave.finish()
            if uninstrument and self._instrumented:
                self.uninstrument()
            self._project = None

    # -- traces ----------------------------------------------------------------------------------

    def open_trace(self, trace_id: str, sink: CallSink) -> None:
        """Send the calls of Weave trace ``trace_id`` to ``sink`` until :meth:`close_trace`."""
        with self._lock:
            self._sinks[trace_id] = sink

    def close_trace(self, trace_id: str) -> None:
        """Stop routing ``trace_id``; its later calls are dropped."""
        with self._lock:
            self._sinks.pop(trace_id, None)

    def _sink(self, trace_id: object) -> CallSink | None:
        with self._lock:
            return self._sinks.get(str(trace_id))

    def _started(self, start: dict[str, Any]) -> None:
        sink = self._sink(start.get("trace_id"))
        if sink is not None and start.get("id"):
            sink.call_started(str(start["id"]))

    def _completed(self, call: Call) -> None:
        sink = self._sink(call.trace_id)
        if sink is None:
            logger.debug(
                "Weave call %s (%s) is outside any trace_context; not recorded.", call.id, call.op_name
            )
            return
        sink.call_completed(call)


_router: WeaveCallRouter | None = None
_router_lock = threading.Lock()


def get_router() -> WeaveCallRouter:
    """The router of this process (created on first use; a forked child gets a fresh one)."""
    global _router
    with _router_lock:
        if _router is None:
            _router = WeaveCallRouter()
        return _router


def _forget_router_in_child() -> None:
    global _router
    _router = None


if hasattr(os, "register_at_fork"):  # not on Windows
    os.register_at_fork(after_in_child=_forget_router_in_child)
