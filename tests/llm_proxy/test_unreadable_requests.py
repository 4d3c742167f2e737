"""Requests aiohttp cannot read (an over-long URL or header line) get the proxy's JSON error body.

The store server answers these in JSON too (`tests/store/http/test_hardening_slow_clients.py`); both
use `agl_core.store.http.connections.answer_request_errors_in_json`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import aiohttp
import pytest

from agl_core.llm_proxy import LLMProxy


class _Echo:
    async def chat_completions(self, request: dict[str, Any]) -> dict[str, Any]:
        return {"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}]}


async def _exchange(endpoint: str, request: bytes) -> bytes:
    port = int(endpoint.rsplit(":", 1)[1].split("/", 1)[0])
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 10)
    try:
        writer.write(request)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), 10)  # the proxy closes the connection after the error
    finally:
        writer.close()


_OVER_LONG = (
    b"GET /v1/models?" + b"a" * 20_000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",  # the URL
    b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Long: " + b"b" * 20_000 + b"\r\n\r\n",  # a header
)


async def test_an_over_long_url_or_header_gets_a_json_400(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="agl_core.llm_proxy")
    async with LLMProxy({"m": _Echo()}) as proxy:
        answers = [await _exchange(proxy.endpoint, head) for head in _OVER_LONG for _ in range(10)]
        async with aiohttp.ClientSession() as http, http.get(proxy.endpoint + "/models") as response:
            assert response.status == 200  # the proxy still serves
    for answer in answers:
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith((b"HTTP/1.0 400", b"HTTP/1.1 400")) and b"application/json" in head, answer[
            :300
        ]
        error = json.loads(body)["error"]
        assert error["type"] == "invalid_request_error" and error["code"] == "LineTooLong"
        assert "under 8190 bytes" in error["message"]
    logged = [r for r in caplog.records if "unreadable request" in r.getMessage()]
    assert 1 <= len(logged) <= 3  # the log limiter: a flood writes a bounded number of lines
