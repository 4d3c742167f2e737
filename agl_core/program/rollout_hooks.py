"""`RolloutHooks`: callbacks where the store is, around a rollout's life -- enqueue, success, failure.

Give them to the trainer, ``Trainer(rollout_hooks=[MyHooks()])``: the trainer's store is wrapped in a
:class:`HookedStore`, so the hooks see every rollout whoever enqueues it (the algorithm, an HTTP client of
the served store) and whichever runner finishes it (a thread, a process, another machine).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agl_core.store.delegating import DelegatingLightningStore
from agl_core.store.logic.queries import check_new_rollout
from agl_core.types import FINISHED_ROLLOUT_STATUSES, EnqueueRolloutRequest
from agl_core.types.queries import EnqueueRollouts, StartRollout

if TYPE_CHECKING:
    from agl_core.store.base import LightningStore
    from agl_core.types import Attempt, AttemptedRollout, Rollout
    from agl_core.types.queries import AttemptUpdate, RolloutUpdate

__all__ = ["HookedStore", "RolloutHooks", "load_rollout_hooks", "with_rollout_hooks"]

logger = logging.getLogger(__name__)


class RolloutHooks:
    """Override any of these; each runs in the process that holds the store (the trainer's).

    * :meth:`on_enqueue` transforms each rollout request before it is stored (fill in a field, derive the
      timeout from the input, refuse a task by raising); an exception fails the enqueue.
    * :meth:`on_succeeded` runs when a runner reports an attempt succeeded, *before* that is stored, so a
      reward it adds (say from the rollout's LLM calls) is there when the algorithm sees the rollout
      finished.
    * :meth:`on_failed` runs once a rollout has finally failed or was cancelled (no retry left).

    Exceptions of ``on_succeeded`` and ``on_failed`` are logged and never change the rollout. Attempts
    the store itself gives up on (unresponsive workers) reach ``on_failed`` only through a later update.
    """

    async def on_enqueue(self, request: EnqueueRolloutRequest) -> EnqueueRolloutRequest:
        """Return the request to store (default: unchanged)."""
        return request

    async def on_succeeded(self, *, rollout: Rollout, attempt_id: str, store: LightningStore) -> None:
        """Called before attempt ``attempt_id`` of ``rollout`` is recorded as succeeded."""

    async def on_failed(self, *, rollout: Rollout, store: LightningStore) -> None:
        """Called after ``rollout`` finished ``failed`` or ``cancelled``."""


class HookedStore(DelegatingLightningStore):
    """A store that runs :class:`RolloutHooks` around the rollout methods of the store it wraps.

    Args:
        store: The store to wrap (it keeps every rollout and span).
        hooks: The hooks, called in order.
    """

    def __init__(self, store: LightningStore, hooks: Sequence[RolloutHooks]) -> None:
        super().__init__()
        for hook in hooks:
            if not isinstance(hook, RolloutHooks):
                raise TypeError(
                    f"rollout_hooks must be agl.RolloutHooks instances, got {type(hook).__name__}: subclass "
                    "agl.RolloutHooks and override on_enqueue, on_succeeded or on_failed."
                )
        self.store = store
        self.hooks = tuple(hooks)

    async def close(self) -> None:
        """Close the wrapped store."""
        await self.store.close()

    async def _transform(self, request: EnqueueRolloutRequest) -> EnqueueRolloutRequest:
        for hook in self.hooks:
            request = await hook.on_enqueue(request)
            if not isinstance(request, EnqueueRolloutRequest):
                raise TypeError(
                    f"{type(hook).__name__}.on_enqueue returned {type(request).__name__}; it must return the "
                    "(possibly changed) EnqueueRolloutRequest."
                )
        return request

    async def _checked(self, rollout: EnqueueRolloutRequest) -> EnqueueRolloutRequest:
        r = await self._transform(rollout)
        return check_new_rollout(r.input, r.mode, r.resources_id, r.config, r.metadata)

    async def _enqueue_rollouts(self, request: EnqueueRollouts) -> Sequence[Rollout]:
        """Enqueue the requests as the ``on_enqueue`` hooks return them (one batch)."""
        rollouts = [await self._checked(rollout) for rollout in request.rollouts]
        return await self.store._enqueue_rollouts(EnqueueRollouts(rollouts))

    async def _start_rollout(self, request: StartRollout) -> AttemptedRollout:
        """Start the rollout as the ``on_enqueue`` hooks return its request."""
        rollout = await self._checked(request.rollout)
        return await self.store._start_rollout(StartRollout(rollout, request.worker_id))

    async def _apply_attempt_update(self, update: AttemptUpdate) -> Attempt:
        """Run ``on_succeeded`` before a success is stored, ``on_failed`` after a final failure."""
        rollout_id, attempt_id, status = update.rollout_id, update.attempt_id, update.status
        if status == "succeeded":
            rollout = await self.store.get_rollout_by_id(rollout_id)
            if rollout is not None and rollout.status not in FINISHED_ROLLOUT_STATUSES:
                resolved = attempt_id
                if attempt_id == "latest":
                    latest = await self.store.get_latest_attempt(rollout_id)
                    resolved = latest.attempt_id if latest is not None else attempt_id
                for hook in self.hooks:
                    await self._call(
                        hook.on_succeeded, rollout=rollout, attempt_id=resolved, store=self.store
                    )
        attempt = await self.store._apply_attempt_update(update)
        if status in ("failed", "timeout", "unresponsive"):
            await self._after_failure(rollout_id)
        return attempt

    async def _apply_rollout_update(self, update: RolloutUpdate) -> Rollout:
        """Run ``on_failed`` after the rollout is set to ``failed`` or ``cancelled``."""
        rollout = await self.store._apply_rollout_update(update)
        if update.status in ("failed", "cancelled"):
            await self._after_failure(update.rollout_id)
        return rollout

    async def _after_failure(self, rollout_id: str) -> None:
        rollout = await self.store.get_rollout_by_id(rollout_id)
        if rollout is None or rollout.status not in ("failed", "cancelled"):
            return  # requeued for another attempt, or gone
        for hook in self.hooks:
            await self._call(hook.on_failed, rollout=rollout, store=self.store)

    @staticmethod
    async def _call(method: Any, **kwargs: Any) -> None:
        try:
            await method(**kwargs)
        except Exception:
            logger.exception("Rollout hook %s raised; ignoring it.", getattr(method, "__qualname__", method))


def with_rollout_hooks(store: LightningStore, hooks: RolloutHooks | Sequence[RolloutHooks]) -> HookedStore:
    """``store`` wrapped in a :class:`HookedStore` running ``hooks`` (one, or a sequence)."""
    items = [hooks] if isinstance(hooks, RolloutHooks) else list(hooks)
    # DelegatingLightningStore fills in the store methods when the class is created; mypy cannot see that
    return HookedStore(store, items)  # type: ignore[abstract]


def load_rollout_hooks(target: str) -> RolloutHooks:
    """The hooks an operator names as ``package.module:name``: a `RolloutHooks` instance, or a subclass
    that takes no arguments (made once). The current directory is importable, as for ``agl runner --agent``.

    Only for a value the operator gives (``agl store serve --rollout-hooks``), never one from a request.

    Raises:
        ValueError: ``target`` cannot be imported, or names something other than rollout hooks.
    """
    from agl_core.registry import import_target

    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        found = import_target(target)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ValueError(
            f"cannot import rollout hooks {target!r}: {exc}. Use 'package.module:hooks' with the package "
            "importable from the current directory or PYTHONPATH."
        ) from exc
    if isinstance(found, type) and issubclass(found, RolloutHooks):
        found = found()
    if not isinstance(found, RolloutHooks):
        raise ValueError(
            f"{target!r} is a {type(found).__name__}, not rollout hooks: point at an agl.RolloutHooks "
            "subclass (or an instance of one)."
        )
    return found
