"""The `Tracer` contract and the context-local active tracer.

Agent Lightning 0.3 kept the active tracer in a process global, so one process could run one trace
context at a time (quirk 10 in docs/migrating-from-agent-lightning.md). agl keeps it in a ``contextvars``
variable instead: every asyncio
task and every thread has its own, so several runners in one process trace side by side. A task created
inside ``trace_context`` inherits the tracer (asyncio copies the context); a raw ``threading.Thread`` does
not -- run such work through ``asyncio.to_thread`` or ``contextvars.copy_context().run`` to keep it traced.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    asynccontextmanager,
    contextmanager,
)
from typing import TYPE_CHECKING, Any, TypeVar

from agl_core.types import ParallelWorkerBase

if TYPE_CHECKING:
    from agl_core.store.base import LightningStore
    from agl_core.types import Span, SpanCoreFields, SpanRecordingContext, TraceStatus

__all__ = [
    "Tracer",
    "clear_active_tracer",
    "get_active_tracer",
    "set_active_tracer",
]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

_ACTIVE_TRACER: contextvars.ContextVar[Tracer | None] = contextvars.ContextVar(
    "agl_active_tracer", default=None
)


def get_active_tracer() -> Tracer | None:
    """The tracer whose ``trace_context`` is open in the current context (task or thread), or None."""
    return _ACTIVE_TRACER.get()


def set_active_tracer(tracer: Tracer) -> None:
    """Make ``tracer`` active in the current context.

    Raises ``ValueError`` if a tracer is already active here. Unlike Agent Lightning 0.3 this is
    context-local: another task or thread is unaffected. Prefer ``trace_context``, which sets and
    restores it for you.
    """
    current = _ACTIVE_TRACER.get()
    if current is not None:
        raise ValueError(
            f"An active tracer is already set. Cannot set a new one. ({type(current).__name__} is active in "
            "this context; call clear_active_tracer() first or use tracer.trace_context().)"
        )
    _ACTIVE_TRACER.set(tracer)


def clear_active_tracer() -> None:
    """Forget the active tracer of the current context (no-op when there is none)."""
    _ACTIVE_TRACER.set(None)


class Tracer(ParallelWorkerBase):
    """Base of all tracers: turns agent activity into spans attributed to a rollout attempt.

    Lifecycle: ``init()`` once, ``init_worker(worker_id, store)`` per worker, ``trace_context(...)`` per
    rollout, then ``teardown_worker(worker_id)`` and ``teardown()``. Subclasses implement
    ``_trace_context``, ``get_last_trace``, ``create_span`` and ``operation_context``.
    """

    _store: LightningStore | None = None

    def init_worker(
        self, worker_id: int, store: LightningStore | None = None, *args: Any, **kwargs: Any
    ) -> None:
        """Prepare this worker; spans of traced rollouts go to ``store``."""
        super().init_worker(worker_id)
        self._store = store

    @property
    def store(self) -> LightningStore | None:
        """The store given to ``init_worker`` (None before, or when tracing locally)."""
        return self._store

    @contextmanager
    def lifespan(self, store: LightningStore | None = None) -> Iterator[Tracer]:
        """Debugging helper: ``init``, ``init_worker(0, store)``; on exit the two teardowns."""
        self.init()
        self.init_worker(0, store)
        try:
            yield self
        finally:
            self.teardown_worker(0)
            self.teardown()

    @asynccontextmanager
    async def trace_context(
        self,
        name: str | None = None,
        *,
        store: LightningStore | None = None,
        rollout_id: str | None = None,
        attempt_id: str | None = None,
    ) -> AsyncIterator[Any]:
        """Attribute every span recorded inside to ``(rollout_id, attempt_id)``; this tracer is active inside.

        ``rollout_id`` and ``attempt_id`` are given together or not at all (``ValueError``). ``store=`` is
        deprecated: the store from ``init_worker`` is used. After the block, ``get_last_trace()`` returns the
        spans and, with a store, they are all in it.
        """
        if (rollout_id is None) != (attempt_id is None):
            raise ValueError(
                "rollout_id and attempt_id must be given together (both or neither); got "
                f"rollout_id={rollout_id!r}, attempt_id={attempt_id!r}."
            )
        if store is not None:
            warnings.warn(
                "trace_context(store=...) is deprecated; pass the store to init_worker(worker_id, store).",
                DeprecationWarning,
                stacklevel=3,
            )
        token = _ACTIVE_TRACER.set(self)
        try:
            async with self._trace_context(
                name, store=store, rollout_id=rollout_id, attempt_id=attempt_id
            ) as handle:
                yield handle
        finally:
            _ACTIVE_TRACER.reset(token)

    def _trace_context(
        self,
        name: str | None,
        *,
        store: LightningStore | None,
        rollout_id: str | None,
        attempt_id: str | None,
    ) -> AbstractAsyncContextManager[Any]:
        """Subclass hook behind ``trace_context`` (argument checks and the active tracer are done)."""
        raise NotImplementedError(f"{type(self).__name__} does not support trace_context().")

    def get_last_trace(self) -> list[Span]:
        """The spans of the most recent ``trace_context`` (of the current task when it opened one)."""
        raise NotImplementedError(f"{type(self).__name__} does not record traces.")

    def create_span(
        self,
        name: str,
        attributes: dict[str, Any] | None = None,
        timestamp: float | None = None,
        status: TraceStatus | None = None,
    ) -> SpanCoreFields:
        """Record a zero-duration span now (or at ``timestamp``: seconds, or nanoseconds if > 1e12)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement create_span().")

    def operation_context(
        self,
        name: str,
        attributes: dict[str, Any] | None = None,
        start_time: float | None = None,
        end_time: float | None = None,
    ) -> AbstractContextManager[SpanRecordingContext]:
        """Record a span around a block; exceptions mark it ERROR and propagate."""
        raise NotImplementedError(f"{type(self).__name__} does not implement operation_context().")

    def get_langchain_handler(self) -> Any:
        """A LangChain callback handler feeding this tracer; the base tracer has none (returns None)."""
        logger.warning("%s provides no LangChain callback handler; returning None.", type(self).__name__)
        return None

    def trace_run(self, func: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """Deprecated: call ``func`` inside a fresh event loop's ``trace_context()`` and return its result."""
        warnings.warn(
            "Tracer.trace_run is deprecated; use `async with tracer.trace_context(): ...`.",
            DeprecationWarning,
            stacklevel=2,
        )

        async def run() -> _T:
            async with self.trace_context():
                return func(*args, **kwargs)

        return asyncio.run(run())

    async def trace_run_async(self, func: Callable[..., Awaitable[_T]], *args: Any, **kwargs: Any) -> _T:
        """Deprecated: await ``func`` inside ``trace_context()`` and return its result."""
        warnings.warn(
            "Tracer.trace_run_async is deprecated; use `async with tracer.trace_context(): ...`.",
            DeprecationWarning,
            stacklevel=2,
        )
        async with self.trace_context():
            return await func(*args, **kwargs)


T_func = Callable[..., Awaitable[Any]]
"""An async callable (Agent Lightning 0.3's alias)."""


def with_active_tracer_context(
    func: Callable[..., AbstractAsyncContextManager[_T]],
) -> Callable[..., AbstractAsyncContextManager[_T]]:
    """Decorate a tracer method returning an async context manager: the tracer is active for the whole block.

    Agent Lightning 0.3's decorator; the tracer is active in the current context only, as everywhere in agl.
    """

    @functools.wraps(func)
    def wrapper(self: Tracer, *args: Any, **kwargs: Any) -> AbstractAsyncContextManager[_T]:
        return _active_for_block(self, func(self, *args, **kwargs))

    return wrapper


@asynccontextmanager
async def _active_for_block(tracer: Tracer, manager: AbstractAsyncContextManager[_T]) -> AsyncIterator[_T]:
    token = _ACTIVE_TRACER.set(tracer)
    try:
        async with manager as value:
            yield value
    finally:
        _ACTIVE_TRACER.reset(token)
