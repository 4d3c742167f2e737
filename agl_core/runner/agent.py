"""`LitAgentRunner`: runs a `LitAgent` on rollouts from a store, with tracing, hooks and heartbeats."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import random
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from agl_core.litagent import LitAgent
from agl_core.runner._results import exception_span, spans_from_result
from agl_core.runner.base import Runner
from agl_core.runner.heartbeat import HeartbeatMode, HeartbeatSender
from agl_core.store.errors import ResourcesNotFoundError

if TYPE_CHECKING:
    from agl_core.store.base import LightningStore
    from agl_core.tracer import Tracer
    from agl_core.types import AttemptedRollout, AttemptStatus, Hook, NamedResources, Rollout, RolloutMode

__all__ = ["AgentTimeoutError", "LitAgentRunner", "ResourcesNotFoundError", "RunnerStoppedError"]

logger = logging.getLogger(__name__)

T_task = TypeVar("T_task")

MIN_IDLE_WAIT_SECONDS = 0.002
"""First wait after an empty dequeue; doubles on each empty poll up to ``poll_interval``."""
STOP_CHECK_SECONDS = 0.02
"""How often a waiting runner looks at its stop event."""
CANCEL_GRACE_SECONDS = 5.0
"""How long a cancelled agent (timeout, shutdown) gets to unwind before it is abandoned."""
PROGRESS_LOG_SECONDS = 10.0
"""At most one progress line per this many seconds at INFO level."""


class AgentTimeoutError(TimeoutError):
    """The agent ran longer than the rollout's ``config.timeout_seconds``; the attempt becomes ``timeout``."""


class RunnerStoppedError(RuntimeError):
    """The runner was stopped (cancelled) while the rollout was running; the attempt fails."""


def _event_is_set(event: Any | None) -> bool:
    return event is not None and bool(event.is_set())


