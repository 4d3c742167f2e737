"""Filters: normalisation of query conditions, matching and the per-query filter builders."""

from __future__ import annotations

import string
import warnings
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, get_args

from pydantic_core import PydanticSerializationError, to_json

from agl_core.store.errors import (
    InvalidFilterError,
)
from agl_core.store.logic.checks import check_no_nul, validate_filter_logic, validate_statuses
from agl_core.types.status import RolloutMode

if TYPE_CHECKING:
    pass


_MODES: tuple[str, ...] = get_args(RolloutMode)

__all__ = [
    "MATCH_ALL",
    "FilterCondition",
    "FilterOperator",
    "NormalizedFilter",
    "ascii_lower",
    "build_predicate",
    "normalize_filter",
    "resolve_rollout_query_aliases",
    "resources_query_filter",
    "rollout_query_filter",
    "span_query_filter",
    "worker_query_filter",
]

FilterOperator = Literal["exact", "within", "contains", "json_icontains"]
"""``json_icontains`` is no `FilterOptions` operator: only ``query_rollouts(input_contains=...)`` sets it."""
_OPERATORS: tuple[str, ...] = ("exact", "within", "contains")
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def ascii_lower(text: str) -> str:
    """`text` with the ASCII letters A-Z lowered and every other character kept (SQL ``LIKE``'s folding)."""
    return text.translate(_ASCII_LOWER)


def _json_icontains(needle: str, value: Any) -> bool:
    try:
        text = to_json(value, inf_nan_mode="constants").decode()
    except (PydanticSerializationError, ValueError):  # never stored by a store (they refuse such input)
        return False
    return needle in ascii_lower(text)


@dataclass(frozen=True, slots=True)
class FilterCondition:
    """One ``field <op> value`` test. `value` is a frozenset (or a tuple if unhashable) for ``within``."""

    field: str
    op: FilterOperator
    value: Any


@dataclass(frozen=True, slots=True)
class NormalizedFilter:
    """A validated filter: every `must` condition holds AND the `conditions` pool holds under `aggregate`.

    An empty pool holds for "and" and "or" alike (quirk 8 fixed), so an empty filter matches everything.
    Backends translate it: ``exact`` -> ``=``, ``within`` -> ``IN`` (empty: false), ``contains`` ->
    case-sensitive substring (SQLite: ``instr(col, ?) > 0``, never ``LIKE``), ``json_icontains`` (value:
    text already `ascii_lower`-ed) -> the field's compact JSON text (as the stores write it) contains the
    text, ASCII letters in either case (SQLite: ``LIKE`` on the stored JSON column).
    """

    conditions: tuple[FilterCondition, ...] = ()
    must: tuple[FilterCondition, ...] = ()
    aggregate: Literal["and", "or"] = "and"

    @property
    def matches_all(self) -> bool:
        """True if no condition is set, so every item matches."""
        return not self.conditions and not self.must

    def required_exact(self, field: str) -> list[Any]:
        """Values every match must equal on `field` (from ``exact`` tests that always apply).

        Lets a backend narrow by an index (e.g. ``rollout_id``); more than one distinct value means
        no item can match.
        """
        found = [c.value for c in self.must if c.field == field and c.op == "exact"]
        if self.aggregate == "and" or len(self.conditions) == 1:
            found.extend(c.value for c in self.conditions if c.field == field and c.op == "exact")
        return found


MATCH_ALL = NormalizedFilter()
"""The filter with no condition."""


def _within_container(field: str, value: object) -> Any:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise InvalidFilterError(
            f"'within' for field {field!r} needs a list of values, got {value!r}. "
            "Use 'exact' for a single value or 'contains' for a substring."
        )
    items = tuple(value)
    try:
        return frozenset(items)
    except TypeError:
        return items


