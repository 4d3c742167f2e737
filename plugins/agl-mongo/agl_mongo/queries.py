"""Filters, sorting and pagination translated to MongoDB queries, with the core stores' results.

A `NormalizedFilter` (from `agl_core.store.logic`) becomes a query: ``exact`` is equality,
``within`` is ``$in``, ``contains`` is a case-sensitive ``$regex`` of the escaped text (agl fix 5),
``json_icontains`` a ``$regex`` on the stored JSON text with each ASCII letter as ``[Aa]``;
``must`` conditions are ANDed and the pool is combined with ``$and``/``$or``.

Order: without ``sort_by`` documents come in insertion order (field ``o``). Sorting by a field that is
never null runs on the server with ``o`` breaking ties, which is what the core stores' stable sort
gives. Fields that may be null (``end_time``, ``mode``...) sort with `store_logic.sort_items` in Python
after fetching every match, because the contract puts None *last* ascending for ``*_time`` fields
while MongoDB puts null first.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from typing import Any, TypeVar

from pymongo.asynchronous.collection import AsyncCollection

from agl_core.store import logic as store_logic
from agl_core.types import PaginatedResult

__all__ = ["fetch_page", "to_query"]

T = TypeVar("T")


def _condition(cond: store_logic.FilterCondition) -> dict[str, Any]:
    if cond.op == "exact":
        return {cond.field: cond.value}
    if cond.op == "within":
        return {cond.field: {"$in": list(cond.value)}}
    if cond.op == "json_icontains":
        return {cond.field: {"$regex": _ascii_insensitive(cond.value)}}
    return {cond.field: {"$regex": re.escape(cond.value)}}


def _ascii_insensitive(lowered: str) -> str:
    """A regex of `lowered` (ASCII already lowered) that matches ASCII letters in either case, nothing else.

    Spelled out (``[Aa]``) rather than the ``i`` option, which would also fold non-ASCII letters.
    """
    return "".join(f"[{c.upper()}{c}]" if "a" <= c <= "z" else re.escape(c) for c in lowered)


def to_query(
    base: Mapping[str, Any], normalized: store_logic.NormalizedFilter, implied: Collection[str] = ()
) -> dict[str, Any]:
    """The MongoDB query of `normalized` added to `base` (which scopes it, e.g. a ``_id`` range).

    ``must`` conditions on the fields in `implied` are left out: `base` already enforces them.
    """
    query: dict[str, Any] = dict(base)
    clauses: list[dict[str, Any]] = []
    for cond in normalized.must:
        if cond.field in implied:
            continue
        if cond.op == "exact" and cond.field not in query:
            query[cond.field] = cond.value
        else:
            clauses.append(_condition(cond))
    pool = [_condition(c) for c in normalized.conditions]
    if pool:
        if normalized.aggregate == "and" or len(pool) == 1:
            clauses.extend(pool)
        else:
            clauses.append({"$or": pool})
    if clauses:
        query["$and"] = clauses
    return query


async def fetch_page(
    collection: AsyncCollection[Any],
    query: Mapping[str, Any],
    *,
    sort_by: str | None,
    sort_order: str,
    limit: int,
    offset: int,
    model_type: type,
    server_sortable: Collection[str],
    decode: Callable[[Mapping[str, Any]], T],
    projection: Mapping[str, Any] | None = None,
) -> PaginatedResult[T]:
    """One page of `collection` matching `query`, decoded, with the total number of matches.

    Arguments must already be validated (`store_logic.validate_pagination`, `sort_key_for`).
    """
    if sort_by is not None and sort_by not in server_sortable:
        docs = await collection.find(query, projection).sort("o", 1).to_list()
        items = store_logic.sort_items([decode(d) for d in docs], sort_by, sort_order, model_type)
        return store_logic.paginate(items, limit, offset)
    direction = -1 if sort_order == "desc" else 1
    order = [("o", 1)] if sort_by is None else [(sort_by, direction), ("o", 1)]
    cursor = collection.find(query, projection).sort(order).skip(offset)
    if limit != -1:
        cursor = cursor.limit(limit)
    page = [] if limit == 0 else await cursor.to_list()  # Mongo's limit(0) means no limit
    if (limit == -1 or len(page) < limit) and (page or offset == 0):
        total = offset + len(page)  # the page reaches the last match
    else:
        total = await collection.count_documents(query)
    return PaginatedResult(items=[decode(d) for d in page], limit=limit, offset=offset, total=total)
