"""0.3's ``agl`` commands: ``agl store --port N``, ``agl vllm``, ``agl prometheus``, ``agl agentops``."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import urllib.request

from click.testing import CliRunner

from agl_core.cli import build_cli


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_agl_store_port_serves_like_03() -> None:
    port = _free_port()
    code = "from agl_core.cli import main; main()"
    process = subprocess.Popen(
        [sys.executable, "-c", code, "store", "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "AGL_PLUGINS_STRICT": "0"},
    )
    try:
        assert process.stdout is not None
        lines = []
        for _ in range(50):  # the server logs, then prints "agl store: serving ..." once it listens
            lines.append(process.stdout.readline())
            if "agl store: serving" in lines[-1] or not lines[-1]:
                break
        assert f"127.0.0.1:{port}" in lines[-1] and "memory:" in lines[-1], lines
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/agl/health", timeout=30) as response:
            assert response.status == 200
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
        if process.stdout is not None:
            process.stdout.close()
    assert process.returncode == 0


def test_the_03_form_shows_its_options() -> None:
    result = CliRunner().invoke(build_cli(), ["store", "--port", "1", "--help"])
    assert result.exit_code == 0 and "--mongo-uri" in result.output and "--cors-origin" in result.output


def test_removed_commands_name_their_replacement() -> None:
    cli = build_cli()
    prometheus = CliRunner().invoke(cli, ["prometheus", "--port", "4748"])
    assert prometheus.exit_code == 1 and "/v1/agl/statistics" in prometheus.output
    agentops = CliRunner().invoke(cli, ["agentops"])
    assert agentops.exit_code == 1 and "pip install agl-agentops" in agentops.output


def test_vllm_runs_vllms_cli_or_says_how_to_get_it() -> None:
    try:
        import vllm  # noqa: F401
    except ImportError:
        result = CliRunner().invoke(build_cli(), ["vllm", "serve", "some/model"])
        assert result.exit_code == 1 and "pip install 'vllm" in result.output
    else:  # pragma: no cover - vLLM is not installed in CI
        result = CliRunner().invoke(build_cli(), ["vllm", "--help"])
        assert result.exit_code == 0


def test_03_cli_modules_have_main() -> None:
    from agl_core.cli import prometheus, store, vllm

    assert prometheus.main(["--port", "1"]) == 1
    assert callable(store.main) and callable(vllm.main)
