"""Spans and span sequence ids.

A span is one document (see `agl_mongo.codec.span_doc`) with a unique index on ``(pt, rollout_id,
attempt_id, span_id)``; its ``_id`` is its rollout's key plus its insertion number within the rollout
(``span_key``), so the spans of a rollout are the ``_id`` values 1..``so`` (the rollout's counter of
reserved numbers): a query reads them by ``_id``, never scanning other rollouts. Its body is JSON text.
Adding spans takes three steps per target attempt: reserve insertion-order numbers on the rollout
document (this also proves the attempt exists, before anything is written), insert the batch
(duplicate keys are refused and skipped), then count the inserted spans as one heartbeat
(`agl_mongo.attempts.heartbeat`), which also raises the rollout's sequence counter to the largest
stored ``sequence_id``.

Sequence ids live on the rollout document (``sq``, ``$inc``); ids asked for a rollout id that has no
document come from the ``sequences`` collection.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from pymongo import ReturnDocument
from pymongo.errors import DuplicateKeyError

from agl_core.store import AttemptNotFoundError, RolloutNotFoundError
from agl_core.store import logic as store_logic
from agl_core.types import PaginatedResult, Span
from agl_mongo.attempts import heartbeat
from agl_mongo.codec import SCHEMA_VERSION, span_doc, span_from_doc
from agl_mongo.connection import Collections
from agl_mongo.context import StoreContext, insert_new
from agl_mongo.keys import key, prefix_range, span_key
from agl_mongo.queries import fetch_page, to_query

__all__ = ["SPAN_SERVER_SORTABLE", "add_spans", "allocate_sequence_ids", "query_spans"]

_LOOKUP_LIMIT = 2000
"""Rollouts with at most this many spans are read by ``_id`` list, larger ones by ``_id`` range."""

SPAN_SERVER_SORTABLE = frozenset(("rollout_id", "attempt_id", "sequence_id", "trace_id", "span_id", "name"))
"""Span fields that are never null, so MongoDB can sort on them."""


async def _check_targets(ctx: StoreContext, targets: Sequence[tuple[str, str]]) -> None:
    """Raise for the first ``(rollout_id, attempt_id)`` that does not exist (one read for all)."""
    rollout_ids = list(dict.fromkeys(rid for rid, _ in targets))

    async def step(cols: Collections, retrying: bool) -> list[Any]:
        query = {"_id": {"$in": [key(ctx.partition, rollout_id) for rollout_id in rollout_ids]}}
        return await cols.rollouts.find(query, {"rollout_id": 1, "attempts": 1}).to_list()

    known = {d["rollout_id"]: {a["attempt_id"] for a in d.get("attempts") or ()} for d in await ctx.run(step)}
    for rollout_id, attempt_id in targets:
        if rollout_id not in known:
            raise RolloutNotFoundError(rollout_id)
        if attempt_id not in known[rollout_id]:
            raise AttemptNotFoundError(rollout_id, attempt_id)


async def _reserve_order(
    ctx: StoreContext, rollout_id: str, attempt_id: str, count: int, unnumbered: int
) -> tuple[int, dict[str, Any]]:
    """Reserve `count` insertion-order numbers for spans of the attempt and `unnumbered` sequence ids.

    Returns the first number and the rollout's state (for the heartbeat's transition; its ``sq`` is
    the last sequence id reserved).
    """

    async def step(cols: Collections, retrying: bool) -> Any:
        return await cols.rollouts.find_one_and_update(
            {"_id": key(ctx.partition, rollout_id), "attempts.attempt_id": attempt_id},
            {"$inc": {"so": count, "sq": unnumbered}},
            projection={"so": 1, "sq": 1, "status": 1, "attempts": 1, "rev": 1},
            return_document=ReturnDocument.AFTER,
        )

    doc = await ctx.run(step)
    if doc is None:
        await _check_targets(ctx, [(rollout_id, attempt_id)])
        raise AttemptNotFoundError(rollout_id, attempt_id)  # it vanished in between (cannot happen)
    return int(doc["so"]) - count + 1, doc


async def add_spans(ctx: StoreContext, spans: Sequence[Span]) -> list[Span]:
    """Store validated spans; return those inserted (duplicates skipped, even within the batch).

    Every span's rollout and attempt must exist; that is checked before anything is written. Spans
    with ``sequence_id`` 0 get ids reserved with the insertion-order numbers (one ``$inc``).
    """
    unique: list[Span] = []
    seen: set[tuple[str, str, str]] = set()
    groups: dict[tuple[str, str], list[int]] = {}
    for span in spans:
        identity = (span.rollout_id, span.attempt_id, span.span_id)
        if identity in seen:
            continue
        seen.add(identity)
        groups.setdefault((span.rollout_id, span.attempt_id), []).append(len(unique))
        unique.append(span)
    if len(groups) > 1:
        await _check_targets(ctx, list(groups))
    token = uuid.uuid4().hex
    docs: list[dict[str, Any]] = [{} for _ in unique]
    states: dict[tuple[str, str], dict[str, Any]] = {}
    for (rollout_id, attempt_id), members in groups.items():
        unnumbered = [position for position in members if not unique[position].sequence_id]
        first, state = await _reserve_order(ctx, rollout_id, attempt_id, len(members), len(unnumbered))
        states[(rollout_id, attempt_id)] = state
        for number, position in enumerate(unnumbered, int(state["sq"]) - len(unnumbered) + 1):
            unique[position] = store_logic.number_span(unique[position], number)
        for offset, position in enumerate(members):
            span = unique[position]
            doc = span_doc(ctx.partition, span, first + offset, token)
            doc["_id"] = span_key(ctx.partition, rollout_id, first + offset)
            docs[position] = doc
    refused = set(await insert_new(ctx, _spans, docs))
    inserted = [span for position, span in enumerate(unique) if position not in refused]
    if inserted:
        now = ctx.clock()
        touched: dict[tuple[str, str], int] = {}
        for span in inserted:
            target = (span.rollout_id, span.attempt_id)
            touched[target] = max(touched.get(target, 0), span.sequence_id)
        for (rollout_id, attempt_id), max_sequence_id in touched.items():
            # The state read with the reservation; its `rev` guard catches any change since.
            await heartbeat(
                ctx, rollout_id, attempt_id, max_sequence_id, now, states[(rollout_id, attempt_id)]
            )
    return inserted


def _spans(cols: Collections) -> Any:
    return cols.spans


async def allocate_sequence_ids(ctx: StoreContext, rollout_id: str, count: int) -> int:
    """Issue `count` consecutive sequence ids of the rollout; return the last one.

    A retry after a lost acknowledgement may skip ids (a gap), never repeat one.
    """

    query = {"_id": key(ctx.partition, rollout_id)}
    identity = {"v": SCHEMA_VERSION, "pt": ctx.partition, "rollout_id": rollout_id}

    async def step(cols: Collections, retrying: bool) -> int:
        doc = await cols.rollouts.find_one_and_update(
            query, {"$inc": {"sq": count}}, projection={"sq": 1}, return_document=ReturnDocument.AFTER
        )
        if doc is not None:
            return int(doc["sq"])
        for _ in range(3):
            try:
                counter = await cols.sequences.find_one_and_update(
                    query,
                    {"$inc": {"sq": count}, "$set": identity},
                    upsert=True,
                    projection={"sq": 1},
                    return_document=ReturnDocument.AFTER,
                )
                assert counter is not None  # an upsert always returns the document
                return int(counter["sq"])
            except DuplicateKeyError:  # created concurrently: the next try increments it
                continue
        raise RuntimeError(f"Could not create the sequence counter of {rollout_id!r}.")

    return await ctx.run(step)


async def query_spans(
    ctx: StoreContext,
    rollout_id: str,
    attempt_id: str | None,
    normalized: store_logic.NormalizedFilter,
    sort_by: str | None,
    sort_order: str,
    limit: int,
    offset: int,
) -> PaginatedResult[Span]:
    """Spans of one rollout (of one attempt if `attempt_id`; "latest" resolves to its newest attempt).

    The rollout document gives the number of span ``_id`` values reserved so far; up to
    `_LOOKUP_LIMIT` of them are fetched by ``_id``, more as one ``_id`` range. An unknown rollout, or
    "latest" of a rollout without attempts, gives an empty page.
    """

    async def rollout(cols: Collections, retrying: bool) -> Any:
        return await cols.rollouts.find_one({"_id": key(ctx.partition, rollout_id)}, {"attempts": 1, "so": 1})

    doc = await ctx.run(rollout)
    empty = PaginatedResult[Span](items=[], limit=limit, offset=offset, total=0)
    if doc is None or not doc.get("so"):
        return empty
    if attempt_id == "latest":
        if not doc.get("attempts"):
            return empty
        attempt_id = doc["attempts"][-1]["attempt_id"]
    reserved = int(doc["so"])
    if reserved <= _LOOKUP_LIMIT:
        scope: dict[str, Any] = {
            "$in": [span_key(ctx.partition, rollout_id, n) for n in range(1, reserved + 1)]
        }
    else:
        scope = prefix_range(ctx.partition, rollout_id)
    base: dict[str, Any] = {"_id": scope}
    if attempt_id is not None:
        base["attempt_id"] = attempt_id
    query = to_query(base, normalized, implied=("rollout_id", "attempt_id"))

    async def step(cols: Collections, retrying: bool) -> PaginatedResult[Span]:
        return await fetch_page(
            cols.spans,
            query,
            sort_by=sort_by,
            sort_order=sort_order,
            limit=limit,
            offset=offset,
            model_type=Span,
            server_sortable=SPAN_SERVER_SORTABLE,
            decode=span_from_doc,
        )

    return await ctx.run(step)
