"""``agl store ls`` and ``agl store show``: look into a store from the terminal (tables) or scripts (JSON)."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

import click

from agl_core.cli.store_inspect import open_store_for_reading, store_option

if TYPE_CHECKING:
    from agl_core.types.status import RolloutStatus, WorkerStatus

__all__ = ["ls_command", "show_command"]

KINDS = ("rollouts", "attempts", "spans", "resources", "workers")


def _when(seconds: float | None) -> str:
    return time.strftime("%m-%d %H:%M:%S", time.localtime(seconds)) if seconds else "-"


def _duration(start: float | None, end: float | None) -> str:
    if not start:
        return "-"
    seconds = (end or time.time()) - start
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"


def _emit_json(items: Sequence[Any]) -> None:
    for item in items:
        sys.stdout.write(item.model_dump_json() + "\n")


def _table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title, title_justify="left")
    for i, column in enumerate(columns):
        table.add_column(column, no_wrap=i < 2, overflow="fold")
    for row in rows:
        table.add_row(*(Text("-" if cell is None else str(cell)) for cell in row))
    Console().print(table)


def _rollout_row(r: Any) -> list[Any]:
    attempt = getattr(r, "attempt", None)
    return [
        r.rollout_id,
        r.status,
        r.mode,
        r.resources_id,
        attempt.sequence_id if attempt is not None else 0,
        _when(r.start_time),
        _duration(r.start_time, r.end_time),
    ]


async def _list(
    uri: str, kind: str, status: list[str], limit: int, rollout_id: str | None, attempt: str
) -> Any:
    store = open_store_for_reading(uri)
    # the statuses are the user's words: the store checks them and names one it does not know
    try:
        if kind == "rollouts":
            rollouts = await store.query_rollouts(
                status_in=cast("list[RolloutStatus] | None", status or None),
                sort_by="start_time",
                sort_order="desc",
                limit=limit,
            )
            return rollouts.items, rollouts.total
        if kind == "workers":
            workers = await store.query_workers(
                status_in=cast("list[WorkerStatus] | None", status or None), limit=limit
            )
            return workers.items, workers.total
        if kind == "resources":
            resources = await store.query_resources(sort_by="version", sort_order="desc", limit=limit)
            return resources.items, resources.total
        if kind == "spans":
            if rollout_id is None:
                raise click.UsageError(
                    "agl store ls spans needs --rollout ROLLOUT_ID (spans belong to a rollout)."
                )
            selector = None if attempt == "all" else attempt
            spans = await store.query_spans(rollout_id, selector, limit=limit)
            return spans.items, spans.total
        # attempts: of one rollout, or of the most recent rollouts
        if rollout_id is not None:
            ids = [rollout_id]
        else:
            recent = await store.query_rollouts(sort_by="start_time", sort_order="desc", limit=limit)
            ids = [r.rollout_id for r in recent.items]
        found: list[Any] = []
        for rid in ids:
            found.extend(a for a in await store.query_attempts(rid) if not status or a.status in status)
        return found[:limit] if limit >= 0 else found, len(found)
    finally:
        await store.close()


_COLUMNS: dict[str, tuple[list[str], Callable[[Any], list[Any]]]] = {
    "rollouts": (["rollout", "status", "mode", "resources", "attempts", "started", "duration"], _rollout_row),
    "attempts": (
        ["attempt", "rollout", "#", "status", "worker", "started", "duration"],
        lambda a: [
            a.attempt_id,
            a.rollout_id,
            a.sequence_id,
            a.status,
            a.worker_id,
            _when(a.start_time),
            _duration(a.start_time, a.end_time),
        ],
    ),
    "spans": (
        ["#", "name", "span", "parent", "started", "duration", "status"],
        lambda s: [
            s.sequence_id,
            s.name,
            s.span_id,
            s.parent_id,
            _when(s.start_time),
            _duration(s.start_time, s.end_time),
            s.status.status_code,
        ],
    ),
    "resources": (
        ["version", "resources", "created", "names"],
        lambda r: [
            r.version,
            r.resources_id,
            _when(r.create_time),
            ", ".join(f"{k} ({v.resource_type})" for k, v in r.resources.items()),
        ],
    ),
    "workers": (
        ["worker", "status", "current rollout", "last heartbeat"],
        lambda w: [w.worker_id, w.status, w.current_rollout_id, _when(w.last_heartbeat_time)],
    ),
}


@click.command("ls")
@click.argument("kind", type=click.Choice(KINDS))
@store_option
@click.option("--status", multiple=True, help="Only items with this status (repeatable).")
@click.option("--limit", default=50, show_default=True, type=int, help="At most this many (-1: all).")
@click.option("--rollout", "rollout_id", default=None, help="Rollout of the spans/attempts to list.")
@click.option(
    "--attempt", default="latest", show_default=True, help="Spans of: latest, all, or an attempt id."
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per line instead of a table.")
def ls_command(
    kind: str,
    store_uri: str,
    status: tuple[str, ...],
    limit: int,
    rollout_id: str | None,
    attempt: str,
    as_json: bool,
) -> None:
    """List rollouts (newest first), attempts, spans, resources or workers of a store."""
    items, total = asyncio.run(_list(store_uri, kind, list(status), limit, rollout_id, attempt))
    if as_json:
        _emit_json(items)
        return
    columns, row = _COLUMNS[kind]
    _table(f"{kind}: {len(items)} of {total}", columns, [row(item) for item in items])


async def _show(uri: str, rollout_id: str, with_spans: bool) -> tuple[Any, list[Any], list[Any], Any]:
    from agl_core.emitter import find_final_reward

    store = open_store_for_reading(uri)
    try:
        rollout = await store.get_rollout_by_id(rollout_id)
        if rollout is None:
            raise click.ClickException(
                f"No rollout {rollout_id!r} in {uri}; `agl store ls rollouts` lists them."
            )
        attempts = list(await store.query_attempts(rollout_id))
        spans = list(await store.query_spans(rollout_id, "latest")) if attempts else []
        return rollout, attempts, spans if with_spans else [], find_final_reward(spans)
    finally:
        await store.close()


@click.command("show")
@click.argument("rollout_id")
@store_option
@click.option("--spans", "with_spans", is_flag=True, help="Also list the spans of the latest attempt.")
@click.option("--json", "as_json", is_flag=True, help="JSON lines: the rollout (with attempts), then spans.")
def show_command(rollout_id: str, store_uri: str, with_spans: bool, as_json: bool) -> None:
    """Show one rollout: its fields, attempts, final reward, and (with --spans) its spans."""
    rollout, attempts, spans, reward = asyncio.run(_show(store_uri, rollout_id, with_spans))
    if as_json:
        import json

        record = rollout.model_dump(mode="json")
        record["attempts"] = [a.model_dump(mode="json") for a in attempts]
        record["reward"] = reward
        sys.stdout.write(json.dumps(record) + "\n")
        _emit_json(spans)
        return
    from rich.console import Console

    console = Console()
    console.print(f"[bold]Rollout {rollout.rollout_id}[/bold]  {rollout.status}  mode={rollout.mode}")
    console.print(
        f"resources {rollout.resources_id}  started {_when(rollout.start_time)}  "
        f"duration {_duration(rollout.start_time, rollout.end_time)}  reward {reward}"
    )
    console.print("input:", rollout.input, markup=False, highlight=False)
    columns, row = _COLUMNS["attempts"]
    _table("attempts", columns, [row(a) for a in attempts])
    if with_spans:
        columns, row = _COLUMNS["spans"]
        _table(f"spans of the latest attempt ({len(spans)})", columns, [row(s) for s in spans])
