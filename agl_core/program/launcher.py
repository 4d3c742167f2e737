"""Starting a program and waiting for it: `ProgramLaunch`, `ProgramExit`, `ProgramLauncher`, `LocalLauncher`.

A :class:`ProgramAgent <agl_core.program.ProgramAgent>` builds a :class:`ProgramLaunch` per attempt (argv,
environment, working folder, stdin, timeout) and hands it to a launcher, which runs it and answers a
:class:`ProgramExit`. :class:`LocalLauncher` runs it as a local subprocess in its own process group; a
plugin can run the same launch elsewhere (a Kubernetes Job, a container) by implementing
:class:`ProgramLauncher`.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LocalLauncher", "ProgramExit", "ProgramLaunch", "ProgramLauncher", "signal_name"]

_READ_CHUNK = 65536
_KILL_GRACE_SECONDS = 5.0
"""How long a program gets between SIGTERM (to its process group) and SIGKILL."""


@dataclass(frozen=True)
class ProgramLaunch:
    """Everything needed to start one program for one attempt.

    Attributes:
        argv: The command and its arguments (``argv[0]`` is looked up on ``PATH``).
        env: The whole environment of the program (nothing else is inherited).
        cwd: The working folder.
        stdin: Bytes written to the program's stdin, which is then closed (None: stdin is ``/dev/null``).
        timeout: Seconds the program may run before its whole process group is ended (None: no limit).
        tail_bytes: How many bytes of the end of stdout and of stderr are kept.
    """

    argv: Sequence[str]
    env: Mapping[str, str]
    cwd: Path
    stdin: bytes | None = None
    timeout: float | None = None
    tail_bytes: int = 8192


@dataclass(frozen=True)
class ProgramExit:
    """How a program ended.

    Attributes:
        returncode: The exit code; None when a signal ended it.
        signal: The number of the signal that ended it, else None.
        timed_out: True when the launcher ended it for running past the launch's timeout.
        stdout_tail / stderr_tail: The last ``tail_bytes`` of each stream, decoded as UTF-8 (invalid bytes
            replaced).
        stdout_bytes / stderr_bytes: How many bytes each stream carried in all.
        duration: Seconds from start to exit.
    """

    returncode: int | None
    signal: int | None
    timed_out: bool
    stdout_tail: str
    stderr_tail: str
    stdout_bytes: int
    stderr_bytes: int
    duration: float

    @property
    def ok(self) -> bool:
        """True when the program exited with code 0 on its own."""
        return self.returncode == 0 and not self.timed_out

    def describe(self) -> str:
        """One phrase saying how it ended: ``exited with code 2``, ``was killed by SIGKILL``, ..."""
        if self.timed_out:
            return "ran past its timeout and was stopped"
        if self.signal is not None:
            return f"was killed by {signal_name(self.signal)}"
        return f"exited with code {self.returncode}"


def signal_name(number: int) -> str:
    """``SIGKILL`` for 9, ``signal 77`` for a number without a name."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class ProgramLauncher(abc.ABC):
    """Runs a :class:`ProgramLaunch` to its end; subclass it to run programs somewhere else.

    The launcher owns the process: when :meth:`run` is cancelled (the runner stops, the rollout's own
    timeout fires) it must stop the program before the cancellation propagates.
    """

    @abc.abstractmethod
    async def run(self, launch: ProgramLaunch) -> ProgramExit:
        """Start the program, wait for it (at most ``launch.timeout`` seconds) and say how it ended.

        Raises:
            FileNotFoundError: the command cannot be found or started.
        """


class _Tail:
    """The last ``limit`` bytes of a stream, and its total length."""

    def __init__(self, limit: int) -> None:
        self.limit = max(0, limit)
        self.data = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self.data += chunk
        if len(self.data) > self.limit:
            del self.data[: len(self.data) - self.limit]

    def text(self) -> str:
        return bytes(self.data).decode("utf-8", errors="replace")


async def _drain(stream: asyncio.StreamReader | None, tail: _Tail) -> None:
    if stream is None:
        return
    while chunk := await stream.read(_READ_CHUNK):
        tail.add(chunk)


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


class LocalLauncher(ProgramLauncher):
    """Runs programs as subprocesses of the runner, each in a new session (its own process group).

    On timeout or cancellation the whole group gets SIGTERM, then SIGKILL after ``kill_grace`` seconds,
    so the children a program started end with it; what a program leaves running in its group when it
    exits is killed too. stdout and stderr are read as they come (a chatty
    program never blocks on a full pipe) and only their tails are kept.

    Args:
        kill_grace: Seconds between SIGTERM and SIGKILL.
    """

    def __init__(self, kill_grace: float = _KILL_GRACE_SECONDS) -> None:
        if kill_grace < 0:
            raise ValueError(f"kill_grace must be >= 0 seconds, got {kill_grace!r}.")
        self.kill_grace = float(kill_grace)

    async def run(self, launch: ProgramLaunch) -> ProgramExit:
        """Run ``launch`` as a local subprocess (see the class docstring)."""
        started = time.monotonic()
        process = await asyncio.create_subprocess_exec(
            *launch.argv,
            cwd=str(launch.cwd),
            env=dict(launch.env),
            stdin=asyncio.subprocess.PIPE if launch.stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        out, err = _Tail(launch.tail_bytes), _Tail(launch.tail_bytes)
        readers = asyncio.gather(_drain(process.stdout, out), _drain(process.stderr, err))
        timed_out = False
        try:
            if launch.stdin is not None and process.stdin is not None:
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    process.stdin.write(launch.stdin)
                    await process.stdin.drain()
                process.stdin.close()
            try:
                await asyncio.wait_for(process.wait(), launch.timeout)
            except asyncio.TimeoutError:
                timed_out = True
                await self._stop(process)
        except BaseException:
            await asyncio.shield(self._stop(process))
            readers.cancel()
            raise
        # The program is gone; its children may still hold the pipes: end the group, then read what is left.
        _signal_group(process.pid, signal.SIGKILL)
        try:
            await asyncio.wait_for(readers, self.kill_grace + 1.0)
        except asyncio.TimeoutError:
            readers.cancel()
        code = process.returncode
        return ProgramExit(
            returncode=code if code is not None and code >= 0 else None,
            signal=-code if code is not None and code < 0 else None,
            timed_out=timed_out,
            stdout_tail=out.text(),
            stderr_tail=err.text(),
            stdout_bytes=out.total,
            stderr_bytes=err.total,
            duration=time.monotonic() - started,
        )

    async def _stop(self, process: asyncio.subprocess.Process) -> None:
        """SIGTERM the process group, SIGKILL it after the grace period, and reap the process."""
        if process.returncode is None:
            _signal_group(process.pid, signal.SIGTERM)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(process.wait(), self.kill_grace)
        _signal_group(process.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
