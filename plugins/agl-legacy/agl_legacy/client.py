"""Compatibility module for Agent Lightning 0.3's ``agentlightning.client``.

Listed in docs/migrating-from-agent-lightning.md.

The deprecated v0.1 client of ``AgentLightningServer`` and its in-memory stand-in ``DevTaskLoader``, kept
working (with 0.3's DeprecationWarning). New code uses ``LightningStoreClient`` / ``Trainer.dev``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import urllib.error
import urllib.request
import warnings
from typing import Any

import aiohttp

from agl_core.types.core import TaskInput
from agl_core.types.legacy import RolloutLegacy, Task, TaskIfAny
from agl_core.types.resources import NamedResources, ResourcesUpdate

__all__: list[str] = []  # 0.3's module had no __all__; the names below are importable

# named by its 0.3 path, so logging set up for agl_core (or agentlightning) covers it
logger = logging.getLogger("agl_core.client")

_HEADERS = {"X-AgentLightning-Client": "true"}


class AgentLightningClient:
    """Deprecated (v0.1): client of ``AgentLightningServer``; use ``LightningStoreClient``.

    Failed requests are logged and answered with None, as in 0.3.

    Args:
        endpoint: ``http://host:port`` of the server.
        poll_interval: Seconds between two ``GET /task`` while no task is queued.
        timeout: Seconds one request may take.
    """

    def __init__(self, endpoint: str, poll_interval: float = 5.0, timeout: float = 10.0) -> None:
        if type(self) is AgentLightningClient:
            warnings.warn(
                "AgentLightningClient is deprecated. Please use LightningStoreClient instead.",
                DeprecationWarning,
                stacklevel=2,
            )
        self.endpoint = endpoint.rstrip("/")
        self.task_count = 0
        self.poll_interval = poll_interval
        self.timeout = timeout
        self._resource_cache: dict[str, ResourcesUpdate] = {}

    # ------------------------------------------------------------------ transport

    async def _request_async(self, path: str, payload: dict[str, Any] | None = None) -> Any:
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout)) as session:
                method = session.get if payload is None else session.post
                async with method(self.endpoint + path, json=payload, headers=_HEADERS) as response:
                    response.raise_for_status()
                    return await response.json()
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
            logger.debug("Request to %s%s failed: %s", self.endpoint, path, exc)
            return None

    def _request(self, path: str, payload: dict[str, Any] | None = None) -> Any:
        data = None if payload is None else json.dumps(payload).encode()
        headers = {**_HEADERS, **({} if data is None else {"Content-Type": "application/json"})}
        request = urllib.request.Request(self.endpoint + path, data=data, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read())
        except (OSError, ValueError) as exc:  # urllib.error.URLError is an OSError
            logger.debug("Request to %s%s failed: %s", self.endpoint, path, exc)
            return None

    def _take_task(self, answer: Any) -> Task | None:
        if not answer:
            return None
        reply = TaskIfAny.model_validate(answer)
        if not (reply.is_available and reply.task):
            return None
        self.task_count += 1
        return reply.task

    def _cache(self, answer: Any) -> ResourcesUpdate | None:
        if not answer:
            return None
        update = ResourcesUpdate.model_validate(answer)
        self._resource_cache[update.resources_id] = update
        return update

    # ------------------------------------------------------------------ async API

    async def poll_next_task_async(self) -> Task | None:
        """Wait until the server hands out a task."""
        while True:
            task = self._take_task(await self._request_async("/task"))
            if task is not None:
                return task
            await asyncio.sleep(self.poll_interval)

    async def get_resources_by_id_async(self, resource_id: str) -> ResourcesUpdate | None:
        """One resources version (cached after the first fetch); None on error."""
        if resource_id in self._resource_cache:
            return self._resource_cache[resource_id]
        return self._cache(await self._request_async(f"/resources/{resource_id}"))

    async def get_latest_resources_async(self) -> ResourcesUpdate | None:
        """The latest resources version; None on error or before the first update."""
        return self._cache(await self._request_async("/resources/latest"))

    async def post_rollout_async(self, rollout: RolloutLegacy) -> dict[str, Any] | None:
        """Report a finished rollout; the server's answer, or None on error."""
        answer: dict[str, Any] | None = await self._request_async("/rollout", rollout.model_dump(mode="json"))
        return answer

    # ------------------------------------------------------------------ sync API

    def poll_next_task(self) -> Task | None:
        """Wait until the server hands out a task."""
        while True:
            task = self._take_task(self._request("/task"))
            if task is not None:
                return task
            time.sleep(self.poll_interval)

    def get_resources_by_id(self, resource_id: str) -> ResourcesUpdate | None:
        """One resources version (cached after the first fetch); None on error."""
        if resource_id in self._resource_cache:
            return self._resource_cache[resource_id]
        return self._cache(self._request(f"/resources/{resource_id}"))

    def get_latest_resources(self) -> ResourcesUpdate | None:
        """The latest resources version; None on error or before the first update."""
        return self._cache(self._request("/resources/latest"))

    def post_rollout(self, rollout: RolloutLegacy) -> dict[str, Any] | None:
        """Report a finished rollout; the server's answer, or None on error."""
        answer: dict[str, Any] | None = self._request("/rollout", rollout.model_dump(mode="json"))
        return answer


