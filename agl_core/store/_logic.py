"""Backend-independent store semantics, shared by every bundled `LightningStore`.

Pure functions (no I/O, no locks except `ScanDebouncer`'s) so the in-memory and SQLite stores compute
statuses, timestamps, worker state, filters, sorting and pagination identically. They run on hot
paths: keep them allocation-light.
"""

from __future__ import annotations

import functools
import os
import threading
import types
import warnings
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

from agl_core.store._inputs import check_int_bound, check_json_value, check_optional_str
from agl_core.store.base import UNSET
from agl_core.store.errors import (
    InvalidFilterError,
    InvalidRequestError,
    InvalidSpanError,
    InvalidStatusError,
)
from agl_core.types import PaginatedResult, Span, Worker
from agl_core.types.status import (
    ATTEMPT_STATUSES,
    FINISHED_ROLLOUT_STATUSES,
    QUEUING_ROLLOUT_STATUSES,
    ROLLOUT_STATUSES,
    TERMINAL_ATTEMPT_STATUSES,
    AttemptStatus,
    RolloutMode,
    RolloutStatus,
    WorkerStatus,
    rollout_status_from_attempt,
)

if TYPE_CHECKING:
    from agl_core.types import Attempt, Rollout, RolloutConfig

__all__ = [
    "MATCH_ALL",
    "WATCHDOG_GUARDED_METHODS",
    "FilterCondition",
    "NormalizedFilter",
    "ScanDebouncer",
    "apply_worker_updates",
    "attempt_end_time_for",
    "build_predicate",
    "draw_unique_id",
    "heartbeat_transition",
    "matches",
    "new_attempt_id",
    "new_resources_id",
    "new_rollout_id",
    "next_rollout_status",
    "next_rollout_status_after_attempt_update",
    "normalize_filter",
    "paginate",
    "plan_sequence_ids",
    "resolve_rollout_query_aliases",
    "resources_query_filter",
    "rollout_changes",
    "rollout_end_time_for",
    "rollout_query_filter",
    "scan_unhealthy",
    "should_enqueue",
    "sort_items",
    "sort_key_for",
    "sortable_fields",
    "span_query_filter",
    "unhealthy_attempt_status",
    "validate_attempt_status",
    "validate_filter_logic",
    "validate_mode",
    "validate_pagination",
    "validate_rollout_status",
    "validate_sort_order",
    "validate_span",
    "validate_statuses",
    "validate_worker_status",
    "worker_query_filter",
    "worker_sync_required",
    "worker_updates_for_attempt",
    "worker_updates_for_empty_dequeue",
    "worker_updates_for_heartbeat",
]

T = TypeVar("T")

# ---------------------------------------------------------------------------------------------- ids

_urandom = os.urandom


def new_rollout_id() -> str:
    """A fresh rollout id: ``"ro-"`` + 12 random hex characters (48 bits)."""
    return "ro-" + _urandom(6).hex()


def new_attempt_id() -> str:
    """A fresh attempt id: ``"at-"`` + 8 random hex characters (unique within its rollout)."""
    return "at-" + _urandom(4).hex()


def new_resources_id() -> str:
    """A fresh resources id: ``"rs-"`` + 12 random hex characters (48 bits)."""
    return "rs-" + _urandom(6).hex()


def draw_unique_id(factory: Callable[[], str], taken: Container[str], max_tries: int = 64) -> str:
    """Draw ids from `factory` until one is not in `taken`.

    Ids are random, so a store of millions of rollouts can collide; stores check before inserting.
    """
    for _ in range(max_tries):
        candidate = factory()
        if candidate not in taken:
            return candidate
    raise RuntimeError(f"Could not draw an unused id after {max_tries} tries; the id space looks exhausted.")


# ---------------------------------------------------------------------------------------------- validation

_ROLLOUT_STATUS_SET: frozenset[str] = frozenset(ROLLOUT_STATUSES)
_ATTEMPT_STATUS_SET: frozenset[str] = frozenset(ATTEMPT_STATUSES)
_WORKER_STATUSES: tuple[str, ...] = get_args(WorkerStatus)
_WORKER_STATUS_SET: frozenset[str] = frozenset(_WORKER_STATUSES)
_MODES: tuple[str, ...] = get_args(RolloutMode)
_STATUS_SETS: dict[str, tuple[frozenset[str], tuple[str, ...]]] = {
    "rollout": (_ROLLOUT_STATUS_SET, ROLLOUT_STATUSES),
    "attempt": (_ATTEMPT_STATUS_SET, ATTEMPT_STATUSES),
    "worker": (_WORKER_STATUS_SET, _WORKER_STATUSES),
}


