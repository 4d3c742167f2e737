"""``agl proxy serve``: option parsing and a real run against a fake backend with a SQLite store."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from agl_core.cli.proxy_cmd import parse_backend_options, proxy_group
from agl_core.llm_proxy import HttpBackend
from agl_core.store.sqlite import SqliteLightningStore
from agl_testing.fake_openai import FakeOpenAIServer


def test_backend_options_group_replicas_by_model() -> None:
    spec = parse_backend_options(
        ["m=http://a/v1", "m=http://b/v1", "*=http://c/v1"], api_key="k", token_ids=False
    )
    assert spec == {
        "m": [
            HttpBackend("http://a/v1", api_key="k", return_token_ids=False, logprobs=False),
            HttpBackend("http://b/v1", api_key="k", return_token_ids=False, logprobs=False),
        ],
        "*": [HttpBackend("http://c/v1", api_key="k", return_token_ids=False, logprobs=False)],
    }
    for bad in ("http://a/v1", "=http://a", "m="):
        with pytest.raises(click.BadParameter, match="MODEL=URL"):
            parse_backend_options([bad])


def test_serve_reports_bad_options_without_starting() -> None:
    result = CliRunner().invoke(proxy_group, ["serve", "--backend", "no-equals-sign"])
    assert result.exit_code == 2 and "MODEL=URL" in result.output
    result = CliRunner().invoke(
        proxy_group, ["serve", "--backend", "m=http://a/v1", "--api-key-env", "AGL_TEST_UNSET_VAR"]
    )
    assert result.exit_code == 2 and "AGL_TEST_UNSET_VAR" in result.output


def _readline(process: subprocess.Popen[str], timeout: float) -> str:
    """One stdout line, failing after ``timeout`` seconds instead of hanging."""
    import selectors

    assert process.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    if not selector.select(timeout):
        process.kill()
        raise AssertionError(
            f"no output within {timeout}s; stderr: {process.stderr.read() if process.stderr else ''}"
        )
    return process.stdout.readline()


@pytest.mark.slow
def test_serve_proxies_records_into_the_store_and_stops_cleanly_on_sigint(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    store = SqliteLightningStore(str(db))
    started = asyncio.run(store.start_rollout(input=1))
    asyncio.run(store.close())
    code = "from agl_core.cli.proxy_cmd import proxy_group; proxy_group(prog_name='agl proxy')"
    with FakeOpenAIServer() as backend:
        args = ["serve", "--backend", f"m={backend.base_url},model=served,max_tokens=8"]
        args += [
            "--store",
            f"sqlite:///{db}",
            "--port",
            "0",
            "--side-call-model",
            "m",
            "--strip-volatile-lines",
        ]
        env = {**os.environ, "AGL_PROXY_TOKEN": "tok"}
        process = subprocess.Popen(
            [sys.executable, "-c", code, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            banner = _readline(process, 60)
            match = re.search(r"at (http://\S+/v1)", banner)
            assert match, banner
            assert "token required" in banner
            base = match.group(1).removesuffix("/v1")
            url = f"{base}/rollout/{started.rollout_id}/attempt/{started.attempt.attempt_id}/v1"
            request = urllib.request.Request(
                url + "/chat/completions",
                data=json.dumps(
                    {"model": "m", "messages": [{"role": "user", "content": "via cli"}]}
                ).encode(),
                headers={"Content-Type": "application/json", "Authorization": "Bearer tok"},
            )
            with urllib.request.urlopen(request, timeout=30) as response:
                assert json.loads(response.read())["choices"][0]["message"]["content"] == "via cli"
        finally:
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert "spans written 1, failed 0, dropped 0" in out
    reopened = SqliteLightningStore(str(db))
    spans = asyncio.run(reopened.query_spans(started.rollout_id))
    asyncio.run(reopened.close())
    assert len(spans) == 1 and spans[0].attributes["response_token_ids"]
    assert spans[0].attributes["agl.llm.side_call"] == "m"
    assert [(r.body["model"], r.body["max_tokens"]) for r in backend.requests] == [("served", 8)]
