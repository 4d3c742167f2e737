"""`InMemoryWeaveTraceServer`: a Weave trace server inside this process, so Weave runs without W&B.

Weave's client (``weave.init`` / ``@weave.op``) talks to a *trace server*: normally W&B's, over HTTP. This
class implements the part of Weave's trace-server protocol
(``weave.trace_server_bindings.client_interface.TraceServerClientInterface``) that tracing uses -- calls,
the objects and files an op publishes (its code), tables, refs and feedback -- and keeps everything in
memory. :func:`agl_weave.instrumentation.instrument_weave` makes ``weave.init`` use it.

Weave sends call starts and ends from its own worker threads, possibly end before start; the server
merges the two halves into one complete call (Weave's ``Call`` model) and tells its listeners, so a
tracer sees each call once, complete. Any other protocol method raises ``NotImplementedError`` naming
itself (nothing is silently dropped).
"""

from __future__ import annotations

import datetime
import json
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

from weave.trace.serialization.digest import bytes_digest, compute_object_digest, str_digest
from weave.trace_server_bindings import client_interface
from weave.trace_server_bindings.models import CallsQueryRes, EnsureProjectExistsRes, FileContentReadRes
from weave.vendor.weave_server_sdk.types import (
    CallReadResponse,
    CallStartResponse,
    CallUpsertBatchResponse,
    FileCreateResponse,
    ObjectCreateResponse,
    ObjectReadResponse,
    RefReadBatchResponse,
    ServerInfoRes,
    TableCreateFromDigestsResponse,
    TableCreateResponse,
    TableUpdateResponse,
)
from weave.vendor.weave_server_sdk.types.call_read_response import Call
from weave.version import VERSION

__all__ = ["CallListener", "InMemoryWeaveTraceServer"]

logger = logging.getLogger(__name__)

CallListener = Callable[[Call], None]
"""Called with each completed call (from a Weave worker thread)."""

StartListener = Callable[[dict[str, Any]], None]
"""Called with the ``start`` half of a call when it arrives first (from a Weave worker thread)."""

_PROTOCOL_METHODS = frozenset(
    name for name in vars(client_interface.TraceServerClientInterface) if not name.startswith("_")
)


def _utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


