"""OTLP/JSON input that used to give a 500 (issue 34): out-of-range numbers and deep nesting are a 400."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agl_core.store.http import BackgroundServer
from agl_core.store.memory import InMemoryLightningStore

from .test_rest_api import request

JSON = {"Content-Type": "application/json"}


def _export(span: dict[str, Any]) -> bytes:
    base = {"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331", "name": "s"}
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{**base, **span}]}]}]}).encode()


@pytest.mark.parametrize(
    ("raw_span", "field"),
    [
        ('"startTimeUnixNano": 1e400', "startTimeUnixNano"),
        ('"endTimeUnixNano": -1', "endTimeUnixNano"),
        ('"startTimeUnixNano": "18446744073709551616"', "startTimeUnixNano"),
        ('"flags": -Infinity', "flags"),
        ('"flags": NaN', "flags"),
        ('"flags": 4294967296', "flags"),
        ('"events": [{"name": "e", "timeUnixNano": 1e400}]', "timeUnixNano"),
        ('"links": [{"traceId": "00", "spanId": "00", "flags": 1.5}]', "flags"),
        ('"attributes": [{"key": "k", "value": {"intValue": "9223372036854775808"}}]', "intValue"),
        ('"attributes": [{"key": "k", "value": {"doubleValue": 1e400}}]', "doubleValue"),
    ],
)
def test_out_of_range_numbers_are_a_400_naming_the_field(
    server: BackgroundServer, raw_span: str, field: str
) -> None:
    body = _export({"__raw__": 0}).replace(b'"__raw__": 0', raw_span.encode())
    status, _, answer = request(server.endpoint, "POST", "/v1/traces", raw=body, headers=JSON)
    assert status == 400, answer
    assert field in answer["error"]["message"]


@pytest.mark.parametrize("depth", [300, 5_000, 200_000])
def test_deep_nesting_is_a_400_before_decoding(depth: int) -> None:
    value = '{"arrayValue": {"values": [' * depth + "{}" + "]}}" * depth
    body = _export({"__raw__": 0}).replace(
        b'"__raw__": 0', f'"attributes": [{{"key": "k", "value": {value}}}]'.encode()
    )
    with BackgroundServer(InMemoryLightningStore) as server:  # the default body limit (32 MiB)
        for raw in (body, b"[" * depth + b"]" * depth):
            status, _, answer = request(server.endpoint, "POST", "/v1/traces", raw=raw, headers=JSON)
            assert status == 400, answer
            assert "nested more than 64 levels" in answer["error"]["message"]


def test_brackets_inside_strings_do_not_count_as_nesting(server: BackgroundServer) -> None:
    text = "[{" * 5_000 + '\\"'
    body = _export({"attributes": [{"key": "k", "value": {"stringValue": text}}]})
    status, _, answer = request(server.endpoint, "POST", "/v1/traces", raw=body, headers=JSON)
    assert status == 200, answer  # decoded; the span itself is rejected for its missing rollout id
    assert answer["partialSuccess"]["rejectedSpans"] == "1"
