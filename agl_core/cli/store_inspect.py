"""Store helpers of ``agl store ls|show|export``: open a store for reading, and page through it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, cast

import click

from agl_core.store.base import LightningStore

if TYPE_CHECKING:
    from agl_core.types.status import RolloutStatus

__all__ = ["PAGE_SIZE", "iter_rollouts", "open_store_for_reading", "store_option"]

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

    `agl_core.store.uri.open_store_for_reading` does the work: a SQLite file must exist and is opened
    read-only (``mode=ro``), an HTTP store sends ``$AGL_STORE_TOKEN`` and gets one quick try.

    Raises:
        click.UsageError: the URI names a SQLite file that does not exist or cannot be opened.
    """
    from agl_core.store.errors import StoreOpenError
    from agl_core.store.uri import open_store_for_reading as open_for_reading

    try:
        return open_for_reading(uri)
    except StoreOpenError as exc:
        raise click.UsageError(f"Cannot open --store {uri}: {exc}") from None


async def iter_rollouts(
    store: LightningStore, *, status_in: list[str] | None = None, start: int = 0
) -> AsyncIterator[tuple[int, int, Any]]:
    """Yield ``(index, total, rollout)`` oldest first, one page in memory at a time, from index ``start``.

    Rollouts come in the store's insertion order (no ``sort_by``: SQLite serves it from its primary key,
    with no sort whose memory would grow with the offset), so rollouts added while this runs come after
    the ones already seen and an interrupted walk can resume at the index it reached.
    """
    offset = start
    # the statuses are the user's words: the store checks them and names one it does not know
    statuses = cast("list[RolloutStatus] | None", status_in or None)
    while True:
        page = await store.query_rollouts(status_in=statuses, limit=PAGE_SIZE, offset=offset)
        for i, rollout in enumerate(page.items):
            yield offset + i, page.total, rollout
        offset += len(page.items)
        if not page.items or offset >= page.total:
            return
