"""A local stand-in for the AgentOps service: the three routes the SDK talks to, on 127.0.0.1.

* ``POST /v3/auth/token`` ``{"api_key"}`` -> ``{"token", "project_id"}`` (401 for another key);
* ``POST /v4/logs/upload/`` ``{"body"}`` with ``Trace-Id`` -> ``{}``;
* ``POST /v1/traces`` OTLP protobuf with ``Authorization: Bearer <token>`` -> an empty
  ``ExportTraceServiceResponse`` (401 without the token); the spans are decoded and kept.

It runs on its own thread and event loop (the SDK's exporters are synchronous and run on background
threads). ``hang=True`` makes every handler wait until :meth:`release` (bounded), like a stuck server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

API_KEY = "7e5c1b7e-0000-4000-8000-00000000a91c"
TOKEN = "jwt-for-tests"
PROJECT_ID = "project-agl"
_HANG_LIMIT_S = 60.0


@dataclass
class Received:
    """One request as the server saw it."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    status: int | None = None


@dataclass
class ExportedSpan:
    """A span decoded from an OTLP request."""

    name: str
    trace_id: str
    span_id: str
    attributes: dict[str, Any] = field(default_factory=dict)
    resource: dict[str, Any] = field(default_factory=dict)


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [_value(item) for item in any_value.array_value.values]
    return getattr(any_value, kind) if kind else None


def _attributes(items: Any) -> dict[str, Any]:
    return {item.key: _value(item.value) for item in items}


def closed_port_url() -> str:
    """A URL on 127.0.0.1 where nothing listens (the port was just released)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}"


class FakeAgentOpsServer:
    """The AgentOps API and OTLP intake on one local port (see the module docstring)."""

    def __init__(self, *, hang: bool = False) -> None:
        self.hang = hang
        self.received: list[Received] = []
        self.spans: list[ExportedSpan] = []
        self._changed = threading.Condition()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._release: asyncio.Event | None = None
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def url(self) -> str:
        """Base URL (the API endpoint)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def traces_url(self) -> str:
        """The OTLP traces URL (the exporter endpoint)."""
        return self.url + "/v1/traces"

    def paths(self) -> list[str]:
        """Paths of every request received so far, in order."""
        with self._changed:
            return [item.path for item in self.received]

    def wait_for(self, predicate: Callable[[FakeAgentOpsServer], bool], timeout: float = 10.0) -> bool:
        """Block until ``predicate(self)`` holds (re-checked on every request); False after ``timeout``."""
        with self._changed:
            return self._changed.wait_for(lambda: predicate(self), timeout)

    def release(self) -> None:
        """Let hanging handlers answer (and stop hanging)."""
        self.hang = False
        loop, event = self._loop, self._release
        if loop is not None and event is not None:
            loop.call_soon_threadsafe(event.set)

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> FakeAgentOpsServer:
        started = threading.Event()
        self._loop = asyncio.new_event_loop()

        def serve() -> None:
            assert self._loop is not None
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(self._start())
            started.set()
            self._loop.run_forever()
            self._loop.run_until_complete(self._stop())
            self._loop.close()

        self._thread = threading.Thread(target=serve, name="fake-agentops", daemon=True)
        self._thread.start()
        if not started.wait(10):
            raise TimeoutError("FakeAgentOpsServer did not start within 10s")
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    async def _start(self) -> None:
        self._release = asyncio.Event()
        app = web.Application()
        app.router.add_post("/v3/auth/token", self._auth)
        app.router.add_post("/v4/logs/upload/", self._logs)
        app.router.add_post("/v1/traces", self._traces)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=0.1)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        await web.SockSite(self._runner, sock).start()
        self.port = sock.getsockname()[1]

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    # ------------------------------------------------------------------ handlers

    async def _record(self, request: web.Request) -> Received:
        item = Received(request.method, request.path, dict(request.headers), await request.read())
        with self._changed:
            self.received.append(item)
            self._changed.notify_all()
        if self.hang:
            assert self._release is not None
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._release.wait(), _HANG_LIMIT_S)
        return item

    def _answer(self, item: Received, response: web.Response) -> web.Response:
        with self._changed:
            item.status = response.status
            self._changed.notify_all()
        return response

    async def _auth(self, request: web.Request) -> web.Response:
        item = await self._record(request)
        key = json.loads(item.body or b"{}").get("api_key")
        if key != API_KEY:
            return self._answer(item, web.json_response({"error": "invalid api key"}, status=401))
        return self._answer(item, web.json_response({"token": TOKEN, "project_id": PROJECT_ID}))

    async def _logs(self, request: web.Request) -> web.Response:
        item = await self._record(request)
        return self._answer(item, web.json_response({}))

    async def _traces(self, request: web.Request) -> web.Response:
        item = await self._record(request)
        if item.headers.get("Authorization") != f"Bearer {TOKEN}":
            return self._answer(item, web.json_response({"error": "unauthorized"}, status=401))
        message = ExportTraceServiceRequest()
        message.ParseFromString(item.body)
        decoded = [
            ExportedSpan(
                name=span.name,
                trace_id=span.trace_id.hex(),
                span_id=span.span_id.hex(),
                attributes=_attributes(span.attributes),
                resource=_attributes(resource_spans.resource.attributes),
            )
            for resource_spans in message.resource_spans
            for scope_spans in resource_spans.scope_spans
            for span in scope_spans.spans
        ]
        with self._changed:
            self.spans.extend(decoded)
        body = ExportTraceServiceResponse().SerializeToString()
        return self._answer(item, web.Response(body=body, content_type="application/x-protobuf"))