def validate_rollout_status(status: object) -> RolloutStatus:
    """Return `status` if it is a rollout status, else raise `InvalidStatusError`."""
    if status.__class__ is str and status in _ROLLOUT_STATUS_SET:
        return status  # type: ignore[return-value]
    raise InvalidStatusError("rollout", status, ROLLOUT_STATUSES)


def validate_attempt_status(status: object) -> AttemptStatus:
    """Return `status` if it is an attempt status, else raise `InvalidStatusError`."""
    if status.__class__ is str and status in _ATTEMPT_STATUS_SET:
        return status  # type: ignore[return-value]
    raise InvalidStatusError("attempt", status, ATTEMPT_STATUSES)


def validate_worker_status(status: object) -> WorkerStatus:
    """Return `status` if it is a worker status, else raise `InvalidStatusError`."""
    if status.__class__ is str and status in _WORKER_STATUS_SET:
        return status  # type: ignore[return-value]
    raise InvalidStatusError("worker", status, _WORKER_STATUSES)


def validate_statuses(values: object, kind: Literal["rollout", "attempt", "worker"]) -> tuple[str, ...]:
    """Validate a ``status_in`` argument: a list (not a string) of valid statuses of `kind`."""
    allowed_set, allowed = _STATUS_SETS[kind]
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise InvalidStatusError(
            kind,
            values,
            allowed,
            f"status_in must be a list of {kind} statuses, e.g. [{allowed[0]!r}], not {values!r}.",
        )
    result = tuple(values)
    for value in result:
        if value.__class__ is not str or value not in allowed_set:
            raise InvalidStatusError(kind, value, allowed)
    return result


def validate_mode(mode: object) -> RolloutMode | None:
    """Return `mode` if it is None or a rollout mode, else raise `InvalidRequestError`."""
    if mode is None or (mode.__class__ is str and mode in _MODES):
        return mode  # type: ignore[return-value]
    raise InvalidRequestError(
        f"Invalid rollout mode {mode!r}. Use one of: {', '.join(map(repr, _MODES))} or None."
    )


def rollout_changes(
    input: object,
    mode: object,
    resources_id: object,
    status: object,
    config: object,
    metadata: object,
    *,
    encode_input: Callable[[Any], Any],
    encode_config: Callable[[Any], Mapping[str, Any]],
    encode_metadata: Callable[[Any], Any],
) -> dict[str, Any]:
    """The fields an `update_rollout` call sets, checked, each encoded the backend's way.

    Arguments left `UNSET` are left out. Mode, resources id and status are checked here; `input`,
    `config` (whose encoder returns the field or fields it is stored as) and `metadata` by the
    backend's encoders, which raise `InvalidRequestError` for what they cannot store.
    """
    changes: dict[str, Any] = {}
    if input is not UNSET:
        check_json_value("input", input)
        changes["input"] = encode_input(input)
    if mode is not UNSET:
        changes["mode"] = validate_mode(mode)
    if resources_id is not UNSET:
        changes["resources_id"] = check_optional_str("resources_id", resources_id)
    if status is not UNSET:
        changes["status"] = validate_rollout_status(status)
    if config is not UNSET:
        changes.update(encode_config(config))
    if metadata is not UNSET:
        check_json_value("metadata", metadata)
        changes["metadata"] = encode_metadata(metadata)
    return changes


def validate_filter_logic(value: object) -> Literal["and", "or"]:
    """Return `value` if it is ``"and"`` or ``"or"``, else raise `InvalidFilterError`."""
    if value == "and" or value == "or":
        return value  # type: ignore[return-value]
    raise InvalidFilterError(f"Invalid filter_logic {value!r}. Use 'and' or 'or'.")


def validate_sort_order(value: object) -> Literal["asc", "desc"]:
    """Return `value` if it is ``"asc"`` or ``"desc"``, else raise `InvalidFilterError`."""
    if value == "asc" or value == "desc":
        return value  # type: ignore[return-value]
    raise InvalidFilterError(f"Invalid sort_order {value!r}. Use 'asc' or 'desc'.")


