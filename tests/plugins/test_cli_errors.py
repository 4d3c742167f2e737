"""Every `agl` command answers bad input with one or two lines and a distinct exit code, no traceback.

Each case runs the real console entry point in a subprocess (issue 20, point 5).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import click
import pytest

from agl_core.cli import build_cli
from agl_core.cli.errors import ExitCode
from agl_core.plugins import PluginManager

pytestmark = pytest.mark.slow


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _agl(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("AGL_")}
    environ.update(env)
    return subprocess.run(
        [sys.executable, "-m", "agl_core.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=environ,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cli-errors")
    (root / "corrupt.db").write_bytes(b"SQLite format 3\x00" + b"\xa5" * 8192)
    return root


def _cases() -> list[tuple[str, list[str], ExitCode, str]]:
    port = _closed_port()
    nonsense = "nonsense://x"
    return [
        ("serve-unknown-scheme", ["store", "serve", "--store", nonsense], ExitCode.BAD_INPUT, "nonsense"),
        ("serve-no-scheme", ["store", "serve", "--store", "just-a-path"], ExitCode.BAD_INPUT, "no scheme"),
        ("serve-corrupt-db", ["store", "serve", "--store", "sqlite:///corrupt.db"], ExitCode.DATA, "damaged"),
        (
            "serve-unwritable",
            ["store", "serve", "--store", "sqlite:////proc/x.db"],
            ExitCode.DATA,
            "/proc/x.db",
        ),
        (
            "runner-unknown-scheme",
            ["runner", "--store", nonsense, "--agent", "x.y:z"],
            ExitCode.BAD_INPUT,
            "nonsense",
        ),
        (
            "proxy-unknown-scheme",
            ["proxy", "serve", "--backend", "m=http://127.0.0.1:9/v1", "--store", nonsense],
            ExitCode.BAD_INPUT,
            "nonsense",
        ),
        (
            "doctor-unreachable",
            ["doctor", "X", "--store", f"http://127.0.0.1:{port}"],
            ExitCode.UNREACHABLE,
            "cannot reach",
        ),
        ("doctor-missing-db", ["doctor", "X", "--store", "sqlite:///typo.db"], ExitCode.DATA, "typo.db"),
        ("doctor-corrupt-db", ["doctor", "X", "--store", "sqlite:///corrupt.db"], ExitCode.DATA, "damaged"),
        ("doctor-unknown-scheme", ["doctor", "X", "--store", nonsense], ExitCode.BAD_INPUT, "nonsense"),
    ]


CASES = _cases()


@pytest.mark.parametrize(("args", "code", "names"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_or_two_lines(workdir: Path, args: list[str], code: ExitCode, names: str) -> None:
    result = _agl(workdir, *args)
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert 1 <= len(lines) <= 2, result.stderr
    assert lines[0].startswith("agl: error: ") and names in lines[0]
    assert not (workdir / "typo.db").exists()


def test_debug_shows_the_traceback(workdir: Path) -> None:
    plain = _agl(workdir, "store", "serve", "--store", "sqlite:///corrupt.db", AGL_DEBUG="1")
    flag = _agl(workdir, "--debug", "store", "serve", "--store", "sqlite:///corrupt.db")
    for result in (plain, flag):
        assert result.returncode != 0
        assert "Traceback" in result.stderr and "StoreCorruptError" in result.stderr


def _leaf_commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    leaves: list[tuple[str, ...]] = []
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)  # the real command, not the listing's stand-in
        if isinstance(command, click.Group):
            leaves.extend(_leaf_commands(command, (*prefix, name)))
        else:
            leaves.append((*prefix, name))
    return leaves


def test_every_command_rejects_an_unknown_option_briefly(workdir: Path) -> None:
    leaves = _leaf_commands(build_cli(PluginManager(strict=False)))
    assert ("store", "serve") in leaves and ("doctor",) in leaves
    cli = build_cli(PluginManager(strict=False))
    for path in leaves:
        result = _agl(workdir, *path, "--no-such-option")
        assert "Traceback" not in result.stderr, (path, result.stderr)
        if _passes_arguments_through(cli, path):
            continue  # e.g. `agl vllm ARGS...` hands every argument to another program
        assert result.returncode == ExitCode.USAGE, (path, result.stderr)
        assert "--no-such-option" in result.stderr


def _passes_arguments_through(group: click.Group, path: tuple[str, ...]) -> bool:
    command: click.Command = group
    for name in path:
        assert isinstance(command, click.Group)
        found = command.get_command(click.Context(command), name)
        assert found is not None
        command = found
    return bool(command.context_settings.get("ignore_unknown_options"))


def test_every_cli_built_in_one_process_has_the_built_in_commands() -> None:
    manager = PluginManager(strict=False)
    first, second = build_cli(manager), build_cli(manager)
    for cli in (first, second):
        assert {"store", "runner", "doctor", "plugins", "proxy"} <= set(cli.commands)
