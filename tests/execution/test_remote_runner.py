"""`agl runner` in a separate process joins a running `fit` (client-server strategy) and takes work."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
REMOTE_ID = 77


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", *args], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def finish(proc: subprocess.Popen[str], timeout: float) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"process did not exit in time:\n{out}\n{err}") from None


@pytest.mark.parametrize("n_local", [0, 1])
def test_a_remote_runner_joins_a_running_fit_and_takes_work(n_local: int) -> None:
    port = free_port()
    fit = start("tests.execution._fit_with_remote", str(port), str(REMOTE_ID), str(n_local))
    remote = start(
        "agl_core.cli.runner_cmd",
        "--store",
        f"http://127.0.0.1:{port}",
        "--agent",
        "tests.execution._fit_with_remote:sleepy_agent",
        "--worker-id",
        str(REMOTE_ID),
        "--poll-interval",
        "0.05",
        "--log-level",
        "WARNING",
    )
    try:
        out, err = finish(fit, timeout=120)
        assert fit.returncode == 0, err
        ran_by = json.loads(out.strip().splitlines()[-1])
    finally:
        if remote.poll() is None:
            remote.send_signal(signal.SIGINT)
        _, remote_err = finish(remote, timeout=60)
    assert remote.returncode == 0, remote_err
    workers = list(ran_by.values())
    assert len(workers) == 30
    assert f"Worker-{REMOTE_ID}" in workers
    if n_local == 0:
        assert set(workers) == {f"Worker-{REMOTE_ID}"}
    else:
        assert set(workers) == {f"Worker-{REMOTE_ID}", "Worker-0"}


def test_runner_command_rejects_an_agent_that_is_not_one() -> None:
    proc = start("agl_core.cli.runner_cmd", "--store", "http://127.0.0.1:9", "--agent", "json:dumps")
    _, err = finish(proc, timeout=60)
    assert proc.returncode == 2
    assert "not an agent" in err and "@agl.rollout" in err
