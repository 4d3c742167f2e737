"""Compatibility module for Agent Lightning 0.3's ``agentlightning.runner.legacy``.

Listed in docs/migrating-from-agent-lightning.md. `LegacyAgentRunner` is 0.3's runner of the deprecated
v0.1 stack: it polls tasks from an `AgentLightningClient` (or `DevTaskLoader`), runs the `LitAgent` under a
tracer, turns the result into a `RolloutLegacy` (reward, triplets, trace) and posts it back. New code runs
agents with ``Trainer.fit()`` / `LitAgentRunner` against a `LightningStore`.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from typing import TYPE_CHECKING, Any

from agl_core.runner.base import Runner
from agl_core.types import Span, Triplet
from agl_core.types.legacy import RolloutLegacy, Task

if TYPE_CHECKING:
    from agl_core.adapter.triplet import TracerTraceToTriplet
    from agl_core.litagent import LitAgent
    from agl_core.tracer.base import Tracer
    from agl_legacy.client import AgentLightningClient

__all__ = ["LegacyAgentRunner"]

# named by its 0.3 path, so logging set up for agl_core (or agentlightning) covers it
logger = logging.getLogger("agl_core.runner.legacy")


def _takes_rollout_id(method: Any) -> bool:
    """True for a v0.1 rollout method, ``(task, rollout_id=..., resources=...)``."""
    try:
        return "rollout_id" in inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False


class LegacyAgentRunner(Runner[Any]):
    """Runs a `LitAgent` on tasks from a v0.1 `AgentLightningClient` (Agent Lightning 0.3's legacy runner).

    `run` / `run_async` handle one task; `iter` / `iter_async` loop until ``max_tasks`` tasks are done
    (forever when None). A failing agent is logged and its rollout is still posted (without a reward).

    Args:
        agent: The agent; its ``training_rollout`` or ``validation_rollout`` (by the task's mode) is called
            with ``(input, resources=..., rollout=RolloutLegacy)``, or v0.1's ``(input, rollout_id=...,
            resources=...)``.
        client: Where tasks and resources come from and rollouts go.
        tracer: Traces each rollout; its spans become the posted ``trace`` and, through
            ``triplet_exporter``, the ``triplets``.
        triplet_exporter: Turns the spans into triplets (e.g. `TracerTraceToTriplet()`).
        worker_id: This worker's number (for log lines).
        max_tasks: How many tasks `iter` handles; None: no limit.
    """

    def __init__(
        self,
        agent: LitAgent[Any],
        client: AgentLightningClient,
        tracer: Tracer,
        triplet_exporter: TracerTraceToTriplet,
        worker_id: int | None = None,
        max_tasks: int | None = None,
    ) -> None:
        super().__init__()
        self.agent = agent
        self.client = client
        self.tracer = tracer
        self.triplet_exporter = triplet_exporter
        self.worker_id = worker_id
        self.max_tasks = max_tasks

    # 0.3's legacy runner ignores the store-based lifecycle.
    def init(self, *args: Any, **kwargs: Any) -> None:
        """Nothing to set up."""

    def init_worker(self, worker_id: int, *args: Any, **kwargs: Any) -> None:
        """Remember the worker id."""
        self.worker_id = worker_id

    def teardown_worker(self, worker_id: int, *args: Any, **kwargs: Any) -> None:
        """Nothing to release."""

    def teardown(self, *args: Any, **kwargs: Any) -> None:
        """Nothing to release."""

    async def step(self, *args: Any, **kwargs: Any) -> Any:
        """One task from the client (same as `run_async`)."""
        return await self.run_async()

    def _prefix(self, rollout_id: str | None = None) -> str:
        worker = "Default Worker" if self.worker_id is None else f"Worker {self.worker_id}"
        return f"[{worker}{'' if rollout_id is None else f' | RolloutLegacy {rollout_id}'}]"

    def _to_rollout_object(self, result: Any, rollout_id: str) -> RolloutLegacy:
        """The `RolloutLegacy` to post for the agent's ``result`` (reward, triplets, spans, trace, ...)."""
        final_reward: float | None = None
        triplets: list[Triplet] | None = None
        trace: list[dict[str, Any]] | None = None
        spans: list[Any] | None = None
        if isinstance(result, float):
            final_reward = result
        elif isinstance(result, RolloutLegacy):
            final_reward, triplets, trace = result.final_reward, result.triplets, result.trace
        elif isinstance(result, list) and result:
            if all(isinstance(item, Triplet) for item in result):
                triplets = result
            elif all(isinstance(item, Span) for item in result):
                spans, trace = result, [item.model_dump() for item in result]
            elif all(isinstance(item, dict) for item in result):
                trace = result
            elif all(hasattr(item, "to_json") for item in result):  # OpenTelemetry ReadableSpans
                spans = [Span.from_opentelemetry(item, "", "", 0) for item in result]
                trace = [span.model_dump() for span in spans]
        if trace is None or spans is None:
            last = self.tracer.get_last_trace()
            if last:
                spans, trace = last, [span.model_dump() for span in last]
        if spans:
            triplets = self.triplet_exporter(spans)
        if triplets and final_reward is None and triplets[-1].reward is not None:
            final_reward = triplets[-1].reward
        fields: dict[str, Any] = {"rollout_id": rollout_id}
        for name, value in (("final_reward", final_reward), ("triplets", triplets), ("trace", trace)):
            if value is not None:
                fields[name] = value
        if isinstance(result, RolloutLegacy):
            return result.model_copy(update=fields)
        return RolloutLegacy(**fields)

    async def _run_task(self, task: Task, resources: Any, *, use_async: bool) -> None:
        rollout = RolloutLegacy(rollout_id=task.rollout_id, task=task)
        try:
            try:
                self.agent.on_rollout_start(task, self, self.tracer)
            except Exception:
                logger.exception("%s Exception during on_rollout_start hook.", self._prefix(task.rollout_id))
            async with self.tracer.trace_context(name=f"rollout_{task.rollout_id}"):
                started = time.time()
                train = task.mode == "train"
                method: Any  # 0.3's v0.1 signature (rollout_id=) or the current one, sync or async
                if use_async:
                    method = (
                        self.agent.training_rollout_async if train else self.agent.validation_rollout_async
                    )
                else:
                    method = self.agent.training_rollout if train else self.agent.validation_rollout
                if _takes_rollout_id(method):
                    result = method(task.input, rollout_id=rollout.rollout_id, resources=resources)
                else:
                    result = method(task.input, resources=resources, rollout=rollout)
                if inspect.isawaitable(result):
                    result = await result
            rollout = self._to_rollout_object(result, task.rollout_id)
            logger.info(
                "%s Completed in %.2fs. Triplet length: %s. Reward: %s",
                self._prefix(task.rollout_id),
                time.time() - started,
                "N/A" if rollout.triplets is None else len(rollout.triplets),
                rollout.final_reward,
            )
        except Exception:
            logger.exception("%s Exception during rollout.", self._prefix(task.rollout_id))
        finally:
            try:
                self.agent.on_rollout_end(task, rollout, self, self.tracer)
            except Exception:
                logger.exception("%s Exception during on_rollout_end hook.", self._prefix(task.rollout_id))
            if use_async:
                await self.client.post_rollout_async(rollout)
            else:
                self.client.post_rollout(rollout)

    def run(self) -> bool:
        """Poll one task and run the agent's sync rollout on it; False when no task or no resources."""
        self.agent.set_runner(self)
        task = self.client.poll_next_task()
        if task is None:
            logger.info("%s Poll returned no task. Exiting.", self._prefix())
            return False
        update = (
            self.client.get_resources_by_id(task.resources_id)
            if task.resources_id
            else self.client.get_latest_resources()
        )
        if not update:
            logger.error("%s Failed to fetch resources. Skipping.", self._prefix(task.rollout_id))
            return False
        asyncio.run(self._run_task(task, update.resources, use_async=False))
        return True

    async def run_async(self) -> bool:
        """Poll one task and run the agent's async rollout on it; False when no task or no resources."""
        self.agent.set_runner(self)
        task = await self.client.poll_next_task_async()
        if task is None:
            logger.info("%s Poll returned no task. Exiting.", self._prefix())
            return False
        update = (
            await self.client.get_resources_by_id_async(task.resources_id)
            if task.resources_id
            else await self.client.get_latest_resources_async()
        )
        if not update:
            logger.error("%s Failed to fetch resources. Skipping.", self._prefix(task.rollout_id))
            return False
        await self._run_task(task, update.resources, use_async=True)
        return True

    def iter(self) -> int:  # type: ignore[override]
        """Run `run` until ``max_tasks`` tasks are done; returns how many were."""
        done = 0
        while self.max_tasks is None or done < self.max_tasks:
            if self.run():
                done += 1
        logger.info("%s Finished sync rollouts. Processed %d tasks.", self._prefix(), done)
        return done

    async def iter_async(self) -> int:
        """Run `run_async` until ``max_tasks`` tasks are done; returns how many were."""
        done = 0
        while self.max_tasks is None or done < self.max_tasks:
            if await self.run_async():
                done += 1
        logger.info("%s Finished async rollouts. Processed %d tasks.", self._prefix(), done)
        return done
