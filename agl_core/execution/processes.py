"""Child processes of an execution: spawning, parent-death detection and bounded shutdown escalation."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable, Sequence
from multiprocessing.context import BaseContext
from multiprocessing.process import BaseProcess
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agl_core.execution.events import ExecutionEvent

__all__ = ["ParentAwareEvent", "ProcessGroup"]

logger = logging.getLogger(__name__)


class ParentAwareEvent:
    """The shared stop event as seen by a child: it also counts as set once the parent process is gone.

    So a runner whose trainer was killed (SIGKILL, OOM) stops instead of polling a dead server forever.
    """

    __slots__ = ("_event", "_parent_pid")

    def __init__(self, event: ExecutionEvent, parent_pid: int) -> None:
        self._event = event
        self._parent_pid = parent_pid

    def parent_alive(self) -> bool:
        """False once this process was re-parented (its parent exited)."""
        return os.getppid() == self._parent_pid

    def set(self) -> None:
        """Raise the shared flag."""
        self._event.set()

    def clear(self) -> None:
        """Lower the shared flag."""
        self._event.clear()

    def is_set(self) -> bool:
        """True when the flag is raised or the parent is gone."""
        return self._event.is_set() or not self.parent_alive()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the flag (checking the parent every 0.2 s); True when set or the parent is gone."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self.is_set():
                return True
            remaining = 0.2 if deadline is None else min(0.2, deadline - time.monotonic())
            if remaining <= 0:
                return False
            if self._event.wait(remaining):
                return True


def _join_all(processes: Sequence[BaseProcess], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))


class ProcessGroup:
    """Processes started by one execution, stopped with a bounded escalation.

    :meth:`shutdown`: set the event and wait ``graceful_timeout``; SIGINT the survivors and wait
    ``terminate_timeout``; ``terminate()`` (SIGTERM) and wait; ``kill()`` (SIGKILL) and wait.
    """

    def __init__(self, ctx: BaseContext, name: str) -> None:
        self.ctx = ctx
        self.name = name
        self.processes: list[BaseProcess] = []

    def spawn(self, target: Callable[..., Any], args: tuple[Any, ...], name: str) -> BaseProcess:
        """Start ``target(*args)`` in a new process."""
        # typeshed's BaseContext has no Process (only its concrete subclasses declare it)
        process: BaseProcess = self.ctx.Process(target=target, args=args, name=name, daemon=False)  # type: ignore[attr-defined]
        process.start()
        self.processes.append(process)
        logger.debug("Started %s (pid %s).", name, process.pid)
        return process

    def alive(self) -> list[BaseProcess]:
        """Processes still running."""
        return [p for p in self.processes if p.is_alive()]

    def exit_codes(self) -> dict[str, int | None]:
        """Exit code of each process by name (None while running)."""
        return {f"{p.name} (pid {p.pid})": p.exitcode for p in self.processes}

    def unexpected_exit_codes(self, allowed: Sequence[int]) -> dict[str, int | None]:
        """Processes that exited with a code outside ``allowed`` (or are still running)."""
        return {name: code for name, code in self.exit_codes().items() if code not in allowed}

    def join(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for every process."""
        _join_all(self.processes, timeout)

    def shutdown(self, event: ExecutionEvent, graceful_timeout: float, terminate_timeout: float) -> None:
        """Stop every process with the escalation described on the class; returns when all are gone."""
        event.set()
        _join_all(self.processes, graceful_timeout)
        steps: list[tuple[str, Callable[[BaseProcess], None]]] = [
            ("SIGINT", _interrupt),
            ("SIGTERM", lambda p: p.terminate()),
            ("SIGKILL", lambda p: p.kill()),
        ]
        for label, action in steps:
            survivors = self.alive()
            if not survivors:
                return
            logger.warning(
                "%s: %d process(es) still running (%s); sending %s.",
                self.name,
                len(survivors),
                ", ".join(f"{p.name}/{p.pid}" for p in survivors),
                label,
            )
            for process in survivors:
                with contextlib.suppress(OSError, ValueError):  # already gone
                    action(process)
            _join_all(survivors, terminate_timeout)
        for process in self.alive():
            logger.error("%s: process %s (pid %s) survived SIGKILL.", self.name, process.name, process.pid)

    def kill_now(self, timeout: float = 5.0) -> None:
        """Last resort (a second Ctrl-C): SIGTERM, then SIGKILL, each waited on for ``timeout`` seconds."""
        actions: tuple[Callable[[BaseProcess], None], ...] = (lambda p: p.terminate(), lambda p: p.kill())
        for action in actions:
            survivors = self.alive()
            if not survivors:
                return
            for process in survivors:
                with contextlib.suppress(OSError, ValueError):
                    action(process)
            _join_all(survivors, timeout)


def _interrupt(process: BaseProcess) -> None:
    if process.pid is not None:
        os.kill(process.pid, signal.SIGINT)