def _field_conditions(
    field: object, ops: object, allowed_fields: Container[str] | None, out: list[FilterCondition]
) -> None:
    if not isinstance(field, str):
        raise InvalidFilterError(f"Filter field names must be strings, got {field!r}.")
    if allowed_fields is not None and field not in allowed_fields:
        known = ", ".join(sorted(allowed_fields)) if isinstance(allowed_fields, Iterable) else "see the model"
        raise InvalidFilterError(f"Unknown filter field {field!r}. Filterable fields: {known}.")
    if ops is None:
        return
    if not isinstance(ops, Mapping):
        raise InvalidFilterError(
            f"The filter for field {field!r} must be a mapping of operators such as "
            f"{{'exact': value}}, {{'within': [values]}} or {{'contains': text}}; got {ops!r}."
        )
    for op, value in ops.items():
        if op not in _OPERATORS:
            raise InvalidFilterError(
                f"Unknown filter operator {op!r} for field {field!r}. Use 'exact', 'within' or 'contains'."
            )
        if value is None:
            continue  # an operator set to None is ignored
        if op == "within":
            value = _within_container(field, value)
        out.append(FilterCondition(field, op, value))


def normalize_filter(
    filter_options: Mapping[str, Any] | None, *, allowed_fields: Container[str] | None = None
) -> NormalizedFilter:
    """Validate a `FilterOptions` mapping and flatten it into a `NormalizedFilter`.

    Keys are field names mapping to ``{"exact"|"within"|"contains": value}``; operators set to None are
    ignored. ``"_aggregate"`` ("and" default, or "or") combines all field operators in one pool;
    ``"_must"`` (a mapping or a list of mappings) is always ANDed, and the same operator twice on one
    field there is an error. `allowed_fields` restricts field names.

    Raises:
        InvalidFilterError: unknown operator or field, bad shape, bad ``_aggregate``, duplicate in ``_must``.
    """
    if filter_options is None:
        return MATCH_ALL
    if not isinstance(filter_options, Mapping):
        raise InvalidFilterError(
            "A filter must be a mapping of field name to operators, "
            "e.g. {'status': {'within': ['running']}}; "
            f"got {type(filter_options).__name__}."
        )
    aggregate: Literal["and", "or"] = "and"
    conditions: list[FilterCondition] = []
    must: list[FilterCondition] = []
    for key, spec in filter_options.items():
        if key == "_aggregate":
            if spec is not None:
                aggregate = validate_filter_logic(spec)
        elif key == "_must":
            _normalize_must(spec, allowed_fields, must)
        elif isinstance(key, str) and key.startswith("_"):
            raise InvalidFilterError(
                f"Unknown filter key {key!r}. The special keys are '_aggregate' and '_must'."
            )
        else:
            _field_conditions(key, spec, allowed_fields, conditions)
    if not conditions and not must:
        return MATCH_ALL
    return NormalizedFilter(tuple(conditions), tuple(must), aggregate)


def _normalize_must(spec: object, allowed_fields: Container[str] | None, out: list[FilterCondition]) -> None:
    if spec is None:
        return
    if isinstance(spec, Mapping):
        entries: list[object] = [spec]
    elif isinstance(spec, Sequence) and not isinstance(spec, (str, bytes)):
        entries = list(spec)
    else:
        raise InvalidFilterError(
            f"'_must' must be a mapping or a list of mappings of field filters, got {spec!r}."
        )
    start = len(out)
    for entry in entries:
        if not isinstance(entry, Mapping):
            raise InvalidFilterError(
                f"Each '_must' entry must be a mapping of field name to operators, got {entry!r}."
            )
        for field, ops in entry.items():
            _field_conditions(field, ops, allowed_fields, out)
    seen: set[tuple[str, str]] = set()
    for cond in out[start:]:
        key = (cond.field, cond.op)
        if key in seen:
            raise InvalidFilterError(
                f"Duplicate operator {cond.op!r} for field {cond.field!r} in '_must'. "
                "Combine them into one condition."
            )
        seen.add(key)


def _contains(expected: Any, actual: Any) -> bool:
    if actual is None:
        return False
    if isinstance(actual, str):
        return isinstance(expected, str) and expected in actual
    try:
        return expected in actual
    except TypeError:
        return False


