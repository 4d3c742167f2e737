"""`Runner`: the base class of components that execute an agent on rollouts from a store."""

from __future__ import annotations

import abc
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from agl_core.types import ParallelWorkerBase

if TYPE_CHECKING:
    from agl_core.store.base import LightningStore
    from agl_core.types import Hook, NamedResources, Rollout, RolloutMode

__all__ = ["Runner"]

logger = logging.getLogger(__name__)

T_task = TypeVar("T_task")
_R = TypeVar("_R", bound="Runner[Any]")


class Runner(ParallelWorkerBase, abc.ABC, Generic[T_task]):
    """Executes an agent on rollouts: :meth:`iter` works through the queue, :meth:`step` runs one task.

    Lifecycle: ``init(agent, hooks=...)`` once, ``init_worker(worker_id, store)`` per worker, then
    ``iter``/``step``, then ``teardown_worker(worker_id)`` and ``teardown()``; :meth:`run_context` does it
    all around a ``with`` block. One runner instance serves one worker at a time.
    """

    @abc.abstractmethod
    def init(self, agent: Any, **kwargs: Any) -> None:
        """Bind the agent (and hooks) once, before any worker starts."""

    @abc.abstractmethod
    def init_worker(self, worker_id: int, store: LightningStore, **kwargs: Any) -> None:
        """Bind this worker's id and store."""

    @abc.abstractmethod
    def teardown(self, *args: Any, **kwargs: Any) -> None:
        """Release what :meth:`init` set up."""

    @abc.abstractmethod
    def teardown_worker(self, worker_id: int, *args: Any, **kwargs: Any) -> None:
        """Release what :meth:`init_worker` set up."""

    def run(self, *args: Any, **kwargs: Any) -> Any:
        """Removed: use ``await runner.iter()`` or ``await runner.step(task)``."""
        raise RuntimeError(
            "Runner.run() is deprecated; use `await runner.iter()` or `await runner.step(task)`."
        )

    @contextmanager
    def run_context(
        self: _R,
        *,
        agent: Any,
        store: LightningStore,
        hooks: Sequence[Hook] | None = None,
        worker_id: int | None = None,
    ) -> Iterator[_R]:
        """Initialize the runner for ``worker_id`` (default 0) around a block, then tear down.

        Only the stages that succeeded are torn down; teardown errors are logged, not raised. Unlike Agent
        Lightning 0.3 (quirk 16 in docs/migrating-from-agent-lightning.md), ``init_worker`` receives
        ``worker_id`` too, not always 0.
        """
        worker = 0 if worker_id is None else worker_id
        self.init(agent, hooks=hooks)
        worker_ready = False
        try:
            self.init_worker(worker, store)
            worker_ready = True
            yield self
        finally:
            if worker_ready:
                try:
                    self.teardown_worker(worker)
                except Exception:
                    logger.exception(  # 0.3's sentence first (0.3 code matches it), then agl's
                        "Error during runner worker teardown: %s.teardown_worker(%s) failed.",
                        type(self).__name__,
                        worker,
                    )
            try:
                self.teardown()
            except Exception:
                logger.exception("Error during runner teardown: %s.teardown() failed.", type(self).__name__)

    @abc.abstractmethod
    async def iter(self, *, event: Any | None = None) -> None:
        """Run rollouts from the store until ``event`` is set (or the runner's own limit is reached)."""

    @abc.abstractmethod
    async def step(
        self,
        input: T_task,
        *,
        resources: NamedResources | None = None,
        mode: RolloutMode | None = None,
        event: Any | None = None,
    ) -> Rollout:
        """Run the agent on one task outside the queue and return the finished rollout."""
