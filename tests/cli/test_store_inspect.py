"""``agl store ls``, ``show`` and ``export`` against a SQLite store (and the same store over HTTP)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agl_core.cli import build_cli, store_export_cmd
from agl_core.plugins import PluginManager
from tests.dashboard.store_data import small_store


@pytest.fixture
def store_file(tmp_path: Path) -> tuple[str, list[str]]:
    path = tmp_path / "store.db"
    ids = asyncio.run(small_store(path))
    return f"sqlite:///{path}", ids


def agl(*args: str, env: dict[str, str] | None = None) -> Any:
    cli = build_cli(PluginManager(strict=False))
    return CliRunner().invoke(cli, ["store", *args], env=env, catch_exceptions=False)


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_ls_rollouts_json_newest_first_with_status_filter(store_file: tuple[str, list[str]]) -> None:
    uri, ids = store_file
    result = agl("ls", "rollouts", "--store", uri, "--json")
    assert result.exit_code == 0, result.output
    assert [r["rollout_id"] for r in json_lines(result.output)] == ids[::-1]
    result = agl("ls", "rollouts", "--status", "running", "--json", env={"AGL_STORE": uri})
    assert [r["rollout_id"] for r in json_lines(result.output)] == [ids[-1]]
    result = agl("ls", "rollouts", "--limit", "2", "--store", uri)
    assert result.exit_code == 0
    assert "rollouts: 2 of 6" in result.output and ids[-1] in result.output


def test_ls_spans_attempts_resources_workers(store_file: tuple[str, list[str]]) -> None:
    uri, ids = store_file
    spans = json_lines(agl("ls", "spans", "--rollout", ids[0], "--store", uri, "--json").output)
    assert [s["name"] for s in spans] == ["chat model", "agentlightning.annotation"]
    attempts = json_lines(agl("ls", "attempts", "--status", "succeeded", "--store", uri, "--json").output)
    assert len(attempts) == 5 and all(a["status"] == "succeeded" for a in attempts)
    assert agl("ls", "resources", "--store", uri).exit_code == 0
    assert agl("ls", "workers", "--store", uri, "--json").output == ""
    result = CliRunner().invoke(
        build_cli(PluginManager(strict=False)), ["store", "ls", "spans", "--store", uri]
    )
    assert result.exit_code == 2 and "--rollout" in result.output


def test_show_rollout_with_spans(store_file: tuple[str, list[str]]) -> None:
    uri, ids = store_file
    lines = json_lines(agl("show", ids[3], "--spans", "--json", "--store", uri).output)
    assert lines[0]["rollout_id"] == ids[3]
    assert lines[0]["reward"] == pytest.approx(3 / 6)
    assert len(lines[0]["attempts"]) == 1
    assert [s["sequence_id"] for s in lines[1:]] == [1, 2]
    text = agl("show", ids[3], "--spans", "--store", uri).output
    assert "chat model" in text and "attempts" in text
    result = CliRunner().invoke(
        build_cli(PluginManager(strict=False)), ["store", "show", "ro-nope", "--store", uri]
    )
    assert result.exit_code == 1 and "ro-nope" in result.output


def test_missing_sqlite_file_is_a_usage_error_and_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "nope.db"
    result = CliRunner().invoke(
        build_cli(PluginManager(strict=False)), ["store", "ls", "rollouts", "--store", f"sqlite:///{missing}"]
    )
    assert result.exit_code == 2 and "nope.db" in result.output
    assert not missing.exists()


def test_export_messages_with_min_reward(store_file: tuple[str, list[str]], tmp_path: Path) -> None:
    uri, ids = store_file
    out = tmp_path / "sft.jsonl"
    result = agl("export", str(out), "--store", uri, "--min-reward", "0.5")
    assert result.exit_code == 0, result.output
    records = json_lines(out.read_text())
    assert [r["rollout_id"] for r in records] == ids[3:5]  # rewards 3/6 and 4/6; the running one is left out
    assert records[0]["messages"] == [
        {"role": "user", "content": "question 3"},
        {"role": "assistant", "content": "answer 3"},
    ]
    assert "wrote 2 messages records" in result.output


def test_export_triplets(store_file: tuple[str, list[str]], tmp_path: Path) -> None:
    uri, _ids = store_file
    out = tmp_path / "t.jsonl"
    assert agl("export", str(out), "--adapter", "triplets", "--store", uri).exit_code == 0
    records = json_lines(out.read_text())
    assert len(records) == 5
    assert records[2]["prompt"]["token_ids"] == [1, 2, 2]
    assert records[2]["reward"] == pytest.approx(2 / 6)


class Interrupt(KeyboardInterrupt):
    """Ctrl-C in the middle of an export."""


@pytest.fixture
def interrupt_after_three(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    real = store_export_cmd._records
    calls = {"n": 0}

    def records(*args: Any) -> list[dict[str, Any]]:
        calls["n"] += 1
        if calls["n"] == 4:
            raise Interrupt
        return real(*args)

    monkeypatch.setattr(store_export_cmd.JsonlWriter, "SYNC_EVERY", 1)
    monkeypatch.setattr(store_export_cmd, "_records", records)
    yield
    monkeypatch.setattr(store_export_cmd, "_records", real)


def test_interrupted_export_resumes_without_duplicates(
    store_file: tuple[str, list[str]], tmp_path: Path, interrupt_after_three: None
) -> None:
    uri, ids = store_file
    out = tmp_path / "sft.jsonl"
    cli = build_cli(PluginManager(strict=False))
    first = CliRunner().invoke(cli, ["store", "export", str(out), "--store", uri])
    assert first.exit_code != 0
    assert [r["rollout_id"] for r in json_lines(out.read_text())] == ids[:3]
    with out.open("a") as f:
        f.write('{"half-written')  # a torn line after the last saved progress is dropped on resume
    second = CliRunner().invoke(cli, ["store", "export", str(out), "--store", uri])
    assert second.exit_code == 0, second.output
    assert "resuming at rollout 3" in second.output
    assert [r["rollout_id"] for r in json_lines(out.read_text())] == ids[:5]
    changed = CliRunner().invoke(cli, ["store", "export", str(out), "--store", uri, "--min-reward", "1"])
    assert changed.exit_code == 2 and "--restart" in changed.output


def test_export_parquet(store_file: tuple[str, list[str]], tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    uri, ids = store_file
    out = tmp_path / "sft.parquet"
    assert agl("export", str(out), "--format", "parquet", "--store", uri).exit_code == 0
    table = pq.read_table(out)
    assert table.column("rollout_id").to_pylist() == ids[:5]
    assert json.loads(table.column("record")[0].as_py())["messages"][0]["content"] == "question 0"
    assert not out.with_name(out.name + ".parts").exists()


def test_commands_read_over_http_with_the_token(store_file: tuple[str, list[str]], tmp_path: Path) -> None:
    from agl_core.store import open_store
    from agl_core.store.http import BackgroundServer

    uri, _ids = store_file
    with BackgroundServer(lambda: open_store(uri), token="s3cret") as server:
        env = {"AGL_STORE": server.endpoint, "AGL_STORE_TOKEN": "s3cret"}
        lines = json_lines(agl("ls", "rollouts", "--json", env=env).output)
        assert len(lines) == 6
        out = tmp_path / "http.jsonl"
        assert agl("export", str(out), env=env).exit_code == 0
        assert len(json_lines(out.read_text())) == 5
