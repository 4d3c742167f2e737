"""TensorBoard, MLflow and W&B (offline) reporters, read back with each tracker's own reader.

Run in the reporting venv (``make test-reporting``); skipped where the trackers are not installed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agl_core.reporting import open_reporters

STEPS = [
    {"step": 1, "reward_mean": 0.25, "loss": 2.0, "served_model": "base", "kept": None},
    {"step": 2, "reward_mean": 0.5, "loss": 1.5, "served_model": "iter-1", "kept": 3},
    {"step": 3, "reward_mean": 0.75, "loss": 1.0, "served_model": "iter-2", "kept": 4},
]


def _log_all(names: list[str], run_dir: Path) -> None:
    with open_reporters(
        names, run_dir=run_dir, run_name="t", config={"lr": 0.001, "model": "tiny"}
    ) as reporters:
        for row in STEPS:
            reporters.log(int(row["step"]), row)


def test_tensorboard_event_files_read_back(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _log_all(["jsonl", "tensorboard"], tmp_path)
    accumulator = EventAccumulator(str(tmp_path / "tensorboard"))
    accumulator.Reload()
    assert set(accumulator.Tags()["scalars"]) == {"step", "reward_mean", "loss", "kept"}
    reward = [(e.step, e.value) for e in accumulator.Scalars("reward_mean")]
    assert reward == [(1, 0.25), (2, 0.5), (3, 0.75)]
    assert [(e.step, e.value) for e in accumulator.Scalars("kept")] == [(2, 3.0), (3, 4.0)]
    assert len((tmp_path / "metrics.jsonl").read_text().splitlines()) == 3


def test_mlflow_file_store_reads_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)  # the reporter opts in; restored after
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "agl-test")
    _log_all(["mlflow"], tmp_path)
    client = MlflowClient(tracking_uri=(tmp_path / "mlruns").resolve().as_uri())
    experiment = client.get_experiment_by_name("agl-test")
    assert experiment is not None
    [run] = client.search_runs([experiment.experiment_id])
    assert run.info.status == "FINISHED"
    assert run.info.run_name == "t"
    assert run.data.params == {"lr": "0.001", "model": "tiny"}
    history = client.get_metric_history(run.info.run_id, "reward_mean")
    assert sorted((m.step, m.value) for m in history) == [(1, 0.25), (2, 0.5), (3, 0.75)]
    assert "served_model" not in run.data.metrics


def test_wandb_offline_run_is_written_to_the_run_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    _log_all(["wandb"], tmp_path)
    import wandb

    wandb.teardown()  # W&B's service writes the offline file in the background; stopping it flushes it
    [run_folder] = list((tmp_path / "wandb").glob("offline-run-*"))
    [data] = list(run_folder.glob("run-*.wandb"))
    records = _wandb_records(data)
    kinds = [record.WhichOneof("record_type") for record in records]
    assert "exit" in kinds, f"incomplete run file: {kinds} {data.stat().st_size} {data.read_bytes()[:40]!r}"
    by_step: dict[int, dict[str, object]] = {}  # history items merged per W&B step
    for record in records:
        if record.WhichOneof("record_type") == "history":
            items = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in record.history.item}
            by_step.setdefault(int(record.history.step.num), {}).update(items)
    history = [{k: v for k, v in row.items() if not k.startswith("_")} for _, row in sorted(by_step.items())]
    assert history == [
        {"step": 1, "reward_mean": 0.25, "loss": 2},
        {"step": 2, "reward_mean": 0.5, "loss": 1.5, "kept": 3},
        {"step": 3, "reward_mean": 0.75, "loss": 1, "kept": 4},
    ], kinds
    assert os.environ["WANDB_MODE"] == "offline"


def _wandb_records(path: Path) -> list:
    """The protobuf records of an offline run's ``.wandb`` file.

    The file is a 7-byte header (``:W&B``, magic, version) then a LevelDB-style log: 32 KiB blocks of
    chunks, each with a 7-byte header (CRC, length, type 1 full / 2 first / 3 middle / 4 last); a chunk
    header never straddles a block (the tail of a block shorter than 7 bytes is padding).
    """
    import struct

    from wandb.proto.wandb_internal_pb2 import Record

    raw = path.read_bytes()
    assert raw[:4] == b":W&B"
    block, position, pending, records = 32768, 7, b"", []
    while position + 7 <= len(raw):
        if block - position % block < 7:
            position += block - position % block
            continue
        _crc, length, kind = struct.unpack("<IHB", raw[position : position + 7])
        if kind == 0:
            break
        pending += raw[position + 7 : position + 7 + length]
        position += 7 + length
        if kind in (1, 4):
            record = Record()
            record.ParseFromString(pending)
            records.append(record)
            pending = b""
    return records
