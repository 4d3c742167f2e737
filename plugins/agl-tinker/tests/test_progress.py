"""The per-step view (log lines off a TTY, a rich table on one) and the run folder's files."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from agl_tinker.progress import MetricsLog, ProgressView, plot_rewards

ROW = {"step": 1, "reward_mean": 0.25, "reward_std": 0.1, "tokens": 120, "loss": -0.5, "step_time_s": 1.5}


def test_log_lines_name_every_column(caplog: pytest.LogCaptureFixture) -> None:
    with (
        caplog.at_level(logging.INFO, logger="agl_core.algorithm.tinker"),
        ProgressView(4, enabled=False) as view,
    ):
        view.update(ROW)
        view.update({**ROW, "step": 2, "loss": None})
    assert "tinker step 1/4: reward=0.250 std=0.100 tokens=120 loss=-0.5000 time (s)=1.50" in caplog.text
    assert "tinker step 2/4" in caplog.text and "loss=-" in caplog.text


def test_live_table_renders_the_rows() -> None:
    with ProgressView(2, enabled=True) as view:
        view.update(ROW)
        table = view._table()
    assert table.row_count == 1 and "1/2" in str(table.title)


def test_metrics_jsonl_and_reward_png(tmp_path: Path) -> None:
    log = MetricsLog(tmp_path)
    assert plot_rewards(log.read(), tmp_path / "reward.png") is None
    log.append(ROW)
    log.append({**ROW, "step": 2, "reward_mean": 0.5})
    assert [r["reward_mean"] for r in log.read()] == [0.25, 0.5]
    png = plot_rewards(log.read(), tmp_path / "reward.png")
    assert png is not None and png.read_bytes()[:4] == b"\x89PNG"