class DevTaskLoader(AgentLightningClient):
    """Deprecated (v0.1): an in-memory stand-in for ``AgentLightningClient``; use ``Trainer.dev``.

    Hands out ``tasks`` in order, round and round, with ``resources`` as the only resources version;
    rollouts posted back are kept in :attr:`rollouts`.
    """

    def __init__(
        self,
        tasks: list[TaskInput] | list[Task],
        resources: NamedResources | ResourcesUpdate,
        **kwargs: Any,
    ) -> None:
        warnings.warn(
            "DevTaskLoader is deprecated. Please use Trainer.dev instead.", DeprecationWarning, stacklevel=2
        )
        super().__init__(endpoint="local://", **kwargs)
        self._tasks = list(tasks)
        if not self._tasks:
            raise ValueError("DevTaskLoader requires at least one task to be provided.")
        if any(isinstance(task, Task) for task in self._tasks) and not all(
            isinstance(task, Task) for task in self._tasks
        ):
            raise ValueError("All tasks must be either Task or TaskInput objects.")
        self._task_index = 0
        if isinstance(resources, ResourcesUpdate):
            self._resources_update = resources
        else:
            now = time.time()
            self._resources_update = ResourcesUpdate(
                resources_id="local", resources=resources, create_time=now, update_time=now, version=1
            )
        self._rollouts: list[RolloutLegacy] = []

    @property
    def rollouts(self) -> list[RolloutLegacy]:
        """The rollouts posted back so far."""
        return self._rollouts

    def poll_next_task(self) -> Task | None:
        """The next task (``local_task_001``, ... for plain inputs), wrapping around at the end."""
        if self._task_index >= len(self._tasks):
            self._task_index = 0
        item = self._tasks[self._task_index]
        task = (
            item
            if isinstance(item, Task)
            else Task(
                rollout_id=f"local_task_{self._task_index + 1:03d}",
                input=item,
                resources_id=self._resources_update.resources_id,
                create_time=time.time(),
            )
        )
        self._task_index += 1
        self.task_count += 1
        return task

    def get_resources_by_id(self, resource_id: str) -> ResourcesUpdate | None:
        """The one resources version; ValueError naming it for any other id."""
        if resource_id != self._resources_update.resources_id:
            raise ValueError(
                f"Resource ID '{resource_id}' not found. "
                f"Only '{self._resources_update.resources_id}' is available."
            )
        return self._resources_update

    def get_latest_resources(self) -> ResourcesUpdate | None:
        """The one resources version."""
        return self._resources_update

    def post_rollout(self, rollout: RolloutLegacy) -> dict[str, Any] | None:
        """Keep the rollout in :attr:`rollouts`."""
        self._rollouts.append(rollout)
        return {"status": "received", "rollout_id": rollout.rollout_id}

    async def poll_next_task_async(self) -> Task | None:
        """Same as :meth:`poll_next_task`."""
        return self.poll_next_task()

    async def get_resources_by_id_async(self, resource_id: str) -> ResourcesUpdate | None:
        """Same as :meth:`get_resources_by_id`."""
        return self.get_resources_by_id(resource_id)

    async def get_latest_resources_async(self) -> ResourcesUpdate | None:
        """Same as :meth:`get_latest_resources`."""
        return self.get_latest_resources()

    async def post_rollout_async(self, rollout: RolloutLegacy) -> dict[str, Any] | None:
        """Same as :meth:`post_rollout`."""
        return self.post_rollout(rollout)