def validate_span(span: object) -> Span:
    """Return `span` if a store can key it, else raise `InvalidSpanError`.

    Requires an `agl_core.types.Span` with non-empty string ``rollout_id``, ``attempt_id`` and
    ``span_id`` and an integer ``sequence_id >= 0``.
    """
    if not isinstance(span, Span):
        raise InvalidSpanError(
            f"Expected an agl_core.types.Span, got {type(span).__name__}. Convert OpenTelemetry spans with "
            "add_otel_span() or Span.from_opentelemetry()."
        )
    rollout_id, attempt_id, span_id = span.rollout_id, span.attempt_id, span.span_id
    if not (  # one test for the valid case (this runs for every span added)
        rollout_id.__class__ is str
        and attempt_id.__class__ is str
        and span_id.__class__ is str
        and rollout_id
        and attempt_id
        and span_id
    ):
        for field, value in (("rollout_id", rollout_id), ("attempt_id", attempt_id), ("span_id", span_id)):
            if value.__class__ is not str or not value:
                raise InvalidSpanError(
                    f"Span {field} must be a non-empty string, got {value!r}. Set it before adding the span "
                    "(the tracer does this for spans of a rollout)."
                )
    seq = span.sequence_id
    if seq.__class__ is not int or seq < 0:
        raise InvalidSpanError(
            f"Span sequence_id must be an integer >= 0, got {seq!r}. "
            "Use get_next_span_sequence_id() to get one."
        )
    check_int_bound("Span sequence_id", seq, InvalidSpanError)
    if span.attributes:
        check_json_value(f"Span {span.span_id} attributes", span.attributes)
    return span


# ---------------------------------------------------------------------------------------------- statuses


def should_enqueue(rollout_status: str) -> bool:
    """True if writing `rollout_status` must put the rollout in the queue (``queuing``/``requeuing``)."""
    return rollout_status in QUEUING_ROLLOUT_STATUSES


def rollout_end_time_for(status: str, now: float) -> float | None:
    """``Rollout.end_time`` after writing `status`: `now` for finished statuses, else None."""
    return now if status in FINISHED_ROLLOUT_STATUSES else None


def attempt_end_time_for(status: str, now: float) -> float | None:
    """``Attempt.end_time`` after writing `status`: `now` for every terminal status (quirk 7 in
    docs/migrating-from-agent-lightning.md fixed).

    Terminal: failed, succeeded, timeout, unresponsive. ``preparing``/``running`` give None.
    """
    return now if status in TERMINAL_ATTEMPT_STATUSES else None


def next_rollout_status_after_attempt_update(
    rollout: Rollout, attempt: Attempt, new_attempt_status: str, *, is_latest: bool
) -> RolloutStatus | None:
    """The rollout status implied by setting `attempt` to `new_attempt_status`, or None if unchanged.

    Only the latest attempt propagates, and a finished rollout (failed/succeeded/cancelled) never
    changes this way (quirk 7 fixed: only `update_rollout` changes it). Otherwise the status is
    `rollout_status_from_attempt(new_attempt_status, attempt.sequence_id, rollout.config)`.

    Raises:
        InvalidStatusError: `new_attempt_status` is not an attempt status.
    """
    return next_rollout_status(
        rollout.status, rollout.config, attempt.sequence_id, new_attempt_status, is_latest=is_latest
    )


def next_rollout_status(
    rollout_status: str,
    config: RolloutConfig,
    attempt_sequence_id: int,
    new_attempt_status: str,
    *,
    is_latest: bool,
) -> RolloutStatus | None:
    """`next_rollout_status_after_attempt_update` from plain values (for stores that keep rows).

    Raises:
        InvalidStatusError: `new_attempt_status` is not an attempt status.
    """
    if new_attempt_status.__class__ is not str or new_attempt_status not in _ATTEMPT_STATUS_SET:
        raise InvalidStatusError("attempt", new_attempt_status, ATTEMPT_STATUSES)
    if not is_latest or rollout_status in FINISHED_ROLLOUT_STATUSES:
        return None
    status = rollout_status_from_attempt(new_attempt_status, attempt_sequence_id, config)  # type: ignore[arg-type]
    return None if status == rollout_status else status


