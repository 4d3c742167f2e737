"""Backend specifications, pools and load balancing."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest

from agl_core.llm_proxy import BackendConfigError, HttpBackend, _json
from agl_core.llm_proxy.backends import build_backend_table
from agl_core.llm_proxy.forward import upstream_body


class Sampler:
    async def chat_completions(self, request: dict[str, Any]) -> dict[str, Any]:
        return {}


def test_specification_forms_and_url_normalization() -> None:
    table = build_backend_table(
        {
            "a": "http://h1:8000",
            "b": [
                "http://h2:8000/v1/",
                {"url": "https://h3/api/v1?api-version=2", "return_token_ids": False},
            ],
            "c": Sampler(),
        }
    )
    [a] = table.pool_for("a").replicas
    assert str(a.chat_url) == "http://h1:8000/v1/chat/completions"
    first, second = table.pool_for("b").replicas
    assert str(first.completions_url) == "http://h2:8000/v1/completions"
    assert str(second.chat_url) == "https://h3/api/v1/chat/completions?api-version=2"
    assert second.http is not None and second.http.return_token_ids is False
    assert table.pool_for("c").in_process and table.pool_for("c").replicas[0].label == "in-process:Sampler"
    assert table.pool_for("unknown") is None
    assert table.model_names() == ["a", "b", "c"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"m": "ftp://x"}, "not an http"),
        ({"m": "no-scheme"}, "not an http"),
        ({"m": []}, "no backends"),
        ({"": "http://x/v1"}, "non-empty strings"),
        ({"m": {"url": "http://x/v1", "apikey": "k"}}, "unknown option"),
        ({"m": {"api_key": "k"}}, "needs a 'url'"),
        ({"m": [42]}, "must be a URL string"),
        (["http://x/v1"], "must be a mapping"),
    ],
)
def test_invalid_specifications_are_rejected_with_a_fix(spec: Any, message: str) -> None:
    with pytest.raises(BackendConfigError, match=message):
        build_backend_table(spec)


def test_credentials_never_appear_in_labels() -> None:
    table = build_backend_table(
        {"m": ["http://user:pw@h:1/v1?key=abc", HttpBackend("http://h:2/v1", api_key="sk-x")]}
    )
    labels = [r.label for r in table.pool_for("m").replicas]
    assert labels == ["http://h:1/v1", "http://h:2/v1"]
    assert "sk-x" not in repr(HttpBackend("http://h:2/v1", api_key="sk-x"))


def test_round_robin_spreads_requests_evenly() -> None:
    pool = build_backend_table({"m": ["http://a/v1", "http://b/v1", "http://c/v1"]}).pool_for("m")
    picks = Counter(pool.pick().label for _ in range(300))
    assert picks == {"http://a/v1": 100, "http://b/v1": 100, "http://c/v1": 100}


def test_least_in_flight_prefers_idle_replicas() -> None:
    pool = build_backend_table({"m": ["http://a/v1", "http://b/v1"]}, "least_in_flight").pool_for("m")
    busy, idle = pool.replicas
    busy.in_flight = 5
    assert {pool.pick().label for _ in range(10)} == {idle.label}
    idle.in_flight = 9
    assert pool.pick() is busy


def test_pick_skips_tried_and_cooling_down_replicas() -> None:
    pool = build_backend_table({"m": ["http://a/v1", "http://b/v1"]}).pool_for("m")
    a, b = pool.replicas
    assert all(pool.pick([a]) is b for _ in range(4))
    assert pool.pick([a, b]) is None
    a.down_until = time.monotonic() + 60
    assert all(pool.pick() is b for _ in range(4))
    b.down_until = time.monotonic() + 60
    assert pool.pick() in (a, b)  # everything is down: still try rather than fail untried


def test_update_reuses_replicas_with_the_same_settings() -> None:
    sampler = Sampler()
    old = build_backend_table({"m": ["http://a/v1", HttpBackend("http://b/v1", api_key="k")], "s": sampler})
    new = build_backend_table(
        {"m": [HttpBackend("http://b/v1", api_key="k"), "http://c/v1"], "s": sampler}, previous=old
    )
    old_a, old_b = old.pool_for("m").replicas
    new_b, new_c = new.pool_for("m").replicas
    assert new_b is old_b and new_c is not old_a
    assert new.pool_for("s").replicas[0] is old.pool_for("s").replicas[0]
    changed = build_backend_table({"m": HttpBackend("http://b/v1", api_key="other")}, previous=old)
    assert changed.pool_for("m").replicas[0] is not old_b


def test_upstream_body_splices_additions_without_reserializing() -> None:
    replica = build_backend_table({"m": "http://a/v1"}).pool_for("m").replicas[0]
    raw = b'{"model": "m", "messages": [{"role": "user", "content": "\\u00e9 x"}], "temperature": 0.30}'
    payload = _json.loads(raw)
    out = upstream_body(replica, "chat", payload, raw)
    assert out.endswith(raw[1:])  # the agent's bytes are kept verbatim (0.30 stays 0.30)
    assert _json.loads(out) == {**payload, "return_token_ids": True, "logprobs": True}
    assert (
        _json.loads(
            upstream_body(
                replica, "text_completion", {"model": "m", "prompt": "p"}, b'{"model":"m","prompt":"p"}'
            )
        )["logprobs"]
        == 0
    )
    own = {"model": "m", "messages": [], "logprobs": False, "return_token_ids": False}
    own_raw = _json.dumps(own)
    assert upstream_body(replica, "chat", own, own_raw) is own_raw  # the agent's own settings win
    plain = build_backend_table({"m": HttpBackend("http://a/v1", return_token_ids=False, logprobs=False)})
    assert upstream_body(plain.pool_for("m").replicas[0], "chat", payload, raw) is raw


def test_upstream_body_rewrites_model_and_stream_when_needed() -> None:
    replica = (
        build_backend_table({"m": HttpBackend("http://a/v1", model="served", logprobs=False)})
        .pool_for("m")
        .replicas[0]
    )
    payload = {"model": "m", "messages": [], "stream": True, "stream_options": {"include_usage": True}}
    out = _json.loads(upstream_body(replica, "chat", payload, _json.dumps(payload), stream=False))
    assert out == {"model": "served", "messages": [], "stream": False, "return_token_ids": True}