class LitAgentRunner(Runner[T_task], Generic[T_task]):
    """Runs a :class:`~agl_core.litagent.LitAgent` on rollouts: dequeue, trace, run, record, report.

    Per rollout: ``on_rollout_start`` hooks; the resources (``rollout.resources_id``, else the latest, else
    none -- with a warning, so agents that need no resources still run);
    inside ``tracer.trace_context(rollout_id, attempt_id)``: ``on_trace_start``, the agent
    (``training_rollout[_async]`` for mode ``"train"``, ``validation_rollout[_async]`` otherwise),
    ``on_trace_end``; the result is stored as spans (see ``agl_core.runner._results``);
    ``on_rollout_end``; and the attempt is set to ``succeeded``, ``failed`` (the exception is stored as an
    ``agentlightning.exception`` span) or ``timeout``. The store then retries per the rollout's
    ``RolloutConfig``. Hook exceptions are logged and never fail a rollout.

    A sync agent runs on one thread of the runner's own for the runner's whole life (created on first use,
    released by ``teardown_worker``), with the rollout's context (tracing) copied in: the runner's loop stays
    responsive, the agent may itself call ``asyncio.run``, and thread-bound state (``dspy.configure()``,
    thread-local clients) set in one rollout is there in the next. A sync agent still running after its
    timeout keeps that thread until it returns, so the next rollout waits for it (within its own timeout).
    An async agent runs on the runner's loop.

    Fixes of Agent Lightning 0.3: resources that cannot be found fail the attempt with a clear message
    instead of leaving it in ``preparing`` (quirk 11 in docs/migrating-from-agent-lightning.md): an unknown
    ``resources_id`` raises
    ``ResourcesNotFoundError``, and an agent that asks for an LLM or prompt template when none is
    published raises ``MissingResourceError``; a float result adds no second reward span when the agent
    already emitted that reward (quirk 12); the runner dequeues again as soon as a rollout finishes and
    waits only when the queue was empty, starting with a few milliseconds and backing off to
    ``poll_interval``; ``RolloutConfig.timeout_seconds`` is enforced by cancelling the agent.

    Args:
        tracer: The tracer whose ``trace_context`` wraps each rollout.
        max_rollouts: Stop :meth:`iter` after this many rollouts (None: run until the stop event).
        poll_interval: Longest wait in seconds between two dequeues while the queue is empty.
        heartbeat_interval: Seconds between worker heartbeats; ``<= 0`` disables them.
        interval_jitter: Randomizes waits by up to this many seconds at full length (proportionally for
            shorter waits), so many runners do not poll in lockstep.
        heartbeat_launch_mode: ``"thread"`` (default; beats even while the loop is busy) or ``"asyncio"``.
        heartbeat_include_gpu: Add GPU figures to heartbeats (needs ``pynvml``).
    """

    def __init__(
        self,
        tracer: Tracer,
        max_rollouts: int | None = None,
        poll_interval: float = 5.0,
        heartbeat_interval: float = 10.0,
        interval_jitter: float = 0.5,
        heartbeat_launch_mode: HeartbeatMode = "thread",
        heartbeat_include_gpu: bool = False,
    ) -> None:
        if max_rollouts is not None and (not isinstance(max_rollouts, int) or max_rollouts < 1):
            raise ValueError(f"max_rollouts must be None or an integer >= 1, got {max_rollouts!r}.")
        if poll_interval <= 0:
            raise ValueError(f"poll_interval must be > 0 seconds, got {poll_interval!r}.")
        if interval_jitter < 0:
            raise ValueError(f"interval_jitter must be >= 0 seconds, got {interval_jitter!r}.")
        if heartbeat_launch_mode not in ("thread", "asyncio"):
            raise ValueError(
                f"heartbeat_launch_mode must be 'thread' or 'asyncio', got {heartbeat_launch_mode!r}."
            )
        self.tracer: Tracer = tracer
        self.max_rollouts = max_rollouts
        self.poll_interval = float(poll_interval)
        self.heartbeat_interval = float(heartbeat_interval)
        self.interval_jitter = float(interval_jitter)
        self.heartbeat_launch_mode: HeartbeatMode = heartbeat_launch_mode
        self.heartbeat_include_gpu = heartbeat_include_gpu
        self.worker_id: int | None = None
        self._agent: LitAgent[T_task] | None = None
        self._hooks: tuple[Hook, ...] = ()
        self._store: LightningStore | None = None
        self._heartbeat: HeartbeatSender | None = None
        self._warned: set[str] = set()
        self._agent_thread: ThreadPoolExecutor | None = None
        self.rollouts_processed = 0
        """Rollouts :meth:`iter` has finished (any final status) since the runner was created."""

    # -- lifecycle ---------------------------------------------------------------------------------

    def init(self, agent: LitAgent[T_task], *, hooks: Sequence[Hook] | None = None, **kwargs: Any) -> None:
        """Bind the agent and hooks and initialize the tracer."""
        if not isinstance(agent, LitAgent):
            raise TypeError(
                f"LitAgentRunner runs LitAgent instances, got {type(agent).__name__}. Decorate a function "
                "with "
                "@agl.rollout or subclass agl.LitAgent."
            )
        agent.set_runner(self)
        self._agent = agent
        self._hooks = tuple(hooks or ())
        self.tracer.init()

    def init_worker(self, worker_id: int, store: LightningStore, **kwargs: Any) -> None:
        """Bind this worker's id and store and initialize the tracer for the worker."""
        self.worker_id = worker_id
        self._store = store
        self.tracer.init_worker(worker_id, store)

    def teardown_worker(self, worker_id: int, *args: Any, **kwargs: Any) -> None:
        """Tear the tracer's worker down, release the sync agent's thread, forget the store and worker id."""
        thread, self._agent_thread = self._agent_thread, None
        if thread is not None:
            thread.shutdown(wait=False, cancel_futures=True)  # a hung sync agent must not hang teardown
        try:
            self.tracer.teardown_worker(worker_id)
        finally:
            self._store = None
            self.worker_id = None  # as in Agent Lightning 0.3: no worker until init_worker again

    def teardown(self, *args: Any, **kwargs: Any) -> None:
        """Tear the tracer down and forget the agent and hooks."""
        try:
            self.tracer.teardown()
        finally:
            self._agent = None
            self._hooks = ()

    def get_worker_id(self) -> str:
        """The worker id used in the store: ``"Worker-{n}"`` (``"Worker-Unknown"`` before ``init_worker``)."""
        return "Worker-Unknown" if self.worker_id is None else f"Worker-{self.worker_id}"

    def get_agent(self) -> LitAgent[T_task]:
        """The agent bound by :meth:`init`."""
        if self._agent is None:
            raise ValueError("Agent not initialized. Call init() first. Or use run_context.")
        return self._agent

    def get_store(self) -> LightningStore:
        """The store bound by :meth:`init_worker`."""
        if self._store is None:
            raise ValueError("Store not initialized. Call init_worker() first. Or use run_context.")
        return self._store

    @property
    def hooks(self) -> tuple[Hook, ...]:
        """The hooks bound by :meth:`init`."""
        return self._hooks

    # -- the loop ----------------------------------------------------------------------------------

    async def iter(self, *, event: Any | None = None) -> None:
        """Dequeue and run rollouts until ``event`` is set or ``max_rollouts`` are done.

        After a rollout the runner dequeues again at once; only an empty queue makes it wait (a few
        milliseconds first, doubling up to ``poll_interval``, jittered, checking ``event`` every 20 ms).
        Errors of one rollout are logged and never stop the loop.
        """
        store = self.get_store()
        worker_id = self.get_worker_id()
        done = 0
        idle_wait = MIN_IDLE_WAIT_SECONDS
        last_log = 0.0
        heartbeat = self._start_heartbeat(store, worker_id)
        try:
            while not _event_is_set(event):
                if self.max_rollouts is not None and done >= self.max_rollouts:
                    break
                try:
                    rollout = await store.dequeue_rollout(worker_id=worker_id)
                except Exception:
                    logger.exception("%s: dequeue_rollout failed; retrying.", worker_id)
                    rollout = None
                if rollout is None:
                    if await self._idle(event, idle_wait):
                        break
                    idle_wait = min(idle_wait * 2, self.poll_interval)
                    continue
                idle_wait = MIN_IDLE_WAIT_SECONDS
                if heartbeat is not None:
                    heartbeat.set_current(rollout.rollout_id, rollout.attempt.attempt_id)
                try:
                    await self._step_impl(rollout, raise_on_exception=False)
                except Exception:
                    logger.exception("%s: rollout %s could not be processed.", worker_id, rollout.rollout_id)
                finally:
                    if heartbeat is not None:
                        heartbeat.set_current(None)
                done += 1
                self.rollouts_processed += 1
                now = time.monotonic()
                if done == 1 or now - last_log >= PROGRESS_LOG_SECONDS:
                    last_log = now
                    logger.info("%s: %d rollouts done (latest %s).", worker_id, done, rollout.rollout_id)
        finally:
            if heartbeat is not None:
                await heartbeat.stop()
                self._heartbeat = None

    def _start_heartbeat(self, store: LightningStore, worker_id: str) -> HeartbeatSender | None:
        if self.heartbeat_interval <= 0 or self.worker_id is None:
            return None
        from agl_core.utils.system_snapshot import system_snapshot

        include_gpu = self.heartbeat_include_gpu

        def snapshot() -> dict[str, Any]:
            stats = system_snapshot(include_gpu=include_gpu)
            stats["rollouts_processed"] = self.rollouts_processed
            return stats

        self._heartbeat = HeartbeatSender(
            store,
            worker_id,
            interval=self.heartbeat_interval,
            jitter=self.interval_jitter,
            mode=self.heartbeat_launch_mode,
            snapshot=snapshot,
        )
        self._heartbeat.start()
        return self._heartbeat

    async def _idle(self, event: Any | None, base: float) -> bool:
        """Wait about ``base`` seconds (jittered); True as soon as ``event`` is set."""
        fraction = min(self.interval_jitter / self.poll_interval, 0.9)
        deadline = time.monotonic() + max(0.001, base * (1.0 + random.uniform(-fraction, fraction)))
        while True:
            if _event_is_set(event):
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            await asyncio.sleep(min(remaining, STOP_CHECK_SECONDS))

    async def step(
        self,
        input: T_task,
        *,
        resources: NamedResources | None = None,
        mode: RolloutMode | None = None,
        event: Any | None = None,
    ) -> Rollout:
        """Run the agent on ``input`` as a new rollout (not queued) and return it, finished.

        ``resources`` are stored as a new snapshot first; without them the latest snapshot is used (or none
        when the store has no resources).

        Raises:
            Exception: whatever the agent raised (the attempt is failed first, with the exception recorded),
                e.g. ``MissingResourceError`` for an LLM the resources lack; ``AgentTimeoutError`` on a
                timeout.
        """
        store = self.get_store()
        resources_id = None
        if resources is not None:
            resources_id = (await store.add_resources(resources)).resources_id
        attempted = await store.start_rollout(
            input, mode=mode, resources_id=resources_id, worker_id=self.get_worker_id()
        )
        await self._step_impl(attempted, raise_on_exception=True)
        final = await store.get_rollout_by_id(attempted.rollout_id)
        if final is None:
            raise RuntimeError(  # 0.3's sentence first (0.3 code matches it), then agl's
                f"Failed to fetch completed rollout by id after step: {attempted.rollout_id}. The rollout "
                "disappeared from the store after it ran."
            )
        return final

    # -- one rollout -------------------------------------------------------------------------------

    async def _step_impl(self, rollout: AttemptedRollout, *, raise_on_exception: bool) -> list[Any]:
        """Run one attempted rollout end to end and set the attempt's final status; returns its spans."""
        store = self.get_store()
        agent = self.get_agent()
        spans: list[Any] = []
        status: AttemptStatus = "failed"
        error: BaseException | None = None
        cancelled = False
        try:
            await self._call_hooks("on_rollout_start", agent=agent, runner=self, rollout=rollout)
            resources = await self._resolve_resources(store, rollout)
            result = await self._run_traced(agent, rollout, resources, trace_out=spans)
            spans = await spans_from_result(
                result, store=store, rollout=rollout, trace=list(spans), warned=self._warned
            )
            status = "succeeded"
        except AgentTimeoutError as exc:
            status, error = "timeout", exc
        except asyncio.CancelledError:
            cancelled = True
            error = RunnerStoppedError(f"The runner stopped while rollout {rollout.rollout_id} was running.")
        except Exception as exc:
            error = exc
        finally:
            await self._finish(store, agent, rollout, status, error, spans)
        if cancelled:
            raise asyncio.CancelledError
        if error is not None:
            self._log_failure(rollout, status, error)
            if raise_on_exception:
                raise error
        elif logger.isEnabledFor(logging.DEBUG):
            from agl_core.emitter import find_final_reward

            reward = find_final_reward(spans) if spans else None
            logger.debug(
                "Rollout %s succeeded: %d spans, final reward %s.", rollout.rollout_id, len(spans), reward
            )
        return spans

    async def _finish(
        self,
        store: LightningStore,
        agent: LitAgent[T_task],
        rollout: AttemptedRollout,
        status: AttemptStatus,
        error: BaseException | None,
        spans: list[Any],
    ) -> None:
        """Record the error, call ``on_rollout_end`` and write the attempt's final status (bounded)."""

        async def finish() -> None:
            if error is not None:
                recorded = await exception_span(store, rollout, error)
                if recorded is not None:
                    spans.append(recorded)
            await self._call_hooks("on_rollout_end", agent=agent, runner=self, rollout=rollout, spans=spans)
            try:
                await store.update_attempt(rollout.rollout_id, rollout.attempt.attempt_id, status=status)
            except Exception:
                logger.exception(
                    "Rollout %s: could not set attempt %s to %s.",
                    rollout.rollout_id,
                    rollout.attempt.attempt_id,
                    status,
                )

        if not isinstance(error, RunnerStoppedError):
            await finish()
            return
        # Stopping: the bookkeeping runs shielded, and gets a bounded chance if the runner is cancelled again.
        task = asyncio.ensure_future(finish())
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            await asyncio.wait({task}, timeout=CANCEL_GRACE_SECONDS)
            raise

    def _log_failure(self, rollout: AttemptedRollout, status: AttemptStatus, error: BaseException) -> None:
        if isinstance(error, (AgentTimeoutError, ResourcesNotFoundError, RunnerStoppedError)):
            logger.warning("Rollout %s %s: %s", rollout.rollout_id, status, error)
        else:
            logger.warning(
                "Rollout %s failed: the agent raised %s: %s",
                rollout.rollout_id,
                type(error).__name__,
                error,
                exc_info=error,
            )

    async def _resolve_resources(self, store: LightningStore, rollout: AttemptedRollout) -> NamedResources:
        if rollout.resources_id is not None:
            update = await store.get_resources_by_id(rollout.resources_id)
            if update is None:
                raise ResourcesNotFoundError(
                    rollout.resources_id,
                    f"Rollout {rollout.rollout_id} asks for resources {rollout.resources_id!r}, which are "
                    "not in the store. Enqueue rollouts with the id returned by store.add_resources(...) or "
                    "update_resources(...), or with resources_id=None to use the latest.",
                )
            return update.resources
        update = await store.get_latest_resources()
        if update is None:
            if "no_resources" not in self._warned:
                self._warned.add("no_resources")
                logger.warning(
                    "%s: the store has no resources, so agents run with none (an agent that asks for an LLM "
                    "or a prompt template fails). Publish them before rollouts start, e.g. "
                    "Trainer(initial_resources={'main_llm': agl.LLM(...)}) or store.add_resources({...}).",
                    self.get_worker_id(),
                )
            return {}
        return update.resources

    async def _run_traced(
        self,
        agent: LitAgent[T_task],
        rollout: AttemptedRollout,
        resources: NamedResources,
        *,
        trace_out: list[Any],
    ) -> Any:
        """Run the agent inside the tracer's context with the trace hooks; the trace goes to ``trace_out``.

        ``trace_out`` is filled even when the agent raises, so hooks still see the spans it produced.
        """
        traced = False
        try:
            async with AsyncExitStack() as stack:
                traced = await self._enter_trace(stack, rollout)
                await self._call_hooks(
                    "on_trace_start", agent=agent, runner=self, tracer=self.tracer, rollout=rollout
                )
                try:
                    result = await self._call_agent(agent, rollout, resources)
                finally:
                    await self._call_hooks(
                        "on_trace_end", agent=agent, runner=self, tracer=self.tracer, rollout=rollout
                    )
        finally:
            if traced:
                trace_out.extend(self._last_trace())
        return result

    async def _enter_trace(self, stack: AsyncExitStack, rollout: AttemptedRollout) -> bool:
        """Open the tracer's ``trace_context``; False (run untraced) for a tracer that has none."""
        if "trace_context" in self._warned:
            return False
        context = self.tracer.trace_context(
            name=rollout.rollout_id, rollout_id=rollout.rollout_id, attempt_id=rollout.attempt.attempt_id
        )
        try:
            await stack.enter_async_context(context)
        except NotImplementedError:
            self._warned.add("trace_context")
            logger.warning(
                "%s has no trace_context(); rollouts run untraced (only returned rewards and spans are "
                "stored).",
                type(self.tracer).__name__,
            )
            return False
        return True

    def _last_trace(self) -> list[Any]:
        try:
            return list(self.tracer.get_last_trace())
        except Exception:
            logger.exception(
                "%s.get_last_trace() failed; continuing without the trace.", type(self.tracer).__name__
            )
            return []

    async def _call_agent(
        self, agent: LitAgent[T_task], rollout: AttemptedRollout, resources: NamedResources
    ) -> Any:
        """Run the agent method for the rollout's mode, enforcing ``config.timeout_seconds``."""
        train = rollout.mode == "train"
        task_input = rollout.input
        if agent.is_async():
            method = agent.training_rollout_async if train else agent.validation_rollout_async
            work: Any = method(task_input, resources, rollout)
        else:
            sync_method = agent.training_rollout if train else agent.validation_rollout
            if self._agent_thread is None:
                self._agent_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agl-sync-agent")
            context = contextvars.copy_context()  # the rollout's trace binding travels with the call
            call = functools.partial(context.run, sync_method, task_input, resources, rollout)
            work = asyncio.get_running_loop().run_in_executor(self._agent_thread, call)
        timeout = rollout.config.timeout_seconds
        if timeout is None:
            return await work
        task = asyncio.ensure_future(work)
        try:
            done, _ = await asyncio.wait({task}, timeout=timeout)
        except asyncio.CancelledError:
            await self._cancel(task, agent)
            raise
        if not done:
            await self._cancel(task, agent)
            raise AgentTimeoutError(
                f"the agent ran longer than the rollout's timeout_seconds={timeout} and was cancelled."
            )
        return task.result()

    async def _cancel(self, task: asyncio.Future[Any], agent: LitAgent[T_task]) -> None:
        task.cancel()
        await asyncio.wait({task}, timeout=CANCEL_GRACE_SECONDS)
        if not agent.is_async():
            logger.warning(
                "A sync agent cannot be interrupted: its thread keeps running in the background until it "
                "returns."
            )
        elif not task.done():
            logger.warning("The agent did not stop within %.0f s of being cancelled.", CANCEL_GRACE_SECONDS)
        if task.done() and not task.cancelled():
            task.exception()  # retrieve it so asyncio does not log "exception was never retrieved"

    async def _call_hooks(self, method: str, **kwargs: Any) -> None:
        """Call ``method`` on every hook; an exception is logged and never propagates."""
        for hook in self._hooks:
            try:
                result = getattr(hook, method)(**kwargs)
                if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
                    await result
            except Exception:
                logger.exception("Hook %s.%s raised; ignoring it.", type(hook).__name__, method)
