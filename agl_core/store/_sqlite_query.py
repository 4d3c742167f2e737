"""Translate `logic` filters, sorts and pagination into SQL with exactly the in-memory semantics.

- ``exact`` -> ``col = ?``; ``within`` -> ``col IN (...)`` (an empty set matches nothing);
  ``contains`` -> ``instr(col, ?) > 0`` (case-sensitive, NULL never matches), never ``LIKE``;
  ``json_icontains`` (a rollout's input) -> ``LIKE`` on the stored JSON text (ASCII letters folded, the
  wildcards escaped).
- Values that can never equal a column's Python values (a number for a text column) are dropped
  before binding, since SQLite's type affinity would otherwise coerce them.
- Sorting follows `logic.sort_key_for`: ``*_time`` fields put NULL last ascending and first
  descending; other NULLs sort as the field type's zero; ties keep insertion order in both directions
  (Python's sort is stable, also with ``reverse=True``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agl_core.store.logic import FilterCondition, NormalizedFilter, sort_key_for, validate_sort_order

__all__ = ["Column", "order_by", "page_total", "where"]

_IN_PLACEHOLDER_LIMIT = 64
_LIKE_SPECIAL = re.compile(r"[%_\\]")
_LIKE_TEXT_LIMIT = 10_000  # characters; SQLite refuses LIKE patterns over 50,000 bytes


@dataclass(frozen=True, slots=True)
class Column:
    """How a model field maps to SQL: the expression, whether it holds text, and its NULL sort value."""

    sql: str
    text: bool
    null_as: str | None = None
    """SQL literal that NULL sorts as (None: the column is never NULL, or it is a ``*_time`` field)."""


def _accepts(column: Column, value: object) -> bool:
    if column.text:
        return isinstance(value, str)
    return isinstance(value, (int, float))


def _condition(cond: FilterCondition, columns: Mapping[str, Column], params: list[Any]) -> str:
    column = columns[cond.field]
    if cond.op == "exact":
        if not _accepts(column, cond.value):
            return "0"
        params.append(cond.value)
        return f"{column.sql} = ?"
    if cond.op == "within":
        values = [v for v in cond.value if _accepts(column, v)]
        if not values:
            return "0"
        if len(values) <= _IN_PLACEHOLDER_LIMIT:
            params.extend(values)
            return f"{column.sql} IN ({', '.join('?' * len(values))})"
        from pydantic_core import to_json

        params.append(to_json(values).decode())
        return f"{column.sql} IN (SELECT value FROM json_each(?))"
    if cond.op == "json_icontains":  # the column holds the JSON text; LIKE folds ASCII letters only
        if len(cond.value) > _LIKE_TEXT_LIMIT:  # past SQLite's LIKE pattern limit: lower() folds the same
            params.append(cond.value)
            return f"instr(lower({column.sql}), ?) > 0"
        params.append("%" + _LIKE_SPECIAL.sub(r"\\\g<0>", cond.value) + "%")
        return f"{column.sql} LIKE ? ESCAPE '\\'"
    # contains: a case-sensitive substring test, only meaningful for text columns
    if not column.text or not isinstance(cond.value, str):
        return "0"
    params.append(cond.value)
    return f"instr({column.sql}, ?) > 0"


def where(normalized: NormalizedFilter, columns: Mapping[str, Column]) -> tuple[str, list[Any]]:
    """``(sql, params)`` of a WHERE condition equivalent to `logic.build_predicate` (``"1"`` matches all)."""
    params: list[Any] = []
    parts = [_condition(c, columns, params) for c in normalized.must]
    if normalized.conditions:
        pool = [_condition(c, columns, params) for c in normalized.conditions]
        joiner = " AND " if normalized.aggregate == "and" else " OR "
        parts.append("(" + joiner.join(pool) + ")")
    if not parts:
        return "1", params
    return " AND ".join(parts), params


def order_by(
    sort_by: str | None,
    sort_order: str,
    model_type: type,
    columns: Mapping[str, Column],
    insertion: str,
) -> str:
    """The ORDER BY clause (without the keyword) equivalent to `logic.sort_items`.

    Validates the field and the order.

    `insertion` is the column that gives insertion order (the tie-breaker, and the order when
    `sort_by` is None).
    """
    order = validate_sort_order(sort_order)
    if sort_by is None:
        return insertion
    sort_key_for(sort_by, model_type)  # raises InvalidFilterError for unknown/unsortable fields
    column = columns.get(sort_by)
    if column is None:  # a sortable model field the schema does not store as a column
        raise NotImplementedError(f"SqliteLightningStore cannot sort {model_type.__name__} by {sort_by!r}")
    direction = " DESC" if order == "desc" else ""
    if sort_by.endswith("_time"):
        return f"({column.sql} IS NULL){direction}, {column.sql}{direction}, {insertion}"
    expression = column.sql if column.null_as is None else f"coalesce({column.sql}, {column.null_as})"
    return f"{expression}{direction}, {insertion}"


def page_total(rows: Sequence[Any], limit: int, offset: int) -> int | None:
    """The total number of matches if the page itself proves it, else None (run a COUNT)."""
    count = len(rows)
    if (limit == -1 or count < limit) and (count or offset == 0):
        return offset + count
    return None
