"""One model call, several records: which LLM spans record the same call, and which record is read.

A call can be recorded up to three times: by a framework's own instrumentation, by agl's LLM-client
instrumentation (nested inside the framework's span), and by the agl LLM proxy (server side, another
trace). Every adapter and ``agl doctor`` use :func:`group_llm_calls`, so one call is one triplet, one
chat sample and one "LLM call" in a report, whichever paths recorded it. Records are the same call when:

1. they carry the same response id;
2. one is the only LLM span directly nested in the other (no two different response ids);
3. they were recorded by different recorders, neither side already has a record of the other's, their
   response ids do not differ, and their completions are equal (paired in order). The recorders are the
   proxy, agl's LLM-client instrumentation (``agl.llm.source = "tracer"``) and any other (a framework's
   own): a framework span with no response id that is not nested under the proxy's (DSPy, Google ADK on
   the proxy path), or beside agl's span instead of around it (LlamaIndex's OpenInference span, whose
   streamed call runs after the span's own context). Tracer-side records pair first, then the two paths.

The record read (:attr:`CallRecords.best`) is the richest: token ids first, then the proxy's exact record,
then a response id, then a readable completion and prompt.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import agl_core.adapter.genai as _genai
from agl_core.semconv import AGL_LLM_SOURCE, LLM_SOURCE_TRACER
from agl_core.types import Span

__all__ = ["CallRecords", "group_llm_calls", "nearest_llm_ancestors", "richness"]


@dataclass
class CallRecords:
    """Every record of one model call (in input order) and the one adapters read."""

    spans: list[Span]
    best: Span
    first_index: int
    """Position of the call's first record in the input (calls are returned in this order)."""

    @property
    def extra(self) -> list[Span]:
        """The records that are not :attr:`best`."""
        return [span for span in self.spans if span is not self.best]

    @property
    def recorded_by_proxy(self) -> bool:
        """Whether the LLM proxy recorded this call."""
        return any(_genai.is_proxy_llm_span(span) for span in self.spans)


def richness(span: Span) -> tuple[bool, bool, bool, bool, bool]:
    """How much of a call a record holds: token ids, the proxy's record, response id, completion, prompt."""
    return (
        _genai.prompt_token_ids(span) is not None and _genai.response_token_ids(span) is not None,
        _genai.is_proxy_llm_span(span),
        _genai.response_id(span) is not None,
        _genai.completion_messages(span) is not None,
        _genai.prompt_messages(span) is not None,
    )


def nearest_llm_ancestors(spans: Sequence[Span], llm_ids: set[str]) -> dict[str, str]:
    """Span id of each LLM span -> the id of the nearest LLM span above it (by parent links), if any."""
    parents = {span.span_id: span.parent_id for span in spans if span.parent_id}
    found: dict[str, str] = {}
    for span_id in llm_ids:
        seen = {span_id}
        current = parents.get(span_id)
        while current is not None and current not in seen:
            if current in llm_ids:
                found[span_id] = current
                break
            seen.add(current)
            current = parents.get(current)
    return found


def _completion_key(span: Span) -> str | None:
    """The first choice's text and tool calls, normalised; None when nothing was recorded."""
    choices = _genai.completion_messages(span)
    if not choices:
        return None
    choice = choices[0]
    content = choice.get("content")
    text = content.strip() if isinstance(content, str) else json.dumps(content, sort_keys=True, default=str)
    calls = []
    for call in choice.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping):
            continue
        arguments: Any = function.get("arguments")
        if isinstance(arguments, str):
            with contextlib.suppress(ValueError):
                arguments = json.loads(arguments)
        calls.append([function.get("name"), arguments])
    if not text and not calls:
        return None
    return json.dumps([text if content and text else None, calls], sort_keys=True, default=str)


