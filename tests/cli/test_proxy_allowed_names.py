"""``agl proxy serve --allowed-host/--allowed-origin`` feed the proxy's DNS-rebinding and origin guard."""

from __future__ import annotations

import json
import re
import selectors
import signal
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from agl_testing.fake_openai import FakeOpenAIServer

pytestmark = pytest.mark.slow

CODE = "from agl_core.cli.proxy_cmd import proxy_group; proxy_group(prog_name='agl proxy')"


def _banner(process: subprocess.Popen[str], timeout: float = 60) -> str:
    assert process.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    if not selector.select(timeout):
        process.kill()
        raise AssertionError(
            f"no banner within {timeout}s; stderr: {process.stderr.read() if process.stderr else ''}"
        )
    return process.stdout.readline()


def _status(base: str, headers: dict[str, str]) -> int:
    request = urllib.request.Request(
        base + "/v1/chat/completions",
        data=json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode(),
        headers={"Content-Type": "application/json", **headers},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def test_allowed_host_and_origin_options_are_enforced_by_the_served_proxy() -> None:
    with FakeOpenAIServer() as backend:
        args = [
            "serve",
            "--backend",
            f"m={backend.base_url}",
            "--port",
            "0",
            "--allowed-host",
            "agents.internal",
            "--allowed-origin",
            "http://ui.example:8080",
        ]
        process = subprocess.Popen(
            [sys.executable, "-c", CODE, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            match = re.search(r"at (http://\S+)/v1", _banner(process))
            assert match
            base = match.group(1)
            port = base.rsplit(":", 1)[1]
            assert _status(base, {}) == 200
            assert _status(base, {"Host": f"agents.internal:{port}"}) == 200
            assert _status(base, {"Host": f"rebound.example:{port}"}) == 403
            assert _status(base, {"Origin": "http://ui.example:8080"}) == 200
            assert _status(base, {"Origin": "http://evil.example"}) == 403
        finally:
            process.send_signal(signal.SIGINT)
            process.communicate(timeout=60)
    assert process.returncode == 0


def test_without_the_options_other_names_and_origins_are_refused() -> None:
    with FakeOpenAIServer() as backend:
        process = subprocess.Popen(
            [sys.executable, "-c", CODE, "serve", "--backend", f"m={backend.base_url}", "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            match = re.search(r"at (http://\S+)/v1", _banner(process))
            assert match
            base = match.group(1)
            port = base.rsplit(":", 1)[1]
            assert _status(base, {"Host": f"agents.internal:{port}"}) == 403
            assert _status(base, {"Origin": "http://ui.example:8080"}) == 403
        finally:
            process.send_signal(signal.SIGINT)
            process.communicate(timeout=60)
