"""Compatibility module for Agent Lightning 0.3's ``agentlightning.server``.

Listed in docs/migrating-from-agent-lightning.md.

The deprecated v0.1 HTTP server, kept working (with 0.3's DeprecationWarning) for code that still uses
it: ``GET /task``, ``GET /resources/latest``, ``GET /resources/{id}`` and ``POST /rollout`` with 0.3's
JSON bodies, served with aiohttp. New code uses a ``LightningStore`` (``LightningStoreServer``).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
import uuid
import warnings
from collections import deque
from typing import Any, Literal

from aiohttp import web
from pydantic import ValidationError

from agl_core.types.legacy import GenericResponse, RolloutLegacy, Task, TaskIfAny
from agl_core.types.resources import NamedResources, ResourcesUpdate

__all__: list[str] = []  # 0.3's module had no __all__; the names below are importable

# named by its 0.3 path, so logging set up for agl_core (or agentlightning) covers it
logger = logging.getLogger("agl_core.server")

_POLL_SECONDS = 0.2


class ServerDataStore:
    """Deprecated (v0.1): the legacy server's in-memory queue of tasks, resources and finished rollouts."""

    def __init__(self) -> None:
        self._queue: deque[Task] = deque()
        self._processing: dict[str, Task] = {}
        self._completed: dict[str, RolloutLegacy] = {}
        self._resources: dict[str, ResourcesUpdate] = {}
        self._latest_resources_id: str | None = None

    async def add_task(
        self,
        sample: Any,
        mode: Literal["train", "val", "test"] | None = None,
        resources_id: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> str:
        """Queue a task; returns its ``rollout-<uuid>`` id."""
        rollout_id = f"rollout-{uuid.uuid4()}"
        self._queue.append(
            Task(
                rollout_id=rollout_id,
                input=sample,
                mode=mode,
                resources_id=resources_id,
                create_time=time.time(),
                num_claims=0,
                metadata=metadata or {},
            )
        )
        return rollout_id

    async def get_next_task(self) -> Task | None:
        """Claim the oldest queued task (None when the queue is empty)."""
        if not self._queue:
            return None
        task = self._queue.popleft()
        task = task.model_copy(
            update={"last_claim_time": time.time(), "num_claims": (task.num_claims or 0) + 1}
        )
        self._processing[task.rollout_id] = task
        return task

    async def update_resources(self, update: ResourcesUpdate) -> None:
        """Store a resources version and make it the latest."""
        self._resources[update.resources_id] = update
        self._latest_resources_id = update.resources_id

    async def get_resources_by_id(self, resources_id: str) -> ResourcesUpdate | None:
        """One stored resources version, or None."""
        return self._resources.get(resources_id)

    async def get_latest_resources(self) -> ResourcesUpdate | None:
        """The latest resources version, or None before the first update."""
        return None if self._latest_resources_id is None else self._resources[self._latest_resources_id]

    async def store_rollout(self, rollout: RolloutLegacy) -> None:
        """Record a finished rollout; its task stops being processed."""
        self._processing.pop(rollout.rollout_id, None)
        self._completed[rollout.rollout_id] = rollout

    async def retrieve_rollout(self, rollout_id: str) -> RolloutLegacy | None:
        """Take one finished rollout out (None when it has not arrived)."""
        return self._completed.pop(rollout_id, None)

    async def retrieve_completed_rollouts(self) -> list[RolloutLegacy]:
        """Take every finished rollout out."""
        rollouts = list(self._completed.values())
        self._completed.clear()
        return rollouts

    def get_processing_tasks(self) -> dict[str, Task]:
        """A copy of the claimed, unfinished tasks by id."""
        return dict(self._processing)

    async def requeue_task(self, task: Task) -> None:
        """Put a claimed task that timed out back in the queue."""
        logger.warning("Requeuing task %s after timeout (claim %s)", task.rollout_id, task.num_claims)
        self._processing.pop(task.rollout_id, None)
        self._queue.append(task)


class AgentLightningServer:
    """Deprecated (v0.1): the legacy task server; use ``LightningStoreServer``.

    Args:
        host: Interface to listen on.
        port: TCP port (0 picks a free one; :attr:`endpoint` gives the real one after :meth:`start`).
        task_timeout_seconds: Seconds after which a claimed, unfinished task is queued again.
    """

    def __init__(
        self, host: str = "127.0.0.1", port: int = 8000, task_timeout_seconds: float = 300.0
    ) -> None:
        warnings.warn(
            "AgentLightningServer is deprecated. Please use LightningStoreServer instead.",
            DeprecationWarning,
            stacklevel=2,
        )
        self.host, self.port = host, port
        self._task_timeout_seconds = task_timeout_seconds
        self._store: ServerDataStore | None = None
        self._runner: web.AppRunner | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.startup_event = threading.Event()

    @property
    def endpoint(self) -> str:
        """``http://host:port`` of the server."""
        return f"http://{self.host}:{self.port}"

    def _data(self) -> ServerDataStore:
        if self._store is None:
            raise RuntimeError("Store not initialized. The server may not be running (await server.start()).")
        return self._store

    async def _requeue_stale(self) -> None:
        now = time.time()
        for task in self._data().get_processing_tasks().values():
            if task.last_claim_time and now - task.last_claim_time > self._task_timeout_seconds:
                await self._data().requeue_task(task)

    async def _next_task(self, _: web.Request) -> web.Response:
        await self._requeue_stale()
        task = await self._data().get_next_task()
        return web.json_response(TaskIfAny(is_available=task is not None, task=task).model_dump(mode="json"))

    async def _resources(self, request: web.Request) -> web.Response:
        resources_id = request.match_info.get("resources_id")
        if resources_id is None:
            update = await self._data().get_latest_resources()
            detail = "No resources have been set on the server."
        else:
            update = await self._data().get_resources_by_id(resources_id)
            detail = f"Resource ID '{resources_id}' not found."
        if update is None:
            return web.json_response({"detail": detail}, status=404)
        return web.json_response(update.model_dump(mode="json"))

    async def _post_rollout(self, request: web.Request) -> web.Response:
        try:
            rollout = RolloutLegacy.model_validate(await request.json())
        except (ValueError, ValidationError) as exc:
            return web.json_response({"detail": f"Invalid rollout: {exc}"}, status=422)
        await self._data().store_rollout(rollout)
        reply = GenericResponse(status="ok", message=f"Rollout {rollout.rollout_id} received and stored.")
        return web.json_response(reply.model_dump(mode="json"))

    async def start(self) -> None:
        """Start serving in the running event loop."""
        app = web.Application()
        app.router.add_get("/task", self._next_task)
        app.router.add_get("/resources/latest", self._resources)
        app.router.add_get("/resources/{resources_id}", self._resources)
        app.router.add_post("/rollout", self._post_rollout)
        self._store = ServerDataStore()
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        sock = socket.create_server((self.host, self.port))
        self.port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock).start()
        self.loop = asyncio.get_running_loop()
        self.startup_event.set()

    async def stop(self) -> None:
        """Stop serving; queued tasks and unretrieved rollouts are dropped, as in 0.3."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        self._store = None
        self.startup_event.clear()

    async def run_forever(self) -> None:
        """Start and serve until cancelled."""
        await self.start()
        try:
            await asyncio.Event().wait()
        finally:
            await self.stop()

    async def queue_task(
        self,
        sample: Any,
        mode: Literal["train", "val", "test"] | None = None,
        resources_id: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> str:
        """Queue a task for the clients; returns its rollout id."""
        return await self._data().add_task(sample, mode=mode, resources_id=resources_id, metadata=metadata)

    async def update_resources(self, resources: NamedResources) -> str:
        """Publish a resources version; returns its ``res-<uuid>`` id."""
        now = time.time()
        resources_id = f"res-{uuid.uuid4()}"
        update = ResourcesUpdate(
            resources_id=resources_id, resources=resources, create_time=now, update_time=now, version=1
        )
        await self._data().update_resources(update)
        return resources_id

    async def get_completed_rollout(self, rollout_id: str) -> RolloutLegacy | None:
        """Take one finished rollout out (None when it has not arrived)."""
        return await self._data().retrieve_rollout(rollout_id)

    async def poll_completed_rollout(
        self, rollout_id: str, timeout: float | None = None
    ) -> RolloutLegacy | None:
        """Wait for a finished rollout; None when ``timeout`` seconds pass first (None: wait forever)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            rollout = await self.get_completed_rollout(rollout_id)
            if rollout is not None:
                return rollout
            if deadline is not None and time.monotonic() >= deadline:
                return None
            await asyncio.sleep(_POLL_SECONDS)

    async def retrieve_completed_rollouts(self) -> list[RolloutLegacy]:
        """Take every finished rollout out."""
        return await self._data().retrieve_completed_rollouts()
