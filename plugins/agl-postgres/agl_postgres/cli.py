"""``agl postgres migrate``: apply (or list, with ``--dry-run``) the store's pending schema migrations."""

from __future__ import annotations

import asyncio

import click

__all__ = ["postgres_group"]


@click.group(name="postgres")
def postgres_group() -> None:
    """The PostgreSQL store (agl-postgres)."""


@postgres_group.command(name="migrate")
@click.argument("uri")
@click.option("--schema", default=None, help="Schema of the store (default: the URI's ?schema=, else 'agl').")
@click.option("--dry-run", is_flag=True, help="List the pending migrations and their SQL; change nothing.")
def migrate_command(uri: str, schema: str | None, dry_run: bool) -> None:
    """Bring the store schema at URI to the version this agl-postgres knows.

    Stores also migrate when they first connect; run this to apply upgrades by hand (e.g. with a
    role allowed to change the schema) before deploying.
    """
    from agl_core.store import StoreError

    try:
        lines = asyncio.run(_migrate(uri, schema, dry_run))
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None
    for line in lines:
        click.echo(line)


async def _migrate(uri: str, schema: str | None, dry_run: bool) -> list[str]:
    import asyncpg

    from agl_postgres.errors import StoreUnavailableError
    from agl_postgres.schema import MIGRATIONS, migrate, pending
    from agl_postgres.uri import parse_postgres_uri

    settings = parse_postgres_uri(uri, {"schema": schema})
    name = settings.options["schema"]
    try:
        conn = await asyncpg.connect(settings.dsn, timeout=settings.options["connect_timeout"])
    except (OSError, asyncio.TimeoutError, asyncpg.PostgresError) as exc:
        raise StoreUnavailableError(settings.display_uri, 0.0, f"{type(exc).__name__}: {exc}") from None
    try:
        todo = await pending(conn, name)
        target = MIGRATIONS[-1].version
        if dry_run:
            if not todo:
                return [f"schema {name!r} is at version {target}; nothing to apply"]
            lines = [f"schema {name!r}: {len(todo)} migration(s) pending (dry run, nothing applied)"]
            for migration in todo:
                lines.append(f"-- version {migration.version}: {migration.name}")
                lines.extend(statement.strip() + ";" for statement in migration.statements)
            return lines
        applied = await migrate(conn, name)
        if not applied:
            return [f"schema {name!r} is at version {target}; nothing to apply"]
        return [f"schema {name!r}: applied version {m.version} ({m.name})" for m in applied]
    finally:
        await conn.close()
