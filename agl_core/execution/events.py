"""Stop flags shared by the bundles of one execution: `ExecutionEvent` and its thread/process forms."""

from __future__ import annotations

import multiprocessing
import threading
from multiprocessing.context import BaseContext
from typing import Protocol, runtime_checkable

__all__ = ["ExecutionEvent", "MultiprocessingEvent", "ThreadingEvent"]


@runtime_checkable
class ExecutionEvent(Protocol):
    """A settable flag: once set, every bundle of the execution winds down."""

    def set(self) -> None:
        """Raise the flag."""
        ...

    def clear(self) -> None:
        """Lower the flag."""
        ...

    def is_set(self) -> bool:
        """Whether the flag is raised."""
        ...

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the flag is raised or ``timeout`` seconds pass; True when it is raised."""
        ...


class _Flag:
    """An `ExecutionEvent` over a threading or multiprocessing ``Event``."""

    __slots__ = ("_event",)
    _event: ExecutionEvent

    def set(self) -> None:
        """Raise the flag."""
        self._event.set()

    def clear(self) -> None:
        """Lower the flag."""
        self._event.clear()

    def is_set(self) -> bool:
        """Whether the flag is raised."""
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the flag is raised or ``timeout`` seconds pass; True when it is raised."""
        return self._event.wait(timeout)


class ThreadingEvent(_Flag):
    """An `ExecutionEvent` for bundles running as threads of one process."""

    __slots__ = ()

    def __init__(self) -> None:
        self._event = threading.Event()


class MultiprocessingEvent(_Flag):
    """An `ExecutionEvent` shared with child processes (pass it to the child; it pickles for spawn too).

    Args:
        ctx: The multiprocessing context to create the event in (default: the current default context).
    """

    __slots__ = ()

    def __init__(self, *, ctx: BaseContext | None = None) -> None:
        context = ctx if ctx is not None else multiprocessing.get_context()
        self._event = context.Event()

    def __getstate__(self) -> object:
        return self._event

    def __setstate__(self, state: object) -> None:
        self._event = state  # type: ignore[assignment]