class InMemoryWeaveTraceServer:
    """A Weave trace server in this process's memory (see the module docstring).

    ``calls`` holds the completed calls (id -> Weave ``Call``), ``partial_calls`` the halves still waiting
    for their other half; ``objs``, ``files`` and ``tables`` what Weave published, by digest. All are
    guarded by one lock; Weave calls this server from several threads.
    """

    def __init__(self) -> None:
        self.calls: dict[str, Call] = {}
        self.partial_calls: dict[str, dict[str, Any]] = {}
        self.objs: dict[str, dict[str, Any]] = {}
        self.files: dict[str, bytes] = {}
        self.tables: dict[str, list[Any]] = {}
        self.feedback: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._call_listeners: list[CallListener] = []
        self._start_listeners: list[StartListener] = []

    @classmethod
    def from_env(cls, *args: Any, **kwargs: Any) -> InMemoryWeaveTraceServer:
        """A new server (Weave's factory signature; the environment is not read)."""
        return cls()

    def __getattr__(self, name: str) -> Any:
        if name in _PROTOCOL_METHODS:

            def not_implemented(*args: Any, **kwargs: Any) -> Any:
                raise NotImplementedError(
                    f"InMemoryWeaveTraceServer does not implement {name}(): it keeps calls, op objects, "
                    "files, tables and feedback for tracing. Use a W&B trace server (uninstrument_weave())."
                )

            return not_implemented
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # -- listeners -------------------------------------------------------------------------------

    def add_call_listener(self, on_complete: CallListener, on_start: StartListener | None = None) -> None:
        """Call ``on_complete(call)`` for every completed call and ``on_start(start)`` when a start arrives
        before its end. Listeners run on Weave's worker threads and must not block."""
        with self._lock:
            self._call_listeners.append(on_complete)
            if on_start is not None:
                self._start_listeners.append(on_start)

    def clear(self) -> None:
        """Forget every call, object, file, table and feedback (listeners stay)."""
        with self._lock:
            self.calls.clear()
            self.partial_calls.clear()
            self.objs.clear()
            self.files.clear()
            self.tables.clear()
            self.feedback.clear()

    # -- server ----------------------------------------------------------------------------------

    def server_info(self) -> ServerInfoRes:
        """This Weave client's own version as both the required client and the server version."""
        return ServerInfoRes(min_required_weave_python_version=VERSION, trace_server_version=VERSION)

    def ensure_project_exists(self, entity: str, project: str) -> EnsureProjectExistsRes:
        """Every project exists."""
        return EnsureProjectExistsRes(project_name=project)

    # -- calls -----------------------------------------------------------------------------------

    def call_start(self, req: Any) -> CallStartResponse:
        """Record a call's start half (``req["start"]``)."""
        start = dict(req["start"])
        call_id, trace_id = start.get("id"), start.get("trace_id")
        if not call_id or not trace_id:
            raise ValueError(f"Weave call start without id or trace_id: {start!r}")
        self._merge(call_id, start, is_start=True)
        return CallStartResponse(id=call_id, trace_id=trace_id)

    def call_end(self, req: Any) -> None:
        """Record a call's end half (``req["end"]``)."""
        end = dict(req["end"])
        call_id = end.get("id")
        if not call_id:
            raise ValueError(f"Weave call end without id: {end!r}")
        self._merge(call_id, end, is_start=False)

    def call_start_batch(self, req: Any) -> CallUpsertBatchResponse:
        """Record a batch of start and end halves (``{"batch": [{"mode": "start"|"end", "req": ...}]}``)."""
        for item in req["batch"]:
            if item["mode"] == "start":
                self.call_start(item["req"])
            elif item["mode"] == "end":
                self.call_end(item["req"])
            else:
                raise ValueError(f"Unknown Weave batch item mode {item['mode']!r}.")
        return CallUpsertBatchResponse(res=[])

    def _merge(self, call_id: str, half: dict[str, Any], *, is_start: bool) -> None:
        completed: Call | None = None
        with self._lock:
            other = self.partial_calls.pop(call_id, None)
            if other is None:
                self.partial_calls[call_id] = half
                start_listeners = list(self._start_listeners) if is_start else []
            else:
                start, end = (half, other) if is_start else (other, half)
                # The end half repeats started_at/trace_id (possibly as None): the start's values win.
                fields = {**{k: v for k, v in end.items() if v is not None}, **start}
                for key in ("output", "exception", "summary", "ended_at"):
                    if key in end:
                        fields[key] = end[key]
                completed = Call.model_validate(fields)
                self.calls[call_id] = completed
                start_listeners = []
            call_listeners = list(self._call_listeners) if completed is not None else []
        for on_start in start_listeners:
            self._notify(on_start, half)
        for on_complete in call_listeners:
            self._notify(on_complete, completed)

    @staticmethod
    def _notify(listener: Callable[[Any], None], value: Any) -> None:
        try:
            listener(value)
        except Exception:  # a listener's failure must not fail the traced code
            logger.exception("Weave call listener %r failed", listener)

    def call_read(self, req: Any) -> CallReadResponse:
        """The completed call ``req["id"]`` (``call=None`` when unknown)."""
        with self._lock:
            return CallReadResponse(call=self.calls.get(req["id"]))

    def calls_query_stream(self, req: Any) -> Iterator[Call]:
        """Every completed call of ``req["project_id"]`` (filters are not applied)."""
        project_id = req.get("project_id")
        with self._lock:
            calls = [c for c in self.calls.values() if project_id is None or c.project_id == project_id]
        yield from calls

    def calls_query(self, req: Any) -> CallsQueryRes:
        """`calls_query_stream` as one list."""
        return CallsQueryRes(calls=list(self.calls_query_stream(req)))

    def calls_delete(self, req: Any) -> dict[str, int]:
        """Delete the completed calls ``req["call_ids"]``."""
        with self._lock:
            deleted = [self.calls.pop(call_id, None) for call_id in req["call_ids"]]
        return {"num_deleted": sum(call is not None for call in deleted)}

    def call_update(self, req: Any) -> None:
        """Set a completed call's ``display_name`` (the only update Weave sends)."""
        with self._lock:
            call = self.calls.get(req["call_id"])
            if call is not None and "display_name" in req:
                self.calls[req["call_id"]] = call.model_copy(update={"display_name": req["display_name"]})

    # -- objects, files, tables, refs, feedback --------------------------------------------------

    def obj_create(self, req: Any) -> ObjectCreateResponse:
        """Keep a published object (an op's code reference, a dataset, ...) under its digest."""
        obj = dict(req["obj"])
        digest = obj.get("expected_digest") or compute_object_digest(obj["val"])
        obj["digest"] = digest
        with self._lock:
            self.objs[digest] = obj
        return ObjectCreateResponse(digest=digest, object_id=obj.get("object_id"))

    def obj_read(self, req: Any) -> ObjectReadResponse:
        """A published object by ``req["digest"]``; ``KeyError`` when unknown."""
        with self._lock:
            obj = self.objs.get(req["digest"])
        if obj is None:
            raise KeyError(f"No Weave object with digest {req['digest']!r} in this in-memory server.")
        return ObjectReadResponse.model_validate(
            {
                "obj": {
                    "created_at": _utc_now(),
                    "digest": obj["digest"],
                    "is_latest": 1,
                    "kind": "op" if obj.get("object_id") and "Op" in json.dumps(obj["val"]) else "object",
                    "object_id": obj.get("object_id") or obj["digest"],
                    "project_id": obj["project_id"],
                    "val": obj["val"],
                    "version_index": 0,
                }
            }
        )

    def file_create(self, req: Any) -> FileCreateResponse:
        """Keep a file (``req["file"] = (name, content)``) under its content digest."""
        _name, content = req["file"][0], req["file"][1]
        data = content if isinstance(content, bytes) else content.read()
        digest = req.get("expected_digest") or bytes_digest(data)
        with self._lock:
            self.files[digest] = data
        return FileCreateResponse(digest=digest)

    def file_content_read(self, req: Any) -> FileContentReadRes:
        """A kept file's content by ``req["digest"]``; ``KeyError`` when unknown."""
        with self._lock:
            content = self.files.get(req["digest"])
        if content is None:
            raise KeyError(f"No Weave file with digest {req['digest']!r} in this in-memory server.")
        return FileContentReadRes(content=content)

    def _add_table(self, rows: list[Any], expected: str | None = None) -> str:
        digest = expected or str_digest(json.dumps(rows, sort_keys=True, default=str))
        with self._lock:
            self.tables[digest] = rows
        return digest

    def table_create(self, req: Any) -> TableCreateResponse:
        """Keep a table's rows under its digest."""
        rows = list(req["table"]["rows"])
        digest = self._add_table(rows, req["table"].get("expected_digest"))
        row_digests = [str_digest(json.dumps(row, sort_keys=True, default=str)) for row in rows]
        return TableCreateResponse(digest=digest, row_digests=row_digests)

    def table_create_from_digests(self, req: Any) -> TableCreateFromDigestsResponse:
        """A table made of rows given by digest (kept as the digests)."""
        return TableCreateFromDigestsResponse(digest=self._add_table(list(req["row_digests"])))

    def table_update(self, req: Any) -> TableUpdateResponse:
        """Apply appends (``{"append": {"row": ...}}``) to a kept table; other updates are refused."""
        with self._lock:
            rows = list(self.tables.get(req["base_digest"], []))
        for update in req["updates"]:
            if "append" not in update:
                raise NotImplementedError(
                    f"InMemoryWeaveTraceServer applies table appends only, got {update!r}."
                )
            rows.append(update["append"]["row"])
        return TableUpdateResponse(digest=self._add_table(rows), updated_row_digests=[])

    def refs_read_batch(self, req: Any) -> RefReadBatchResponse:
        """Resolve object refs (``weave:///entity/project/object/name:digest``) to their values."""
        values: list[object] = []
        with self._lock:
            for ref in req["refs"]:
                digest = ref.rsplit(":", 1)[-1].split("/", 1)[0]
                obj = self.objs.get(digest)
                values.append(obj["val"] if obj is not None else None)
        return RefReadBatchResponse(vals=values)

    def feedback_create(self, req: Any) -> dict[str, Any]:
        """Keep a feedback record."""
        record = dict(req)
        record.setdefault("id", str_digest(json.dumps(record, sort_keys=True, default=str)))
        record.setdefault("created_at", _utc_now())
        with self._lock:
            self.feedback.append(record)
        return {
            "id": record["id"],
            "created_at": record["created_at"],
            "wb_user_id": "agl",
            "payload": record.get("payload", {}),
        }
