"""vLLM as a real proxy backend: chat, Responses and Messages requests through the agl proxy to
``vllm serve`` (vLLM's CPU build), with the token ids vLLM returns recorded and checked against
vLLM's own tokenizer (its ``/tokenize`` and ``/detokenize`` endpoints)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from agl_core.llm_proxy import LLMProxy
from agl_core.store.memory import InMemoryLightningStore

MODEL = "smol"
START_TIMEOUT_S = 900.0
SYSTEM = "You are a terse assistant."
QUESTION = "What is 2 + 3? Answer with a number."


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_healthy(proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
    """Poll ``/health`` until it answers 200; fail at once if the server exits, or at the deadline."""
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + START_TIMEOUT_S
    delay = 0.5
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"vllm serve exited with {proc.returncode}:\n{log.read_text()[-4000:]}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=5) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(delay)  # polling a server that is still loading; bounded by the deadline
        delay = min(delay * 1.5, 5.0)
    pytest.fail(f"vllm serve not healthy after {START_TIMEOUT_S:.0f} s:\n{log.read_text()[-4000:]}")


@pytest.fixture(scope="module")
def vllm_url(
    model_dir: Path, child_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """``vllm serve`` on a free local port (bf16, eager), stopped after the module."""
    vllm = shutil.which("vllm", path=str(Path(sys.executable).parent))
    assert vllm, "the venv has no `vllm` command (make .venv-verl-cpu/.installed)"
    port = _free_port()
    log = tmp_path_factory.mktemp("vllm") / "serve.log"
    cmd = [
        vllm, "serve", str(model_dir), "--served-model-name", MODEL, "--host", "127.0.0.1",
        "--port", str(port), "--dtype", "bfloat16", "--enforce-eager", "--max-model-len", "1024",
    ]  # fmt: skip
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            cmd, env=child_env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(proc, url, log)
        yield url
    finally:
        _signal_group(proc.pid, signal.SIGTERM)  # vLLM's engine processes are in the server's session
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


@pytest.fixture
async def recorded() -> AsyncIterator[tuple[InMemoryLightningStore, str, str]]:
    store = InMemoryLightningStore()
    started = await store.start_rollout(input={"task": "vllm"})
    yield store, started.rollout_id, started.attempt.attempt_id
    await store.close()


async def _post(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> dict[str, Any]:
    async with session.post(url, json=body) as response:
        text = await response.text()
        assert response.status == 200, text[:500]
        return dict(json.loads(text))


async def _vllm_tokens(
    session: aiohttp.ClientSession, base: str, messages: list[dict[str, str]]
) -> list[int]:
    body = {"model": MODEL, "messages": messages, "add_generation_prompt": True}
    return list((await _post(session, base + "/tokenize", body))["tokens"])


async def _vllm_text(session: aiohttp.ClientSession, base: str, ids: list[int]) -> str:
    return str((await _post(session, base + "/detokenize", {"model": MODEL, "tokens": ids}))["prompt"])


async def _one_span(store: InMemoryLightningStore, proxy: LLMProxy, rollout_id: str) -> dict[str, Any]:
    assert await proxy.flush(timeout=30)
    spans = list(await store.query_spans(rollout_id))
    assert len(spans) == 1, spans
    return dict(spans[0].attributes)


CHAT_MESSAGES = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]


@pytest.mark.parametrize(
    ("route", "body", "text_of"),
    [
        (
            "/chat/completions",
            {"messages": CHAT_MESSAGES, "max_tokens": 8, "temperature": 0},
            lambda r: r["choices"][0]["message"]["content"],
        ),
        (
            "/responses",
            {"instructions": SYSTEM, "input": QUESTION, "max_output_tokens": 8, "temperature": 0},
            lambda r: "".join(
                part["text"] for item in r["output"] if item["type"] == "message" for part in item["content"]
            ),
        ),
        (
            "/messages",
            {
                "system": SYSTEM,
                "messages": [{"role": "user", "content": QUESTION}],
                "max_tokens": 8,
                "temperature": 0,
            },
            lambda r: "".join(block["text"] for block in r["content"] if block["type"] == "text"),
        ),
    ],
    ids=["chat", "responses", "messages"],
)
async def test_proxy_records_vllm_token_ids(
    vllm_url: str,
    recorded: tuple[InMemoryLightningStore, str, str],
    route: str,
    body: dict[str, Any],
    text_of: Any,
) -> None:
    store, rollout_id, attempt_id = recorded
    async with LLMProxy({MODEL: vllm_url + "/v1"}, store=store) as proxy, aiohttp.ClientSession() as session:
        url = proxy.as_resource(rollout_id, attempt_id).endpoint + route
        answer = await _post(session, url, {"model": MODEL, **body})
        attrs = await _one_span(store, proxy, rollout_id)
        prompt_ids, response_ids = attrs["prompt_token_ids"], attrs["response_token_ids"]
        # vLLM's tokenizer renders the same conversation to exactly the recorded prompt ids ...
        assert prompt_ids == await _vllm_tokens(session, vllm_url, CHAT_MESSAGES)
        # ... and the recorded response ids decode to the text the client got
        assert response_ids, attrs
        decoded = await _vllm_text(session, vllm_url, response_ids)
        assert decoded.replace("<|im_end|>", "").strip() == text_of(answer).strip()


async def test_chat_answer_carries_the_ids_the_proxy_recorded(
    vllm_url: str, recorded: tuple[InMemoryLightningStore, str, str]
) -> None:
    store, rollout_id, attempt_id = recorded
    async with LLMProxy({MODEL: vllm_url + "/v1"}, store=store) as proxy, aiohttp.ClientSession() as session:
        url = proxy.as_resource(rollout_id, attempt_id).endpoint + "/chat/completions"
        body = {"model": MODEL, "messages": CHAT_MESSAGES, "max_tokens": 8, "temperature": 1.0, "seed": 3}
        answer = await _post(session, url, body)
        attrs = await _one_span(store, proxy, rollout_id)
    assert attrs["prompt_token_ids"] == answer["prompt_token_ids"]
    assert attrs["response_token_ids"] == answer["choices"][0]["token_ids"]
    logprobs = json.loads(attrs["logprobs.content"])
    assert len(logprobs) == len(answer["choices"][0]["token_ids"])
    assert all(entry["logprob"] <= 0 for entry in logprobs)