class _Groups:
    """Union-find over record indices; a group never holds two different response ids."""

    def __init__(self, ids: list[str | None]) -> None:
        self.parent = list(range(len(ids)))
        self.ids: list[str | None] = list(ids)

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def union(self, a: int, b: int) -> bool:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return True
        ida, idb = self.ids[ra], self.ids[rb]
        if ida is not None and idb is not None and ida != idb:
            return False
        low, high = min(ra, rb), max(ra, rb)
        self.parent[high] = low
        self.ids[low] = ida if ida is not None else idb
        return True


def group_llm_calls(spans: Sequence[Span], enclosing: Mapping[str, str]) -> list[CallRecords]:
    """Group LLM-call records into calls (rules in the module docstring), in order of first record.

    Args:
        spans: the LLM-call spans of one rollout, in the caller's order (walk or time order).
        enclosing: span id -> id of the nearest LLM span it is nested in (:func:`nearest_llm_ancestors`,
            or the caller's own tree walk).
    """
    count = len(spans)
    if count == 0:
        return []
    ids = [_genai.response_id(span) for span in spans]
    recorders = [_recorder(span) for span in spans]
    known = [rid for rid in ids if rid is not None]
    if not enclosing and len(set(known)) == len(known) and len(set(recorders)) == 1:
        return [
            CallRecords(spans=[span], best=span, first_index=i) for i, span in enumerate(spans)
        ]  # one each
    groups = _Groups(ids)
    first_with_id: dict[str, int] = {}
    for index, rid in enumerate(ids):
        if rid is not None:
            groups.union(index, first_with_id.setdefault(rid, index))
    position = {span.span_id: index for index, span in enumerate(spans)}
    inner: dict[int, list[int]] = {}
    for index, span in enumerate(spans):
        outer = position.get(enclosing.get(span.span_id, ""))
        if outer is not None and outer != index:
            inner.setdefault(outer, []).append(index)
    for outer, nested in inner.items():
        # the only nested call is the same call; a span around several calls is a wrapper of the first
        groups.union(outer, nested[0])
    members: dict[int, list[int]] = {}
    for index in range(count):
        members.setdefault(groups.find(index), []).append(index)
    tracer_side = [recorder if recorder != _PROXY else None for recorder in recorders]
    paths = [recorder == _PROXY for recorder in recorders]
    for kinds in (tracer_side, paths):  # agl's record beside a framework's, then tracer beside proxy
        if len({kind for kind in kinds if kind is not None}) > 1:
            _pair_recorders(spans, groups, members, kinds)
            members = {}
            for index in range(count):
                members.setdefault(groups.find(index), []).append(index)
    calls: list[CallRecords] = []
    for indices in members.values():
        records = [spans[i] for i in indices]
        best = records[0] if len(records) == 1 else max(records, key=richness)  # max keeps the first of ties
        calls.append(CallRecords(spans=records, best=best, first_index=indices[0]))
    calls.sort(key=lambda call: call.first_index)
    return calls


_PROXY = "proxy"


def _recorder(span: Span) -> str:
    """Who recorded the span: the proxy, agl's LLM-client instrumentation, or another instrumentation."""
    if _genai.is_proxy_llm_span(span):
        return _PROXY
    return "agl" if span.attributes.get(AGL_LLM_SOURCE) == LLM_SOURCE_TRACER else "other"


def _pair_recorders(
    spans: Sequence[Span], groups: _Groups, members: dict[int, list[int]], kinds: Sequence[object]
) -> None:
    """Rule 3: join a call recorded only by one kind of recorder with one recorded only by another kind, by
    completion, in order (``kinds[i]``: record i's kind; None: not taking part)."""
    waiting: dict[str, list[tuple[object, int]]] = {}  # completion -> calls of one kind not joined yet
    for root, indices in sorted(members.items()):
        found = {kinds[i] for i in indices}
        if len(found) != 1 or None in found:
            continue
        key = next((k for i in indices if (k := _completion_key(spans[i])) is not None), None)
        if key is None:
            continue
        (kind,) = found
        queue = waiting.setdefault(key, [])
        joined = next((item for item in queue if item[0] != kind and groups.union(root, item[1])), None)
        if joined is not None:
            queue.remove(joined)
        else:
            queue.append((kind, root))
