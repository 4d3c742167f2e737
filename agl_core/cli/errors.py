"""How ``agl`` reports errors: one or two lines for a user error, a traceback only with ``--debug``.

Every subcommand gets this for free. A command raises :class:`AglUserError` (or lets one of agl's
own errors escape: an unknown store scheme, a corrupt database, an unreachable server, ...); the
``agl`` group turns it into ``agl: error: <what was wrong>`` plus ``hint: <how to fix it>`` on
stderr and the exit code of its :class:`ExitCode` class. Anything else is a bug: it prints one line
naming the exception and exits with :attr:`ExitCode.INTERNAL`. ``agl --debug`` or ``AGL_DEBUG=1``
re-raises instead, so Python prints the full traceback.
"""

from __future__ import annotations

import os
import sqlite3
from enum import IntEnum
from typing import IO, Any

import click

__all__ = ["DEBUG_ENV", "AglUserError", "ExitCode", "debug_enabled", "user_error_from"]

DEBUG_ENV = "AGL_DEBUG"
"""Set to 1 to get full tracebacks from ``agl`` (same as ``agl --debug``)."""


class ExitCode(IntEnum):
    """Exit codes of ``agl`` commands, one per kind of failure (documented in docs/guarantees.md)."""

    OK = 0
    FAILED = 1
    """The command ran and reports a negative result (a check failed, a rollout gives no data)."""
    USAGE = 2
    """The command line is malformed (unknown option, missing argument): click's own code."""
    BAD_INPUT = 3
    """A value is wrong: unknown store scheme or component, malformed URI, missing requirement."""
    UNREACHABLE = 4
    """A server (store, model backend) could not be reached or did not answer in time."""
    DATA = 5
    """A file or database cannot be used: missing, unwritable, corrupt."""
    BUSY = 6
    """A system resource is taken or refused: the port is in use, binding is not permitted."""
    INTERNAL = 70
    """A bug in agl or a plugin (EX_SOFTWARE); rerun with --debug and report the traceback."""
    INTERRUPTED = 130
    """Ctrl-C."""


def debug_enabled(ctx: click.Context | None = None) -> bool:
    """True when ``--debug`` was given or ``AGL_DEBUG`` is set to a true value."""
    if (os.environ.get(DEBUG_ENV) or "").strip().lower() in {"1", "true", "yes", "on"}:
        return True
    root = ctx.find_root() if ctx is not None else None
    return bool(root is not None and isinstance(root.meta.get("agl.debug"), bool) and root.meta["agl.debug"])


class AglUserError(click.ClickException):
    """A mistake the user can fix: printed as one line (plus a hint), no traceback.

    Args:
        message: what was wrong, naming the offending value.
        hint: how to fix it (printed on a second line).
        exit_code: the :class:`ExitCode` to exit with (default ``BAD_INPUT``).
    """

    exit_code = int(ExitCode.BAD_INPUT)

    def __init__(self, message: str, *, hint: str | None = None, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.hint = hint
        if exit_code is not None:
            # click types exit_code as a ClassVar, yet only ever reads it from the raised instance
            self.exit_code = int(exit_code)  # type: ignore[misc]

    def show(self, file: IO[Any] | None = None) -> None:
        """Print ``agl: error: ...`` and the hint to stderr."""
        click.echo(f"agl: error: {self.format_message()}", err=True, file=file)
        if self.hint:
            click.echo(f"  hint: {self.hint}", err=True, file=file)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text


def user_error_from(exc: BaseException) -> AglUserError | None:
    """The :class:`AglUserError` for one of agl's known failure types; None for anything else."""
    from agl_core.errors import AglError, UnknownComponentError
    from agl_core.store.errors import InvalidRequestError, StoreOpenError

    if isinstance(exc, AglUserError):
        return exc
    unreachable = _unreachable_types()
    if isinstance(exc, unreachable):
        return AglUserError(
            f"cannot reach the server: {_first_line(exc)}",
            hint="check the URL and that the server is running (agl store serve / agl proxy serve)",
            exit_code=ExitCode.UNREACHABLE,
        )
    if isinstance(exc, StoreOpenError):
        return AglUserError(_first_line(exc), hint=exc.hint, exit_code=ExitCode.DATA)
    if isinstance(exc, UnknownComponentError) and "scheme" in str(exc):
        return AglUserError(
            _first_line(exc),
            hint="pass --store with one of those schemes, e.g. sqlite:///run.db or http://host:4747",
            exit_code=ExitCode.BAD_INPUT,
        )
    if isinstance(exc, (AglError, InvalidRequestError)):
        return AglUserError(_first_line(exc), exit_code=ExitCode.BAD_INPUT)
    if isinstance(exc, sqlite3.DatabaseError):
        reason = _first_line(exc)
        if "readonly" in reason or "read-only" in reason:
            hint = "the file or its file system is read-only: serve a writable copy, or read it with ?mode=ro"
        elif "disk is full" in reason:
            hint = "free space on the disk that holds the --store file"
        else:
            hint = "check the --store path; see docs/guarantees.md for recovering a damaged database"
        return AglUserError(f"the database cannot be used: {reason}", hint=hint, exit_code=ExitCode.DATA)
    if isinstance(exc, OSError) and not isinstance(exc, ConnectionError):
        where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
        reason = exc.strerror or _first_line(exc)
        return AglUserError(
            f"{reason}{where}",
            hint="check the path or address and its permissions",
            exit_code=ExitCode.DATA,
        )
    return None


def _unreachable_types() -> tuple[type[BaseException], ...]:
    from agl_core.store.http.errors import StoreUnavailableError

    types: list[type[BaseException]] = [StoreUnavailableError, ConnectionError, TimeoutError]
    try:
        import aiohttp

        types.append(aiohttp.ClientConnectionError)
    except ImportError:  # pragma: no cover - aiohttp is a core dependency
        pass
    return tuple(types)