def _always(_: object) -> bool:
    return True


def _compile(cond: FilterCondition) -> Callable[[Any], bool]:
    field, expected = cond.field, cond.value
    if cond.op == "exact":
        return lambda item: bool(getattr(item, field, None) == expected)
    if cond.op == "within":

        def within(item: Any) -> bool:
            try:
                return getattr(item, field, None) in expected
            except TypeError:
                return False

        return within
    if cond.op == "json_icontains":
        return lambda item: _json_icontains(expected, getattr(item, field, None))
    return lambda item: _contains(expected, getattr(item, field, None))


def build_predicate(normalized: NormalizedFilter) -> Callable[[Any], bool]:
    """Compile `normalized` into ``predicate(model_instance) -> bool`` (reads fields with getattr).

    ``exact`` is ``==``; ``within`` is membership; ``contains`` is a case-sensitive substring test for
    strings and ``in`` for other containers (None never contains anything). Compile once per query,
    call once per candidate item.
    """
    if not normalized.conditions and not normalized.must:
        return _always
    must = tuple(_compile(c) for c in normalized.must)
    pool = tuple(_compile(c) for c in normalized.conditions)
    if normalized.aggregate == "and" or not pool:
        checks = must + pool
        if len(checks) == 1:
            return checks[0]

        def all_hold(item: Any) -> bool:
            for check in checks:  # noqa: SIM110
                if not check(item):
                    return False
            return True

        return all_hold

    def must_and_any(item: Any) -> bool:
        for check in must:
            if not check(item):
                return False
        for check in pool:  # noqa: SIM110
            if check(item):
                return True
        return False

    return must_and_any


def _require_str(name: str, value: object) -> None:
    if value is not None:
        if value.__class__ is not str:
            raise InvalidFilterError(f"{name} must be a string or None, got {value!r}.")
        check_no_nul(name, value, InvalidFilterError)


def _id_list(name: str, value: object) -> Any:
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise InvalidFilterError(f"{name} must be a list of ids, e.g. ['ro-...'], not {value!r}.")
    ids = _within_container(name, value)
    for item in ids:
        if item.__class__ is str and "\x00" in item:
            check_no_nul(name, item, InvalidFilterError)
    return ids


def rollout_query_filter(
    *,
    status_in: Sequence[str] | None = None,
    rollout_id_in: Sequence[str] | None = None,
    rollout_id_contains: str | None = None,
    filter_logic: str = "and",
    mode_in: Iterable[str] | None = None,
    input_contains: str | None = None,
) -> NormalizedFilter:
    """The filter of `query_rollouts` (after `resolve_rollout_query_aliases`); validates every argument."""
    aggregate = validate_filter_logic(filter_logic)
    _require_str("rollout_id_contains", rollout_id_contains)
    _require_str("input_contains", input_contains)
    conditions: list[FilterCondition] = []
    if status_in is not None:
        conditions.append(
            FilterCondition("status", "within", frozenset(validate_statuses(status_in, "rollout")))
        )
    if rollout_id_in is not None:
        conditions.append(FilterCondition("rollout_id", "within", _id_list("rollout_id_in", rollout_id_in)))
    if rollout_id_contains is not None:
        conditions.append(FilterCondition("rollout_id", "contains", rollout_id_contains))
    if mode_in is not None:
        conditions.append(FilterCondition("mode", "within", frozenset(_modes("mode_in", mode_in))))
    if input_contains is not None:
        conditions.append(FilterCondition("input", "json_icontains", ascii_lower(input_contains)))
    return NormalizedFilter(tuple(conditions), (), aggregate) if conditions else MATCH_ALL


def _modes(name: str, values: object) -> list[str]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise InvalidFilterError(f"{name} must be a list of modes, e.g. ['train'], not {values!r}.")
    modes = list(values)
    for mode in modes:
        if mode.__class__ is not str or mode not in _MODES:
            raise InvalidFilterError(f"{name} lists {mode!r}; use {', '.join(map(repr, _MODES))}.")
    return modes