_ACTIVE_ATTEMPT: frozenset[str] = frozenset(("preparing", "running"))
_HEARTBEAT_REVIVES: frozenset[str] = frozenset(("preparing", "unresponsive"))
_SPAN_MOVES_ROLLOUT: frozenset[str] = frozenset(("queuing", "requeuing", "preparing"))


def heartbeat_transition(
    rollout_status: str, attempt_status: str, *, is_latest: bool
) -> tuple[AttemptStatus, RolloutStatus | None]:
    """Statuses after a span (heartbeat) arrives for an attempt: ``(attempt_status, rollout_status or None)``.

    The attempt goes ``preparing``/``unresponsive`` -> ``running``; ``running``, ``failed``,
    ``succeeded`` and ``timeout`` stay. If the attempt is the latest and is now ``running``, a
    ``queuing``, ``requeuing`` or ``preparing`` rollout becomes ``running`` (quirk 6 "queueing"
    fixed); finished rollouts never move.
    The caller always refreshes ``last_heartbeat_time``.
    """
    new_attempt = "running" if attempt_status in _HEARTBEAT_REVIVES else attempt_status
    if is_latest and new_attempt == "running" and rollout_status in _SPAN_MOVES_ROLLOUT:
        return new_attempt, "running"  # type: ignore[return-value]
    return new_attempt, None  # type: ignore[return-value]


# ---------------------------------------------------------------------------------------------- watchdog

WATCHDOG_GUARDED_METHODS: frozenset[str] = frozenset(
    (
        "start_rollout",
        "enqueue_rollout",
        "enqueue_many_rollouts",
        "dequeue_rollout",
        "dequeue_many_rollouts",
        "start_attempt",
        "query_rollouts",
        "get_rollout_by_id",
        "query_attempts",
        "get_latest_attempt",
        "update_resources",
        "wait_for_rollouts",
        "query_spans",
        "update_rollout",
        "update_attempt",
        "query_workers",
    )
)
"""Store methods that run a (debounced) watchdog scan first (as in Agent Lightning 0.3). Span writes,
resources
reads, `add_resources`, sequence ids, `update_worker`, `get_worker_by_id` and `statistics` do not."""


def unhealthy_attempt_status(
    attempt: Attempt, config: RolloutConfig, now: float
) -> Literal["timeout", "unresponsive"] | None:
    """``"timeout"``/``"unresponsive"`` if the watchdog must flag this active attempt, else None.

    Only ``preparing``/``running`` attempts are ever flagged.

    Timeout is measured from the attempt start (``now - start_time > timeout_seconds``); otherwise
    unresponsive from the last heartbeat, or from the start when there was none.
    """
    if attempt.status not in _ACTIVE_ATTEMPT:
        return None
    start = attempt.start_time
    timeout = config.timeout_seconds
    if timeout is not None and now - start > timeout:
        return "timeout"
    unresponsive = config.unresponsive_seconds
    if unresponsive is not None:
        last = attempt.last_heartbeat_time
        if now - (start if last is None else last) > unresponsive:
            return "unresponsive"
    return None


def scan_unhealthy(
    attempts_with_configs: Iterable[tuple[Attempt, RolloutConfig]], now: float
) -> dict[tuple[str, str], AttemptStatus]:
    """Watchdog scan over the latest attempts of ``preparing``/``running`` rollouts.

    Returns ``{(rollout_id, attempt_id): "timeout" | "unresponsive"}`` for the attempts to flag; apply
    each through the normal attempt-update path (propagation, requeue, worker sync).
    """
    flagged: dict[tuple[str, str], AttemptStatus] = {}
    for attempt, config in attempts_with_configs:
        status = unhealthy_attempt_status(attempt, config, now)
        if status is not None:
            flagged[(attempt.rollout_id, attempt.attempt_id)] = status
    return flagged


class ScanDebouncer:
    """Allows at most one watchdog scan per `interval` seconds of `clock` (thread-safe).

    The first call is allowed at once; ``interval == 0`` allows every call.
    """

    __slots__ = ("_clock", "_interval", "_last", "_lock")

    def __init__(self, interval: float, clock: Callable[[], float]) -> None:
        self._interval = interval
        self._clock = clock
        self._last = float("-inf")
        self._lock = threading.Lock()

    def should_scan(self) -> bool:
        """True if a scan is due now; the caller that gets True must scan."""
        if self._interval <= 0:
            return True
        now = self._clock()
        if now - self._last < self._interval:
            return False
        with self._lock:
            if now - self._last < self._interval:
                return False
            self._last = now
            return True


