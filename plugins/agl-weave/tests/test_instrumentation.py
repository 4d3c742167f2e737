"""instrument_weave: weave.init and @weave.op use the in-memory server, offline; uninstrument restores."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import weave
import weave.trace.weave_init as weave_init
from weave.trace.settings import UserSettings

from agl_weave.instrumentation import instrument_weave, is_weave_instrumented, uninstrument_weave
from agl_weave.server import InMemoryWeaveTraceServer


@weave.op
def double(x: int) -> int:
    return 2 * x


@weave.op
def double_plus_one(x: int) -> int:
    return double(x) + 1


@weave.op
def fail(message: str) -> None:
    raise ValueError(message)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemoryWeaveTraceServer]:
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_ENTITY", raising=False)
    server = InMemoryWeaveTraceServer()
    instrument_weave(server)
    try:
        yield server
    finally:
        weave.finish()
        uninstrument_weave()


def test_ops_are_recorded_in_the_server_with_nesting_and_exceptions(server: InMemoryWeaveTraceServer) -> None:
    client = weave.init(
        "offline-project", settings=UserSettings(use_server_cache=False, print_call_link=False)
    )
    assert client.entity == "agl" and client.project == "offline-project"
    assert double_plus_one(3) == 7
    with pytest.raises(ValueError, match="no luck"):
        fail("no luck")
    client.flush()
    by_name = {call.op_name.split("/op/")[1].split(":")[0]: call for call in server.calls.values()}
    assert set(by_name) == {"double", "double_plus_one", "fail"}
    outer, inner = by_name["double_plus_one"], by_name["double"]
    assert inner.parent_id == outer.id and inner.trace_id == outer.trace_id and outer.parent_id is None
    assert (outer.inputs, outer.output, inner.output) == ({"x": 3}, 7, 6)
    assert by_name["fail"].exception is not None and "no luck" in by_name["fail"].exception
    # the op's source was published as a file and an object
    assert any(b"def double" in content for content in server.files.values())
    assert server.partial_calls == {}


def test_entity_comes_from_the_project_name_or_wandb_entity(
    server: InMemoryWeaveTraceServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert weave_init.get_entity_project_from_project_name("team/proj") == ("team", "proj")
    monkeypatch.setenv("WANDB_ENTITY", "me")
    assert weave_init.get_entity_project_from_project_name("proj") == ("me", "proj")
    with pytest.raises(ValueError, match="entity/project"):
        weave_init.get_entity_project_from_project_name("a/b/c")


def test_uninstrument_restores_weave_and_misuse_is_an_error() -> None:
    originals = (
        weave_init.init_weave_get_server,
        weave_init.get_entity_project_from_project_name,
        weave_init.get_username,
        weave_init.get_wandb_auth_context,
    )
    server = InMemoryWeaveTraceServer()
    instrument_weave(server)
    try:
        assert is_weave_instrumented() and weave_init.init_weave_get_server() is server
        with pytest.raises(RuntimeError, match="already instrumented"):
            instrument_weave(InMemoryWeaveTraceServer())
    finally:
        uninstrument_weave()
    assert not is_weave_instrumented()
    assert (
        weave_init.init_weave_get_server,
        weave_init.get_entity_project_from_project_name,
        weave_init.get_username,
        weave_init.get_wandb_auth_context,
    ) == originals
    with pytest.raises(RuntimeError, match="not instrumented"):
        uninstrument_weave()
    with pytest.raises(TypeError, match="InMemoryWeaveTraceServer"):
        instrument_weave(object())  # type: ignore[arg-type]
