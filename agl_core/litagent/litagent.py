"""`LitAgent`: the base class of every trainable agent."""

from __future__ import annotations

import warnings
import weakref
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from agl_core.types import NamedResources, Rollout, RolloutRawResult

__all__ = ["LitAgent"]

T = TypeVar("T")

_ASYNC_METHODS = ("rollout_async", "training_rollout_async", "validation_rollout_async")


def _deref(ref: weakref.ReferenceType[Any] | None, what: str, setter: str) -> Any:
    """Resolve a weak reference, or raise a ``ValueError`` naming the setter to call."""
    if ref is None:
        raise ValueError(f"The {what} has not been set for this agent; call {setter}() first.")
    value = ref()
    if value is None:
        raise ValueError(f"The {what} of this agent no longer exists (it was garbage-collected).")
    return value


class LitAgent(Generic[T]):
    """Base class of an agent that a runner executes on tasks of type ``T``.

    Override :meth:`rollout` (sync) or :meth:`rollout_async` (async); override
    :meth:`training_rollout`/:meth:`validation_rollout` (or their ``_async`` forms) to behave differently
    per mode. Each receives the task, the resources of the rollout by name and the rollout itself, and
    returns a ``RolloutRawResult``: ``None`` (spans come from the tracer), a reward (``float``; ``int`` and
    ``bool`` are converted), or a list of spans (``Span``, OpenTelemetry ``ReadableSpan`` or
    ``SpanCoreFields``).

    For plain functions, use the :func:`~agl_core.litagent.rollout` decorator instead of subclassing.

    Args:
        trained_agents: Deprecated; only the legacy trainer used it (as the adapter's ``agent_match``).
    """

    def __init__(self, *, trained_agents: str | None = None) -> None:
        if trained_agents is not None:
            warnings.warn(
                "LitAgent(trained_agents=...) is deprecated; set the adapter's agent_match instead, e.g. "
                "Trainer(adapter={'agent_match': '...'}).",
                DeprecationWarning,
                stacklevel=2,
            )
        self.trained_agents = trained_agents
        self._trainer_ref: weakref.ReferenceType[Any] | None = None
        self._runner_ref: weakref.ReferenceType[Any] | None = None

    # -- pickling: weak references cannot cross processes; the new process sets them again ----------

    def __getstate__(self) -> dict[str, Any]:
        """Pickle the agent without its (process-local) trainer and runner references."""
        state = dict(self.__dict__)
        state["_trainer_ref"] = None
        state["_runner_ref"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restore a pickled agent."""
        self.__dict__.update(state)

    # -- trainer / runner / tracer --------------------------------------------------------------

    def set_trainer(self, trainer: Any) -> None:
        """Remember (weakly) the trainer that trains this agent."""
        self._trainer_ref = weakref.ref(trainer)

    def get_trainer(self) -> Any:
        """The trainer set with :meth:`set_trainer`; ``ValueError`` if unset or gone."""
        return _deref(getattr(self, "_trainer_ref", None), "trainer", "set_trainer")

    @property
    def trainer(self) -> Any:
        """The trainer (see :meth:`get_trainer`)."""
        return self.get_trainer()

    def set_runner(self, runner: Any) -> None:
        """Remember (weakly) the runner that executes this agent."""
        self._runner_ref = weakref.ref(runner)

    def get_runner(self) -> Any:
        """The runner set with :meth:`set_runner`; ``ValueError`` if unset or gone."""
        return _deref(getattr(self, "_runner_ref", None), "runner", "set_runner")

    @property
    def runner(self) -> Any:
        """The runner (see :meth:`get_runner`)."""
        return self.get_runner()

    def get_tracer(self) -> Any:
        """The runner's tracer, else the trainer's; ``ValueError`` when neither is available."""
        for ref in (getattr(self, "_runner_ref", None), getattr(self, "_trainer_ref", None)):
            owner = ref() if ref is not None else None
            tracer = getattr(owner, "tracer", None)
            if tracer is not None:
                return tracer
        raise ValueError("This agent has no tracer: neither its runner nor its trainer is set or has one.")

    @property
    def tracer(self) -> Any:
        """The tracer (see :meth:`get_tracer`)."""
        return self.get_tracer()

    # -- rollout methods --------------------------------------------------------------------------

    def is_async(self) -> bool:
        """True when the subclass overrides an ``*_async`` rollout method (the runner then awaits it)."""
        cls = type(self)
        return any(getattr(cls, name) is not getattr(LitAgent, name) for name in _ASYNC_METHODS)

    def rollout(self, task: T, resources: NamedResources, rollout: Rollout) -> RolloutRawResult:
        """Run the agent on one task (sync); override this or :meth:`rollout_async`."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement rollout(self, task, resources, rollout) or "
            "async rollout_async(self, task, resources, rollout)."
        )

    async def rollout_async(self, task: T, resources: NamedResources, rollout: Rollout) -> RolloutRawResult:
        """Run the agent on one task (async); override this or :meth:`rollout`."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement async rollout_async(self, task, resources, rollout) or "
            "rollout(self, task, resources, rollout)."
        )

    def training_rollout(self, task: T, resources: NamedResources, rollout: Rollout) -> RolloutRawResult:
        """Rollout in ``train`` mode; defaults to :meth:`rollout`."""
        return self.rollout(task, resources, rollout)

    def validation_rollout(self, task: T, resources: NamedResources, rollout: Rollout) -> RolloutRawResult:
        """Rollout in any other mode (``val``, ``test``, none); defaults to :meth:`rollout`."""
        return self.rollout(task, resources, rollout)

    async def training_rollout_async(
        self, task: T, resources: NamedResources, rollout: Rollout
    ) -> RolloutRawResult:
        """Async rollout in ``train`` mode; defaults to :meth:`rollout_async`."""
        return await self.rollout_async(task, resources, rollout)

    async def validation_rollout_async(
        self, task: T, resources: NamedResources, rollout: Rollout
    ) -> RolloutRawResult:
        """Async rollout in any other mode; defaults to :meth:`rollout_async`."""
        return await self.rollout_async(task, resources, rollout)

    # -- deprecated hooks -------------------------------------------------------------------------

    def on_rollout_start(self, task: T, runner: Any, tracer: Any) -> None:
        """Deprecated: only the legacy runner calls it; use a :class:`~agl_core.types.Hook` instead."""

    def on_rollout_end(self, task: T, rollout: Any, runner: Any, tracer: Any) -> None:
        """Deprecated: only the legacy runner calls it; use a :class:`~agl_core.types.Hook` instead."""