# ---------------------------------------------------------------------------------------------- workers

_IDLE_ATTEMPT: frozenset[str] = frozenset(("succeeded", "failed"))
_LOST_ATTEMPT: frozenset[str] = frozenset(("timeout", "unresponsive"))


def worker_sync_required(worker_id: object, status: object, attempt_worker_id: str | None) -> bool:
    """Whether an `update_attempt(worker_id=..., status=...)` call must update a worker.

    True when a non-empty `worker_id` is given, or a status is given and the attempt has a worker.
    Pass `UNSET` for arguments that were not given.
    """
    if worker_id is not UNSET and worker_id:
        return True
    return status is not UNSET and bool(attempt_worker_id)


def worker_updates_for_attempt(
    attempt_status: str, rollout_id: str, attempt_id: str, now: float, *, dequeue: bool = False
) -> dict[str, Any]:
    """Worker fields to write after an attempt write carrying that worker.

    ``succeeded``/``failed`` -> ``idle``; ``timeout``/``unresponsive`` -> ``unknown`` (both stamp
    ``last_idle_time`` and clear the current ids); anything else -> ``busy`` with the current ids and
    ``last_busy_time``. `dequeue` also stamps ``last_dequeue_time``.
    """
    if attempt_status in _IDLE_ATTEMPT or attempt_status in _LOST_ATTEMPT:
        updates: dict[str, Any] = {
            "status": "idle" if attempt_status in _IDLE_ATTEMPT else "unknown",
            "last_idle_time": now,
            "current_rollout_id": None,
            "current_attempt_id": None,
        }
    else:
        updates = {
            "status": "busy",
            "last_busy_time": now,
            "current_rollout_id": rollout_id,
            "current_attempt_id": attempt_id,
        }
    if dequeue:
        updates["last_dequeue_time"] = now
    return updates


def worker_updates_for_empty_dequeue(current_status: str | None, now: float) -> dict[str, Any]:
    """Worker fields to write when its dequeue found nothing (`current_status` None: new worker).

    The worker becomes ``idle`` (stamping ``last_idle_time``) unless it already is; ``last_dequeue_time``
    is always stamped.
    """
    if current_status == "idle":
        return {"last_dequeue_time": now}
    return {"status": "idle", "last_idle_time": now, "last_dequeue_time": now}


def worker_updates_for_heartbeat(now: float, heartbeat_stats: object) -> dict[str, Any]:
    """Worker fields for `update_worker`: ``last_heartbeat_time`` and, unless `UNSET`, a copy of the stats."""
    updates: dict[str, Any] = {"last_heartbeat_time": now}
    if heartbeat_stats is UNSET:
        return updates
    if not isinstance(heartbeat_stats, Mapping):
        raise InvalidRequestError(
            f"heartbeat_stats must be a dict, got {type(heartbeat_stats).__name__}; "
            "omit it to keep the old stats."
        )
    check_json_value("heartbeat_stats", heartbeat_stats)
    updates["heartbeat_stats"] = dict(heartbeat_stats)
    return updates


def apply_worker_updates(worker: Worker | None, worker_id: str, updates: Mapping[str, Any]) -> Worker:
    """Upsert: a new `Worker` (status ``unknown`` unless updated) or a copy of `worker` with `updates`."""
    if worker is None:
        return Worker(worker_id=worker_id, **updates)
    return worker.model_copy(update=updates)


# ---------------------------------------------------------------------------------------------- filters

FilterOperator = Literal["exact", "within", "contains"]
_OPERATORS: tuple[str, ...] = ("exact", "within", "contains")


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
    case-sensitive substring (SQLite: ``instr(col, ?) > 0``, never ``LIKE``).
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


def _test(op: str, expected: Any, actual: Any) -> bool:
    if op == "exact":
        return bool(actual == expected)
    if op == "within":
        try:
            return actual in expected
        except TypeError:  # unhashable value against a frozenset
            return False
    if actual is None:
        return False
    if isinstance(actual, str):
        return isinstance(expected, str) and expected in actual
    try:
        return expected in actual
    except TypeError:
        return False


