"""What the long-running commands (``agl store serve``, ``agl proxy serve``, ``agl runner``) share."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable

import click
from click.decorators import FC

from agl_core.cli.errors import AglUserError, ExitCode

__all__ = [
    "address_options",
    "configure_logging",
    "log_level_option",
    "port_busy",
    "stop_on_signals",
    "warn_if_open",
]


def address_options(port: int) -> Callable[[FC], FC]:
    """``--host`` (default loopback) and ``--port`` (default ``port``)."""
    host_option = click.option(
        "--host", default="127.0.0.1", show_default=True, help="Interface to bind (0.0.0.0: all)."
    )
    port_option = click.option(
        "--port",
        default=port,
        show_default=True,
        type=click.IntRange(0, 65535),
        help="TCP port (0: any free).",
    )
    return lambda command: host_option(port_option(command))


def configure_logging(level: str) -> None:
    """The root logger at `level` (a name: ``"INFO"``...), with the servers' line format."""
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def log_level_option(command: FC) -> FC:
    """``--log-level``: configures the root logger as the command line is parsed."""

    def configure(ctx: click.Context, param: click.Parameter, level: str) -> None:
        configure_logging(level)

    levels = click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False)
    return click.option(
        "--log-level", default="INFO", show_default=True, type=levels, expose_value=False, callback=configure
    )(command)


def warn_if_open(host: str, token: str | None, risk: str) -> None:
    """Warn on stderr when a server binds beyond loopback without a token (``risk``: what anyone may do)."""
    if host not in ("127.0.0.1", "localhost", "::1") and not token:
        click.echo(
            f"warning: serving on {host} without --token; anyone who can reach the port can {risk}.", err=True
        )


def stop_on_signals() -> asyncio.Event:
    """An event set by SIGINT or SIGTERM; call it in the running loop."""
    stop, loop = asyncio.Event(), asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except NotImplementedError:  # pragma: no cover - Windows
            signal.signal(sig, lambda *_: loop.call_soon_threadsafe(stop.set))
    return stop


def port_busy(host: str, port: int, exc: OSError) -> AglUserError:
    """The user error for a server that cannot bind ``host:port``."""
    return AglUserError(
        f"cannot serve on {host}:{port}: {exc.strerror or exc}",
        hint="pick another --port (0 picks a free one) or stop the process that holds it",
        exit_code=ExitCode.BUSY,
    )
