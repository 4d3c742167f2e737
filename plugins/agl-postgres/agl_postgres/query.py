"""Translate the shared filters, sorts and pagination (`agl_core.store.logic`) into PostgreSQL.

The results equal the in-memory store's: ``exact`` -> ``col = $n``; ``within`` -> ``col = ANY($n)``
(an empty set matches nothing); ``contains`` -> ``strpos(col, $n) > 0`` (case-sensitive, never
``LIKE``); a value of the wrong type for a column matches nothing. Sorting follows
`logic.sort_key_for`: ``*_time`` fields put NULL last ascending and first descending, other NULLs sort
as the type's zero, text sorts by code point (``COLLATE "C"``, like Python), and ties keep insertion
order in both directions.

``json_icontains`` (a rollout's input) is ``strpos`` in the stored JSON text with its ASCII letters lowered
by ``translate`` (locale-independent, unlike ``ILIKE`` and ``lower``), as SQLite's ``LIKE`` folds them.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agl_core.store.logic import FilterCondition, NormalizedFilter, sort_key_for, validate_sort_order

__all__ = ["Column", "order_by", "page_total", "where"]

_UPPER = string.ascii_uppercase
_LOWER = string.ascii_lowercase


@dataclass(frozen=True, slots=True)
class Column:
    """How a model field maps to SQL: the expression, whether it holds text, and its NULL sort value."""

    sql: str
    text: bool
    null_as: str | None = None
    """SQL literal NULL sorts as (None: never NULL, or a ``*_time`` field)."""


def _accepts(column: Column, value: object) -> bool:
    if column.text:
        return isinstance(value, str)
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _condition(cond: FilterCondition, columns: Mapping[str, Column], params: list[Any]) -> str:
    column = columns[cond.field]
    cast = "text" if column.text else "float8"
    if cond.op == "exact":
        if not _accepts(column, cond.value):
            return "FALSE"
        params.append(cond.value if column.text else float(cond.value))
        return f"{column.sql} = ${len(params)}::{cast}"
    if cond.op == "within":
        values = [v if column.text else float(v) for v in cond.value if _accepts(column, v)]
        if not values:
            return "FALSE"
        params.append(values)
        return f"{column.sql} = ANY(${len(params)}::{cast}[])"
    if cond.op == "json_icontains":  # the column holds the JSON text; fold ASCII letters only, like SQLite
        params.append(cond.value)
        return f"strpos(translate({column.sql}, '{_UPPER}', '{_LOWER}'), ${len(params)}::text) > 0"
    if not column.text or not isinstance(cond.value, str):
        return "FALSE"
    params.append(cond.value)
    return f"strpos({column.sql}, ${len(params)}::text) > 0"


def where(normalized: NormalizedFilter, columns: Mapping[str, Column], params: list[Any]) -> str:
    """A WHERE condition equivalent to `logic.build_predicate`, appending its values to `params`."""
    parts = [_condition(c, columns, params) for c in normalized.must]
    if normalized.conditions:
        pool = [_condition(c, columns, params) for c in normalized.conditions]
        joiner = " AND " if normalized.aggregate == "and" else " OR "
        parts.append("(" + joiner.join(pool) + ")")
    return " AND ".join(parts) if parts else "TRUE"


def order_by(
    sort_by: str | None, sort_order: str, model_type: type, columns: Mapping[str, Column], insertion: str
) -> str:
    """The ORDER BY clause (without the keyword) equivalent to `logic.sort_items`."""
    order = validate_sort_order(sort_order)
    if sort_by is None:
        return insertion
    sort_key_for(sort_by, model_type)  # raises InvalidFilterError for unknown or unsortable fields
    column = columns.get(sort_by)
    if column is None:
        raise NotImplementedError(f"The PostgreSQL store cannot sort {model_type.__name__} by {sort_by!r}.")
    direction = " DESC" if order == "desc" else ""
    collate = ' COLLATE "C"' if column.text else ""
    if sort_by.endswith("_time"):
        return f"({column.sql} IS NULL){direction}, {column.sql}{direction}, {insertion}"
    expression = column.sql if column.null_as is None else f"coalesce({column.sql}, {column.null_as})"
    return f"{expression}{collate}{direction}, {insertion}"


def page_total(rows: Sequence[Any], limit: int, offset: int) -> int | None:
    """The number of matches if the page itself proves it, else None (run a COUNT)."""
    count = len(rows)
    if (limit == -1 or count < limit) and (count or offset == 0):
        return offset + count
    return None


def limit_clause(limit: int, offset: int, params: list[Any]) -> str:
    """``LIMIT $n OFFSET $m`` (no limit for ``-1``), appending the values to `params`."""
    params.append(None if limit == -1 else limit)
    params.append(offset)
    return f"LIMIT ${len(params) - 1}::bigint OFFSET ${len(params)}::bigint"
