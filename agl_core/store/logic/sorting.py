"""Sorting and pagination of query results."""

from __future__ import annotations

import functools
import types
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

from agl_core.store.errors import (
    InvalidFilterError,
    InvalidRequestError,
)
from agl_core.store.logic.checks import check_int_bound, validate_sort_order
from agl_core.types import PaginatedResult

if TYPE_CHECKING:
    pass


__all__ = [
    "T",
    "page_result",
    "paginate",
    "sort_items",
    "sort_key_for",
    "sortable_fields",
    "validate_pagination",
]

T = TypeVar("T")

# ---------------------------------------------------------------------------------------------- sorting

_SCALAR_DEFAULTS: dict[type, Any] = {str: "", int: 0, float: 0.0, bool: False}


def _scalar_type(annotation: Any) -> type | None:
    """The scalar type (str/int/float/bool) behind an annotation, or None if it is not scalar."""
    if annotation in _SCALAR_DEFAULTS:
        return annotation  # type: ignore[no-any-return]
    origin = get_origin(annotation)
    if origin is Annotated:
        return _scalar_type(get_args(annotation)[0])
    kinds: set[type | None]
    if origin is Literal:
        kinds = {type(arg) for arg in get_args(annotation)}
    elif origin is Union or origin is types.UnionType:
        kinds = {_scalar_type(arg) for arg in get_args(annotation) if arg is not type(None)}
    else:
        return None
    if len(kinds) == 1:
        (kind,) = kinds
        return kind if kind in _SCALAR_DEFAULTS else None
    if kinds <= {int, float}:
        return float
    return None


@functools.cache
def _sortable(model_type: type) -> dict[str, Any]:
    fields = getattr(model_type, "model_fields", None)
    if fields is None:
        raise TypeError(f"{model_type!r} is not a pydantic model")
    result: dict[str, Any] = {}
    for name, info in fields.items():
        kind = _scalar_type(info.annotation)
        if kind is not None:
            result[name] = _SCALAR_DEFAULTS[kind]
    return result


def sortable_fields(model_type: type) -> tuple[str, ...]:
    """Fields of the pydantic `model_type` that can be sorted on (string, number or bool fields)."""
    return tuple(_sortable(model_type))


def sort_key_for(field: str, model_type: type) -> Callable[[Any], Any]:
    """A sort key for `field` of `model_type` instances.

    Fields ending in ``_time`` treat None as +infinity (last ascending, first descending); other None
    values sort as the field type's zero ("" / 0 / 0.0 / False).

    Raises:
        InvalidFilterError: `field` is unknown or not a string/number field; the message lists the
            sortable fields.
    """
    table = _sortable(model_type)
    if field not in table:
        raise InvalidFilterError(
            f"Cannot sort {model_type.__name__} by {field!r}. Sortable fields: {', '.join(table)}."
        )
    if field.endswith("_time"):

        def time_key(item: Any) -> tuple[int, Any]:
            value = getattr(item, field)
            return (1, 0.0) if value is None else (0, value)

        return time_key
    default = table[field]

    def key(item: Any) -> Any:
        value = getattr(item, field)
        return default if value is None else value

    return key


def sort_items(items: Iterable[T], sort_by: str | None, sort_order: str, model_type: type) -> list[T]:
    """`items` as a list sorted (stably) by `sort_by`, or in their given order when `sort_by` is None."""
    order = validate_sort_order(sort_order)
    if sort_by is None:
        return list(items)
    return sorted(items, key=sort_key_for(sort_by, model_type), reverse=order == "desc")


# ---------------------------------------------------------------------------------------------- pagination


def validate_pagination(limit: object, offset: object) -> None:
    """Raise `InvalidRequestError` unless ``limit`` is >= 0 or -1 (no limit) and ``offset`` >= 0.

    ``limit=0`` is an empty page that still counts ``total`` (as Agent Lightning 0.3 answered).
    """
    if limit.__class__ is not int:
        raise InvalidRequestError(f"limit must be an integer (>= 0, or -1 for no limit), got {limit!r}.")
    if limit < -1:
        raise InvalidRequestError(f"limit must be >= 0 or -1 for no limit, got {limit}.")
    if offset.__class__ is not int or offset < 0:
        raise InvalidRequestError(f"offset must be an integer >= 0, got {offset!r}.")
    check_int_bound("limit", limit)
    check_int_bound("offset", offset)


def paginate(items: Sequence[T], limit: int, offset: int) -> PaginatedResult[T]:
    """The page ``items[offset:offset+limit]`` (``limit=-1``: to the end) with ``total=len(items)``."""
    validate_pagination(limit, offset)
    page = items[offset:] if limit == -1 else items[offset : offset + limit]
    if not isinstance(page, list):
        page = list(page)
    return page_result(page, limit, offset, len(items))


def page_result(items: list[T], limit: int, offset: int, total: int) -> PaginatedResult[T]:
    """A `PaginatedResult` of items a store already holds as valid models (`items` is taken over).

    Skips pydantic's validation of the page: stores build their pages from their own valid objects.
    """
    return PaginatedResult.model_construct(items=items, limit=limit, offset=offset, total=total)