def span_query_filter(
    rollout_id: str,
    attempt_id: str | None,
    *,
    trace_id: str | None = None,
    trace_id_contains: str | None = None,
    span_id: str | None = None,
    span_id_contains: str | None = None,
    parent_id: str | None = None,
    parent_id_contains: str | None = None,
    name: str | None = None,
    name_contains: str | None = None,
    filter_logic: str = "and",
) -> NormalizedFilter:
    """The filter of `query_spans`, with `attempt_id` already resolved (None: every attempt).

    ``rollout_id`` and ``attempt_id`` go to ``must``; the field filters form the pool.
    """
    aggregate = validate_filter_logic(filter_logic)
    must = [FilterCondition("rollout_id", "exact", rollout_id)]
    if attempt_id is not None:
        must.append(FilterCondition("attempt_id", "exact", attempt_id))
    conditions: list[FilterCondition] = []
    for field, exact, contains in (
        ("trace_id", trace_id, trace_id_contains),
        ("span_id", span_id, span_id_contains),
        ("parent_id", parent_id, parent_id_contains),
        ("name", name, name_contains),
    ):
        if exact is not None:
            _require_str(field, exact)
            conditions.append(FilterCondition(field, "exact", exact))
        if contains is not None:
            _require_str(f"{field}_contains", contains)
            conditions.append(FilterCondition(field, "contains", contains))
    return NormalizedFilter(tuple(conditions), tuple(must), aggregate)


def worker_query_filter(
    *,
    status_in: Sequence[str] | None = None,
    worker_id_contains: str | None = None,
    filter_logic: str = "and",
) -> NormalizedFilter:
    """The filter of `query_workers`; validates every argument."""
    aggregate = validate_filter_logic(filter_logic)
    _require_str("worker_id_contains", worker_id_contains)
    conditions: list[FilterCondition] = []
    if status_in is not None:
        conditions.append(
            FilterCondition("status", "within", frozenset(validate_statuses(status_in, "worker")))
        )
    if worker_id_contains is not None:
        conditions.append(FilterCondition("worker_id", "contains", worker_id_contains))
    return NormalizedFilter(tuple(conditions), (), aggregate) if conditions else MATCH_ALL


def resources_query_filter(
    *, resources_id: str | None = None, resources_id_contains: str | None = None
) -> NormalizedFilter:
    """The filter of `query_resources` (both conditions ANDed)."""
    _require_str("resources_id", resources_id)
    _require_str("resources_id_contains", resources_id_contains)
    conditions: list[FilterCondition] = []
    if resources_id is not None:
        conditions.append(FilterCondition("resources_id", "exact", resources_id))
    if resources_id_contains is not None:
        conditions.append(FilterCondition("resources_id", "contains", resources_id_contains))
    return NormalizedFilter(tuple(conditions)) if conditions else MATCH_ALL


def resolve_rollout_query_aliases(
    status_in: Sequence[str] | None,
    rollout_id_in: Sequence[str] | None,
    status: Sequence[str] | None,
    rollout_ids: Sequence[str] | None,
    *,
    stacklevel: int = 3,
) -> tuple[Sequence[str] | None, Sequence[str] | None]:
    """Fold the deprecated `query_rollouts` aliases into ``(status_in, rollout_id_in)``.

    Each alias given emits a `DeprecationWarning`; the new name wins when both are given. The default
    `stacklevel` points at the caller of ``store.query_rollouts``.
    """
    if status is not None:
        warnings.warn(
            "query_rollouts(status=...) is deprecated; use status_in=...",
            DeprecationWarning,
            stacklevel=stacklevel,
        )
        if status_in is None:
            status_in = status
    if rollout_ids is not None:
        warnings.warn(
            "query_rollouts(rollout_ids=...) is deprecated; use rollout_id_in=...",
            DeprecationWarning,
            stacklevel=stacklevel,
        )
        if rollout_id_in is None:
            rollout_id_in = rollout_ids
    return status_in, rollout_id_in
