"""The core's own components, registered through the same hooks as any plugin."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agl_core.hookspecs import hookimpl

if TYPE_CHECKING:
    import click

    from agl_core.registry import Registry


@hookimpl
def agl_register_stores(registry: Registry[Any]) -> None:
    """Built-in stores: in-memory, SQLite and the HTTP client of ``agl store serve``."""
    registry.add(
        "memory",
        "agl_core.store.memory:InMemoryLightningStore",
        summary="In-process store (threads and asyncio); the default for one-process runs",
        schemes=["memory"],
    )
    registry.add(
        "sqlite",
        "agl_core.store.sqlite:SqliteLightningStore",
        summary="Durable single-file store (WAL); the default for `agl store serve`",
        schemes=["sqlite"],
    )


@hookimpl
def agl_register_commands(cli: click.Group) -> None:
    """Built-in ``agl`` subcommands."""
    from agl_core.cli.plugins_cmd import plugins_group

    cli.add_command(plugins_group)
