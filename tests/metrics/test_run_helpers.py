"""The shared run helpers of `agl_core.reporting`: progress table, JSONL rows and the reward plot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agl_core.reporting import (
    ProgressTable,
    RewardCurve,
    append_jsonl,
    format_cell,
    plot_reward_curves,
    read_jsonl,
)

COLUMNS = (("step", "step", "{}"), ("reward", "reward", "{:.2f}"))


class LoggingTable(ProgressTable):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(3, COLUMNS, title="run: {done}/{total}", **kwargs)
        self.lines: list[str] = []

    def log_row(self, row: dict[str, Any]) -> None:
        self.lines.append(self.cells(row, skip=1))


def test_cells_format_and_mark_missing_values() -> None:
    assert format_cell({"reward": 0.5}, "reward", "{:.3f}") == "0.500"
    assert format_cell({"reward": None}, "reward", "{:.3f}") == "-"
    assert format_cell({}, "loss", "{}") == "-"


def test_rows_are_logged_without_a_live_table() -> None:
    with LoggingTable(live=False) as table:
        table.update({"step": 1, "reward": 0.25})
        table.update({"step": 2})
    assert table.lines == ["reward=0.25", "reward=-"]
    assert [row["step"] for row in table.rows] == [1, 2]


def test_the_live_table_shows_the_title_and_the_last_rows() -> None:
    from rich.console import Console

    table = LoggingTable(live=False, max_rows=1)
    table.update({"step": 1, "reward": 0.1})
    table.update({"step": 2, "reward": 0.9})
    console = Console(record=True, width=60)
    console.print(table._table())
    text = console.export_text()
    assert "run: 2/3" in text and "0.90" in text and "0.10" not in text


def test_jsonl_rows_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "run" / "metrics.jsonl"
    assert read_jsonl(path) == []
    append_jsonl(path, {"step": 1, "reward": 0.5})
    append_jsonl(path, {"step": 2, "where": tmp_path})  # not JSON: written as text
    assert read_jsonl(path) == [{"step": 1, "reward": 0.5}, {"step": 2, "where": str(tmp_path)}]


def test_no_points_means_no_plot(tmp_path: Path) -> None:
    assert (
        plot_reward_curves(tmp_path / "r.png", [RewardCurve("mean", [], [])], xlabel="x", title="t") is None
    )
    assert not (tmp_path / "r.png").exists()


def test_the_reward_plot_is_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    curve = RewardCurve("mean", [1, 2], [0.1, 0.4], spread=[0.05, 0.1])
    path = plot_reward_curves(tmp_path / "r.png", [curve], xlabel="step", title="t", legend=True)
    assert path is not None and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
