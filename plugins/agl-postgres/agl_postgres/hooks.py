"""agl plugin hooks of agl-postgres (imports only agl_core and click, never the driver)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agl_core import hookimpl

if TYPE_CHECKING:
    import click

    from agl_core.registry import Registry


AGL_PLUGIN_API_VERSION = 1
"""The agl plugin contract version these hooks are built for (see `agl plugins check`)."""


@hookimpl
def agl_register_stores(registry: Registry[Any]) -> None:
    """The ``postgres`` store, opened by ``postgresql://`` and ``postgres://`` URIs."""
    registry.add(
        "postgres",
        "agl_postgres.store:PostgresLightningStore",
        summary="Rollouts and spans in PostgreSQL (many runners, many machines; one schema per deployment)",
        requires=["asyncpg>=0.29"],
        schemes=["postgresql", "postgres"],
    )


@hookimpl
def agl_register_commands(cli: click.Group) -> None:
    """``agl postgres migrate [--dry-run] URI``."""
    from agl_postgres.cli import postgres_group

    cli.add_command(postgres_group)
