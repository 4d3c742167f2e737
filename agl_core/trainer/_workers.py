"""One runner (and one tracer) per worker: fixes Agent Lightning 0.3 quirk 10 in
docs/migrating-from-agent-lightning.md.

In 0.3 the trainer gave the *same* runner object, and so the same tracer, to every worker; several threads
of the shared-memory strategy then fought over one runner's state. Here each worker of a process gets its
own: the first one the trainer's runner, the others fresh copies made before any of them starts.
"""

from __future__ import annotations

import copy
import logging
import os
import threading
from typing import Any, Generic, TypeVar

__all__ = ["WorkerRunners", "clone_component"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


def clone_component(obj: T) -> T:
    """An independent copy of ``obj`` for another worker.

    ``copy.deepcopy`` when the object supports it; otherwise (an attribute that cannot be copied, such as
    a ``contextvars.ContextVar``) a shallow copy whose nested runners and tracers are cloned the same way
    and whose list/dict/set attributes are copied, so no mutable state is shared.
    """
    try:
        return copy.deepcopy(obj)
    except Exception as exc:
        logger.debug("deepcopy of %s failed (%r); using a structural copy.", type(obj).__name__, exc)
    from agl_core.runner.base import Runner
    from agl_core.tracer.base import Tracer

    clone = copy.copy(obj)
    state = getattr(clone, "__dict__", None)
    if state is None:
        return clone
    for key, value in list(state.items()):
        if isinstance(value, (Runner, Tracer)):
            state[key] = clone_component(value)
        elif isinstance(value, (list, dict, set)):
            state[key] = copy.copy(value)
    return clone


class WorkerRunners(Generic[T]):
    """Hands each worker of this process its own runner.

    The first worker gets ``template`` itself (so a single worker uses exactly the runner the user
    configured); the next ones get copies prepared up front, while the template is still pristine.
    After a fork the child starts over with its own copy of the template.
    """

    def __init__(self, template: T, n_workers: int) -> None:
        self._template = template
        self._spares = [clone_component(template) for _ in range(max(0, n_workers - 1))]
        self._pid = os.getpid()
        self._template_taken = False
        self._lock = threading.Lock()

    def acquire(self) -> T:
        """The runner for one more worker of this process."""
        with self._lock:
            if os.getpid() != self._pid:
                self._pid = os.getpid()
                self._template_taken = False
            if not self._template_taken:
                self._template_taken = True
                return self._template
            if self._spares:
                return self._spares.pop(0)
        logger.warning(
            "More workers than prepared runners in this process; copying the (already used) runner %s.",
            type(self._template).__name__,
        )
        return clone_component(self._template)

    def __getstate__(self) -> dict[str, Any]:
        """Picklable form (the lock is recreated on the other side)."""
        return {key: value for key, value in self.__dict__.items() if key != "_lock"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restore a pickled instance with a fresh lock."""
        self.__dict__.update(state)
        self._lock = threading.Lock()

    @property
    def template(self) -> Any:
        """The runner the trainer was configured with."""
        return self._template
