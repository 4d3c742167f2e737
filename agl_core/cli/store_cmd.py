"""``agl store serve``: serve a store over HTTP for runners in other processes and on other machines."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from agl_core.cli import serving
from agl_core.cli.store_export_cmd import export_command
from agl_core.cli.store_query_cmd import ls_command, show_command

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agl_core.program.rollout_hooks import RolloutHooks
    from agl_core.store.base import LightningStore

__all__ = ["DEFAULT_STORE_URI", "store_group"]

DEFAULT_STORE_URI = "sqlite:///.agl/store.db"
"""The store ``agl store serve`` opens when ``--store`` is not given (relative to the current directory)."""


def _legacy_store_command() -> click.Command:
    """Agent Lightning 0.3's ``agl store [--port N ...]`` (no subcommand), from the agl-legacy plugin."""
    import importlib

    try:
        legacy_cli = importlib.import_module("agl_legacy.cli")  # a plugin: never a static import of the core
    except ImportError as exc:
        raise click.UsageError(
            f"`agl store` without a subcommand is Agent Lightning 0.3's form: pip install agl-legacy "
            f"({exc}); or serve with `agl store serve --port N`."
        ) from exc
    command: click.Command = legacy_cli.legacy_store_command
    return command


class _StoreGroup(click.Group):
    """``agl store``: options before any subcommand are 0.3's form, handed to agl-legacy's command."""

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        if args and args[0].startswith("-"):
            return "store", _legacy_store_command(), args
        return super().resolve_command(ctx, args)


@click.group(
    name="store",
    cls=_StoreGroup,
    invoke_without_command=True,
    context_settings={"ignore_unknown_options": True},
)
@click.pass_context
def store_group(ctx: click.Context, /) -> None:
    """Run and inspect the LightningStore server.

    Without a subcommand, serves a store with Agent Lightning 0.3's options (``agl store --port 4747``,
    from the agl-legacy plugin).
    """
    if ctx.invoked_subcommand is None:
        ctx.invoke(_legacy_store_command())


for _inspection in (ls_command, show_command, export_command):  # agl store ls | show | export
    store_group.add_command(_inspection)


@store_group.command(name="serve")
@click.option(
    "--store",
    "store_uri",
    default=DEFAULT_STORE_URI,
    show_default=True,
    help="Store to serve: sqlite:///path.db (durable), memory: (lost on exit), or any registered scheme.",
)
@serving.address_options(4747)
@click.option(
    "--token",
    envvar="AGL_STORE_TOKEN",
    default=None,
    help="Require 'Authorization: Bearer TOKEN' on every route but /health (default: $AGL_STORE_TOKEN).",
)
@click.option(
    "--cors-origin",
    "cors_origins",
    multiple=True,
    help="Allow browser calls from this origin (repeatable; '*' for all).",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    help="Host header name to accept besides localhost/127.0.0.1/::1 when bound to loopback "
    "(DNS-rebinding guard; repeatable; '*' accepts any).",
)
@click.option(
    "--max-body-bytes",
    default=32 * 1024 * 1024,
    show_default=True,
    type=click.IntRange(min=1024),
    help="Largest request body accepted (bigger ones get HTTP 413).",
)
@click.option(
    "--max-connections",
    default=None,
    type=click.IntRange(min=1),
    help="Most open connections; beyond it the one that waited longest for its request is closed "
    "[default: the open-file limit (ulimit -n) less 64].",
)
@click.option(
    "--rollout-hooks",
    "rollout_hooks",
    multiple=True,
    metavar="MODULE:NAME",
    help="agl.RolloutHooks (a subclass or an instance) to run around every rollout the store keeps, as "
    "Trainer(rollout_hooks=...) does; repeatable, called in order.",
)
@serving.log_level_option
def serve(
    store_uri: str,
    host: str,
    port: int,
    token: str | None,
    cors_origins: tuple[str, ...],
    allowed_hosts: tuple[str, ...],
    max_body_bytes: int,
    max_connections: int | None,
    rollout_hooks: tuple[str, ...],
) -> None:
    """Serve a store over HTTP until SIGINT/SIGTERM, then shut down gracefully.

    Before serving, the store is checked: opened, read once and written once (a span sequence id of a
    reserved rollout id). A failure exits at once with one line and the documented code: 3 for a wrong
    URI, 4 when its server cannot be reached, 5 when it cannot be used (read-only, damaged), 6 when the
    port is taken. On a signal the server stops accepting connections, lets in-flight requests finish,
    closes the store (flushing everything it acknowledged) and exits with status 0.

    With ``--rollout-hooks``, the hooks see every rollout enqueued through the server and every attempt a
    runner reports (docs/programs.md, "Rollout hooks").
    """
    from agl_core.program.rollout_hooks import load_rollout_hooks

    hooks: list[RolloutHooks] = []
    for target in rollout_hooks:
        try:
            hooks.append(load_rollout_hooks(target))
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--rollout-hooks") from exc
    serving.warn_if_open(host, token, "read and write the store")
    if store_uri == DEFAULT_STORE_URI:
        Path(".agl").mkdir(exist_ok=True)
    asyncio.run(
        _serve(
            store_uri,
            host,
            port,
            token or None,
            list(cors_origins) or None,
            max_body_bytes,
            list(allowed_hosts) or None,
            max_connections,
            hooks,
        )
    )


