"""Store helpers of ``agl store ls|show|export``: open a store for reading, and page through it."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import click

from agl_core.store.base import LightningStore

__all__ = ["PAGE_SIZE", "add_inspection_commands", "iter_rollouts", "open_store_for_reading", "store_option"]

PAGE_SIZE = 200
"""Rollouts fetched per query while streaming through a store."""

store_option = click.option(
    "--store",
    "store_uri",
    envvar="AGL_STORE",
    required=True,
    metavar="URI",
    help="Store to read: sqlite:///path.db or http://host:port (token from $AGL_STORE_TOKEN); "
    "default $AGL_STORE.",
)
"""The ``--store URI`` option every inspection command takes (falls back to ``$AGL_STORE``)."""


def open_store_for_reading(uri: str) -> LightningStore:
    """Open the store at ``uri`` for the inspection commands, which only ever read from it.

    A SQLite file must already exist (the commands never create an empty store by mistake). HTTP stores
    send ``$AGL_STORE_TOKEN`` as the bearer token. This is the one place the inspection commands open a
    store, so a stricter read-only open (SQLite ``mode=ro``) plugs in here.

    Raises:
        click.UsageError: the URI names a SQLite file that does not exist.
    """
    from agl_core.store import open_store

    parsed = urlparse(uri)
    if parsed.scheme == "sqlite":
        path = Path(uri[len("sqlite:///") :] if uri.startswith("sqlite:///") else parsed.path)
        if str(path) not in ("", ":memory:") and not path.is_file():
            raise click.UsageError(
                f"No store file at {path} (from --store {uri}). Check the path; sqlite:///relative.db and "
                "sqlite:////absolute.db are both accepted."
            )
    if parsed.scheme in ("http", "https"):
        return open_store(uri, token=os.environ.get("AGL_STORE_TOKEN") or None)
    return open_store(uri)


async def iter_rollouts(
    store: LightningStore, *, status_in: list[str] | None = None, start: int = 0
) -> AsyncIterator[tuple[int, int, Any]]:
    """Yield ``(index, total, rollout)`` oldest first, one page in memory at a time, from index ``start``.

    Rollouts are ordered by start time, so rollouts added while this runs come after the ones already seen
    and an interrupted walk can resume at the index it reached.
    """
    offset = start
    while True:
        page = await store.query_rollouts(
            status_in=status_in or None,
            sort_by="start_time",
            sort_order="asc",
            limit=PAGE_SIZE,
            offset=offset,
        )
        for i, rollout in enumerate(page.items):
            yield offset + i, page.total, rollout
        offset += len(page.items)
        if not page.items or offset >= page.total:
            return


def add_inspection_commands(group: click.Group) -> None:
    """Add ``ls``, ``show`` and ``export`` to the ``agl store`` group."""
    from agl_core.cli.store_export_cmd import export_command
    from agl_core.cli.store_query_cmd import ls_command, show_command

    for command in (ls_command, show_command, export_command):
        group.add_command(command)