def matches(item_getter: Callable[[str], Any], normalized: NormalizedFilter) -> bool:
    """True if the item whose field values `item_getter(field)` returns satisfies `normalized`.

    ``exact`` is ``==``; ``within`` is membership; ``contains`` is a case-sensitive substring test for
    strings and ``in`` for other containers (None never contains anything).
    """
    for c in normalized.must:
        if not _test(c.op, c.value, item_getter(c.field)):
            return False
    conditions = normalized.conditions
    if not conditions:
        return True
    if normalized.aggregate == "and":
        for c in conditions:  # noqa: SIM110 -- explicit loops beat all()/any() on this hot path
            if not _test(c.op, c.value, item_getter(c.field)):
                return False
        return True
    for c in conditions:  # noqa: SIM110
        if _test(c.op, c.value, item_getter(c.field)):
            return True
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
    return lambda item: _test("contains", expected, getattr(item, field, None))


def build_predicate(normalized: NormalizedFilter) -> Callable[[Any], bool]:
    """Compile `normalized` into ``predicate(model_instance) -> bool`` (reads fields with getattr).

    Same semantics as `matches`; compile once per query, call once per candidate item.
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
    if value is not None and value.__class__ is not str:
        raise InvalidFilterError(f"{name} must be a string or None, got {value!r}.")


def _id_list(name: str, value: object) -> Any:
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise InvalidFilterError(f"{name} must be a list of ids, e.g. ['ro-...'], not {value!r}.")
    return _within_container(name, value)


def rollout_query_filter(
    *,
    status_in: Sequence[str] | None = None,
    rollout_id_in: Sequence[str] | None = None,
    rollout_id_contains: str | None = None,
    filter_logic: str = "and",
) -> NormalizedFilter:
    """The filter of `query_rollouts` (after `resolve_rollout_query_aliases`); validates every argument."""
    aggregate = validate_filter_logic(filter_logic)
    _require_str("rollout_id_contains", rollout_id_contains)
    conditions: list[FilterCondition] = []
    if status_in is not None:
        conditions.append(
            FilterCondition("status", "within", frozenset(validate_statuses(status_in, "rollout")))
        )
    if rollout_id_in is not None:
        conditions.append(FilterCondition("rollout_id", "within", _id_list("rollout_id_in", rollout_id_in)))
    if rollout_id_contains is not None:
        conditions.append(FilterCondition("rollout_id", "contains", rollout_id_contains))
    return NormalizedFilter(tuple(conditions), (), aggregate) if conditions else MATCH_ALL


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
    """Raise `InvalidRequestError` unless ``limit`` is > 0 or -1 (no limit) and ``offset`` >= 0."""
    if limit.__class__ is not int:
        raise InvalidRequestError(f"limit must be an integer (> 0, or -1 for no limit), got {limit!r}.")
    if limit == 0 or limit < -1:  # type: ignore[operator]
        raise InvalidRequestError(f"limit must be > 0 or -1 for no limit, got {limit}.")
    if offset.__class__ is not int or offset < 0:  # type: ignore[operator]
        raise InvalidRequestError(f"offset must be an integer >= 0, got {offset!r}.")
    check_int_bound("limit", limit)  # type: ignore[arg-type]
    check_int_bound("offset", offset)  # type: ignore[arg-type]


def paginate(items: Sequence[T], limit: int, offset: int) -> PaginatedResult[T]:
    """The page ``items[offset:offset+limit]`` (``limit=-1``: to the end) with ``total=len(items)``."""
    validate_pagination(limit, offset)
    page = items[offset:] if limit == -1 else items[offset : offset + limit]
    if not isinstance(page, list):
        page = list(page)
    return PaginatedResult(items=page, limit=limit, offset=offset, total=len(items))


# ---------------------------------------------------------------------------------------------- sequence ids


def plan_sequence_ids(
    rollout_ids: Sequence[str], current: Callable[[str], int]
) -> tuple[list[int], dict[str, int]]:
    """Issue one sequence id per entry of `rollout_ids` (per-rollout counters, no gaps).

    `current(rollout_id)` returns the last id issued for that rollout (0 if none). Returns the ids in
    input order and the new counter value of each rollout involved, to persist atomically.
    """
    counters: dict[str, int] = {}
    issued: list[int] = []
    for rollout_id in rollout_ids:
        value = counters.get(rollout_id)
        if value is None:
            value = current(rollout_id)
        value += 1
        counters[rollout_id] = value
        issued.append(value)
    return issued, counters