START_CHECK_ROLLOUT_ID = "ro-agl-start-check"
"""The rollout id whose span sequence counter `check_store` advances: the write of the start check."""

START_CHECK_TIMEOUT = 15.0
"""Seconds each call of the start check may take (a store that does not answer counts as unreachable)."""


async def check_store(store: LightningStore, uri: str) -> None:
    """Read the store once and, unless it is read-only, write it once, before serving it.

    The write advances the span sequence counter of `START_CHECK_ROLLOUT_ID`, a rollout id no store
    issues, so nothing a user lists changes.

    Raises:
        AglUserError: the store failed, with its one-line reason and the documented exit code (3 a wrong
            value, 4 unreachable, 5 unusable: read-only, full or damaged).
    """
    from agl_core.cli.errors import AglUserError, ExitCode, user_error_from

    step = "read"
    try:
        await asyncio.wait_for(store.query_rollouts(limit=1), START_CHECK_TIMEOUT)
        if not getattr(store, "read_only", False):
            step = "write"
            await asyncio.wait_for(
                store.get_next_span_sequence_id(START_CHECK_ROLLOUT_ID, "at-agl-start-check"),
                START_CHECK_TIMEOUT,
            )
    except asyncio.TimeoutError as exc:
        raise AglUserError(
            f"the store {uri} failed its start check ({step}): no answer within {START_CHECK_TIMEOUT:g} s",
            hint="check that its server runs and the URI names it",
            exit_code=ExitCode.UNREACHABLE,
        ) from exc
    except Exception as exc:
        error = user_error_from(exc)
        if error is None and isinstance(exc, ValueError):  # the store contract's "bad argument"
            error = AglUserError(str(exc), hint="check the --store URI", exit_code=ExitCode.BAD_INPUT)
        if error is None:
            raise
        raise AglUserError(
            f"the store {uri} failed its start check ({step}): {error.format_message()}",
            hint=error.hint,
            exit_code=error.exit_code,
        ) from exc


async def _serve(
    store_uri: str,
    host: str,
    port: int,
    token: str | None,
    cors_origins: list[str] | None,
    max_body_bytes: int,
    allowed_hosts: list[str] | None = None,
    max_connections: int | None = None,
    rollout_hooks: Sequence[RolloutHooks] = (),
) -> None:
    from agl_core.store import open_store
    from agl_core.store.http.server import LightningStoreServer

    store = open_store(store_uri)
    try:
        await check_store(store, store_uri)
    except BaseException:
        with contextlib.suppress(Exception):
            await store.close()
        raise
    served = type(store).__name__
    if rollout_hooks:
        served += " with rollout hooks " + ", ".join(type(hook).__name__ for hook in rollout_hooks)
        from agl_core.program.rollout_hooks import with_rollout_hooks

        store = with_rollout_hooks(store, rollout_hooks)
    server = LightningStoreServer(
        store,
        host,
        port,
        token=token,
        cors_origins=cors_origins,
        max_body_bytes=max_body_bytes,
        allowed_hosts=allowed_hosts,
        max_connections=max_connections,
    )
    stop = serving.stop_on_signals()
    try:
        try:
            await server.start()
        except OSError as exc:
            raise serving.port_busy(host, port, exc) from exc
        click.echo(
            f"agl store: serving {served} ({store_uri}) at {server.endpoint} "
            f"(pid {os.getpid()}{', token required' if token else ''})",
        )
        sys.stdout.flush()
        await stop.wait()
        click.echo("agl store: shutting down (finishing in-flight requests)...")
    finally:
        await server.stop()
        await store.close()
    click.echo("agl store: stopped.")
