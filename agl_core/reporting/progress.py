"""A training run's progress on screen: one row per finished step, as a rich live table or as log lines."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["Column", "ProgressTable", "format_cell"]

Column = tuple[str, str, str]
"""One column: the metrics key, its title, and a ``str.format`` pattern for the value (``"{:.3f}"``)."""


def format_cell(row: Mapping[str, Any], key: str, fmt: str) -> str:
    """``row[key]`` formatted with ``fmt``; ``"-"`` when the row lacks it or holds None."""
    value = row.get(key)
    return "-" if value is None else fmt.format(value)


class ProgressTable:
    """One row per finished step: a rich live table when ``live`` (default: stderr is a TTY).

    Subclasses say what to log per row in :meth:`log_row` (nothing by default).

    Args:
        total: how many steps the run will take (shown in the title).
        columns: what to show, in order.
        title: the table title, a pattern with ``{done}`` and ``{total}``.
        live: draw a live table (None: only on a TTY).
        refresh_per_second: the live table's redraw rate.
        max_rows: show only the last rows (None: every row).
    """

    def __init__(
        self,
        total: int,
        columns: Sequence[Column],
        *,
        title: str,
        live: bool | None = None,
        refresh_per_second: float = 4,
        max_rows: int | None = None,
    ) -> None:
        self.total = total
        self.columns = tuple(columns)
        self.title = title
        self.live = sys.stderr.isatty() if live is None else live
        self.refresh_per_second = refresh_per_second
        self.max_rows = max_rows
        self.rows: list[dict[str, Any]] = []
        self._live: Any = None

    def __enter__(self) -> ProgressTable:
        if self.live:
            from rich.live import Live

            self._live = Live(self._table(), refresh_per_second=self.refresh_per_second)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)
            self._live = None

    def _table(self) -> Any:
        from rich.table import Table

        table = Table(title=self.title.format(done=len(self.rows), total=self.total))
        for _, title, _ in self.columns:
            table.add_column(title, justify="right")
        shown = self.rows if self.max_rows is None else self.rows[-self.max_rows :]
        for row in shown:
            table.add_row(*(format_cell(row, key, fmt) for key, _, fmt in self.columns))
        return table

    def cells(self, row: Mapping[str, Any], *, skip: int = 0) -> str:
        """``title=value`` for each column after the first ``skip`` ones, space-separated (for log lines)."""
        return " ".join(f"{title}={format_cell(row, key, fmt)}" for key, title, fmt in self.columns[skip:])

    def update(self, row: dict[str, Any]) -> None:
        """Show one finished step."""
        self.rows.append(row)
        if self._live is not None:
            self._live.update(self._table())
        self.log_row(row)

    def log_row(self, row: dict[str, Any]) -> None:
        """Log one finished step (called after the table is updated); subclasses decide what to say."""
