"""``agl store export``: training data out of a store, as JSON lines or Parquet, streamed and resumable.

Rollouts are read oldest first, one page at a time, and each rollout's spans (latest attempt) go through
an adapter: ``messages`` gives `TraceToMessages` chat samples (``{"messages", "tools"}``, what TRL's and
unsloth's SFT trainers read), ``triplets`` gives `TracerTraceToTriplet` triplets. Every record also names
its rollout and carries the rollout's final reward. Progress is saved next to OUT (``OUT.progress.json``)
after every rollout, so an interrupted export continues where it stopped instead of starting again.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Protocol

import click

from agl_core.cli.store_inspect import iter_rollouts, open_store_for_reading, store_option

__all__ = ["export_command", "export_records"]

_FINAL = ("succeeded", "failed", "cancelled")


class RecordWriter(Protocol):
    """Where exported records go.

    ``flush(force)`` makes the records written so far durable when it is time to (every so many rollouts,
    or always when ``force``) and then returns the position an interrupted export resumes from; it
    returns None while records are only buffered.
    """

    def write(self, records: list[dict[str, Any]]) -> None: ...
    def flush(self, force: bool) -> int | None: ...
    def close(self) -> None: ...


class JsonlWriter:
    """Appends one JSON object per line; the resume position is the file size at the last sync."""

    SYNC_EVERY = 100
    """Rollouts between two syncs of the file (and two saves of the progress)."""

    def __init__(self, path: Path, resume_at: int | None) -> None:
        self._pending = 0
        self._file: IO[bytes]
        if resume_at is None:
            self._file = path.open("wb")
        else:
            self._file = path.open("r+b")
            self._file.truncate(resume_at)  # drop anything written after the last saved progress
            self._file.seek(resume_at)

    def write(self, records: list[dict[str, Any]]) -> None:
        for record in records:
            self._file.write(json.dumps(record, ensure_ascii=False).encode() + b"\n")

    def flush(self, force: bool) -> int | None:
        self._pending += 1
        if not force and self._pending < self.SYNC_EVERY:
            return None
        self._pending = 0
        self._file.flush()
        os.fsync(self._file.fileno())
        return self._file.tell()

    def close(self) -> None:
        self._file.close()


class ParquetWriter:
    """Writes row groups of JSON-encoded columns to numbered part files, joined into OUT at the end.

    Parts make resuming possible (a Parquet file cannot be appended to); joining streams them row group
    by row group, so memory stays bounded by one group.
    """

    ROWS_PER_PART = 2000

    def __init__(self, path: Path, resume_at: int | None) -> None:
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise click.UsageError(
                "--format parquet needs pyarrow: pip install 'agl-core[parquet]' (or use --format jsonl)."
            ) from None
        self.path = path
        self.parts = path.with_name(path.name + ".parts")
        self.parts.mkdir(exist_ok=True)
        self.done = resume_at or 0
        for stale in self.parts.glob("part-*.parquet"):
            if int(stale.stem.split("-")[1]) >= self.done:
                stale.unlink()
        self._rows: list[dict[str, Any]] = []

    def write(self, records: list[dict[str, Any]]) -> None:
        self._rows.extend(records)

    def flush(self, force: bool) -> int | None:
        if not force and len(self._rows) < self.ROWS_PER_PART:
            return None
        if self._rows:
            import pyarrow as pa
            import pyarrow.parquet as pq

            table = pa.Table.from_pylist([_parquet_row(r) for r in self._rows], schema=_parquet_schema())
            pq.write_table(table, self.parts / f"part-{self.done:08d}.parquet")
            self.done += 1
            self._rows = []
        return self.done

    def close(self) -> None:
        """Nothing to release: buffered rows not yet flushed are exported again on resume."""

    def finish(self) -> None:
        """Join the parts into OUT and remove them."""
        import pyarrow.parquet as pq

        parts = sorted(self.parts.glob("part-*.parquet"))
        with pq.ParquetWriter(self.path, _parquet_schema()) as writer:
            for part in parts:
                source = pq.ParquetFile(part)
                for group in range(source.num_row_groups):
                    writer.write_table(source.read_row_group(group))
        for part in parts:
            part.unlink()
        self.parts.rmdir()


def _parquet_schema() -> Any:
    import pyarrow as pa

    return pa.schema([("rollout_id", pa.string()), ("reward", pa.float64()), ("record", pa.string())])


def _parquet_row(record: dict[str, Any]) -> dict[str, Any]:
    """One Parquet row: rollout id and reward as columns, the whole record as JSON (nested, ragged data)."""
    return {
        "rollout_id": record["rollout_id"],
        "reward": record["reward"],
        "record": json.dumps(record, ensure_ascii=False),
    }


def _records(adapter: str, rollout_id: str, reward: float | None, spans: list[Any]) -> list[dict[str, Any]]:
    if adapter == "messages":
        from agl_core.adapter import TraceToMessages

        samples: list[Any] = TraceToMessages().adapt(spans)
        return [{**sample, "rollout_id": rollout_id, "reward": reward} for sample in samples]
    from agl_core.adapter import TracerTraceToTriplet

    return [
        {**t.model_dump(mode="json"), "rollout_id": rollout_id, "reward": reward}
        for t in TracerTraceToTriplet().adapt(spans)
    ]


async def export_records(
    uri: str,
    writer: RecordWriter,
    *,
    adapter: str,
    statuses: list[str],
    min_reward: float | None,
    start: int,
    save: Any,
    on_rollout: Any,
) -> int:
    """Stream the store's rollouts from index ``start`` through the adapter into ``writer``.

    After each rollout the writer is flushed and ``save(next_index, position)`` records the progress.
    Returns the number of records written.
    """
    from agl_core.emitter import find_final_reward

    store = open_store_for_reading(uri)
    written = 0
    reached = start
    try:
        async for index, total, rollout in iter_rollouts(store, status_in=statuses, start=start):
            spans = list(await store.query_spans(rollout.rollout_id, "latest"))
            reward = find_final_reward(spans)
            if min_reward is None or (reward is not None and reward >= min_reward):
                records = _records(adapter, rollout.rollout_id, reward, spans)
                writer.write(records)
                written += len(records)
            reached = index + 1
            position = writer.flush(False)
            if position is not None:
                save(reached, position)
            on_rollout(reached, total)
        save(reached, writer.flush(True))
    finally:
        await store.close()
    return written


@contextmanager
def _progress() -> Iterator[Any]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(
        TextColumn("exporting rollouts"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        transient=False,
    ) as progress:
        task = progress.add_task("export", total=None)
        yield lambda done, total: progress.update(task, completed=done, total=total)


@click.command("export")
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
@store_option
@click.option("--format", "fmt", type=click.Choice(["jsonl", "parquet"]), default="jsonl", show_default=True)
@click.option(
    "--adapter",
    type=click.Choice(["messages", "triplets"]),
    default="messages",
    show_default=True,
    help="messages: chat samples for SFT (TraceToMessages); triplets: prompt/response token ids and reward.",
)
@click.option("--min-reward", type=float, default=None, help="Only rollouts whose final reward is >= R.")
@click.option(
    "--status",
    "statuses",
    multiple=True,
    type=click.Choice(_FINAL),
    help="Only rollouts with this status (repeatable; default: succeeded).",
)
@click.option("--restart", is_flag=True, help="Start over even if OUT.progress.json says OUT is half done.")
def export_command(
    out: Path,
    store_uri: str,
    fmt: str,
    adapter: str,
    min_reward: float | None,
    statuses: tuple[str, ...],
    restart: bool,
) -> None:
    """Export training data from a store to OUT (JSON lines or Parquet), resuming an interrupted export."""
    state_path = out.with_name(out.name + ".progress.json")
    settings = {
        "store": store_uri,
        "format": fmt,
        "adapter": adapter,
        "min_reward": min_reward,
        "statuses": sorted(statuses or ("succeeded",)),
    }
    start, position = 0, None
    if state_path.exists() and not restart:
        state = json.loads(state_path.read_text())
        if state.get("settings") != settings:
            raise click.UsageError(
                f"{state_path} belongs to an export with other settings ({state.get('settings')}); "
                "pass the same options to resume, or --restart to start over."
            )
        if state.get("complete"):
            click.echo(f"{out} is already complete ({state['records']} records); --restart exports again.")
            return
        start, position = int(state["next"]), state["position"]
        click.echo(f"resuming at rollout {start} ({state['records']} records already in {out})", err=True)
    records_before = json.loads(state_path.read_text())["records"] if position is not None else 0
    writer: JsonlWriter | ParquetWriter = (
        JsonlWriter(out, position) if fmt == "jsonl" else ParquetWriter(out, position)
    )
    counted = {"records": records_before}

    def save(next_index: int, new_position: int) -> None:
        tmp = state_path.with_suffix(".tmp")
        tmp.write_text(
            json.dumps(
                {
                    "settings": settings,
                    "next": next_index,
                    "position": new_position,
                    "records": counted["records"],
                    "complete": False,
                }
            )
        )
        tmp.replace(state_path)

    class Counting:
        def write(self, records: list[dict[str, Any]]) -> None:
            counted["records"] += len(records)
            writer.write(records)

        def flush(self, force: bool) -> int | None:
            return writer.flush(force)

        def close(self) -> None:
            writer.close()

    try:
        with _progress() as on_rollout:
            asyncio.run(
                export_records(
                    store_uri,
                    Counting(),
                    adapter=adapter,
                    statuses=settings["statuses"],  # type: ignore[arg-type]
                    min_reward=min_reward,
                    start=start,
                    save=save,
                    on_rollout=on_rollout,
                )
            )
    finally:
        writer.close()
    if isinstance(writer, ParquetWriter):
        writer.finish()
    state_path.write_text(json.dumps({"settings": settings, "records": counted["records"], "complete": True}))
    click.echo(f"wrote {counted['records']} {adapter} records to {out}")
