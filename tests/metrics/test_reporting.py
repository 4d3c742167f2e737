"""`agl_core.reporting`: names, the JSONL backend, the group, and clear errors for missing trackers."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from agl_core.plugins import PluginManager
from agl_core.reporting import MetricsReporter, ReporterGroup, open_reporters, reporter_names, scalar_metrics


def test_names_come_from_the_argument_then_the_environment_then_jsonl(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("AGL_REPORTERS", raising=False)
    assert reporter_names() == ["jsonl"]
    monkeypatch.setenv("AGL_REPORTERS", " TensorBoard, jsonl,tensorboard ")
    assert reporter_names() == ["tensorboard", "jsonl"]
    assert reporter_names(["mlflow"]) == ["mlflow"]
    assert reporter_names("wandb,jsonl") == ["wandb", "jsonl"]


def test_an_unknown_name_is_a_clear_error() -> None:
    with pytest.raises(
        ValueError, match=r"Unknown metrics reporter 'tensorbord'; choose from jsonl, tensorboard"
    ):
        reporter_names(["jsonl", "tensorbord"])


def test_jsonl_appends_each_step_as_given(tmp_path: Path) -> None:
    rows = [{"step": 1, "reward_mean": 0.5, "note": "x", "kept": None}, {"step": 2, "reward_mean": 0.75}]
    with open_reporters(["jsonl"], run_dir=tmp_path / "run") as reporters:
        for row in rows:
            reporters.log(row["step"], row)
    with open_reporters(["jsonl"], run_dir=tmp_path / "run") as reporters:  # a resumed run appends
        reporters.log(3, {"step": 3})
    lines = (tmp_path / "run" / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == [*rows, {"step": 3}]


def test_scalar_metrics_keep_only_finite_numbers() -> None:
    metrics = {"a": 1, "b": 2.5, "ok": True, "none": None, "name": "m", "nan": float("nan"), "list": [1]}
    assert scalar_metrics(metrics) == {"a": 1.0, "b": 2.5}


class _Broken:
    def log(self, step: int, metrics: Mapping[str, Any]) -> None:
        raise RuntimeError("tracker down")

    def close(self) -> None:
        raise RuntimeError("tracker down")


class _Recorder:
    def __init__(self) -> None:
        self.steps: list[int] = []
        self.closed = False

    def log(self, step: int, metrics: Mapping[str, Any]) -> None:
        self.steps.append(step)

    def close(self) -> None:
        self.closed = True


def test_a_failing_reporter_does_not_stop_the_others(caplog: pytest.LogCaptureFixture) -> None:
    recorder = _Recorder()
    assert isinstance(recorder, MetricsReporter)
    group = ReporterGroup({"broken": _Broken(), "ok": recorder})
    group.log(1, {"x": 1})
    group.log(2, {"x": 2})
    group.close()
    assert recorder.steps == [1, 2] and recorder.closed
    assert sum("'broken' failed at step" in r.getMessage() for r in caplog.records) == 1


def test_a_missing_tracker_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mlflow", None)  # as if not installed
    with pytest.raises(ImportError, match=r"pip install 'agl-core\[mlflow\]'"):
        open_reporters(["jsonl", "mlflow"], run_dir=tmp_path)


def test_import_agl_core_does_not_import_prometheus_or_trackers() -> None:
    import subprocess

    code = (
        "import sys, agl_core, agl_core.reporting; "
        "names = ('prometheus_client', 'tensorboard', 'mlflow', 'wandb'); "
        "print(sorted(m for m in names if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_agl_prometheus_without_agl_legacy_names_the_plugin(plugin_manager: PluginManager) -> None:
    """0.3's ``agl prometheus`` lives in agl-legacy (its own tests run it); the core says so."""
    from click.testing import CliRunner

    from agl_core.cli import build_cli

    result = CliRunner().invoke(build_cli(plugin_manager), ["prometheus", "--port", "4748"])
    assert result.exit_code == 2, result.output
    assert "No such command 'prometheus'" in result.output and "pip install agl-legacy" in result.output
