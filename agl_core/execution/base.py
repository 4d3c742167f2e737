"""`ExecutionStrategy`: how the algorithm bundle and the runner bundles of a training run are executed."""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from agl_core.execution.events import ExecutionEvent
    from agl_core.store.base import LightningStore

__all__ = ["AlgorithmBundle", "ExecutionStrategy", "RunnerBundle"]


class AlgorithmBundle(Protocol):
    """The algorithm side of a run: ``await bundle(store, event)``; it should return once ``event`` is set."""

    async def __call__(self, store: LightningStore, event: ExecutionEvent) -> None:
        """Drive the algorithm against ``store``."""
        ...


class RunnerBundle(Protocol):
    """One runner worker: ``await bundle(store, worker_id, event)``; it returns once ``event`` is set.

    A bundle may also define ``prepare_fork()``: process strategies call it once in the parent before
    they fork runner processes (to import heavy modules once, for instance).
    """

    async def __call__(self, store: LightningStore, worker_id: int, event: ExecutionEvent) -> None:
        """Run rollouts from ``store`` as worker ``worker_id``."""
        ...


class ExecutionStrategy(abc.ABC):
    """Runs one algorithm bundle and ``n_runners`` runner bundles against a store, then cleans up.

    :meth:`execute` is synchronous and returns when the run is over. Implementations share one stop
    event between all bundles, set it when any bundle fails or the algorithm finishes, re-raise the
    first failure, and leave no thread or process of theirs behind.
    """

    n_runners: int = 1

    @abc.abstractmethod
    def execute(self, algorithm: AlgorithmBundle, runner: RunnerBundle, store: LightningStore) -> None:
        """Run the bundles to completion (see the class docstring)."""

    def __repr__(self) -> str:
        fields: dict[str, Any] = {k: v for k, v in vars(self).items() if not k.startswith("_")}
        inner = ", ".join(f"{k}={v!r}" for k, v in fields.items())
        return f"{type(self).__name__}({inner})"
