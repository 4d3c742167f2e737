"""InMemoryWeaveTraceServer: call halves merged in either order, published objects and files by digest."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from agl_weave.server import InMemoryWeaveTraceServer

NOW = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.timezone.utc)


def _start(call_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "start": {
            "project_id": "agl/p",
            "id": call_id,
            "trace_id": "trace-1",
            "op_name": "weave:///agl/p/op/f:abc",
            "started_at": NOW,
            "attributes": {},
            "inputs": {"x": 1},
            "parent_id": None,
            **extra,
        }
    }


def _end(call_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "end": {
            "project_id": "agl/p",
            "id": call_id,
            "trace_id": None,
            "started_at": None,
            "ended_at": NOW + datetime.timedelta(seconds=1),
            "exception": None,
            "output": 2,
            "summary": {"status_counts": {"success": 1, "error": 0}},
            **extra,
        }
    }


@pytest.mark.parametrize("end_first", [False, True])
def test_a_call_completes_once_whichever_half_arrives_first(end_first: bool) -> None:
    server = InMemoryWeaveTraceServer()
    completed: list[Any] = []
    started: list[dict[str, Any]] = []
    server.add_call_listener(completed.append, on_start=started.append)
    if end_first:
        server.call_end(_end("c1"))
        assert completed == [] and server.partial_calls.keys() == {"c1"}
        server.call_start(_start("c1"))
    else:
        assert server.call_start(_start("c1")).id == "c1"
        assert len(started) == 1 and completed == []
        server.call_end(_end("c1"))
    assert len(completed) == 1 and server.partial_calls == {}
    call = completed[0]
    assert call is server.calls["c1"]
    # the start's trace id and start time survive the end half's Nones
    assert (call.trace_id, call.started_at, call.inputs, call.output) == ("trace-1", NOW, {"x": 1}, 2)
    assert call.ended_at == NOW + datetime.timedelta(seconds=1)
    assert call.summary == {"status_counts": {"success": 1, "error": 0}}
    assert started == ([] if end_first else [_start("c1")["start"]])


def test_batches_queries_and_deletes() -> None:
    server = InMemoryWeaveTraceServer()
    batch = [
        {"mode": "start", "req": _start("a")},
        {"mode": "start", "req": _start("b")},
        {"mode": "end", "req": _end("a")},
    ]
    server.call_start_batch({"batch": batch})
    assert set(server.calls) == {"a"} and set(server.partial_calls) == {"b"}
    assert server.call_read({"id": "a"}).call == server.calls["a"]
    assert server.call_read({"id": "b"}).call is None
    assert [c.id for c in server.calls_query({"project_id": "agl/p"}).calls] == ["a"]
    assert list(server.calls_query_stream({"project_id": "other/p"})) == []
    assert server.calls_delete({"call_ids": ["a", "zzz"]}) == {"num_deleted": 1}
    with pytest.raises(ValueError, match="mode"):
        server.call_start_batch({"batch": [{"mode": "upsert", "req": {}}]})


def test_a_call_without_ids_is_refused() -> None:
    server = InMemoryWeaveTraceServer()
    with pytest.raises(ValueError, match="id or trace_id"):
        server.call_start(_start("", trace_id=None))
    with pytest.raises(ValueError, match="without id"):
        server.call_end(_end(""))


def test_objects_files_and_refs_round_trip_by_digest() -> None:
    server = InMemoryWeaveTraceServer()
    created = server.file_create({"project_id": "agl/p", "file": ("obj.py", b"print(1)\n")})
    assert (
        server.file_content_read({"project_id": "agl/p", "digest": created.digest}).content == b"print(1)\n"
    )
    obj = server.obj_create({"obj": {"project_id": "agl/p", "object_id": "cfg", "val": {"lr": 0.1}}})
    # same value, same digest (Weave's own digest function)
    again = server.obj_create({"obj": {"project_id": "agl/p", "object_id": "cfg", "val": {"lr": 0.1}}})
    assert obj.digest == again.digest
    assert server.obj_read({"project_id": "agl/p", "object_id": "cfg", "digest": obj.digest}).obj.val == {
        "lr": 0.1
    }
    refs = [f"weave:///agl/p/object/cfg:{obj.digest}", "weave:///agl/p/object/cfg:missing"]
    assert server.refs_read_batch({"refs": refs}).vals == [{"lr": 0.1}, None]
    table = server.table_create({"table": {"project_id": "agl/p", "rows": [{"a": 1}]}})
    updated = server.table_update(
        {"project_id": "agl/p", "base_digest": table.digest, "updates": [{"append": {"row": {"a": 2}}}]}
    )
    assert server.tables[updated.digest] == [{"a": 1}, {"a": 2}]
    with pytest.raises(KeyError, match="digest"):
        server.file_content_read({"project_id": "agl/p", "digest": "nope"})


def test_unimplemented_protocol_methods_say_so_and_other_names_do_not_exist() -> None:
    server = InMemoryWeaveTraceServer()
    with pytest.raises(NotImplementedError, match="annotation_queue_create"):
        server.annotation_queue_create({})
    # Weave looks for a batching processor with hasattr: there is none, so calls go straight here
    assert not hasattr(server, "call_processor")
    info = server.server_info()
    assert info.min_required_weave_python_version == info.trace_server_version


def test_a_failing_listener_does_not_fail_the_call() -> None:
    server = InMemoryWeaveTraceServer()

    def broken(call: Any) -> None:
        raise RuntimeError("listener bug")

    seen: list[Any] = []
    server.add_call_listener(broken)
    server.add_call_listener(seen.append)
    server.call_start(_start("c"))
    server.call_end(_end("c"))
    assert [c.id for c in seen] == ["c"]
