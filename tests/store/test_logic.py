"""Unit tests of the store's shared pure logic (`agl_core.store.logic`), errors and base defaults."""

from __future__ import annotations

import copy
import pickle
import re
import threading
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from agl_core.store import (
    UNSET,
    AttemptNotFoundError,
    InvalidFilterError,
    InvalidRequestError,
    InvalidSpanError,
    InvalidStatusError,
    LightningStore,
    NotFoundError,
    ResourcesNotFoundError,
    RolloutNotFoundError,
    StoreClosedError,
    StoreError,
    Unset,
)
from agl_core.store import logic as L
from agl_core.store.base import BACKEND_METHODS
from agl_core.store.uri import open_store, parse_store_uri
from agl_core.types import Attempt, PaginatedResult, Rollout, RolloutConfig, Span, Worker

# ---------------------------------------------------------------------------------------------- helpers


def rollout(status: str = "running", **config: Any) -> Rollout:
    return Rollout(
        rollout_id="ro-1", input=None, start_time=0.0, status=status, config=RolloutConfig(**config)
    )


def attempt(
    status: str = "running",
    *,
    seq: int = 1,
    start: float = 100.0,
    heartbeat: float | None = None,
    rollout_id: str = "ro-1",
    attempt_id: str = "at-1",
) -> Attempt:
    return Attempt(
        rollout_id=rollout_id,
        attempt_id=attempt_id,
        sequence_id=seq,
        start_time=start,
        status=status,
        last_heartbeat_time=heartbeat,
    )


def span(rollout_id: str = "ro-1", attempt_id: str = "at-1", span_id: str = "s1", **kw: Any) -> Span:
    s = Span.from_attributes(
        attributes={}, rollout_id=rollout_id, attempt_id=attempt_id, span_id=span_id, **kw
    )
    return s


# ---------------------------------------------------------------------------------------------- ids


def test_id_formats_and_uniqueness() -> None:
    assert re.fullmatch(r"ro-[0-9a-f]{12}", L.new_rollout_id())
    assert re.fullmatch(r"at-[0-9a-f]{8}", L.new_attempt_id())
    assert re.fullmatch(r"rs-[0-9a-f]{12}", L.new_resources_id())
    assert len({L.new_rollout_id() for _ in range(10_000)}) == 10_000


def test_draw_unique_id_skips_taken_and_gives_up() -> None:
    values = iter(["a", "b", "c"])
    assert L.draw_unique_id(lambda: next(values), {"a", "b"}) == "c"
    with pytest.raises(RuntimeError, match="after 3 tries"):
        L.draw_unique_id(lambda: "x", {"x"}, max_tries=3)


# ---------------------------------------------------------------------------------------------- validation


@pytest.mark.parametrize("value", ["queuing", "requeuing", "cancelled"])
def test_validate_rollout_status_accepts(value: str) -> None:
    assert L.validate_rollout_status(value) == value


@pytest.mark.parametrize("value", ["queueing", "RUNNING", "", None, 3])
def test_validate_rollout_status_rejects(value: object) -> None:
    with pytest.raises(InvalidStatusError) as info:
        L.validate_rollout_status(value)
    assert isinstance(info.value, ValueError)
    assert repr(value) in str(info.value) and "'requeuing'" in str(info.value)


def test_validate_attempt_and_worker_status() -> None:
    assert L.validate_attempt_status("timeout") == "timeout"
    with pytest.raises(InvalidStatusError, match="Invalid attempt status 'cancelled'"):
        L.validate_attempt_status("cancelled")
    assert L.validate_worker_status("idle") == "idle"
    with pytest.raises(InvalidStatusError, match="Invalid worker status 'running'"):
        L.validate_worker_status("running")


def test_validate_statuses_requires_a_list() -> None:
    assert L.validate_statuses(["running", "failed"], "rollout") == ("running", "failed")
    with pytest.raises(InvalidStatusError, match="must be a list"):
        L.validate_statuses("running", "rollout")
    with pytest.raises(InvalidStatusError, match="'bogus'"):
        L.validate_statuses(["running", "bogus"], "rollout")


def test_validate_mode_order_logic() -> None:
    assert L.validate_mode(None) is None and L.validate_mode("val") == "val"
    with pytest.raises(InvalidRequestError, match="'eval'"):
        L.validate_mode("eval")
    with pytest.raises(InvalidFilterError, match="'AND'"):
        L.validate_filter_logic("AND")
    with pytest.raises(InvalidFilterError, match="'up'"):
        L.validate_sort_order("up")


# ---------------------------------------------------------------------------------------------- propagation

RETRY_ALL = {"retry_condition": ["failed", "timeout", "unresponsive"], "max_attempts": 3}


@pytest.mark.parametrize(
    ("rollout_status", "config", "seq", "new_status", "expected"),
    [
        ("running", {}, 1, "succeeded", "succeeded"),
        ("running", {}, 1, "failed", "failed"),
        ("running", {}, 1, "timeout", "failed"),
        ("running", {}, 1, "unresponsive", "failed"),
        ("running", RETRY_ALL, 1, "failed", "requeuing"),
        ("running", RETRY_ALL, 2, "timeout", "requeuing"),
        ("running", RETRY_ALL, 3, "unresponsive", "failed"),  # max_attempts reached
        ("running", {"retry_condition": ["timeout"], "max_attempts": 3}, 1, "failed", "failed"),
        ("preparing", {}, 1, "running", "running"),
        ("preparing", {}, 1, "preparing", None),  # unchanged
        ("running", {}, 1, "running", None),
        ("queuing", {}, 1, "running", "running"),
        ("requeuing", {}, 1, "succeeded", "succeeded"),
        # fix (b): finished rollouts are never changed by attempt updates
        ("cancelled", {}, 1, "succeeded", None),
        ("succeeded", {}, 1, "failed", None),
        ("failed", RETRY_ALL, 1, "running", None),
    ],
)
def test_next_rollout_status_table(
    rollout_status: str, config: dict[str, Any], seq: int, new_status: str, expected: str | None
) -> None:
    result = L.next_rollout_status_after_attempt_update(
        rollout(rollout_status, **config), attempt(seq=seq), new_status, is_latest=True
    )
    assert result == expected
    # The plain-values form (for stores that keep rows) decides the same.
    plain = L.next_rollout_status(
        rollout_status, rollout(rollout_status, **config).config, seq, new_status, is_latest=True
    )
    assert plain == expected


def test_only_latest_attempt_propagates() -> None:
    assert L.next_rollout_status_after_attempt_update(rollout(), attempt(), "failed", is_latest=False) is None


def test_next_rollout_status_rejects_bad_status() -> None:
    with pytest.raises(InvalidStatusError, match="'done'"):
        L.next_rollout_status_after_attempt_update(rollout(), attempt(), "done", is_latest=True)


@pytest.mark.parametrize("status", ["failed", "succeeded", "timeout", "unresponsive"])
def test_attempt_end_time_set_for_every_terminal_status(status: str) -> None:
    assert L.attempt_end_time_for(status, 42.0) == 42.0


@pytest.mark.parametrize("status", ["preparing", "running"])
def test_attempt_end_time_cleared_for_active_status(status: str) -> None:
    assert L.attempt_end_time_for(status, 42.0) is None


def test_rollout_end_time_and_enqueue() -> None:
    assert [L.rollout_end_time_for(s, 7.0) for s in ("failed", "succeeded", "cancelled")] == [7.0] * 3
    assert [L.rollout_end_time_for(s, 7.0) for s in ("queuing", "preparing", "running", "requeuing")] == [
        None
    ] * 4
    assert [s for s in ("queuing", "preparing", "running", "requeuing", "failed") if L.should_enqueue(s)] == [
        "queuing",
        "requeuing",
    ]


@pytest.mark.parametrize(
    ("rollout_status", "attempt_status", "is_latest", "expected"),
    [
        ("preparing", "preparing", True, ("running", "running")),
        (
            "queuing",
            "preparing",
            True,
            ("running", "running"),
        ),  # quirk 6 in docs/migrating-from-agent-lightning.md fixed
        ("requeuing", "unresponsive", True, ("running", "running")),
        ("running", "running", True, ("running", None)),
        ("preparing", "preparing", False, ("running", None)),  # not latest: rollout untouched
        ("requeuing", "failed", True, ("failed", None)),  # late span of a failed attempt
        ("running", "timeout", True, ("timeout", None)),
        ("running", "succeeded", True, ("succeeded", None)),
        ("cancelled", "running", True, ("running", None)),  # fix (b)
        ("failed", "unresponsive", True, ("running", None)),
    ],
)
def test_heartbeat_transition(
    rollout_status: str, attempt_status: str, is_latest: bool, expected: tuple[str, str | None]
) -> None:
    assert L.heartbeat_transition(rollout_status, attempt_status, is_latest=is_latest) == expected


# ---------------------------------------------------------------------------------------------- watchdog


def test_timeout_is_measured_from_attempt_start() -> None:
    config = RolloutConfig(timeout_seconds=10)
    assert L.unhealthy_attempt_status(attempt(start=100.0), config, 110.0) is None  # strictly greater
    assert L.unhealthy_attempt_status(attempt(start=100.0), config, 110.5) == "timeout"
    assert L.unhealthy_attempt_status(attempt(start=100.0, heartbeat=110.4), config, 110.5) == "timeout"


def test_unresponsive_from_last_heartbeat_or_start() -> None:
    config = RolloutConfig(unresponsive_seconds=5)
    assert L.unhealthy_attempt_status(attempt(start=100.0), config, 105.5) == "unresponsive"
    assert L.unhealthy_attempt_status(attempt(start=100.0, heartbeat=104.0), config, 108.0) is None
    assert L.unhealthy_attempt_status(attempt(start=100.0, heartbeat=104.0), config, 109.5) == "unresponsive"


def test_timeout_wins_over_unresponsive_and_no_config_never_flags() -> None:
    both = RolloutConfig(timeout_seconds=10, unresponsive_seconds=1)
    assert L.unhealthy_attempt_status(attempt(start=0.0), both, 50.0) == "timeout"
    assert L.unhealthy_attempt_status(attempt(start=0.0), RolloutConfig(), 1e9) is None


@pytest.mark.parametrize("status", ["failed", "succeeded", "timeout", "unresponsive"])
def test_watchdog_ignores_inactive_attempts(status: str) -> None:
    config = RolloutConfig(timeout_seconds=1, unresponsive_seconds=1)
    assert L.unhealthy_attempt_status(attempt(status, start=0.0), config, 100.0) is None


def test_scan_unhealthy_keys_by_rollout_and_attempt() -> None:
    pairs = [
        (
            attempt("preparing", start=0.0, rollout_id="ro-a", attempt_id="at-a"),
            RolloutConfig(timeout_seconds=5),
        ),
        (
            attempt("running", start=0.0, rollout_id="ro-b", attempt_id="at-b"),
            RolloutConfig(unresponsive_seconds=5),
        ),
        (
            attempt("running", start=9.0, rollout_id="ro-c", attempt_id="at-c"),
            RolloutConfig(timeout_seconds=5),
        ),
    ]
    assert L.scan_unhealthy(pairs, 10.0) == {("ro-a", "at-a"): "timeout", ("ro-b", "at-b"): "unresponsive"}
    assert L.scan_unhealthy([], 10.0) == {}


def test_scan_debouncer_with_fake_clock() -> None:
    now = [1000.0]
    debouncer = L.ScanDebouncer(10.0, lambda: now[0])
    assert debouncer.should_scan()  # first scan allowed at once
    assert not debouncer.should_scan()
    now[0] += 9.9
    assert not debouncer.should_scan()
    now[0] += 0.1
    assert debouncer.should_scan()
    always = L.ScanDebouncer(0, lambda: now[0])
    assert all(always.should_scan() for _ in range(3))


def test_scan_debouncer_admits_one_racing_thread() -> None:
    debouncer = L.ScanDebouncer(5.0, lambda: 1.0)
    barrier = threading.Barrier(8)
    results: list[bool] = []

    def race() -> None:
        barrier.wait()
        results.append(debouncer.should_scan())

    threads = [threading.Thread(target=race) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count(True) == 1


def test_watchdog_guarded_methods_are_contract_methods() -> None:
    assert set(dir(LightningStore)) >= L.WATCHDOG_GUARDED_METHODS
    assert "add_span" not in L.WATCHDOG_GUARDED_METHODS and "update_worker" not in L.WATCHDOG_GUARDED_METHODS


# ---------------------------------------------------------------------------------------------- workers


@pytest.mark.parametrize(
    ("attempt_status", "worker_status", "time_field"),
    [
        ("succeeded", "idle", "last_idle_time"),
        ("failed", "idle", "last_idle_time"),
        ("timeout", "unknown", "last_idle_time"),
        ("unresponsive", "unknown", "last_idle_time"),
        ("preparing", "busy", "last_busy_time"),
        ("running", "busy", "last_busy_time"),
    ],
)
def test_worker_updates_for_attempt(attempt_status: str, worker_status: str, time_field: str) -> None:
    updates = L.worker_updates_for_attempt(attempt_status, "ro-1", "at-1", 5.0)
    assert updates["status"] == worker_status and updates[time_field] == 5.0
    busy = worker_status == "busy"
    assert updates["current_rollout_id"] == ("ro-1" if busy else None)
    assert updates["current_attempt_id"] == ("at-1" if busy else None)
    assert "last_dequeue_time" not in updates
    assert (
        L.worker_updates_for_attempt(attempt_status, "ro-1", "at-1", 5.0, dequeue=True)["last_dequeue_time"]
        == 5.0
    )


def test_worker_updates_for_empty_dequeue_and_heartbeat() -> None:
    assert L.worker_updates_for_empty_dequeue(None, 3.0) == {
        "status": "idle",
        "last_idle_time": 3.0,
        "last_dequeue_time": 3.0,
    }
    assert L.worker_updates_for_empty_dequeue("busy", 3.0)["status"] == "idle"
    assert L.worker_updates_for_empty_dequeue("idle", 3.0) == {"last_dequeue_time": 3.0}
    assert L.worker_updates_for_heartbeat(4.0, UNSET) == {"last_heartbeat_time": 4.0}
    stats = {"cpu": 1}
    updates = L.worker_updates_for_heartbeat(4.0, stats)
    assert updates["heartbeat_stats"] == stats and updates["heartbeat_stats"] is not stats
    with pytest.raises(TypeError, match="heartbeat_stats must be a dict"):
        L.worker_updates_for_heartbeat(4.0, ["cpu"])


def test_apply_worker_updates_upserts() -> None:
    fresh = L.apply_worker_updates(None, "w1", {"last_heartbeat_time": 1.0})
    assert fresh == Worker(worker_id="w1", status="unknown", last_heartbeat_time=1.0)
    busy = L.apply_worker_updates(fresh, "w1", L.worker_updates_for_attempt("running", "ro", "at", 2.0))
    assert (busy.status, busy.last_heartbeat_time, busy.current_rollout_id) == ("busy", 1.0, "ro")
    assert fresh.status == "unknown"  # the input is not mutated


def test_worker_sync_required() -> None:
    assert L.worker_sync_required("w1", UNSET, None)
    assert not L.worker_sync_required(UNSET, UNSET, "w1")
    assert L.worker_sync_required(UNSET, "failed", "w1")
    assert not L.worker_sync_required(UNSET, "failed", None)
    assert not L.worker_sync_required("", UNSET, None)


# ---------------------------------------------------------------------------------------------- filters

ITEMS = [
    Rollout(rollout_id="ro-Alpha", input=None, start_time=1.0, status="running", mode="train"),
    Rollout(rollout_id="ro-beta", input=None, start_time=2.0, status="failed", mode="val"),
    Rollout(rollout_id="ro-gamma", input=None, start_time=3.0, status="queuing"),
]


def ids(flt: L.NormalizedFilter) -> list[str]:
    """The ids of the items the filter's predicate accepts."""
    return [r.rollout_id for r in ITEMS if L.build_predicate(flt)(r)]


def matches(fields: dict[str, Any], flt: L.NormalizedFilter) -> bool:
    return L.build_predicate(flt)(SimpleNamespace(**fields))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"status": {"equals": "running"}}, "Unknown filter operator 'equals' for field 'status'"),
        ({"status": "running"}, "must be a mapping of operators"),
        ({"status": {"within": "running"}}, "needs a list of values"),
        ({"_aggregate": "xor"}, "Invalid filter_logic 'xor'"),
        ({"_sort": "x"}, "Unknown filter key '_sort'"),
        ({"_must": "rollout_id"}, "'_must' must be a mapping or a list"),
        ({"_must": ["x"]}, "Each '_must' entry must be a mapping"),
        ({"_must": [{"a": {"exact": 1}}, {"a": {"exact": 2}}]}, "Duplicate operator 'exact' for field 'a'"),
        (["status"], "must be a mapping of field name"),
        ({3: {"exact": 1}}, "field names must be strings"),
    ],
)
def test_normalize_filter_errors(options: Any, message: str) -> None:
    with pytest.raises(InvalidFilterError, match=re.escape(message)) as info:
        L.normalize_filter(options)
    assert isinstance(info.value, ValueError)


def test_normalize_filter_allowed_fields() -> None:
    with pytest.raises(
        InvalidFilterError, match=r"Unknown filter field 'staus'\. Filterable fields: mode, status"
    ):
        L.normalize_filter({"staus": {"exact": "x"}}, allowed_fields={"status", "mode"})


def test_none_operators_are_ignored_and_empty_filters_match_all() -> None:
    assert L.normalize_filter(None) is L.MATCH_ALL
    assert L.normalize_filter({}).matches_all
    flt = L.normalize_filter({"status": {"exact": None, "within": ["failed"]}, "mode": None})
    assert flt.conditions == (L.FilterCondition("status", "within", frozenset({"failed"})),)
    assert ids(flt) == ["ro-beta"]


def test_or_with_no_condition_matches_everything() -> None:  # quirk 8 fixed
    assert ids(L.normalize_filter({"_aggregate": "or"})) == [r.rollout_id for r in ITEMS]
    assert ids(L.normalize_filter({"_aggregate": "or", "status": {"exact": None}})) == [
        r.rollout_id for r in ITEMS
    ]
    assert ids(L.rollout_query_filter(filter_logic="or")) == [r.rollout_id for r in ITEMS]


def test_and_or_pool_and_must() -> None:
    pool = {"status": {"exact": "running"}, "mode": {"exact": "val"}}
    assert ids(L.normalize_filter(pool)) == []
    assert ids(L.normalize_filter({**pool, "_aggregate": "or"})) == ["ro-Alpha", "ro-beta"]
    must_or = {**pool, "_aggregate": "or", "_must": {"start_time": {"within": [2.0, 3.0]}}}
    assert ids(L.normalize_filter(must_or)) == ["ro-beta"]
    # several operators on one field join the pool individually
    both = {"rollout_id": {"within": ["ro-beta", "ro-gamma"], "contains": "gam"}}
    assert ids(L.normalize_filter(both)) == ["ro-gamma"]
    assert ids(L.normalize_filter({**both, "_aggregate": "or"})) == ["ro-beta", "ro-gamma"]


def test_contains_is_case_sensitive() -> None:
    assert ids(L.normalize_filter({"rollout_id": {"contains": "Alpha"}})) == ["ro-Alpha"]
    assert ids(L.normalize_filter({"rollout_id": {"contains": "alpha"}})) == []
    assert ids(L.rollout_query_filter(rollout_id_contains="ALPHA")) == []


def test_contains_on_containers_none_and_mismatched_types() -> None:
    flt = L.normalize_filter({"tags": {"contains": "a"}})
    assert matches({"tags": ["a", "b"]}, flt)
    assert not matches({"tags": None}, flt)
    assert not matches({"tags": 5}, flt)
    assert not matches({"tags": "xyz"}, L.normalize_filter({"tags": {"contains": 1}}))


def test_within_handles_empty_and_unhashable_values() -> None:
    assert ids(L.normalize_filter({"status": {"within": []}})) == []
    unhashable = L.normalize_filter({"meta": {"within": [{"a": 1}, [2]]}})
    assert matches({"meta": {"a": 1}}, unhashable) and not matches({"meta": {"a": 2}}, unhashable)
    hashable = L.normalize_filter({"meta": {"within": ["x"]}})
    assert not matches({"meta": {"a": 1}}, hashable)


def test_required_exact() -> None:
    flt = L.span_query_filter("ro-1", "at-2", name="x", filter_logic="or", span_id="s")
    assert flt.required_exact("rollout_id") == ["ro-1"] and flt.required_exact("attempt_id") == ["at-2"]
    assert flt.required_exact("name") == []  # "or" pool with two conditions: not required
    assert L.span_query_filter("ro-1", None, name="x").required_exact("name") == ["x"]


def test_span_query_filter_or_without_filters_keeps_rollout_scope() -> None:
    spans = [span("ro-1", "at-1", "a", name="llm"), span("ro-1", "at-2", "b"), span("ro-2", "at-1", "c")]
    predicate = L.build_predicate(L.span_query_filter("ro-1", None, filter_logic="or"))
    assert [s.span_id for s in spans if predicate(s)] == ["a", "b"]
    predicate = L.build_predicate(L.span_query_filter("ro-1", "at-1", filter_logic="or"))
    assert [s.span_id for s in spans if predicate(s)] == ["a"]
    predicate = L.build_predicate(
        L.span_query_filter("ro-1", None, name_contains="LLM", span_id="b", filter_logic="or")
    )
    assert [s.span_id for s in spans if predicate(s)] == ["b"]


def test_query_filter_builders_validate() -> None:
    with pytest.raises(InvalidStatusError):
        L.rollout_query_filter(status_in=["running", "done"])
    with pytest.raises(InvalidFilterError, match="rollout_id_in must be a list"):
        L.rollout_query_filter(rollout_id_in="ro-1")
    with pytest.raises(InvalidFilterError, match="name_contains must be a string"):
        L.span_query_filter("ro-1", None, name_contains=3)  # type: ignore[arg-type]
    with pytest.raises(InvalidStatusError, match="worker"):
        L.worker_query_filter(status_in=["busy", "running"])
    workers = [Worker(worker_id="w-A", status="busy"), Worker(worker_id="w-b", status="idle")]
    predicate = L.build_predicate(
        L.worker_query_filter(status_in=["idle"], worker_id_contains="A", filter_logic="or")
    )
    assert [w.worker_id for w in workers if predicate(w)] == ["w-A", "w-b"]
    assert L.resources_query_filter() is L.MATCH_ALL
    assert len(L.resources_query_filter(resources_id="rs-1", resources_id_contains="rs").conditions) == 2


def test_resolve_rollout_query_aliases() -> None:
    with pytest.warns(DeprecationWarning, match="status_in"):
        assert L.resolve_rollout_query_aliases(None, None, ["running"], None) == (["running"], None)
    with pytest.warns(DeprecationWarning, match="rollout_id_in"):
        assert L.resolve_rollout_query_aliases(["failed"], ["a"], None, ["b"]) == (["failed"], ["a"])
    assert L.resolve_rollout_query_aliases(["failed"], None, None, None) == (["failed"], None)


# ---------------------------------------------------------------------------------------------- sorting


def test_sort_time_fields_none_is_infinite() -> None:
    items = [
        Rollout(rollout_id="a", input=None, start_time=0, end_time=None),
        Rollout(rollout_id="b", input=None, start_time=0, end_time=5.0),
        Rollout(rollout_id="c", input=None, start_time=0, end_time=1.0),
    ]
    assert [r.rollout_id for r in L.sort_items(items, "end_time", "asc", Rollout)] == ["c", "b", "a"]
    assert [r.rollout_id for r in L.sort_items(items, "end_time", "desc", Rollout)] == ["a", "b", "c"]


def test_sort_other_none_values_use_type_zero_and_are_stable() -> None:
    items = [
        Rollout(rollout_id="a", input=None, start_time=0, resources_id="rs-b"),
        Rollout(rollout_id="b", input=None, start_time=0, resources_id=None),
        Rollout(rollout_id="c", input=None, start_time=0, resources_id="rs-a"),
        Rollout(rollout_id="d", input=None, start_time=0, resources_id=None),
    ]
    assert [r.rollout_id for r in L.sort_items(items, "resources_id", "asc", Rollout)] == ["b", "d", "c", "a"]
    assert [r.rollout_id for r in L.sort_items(items, "resources_id", "desc", Rollout)] == [
        "a",
        "c",
        "b",
        "d",
    ]
    assert [r.rollout_id for r in L.sort_items(items, None, "desc", Rollout)] == ["a", "b", "c", "d"]


def test_sort_errors_name_the_allowed_fields() -> None:
    with pytest.raises(
        InvalidFilterError, match=r"Cannot sort Rollout by 'nope'. Sortable fields: rollout_id, "
    ):
        L.sort_key_for("nope", Rollout)
    with pytest.raises(InvalidFilterError, match="'config'"):
        L.sort_key_for("config", Rollout)  # not a scalar field
    with pytest.raises(InvalidFilterError, match="sort_order"):
        L.sort_items([], "status", "ascending", Rollout)
    assert {"sequence_id", "start_time", "status", "worker_id"} <= set(L.sortable_fields(Attempt))
    assert "input" not in L.sortable_fields(Rollout) and "sequence_id" in L.sortable_fields(Span)


# ---------------------------------------------------------------------------------------------- pagination


@pytest.mark.parametrize(("limit", "offset"), [(-2, 0), (10, -1), (True, 0), (1.5, 0), (5, None)])
def test_pagination_errors(limit: Any, offset: Any) -> None:
    with pytest.raises(InvalidRequestError, match=r"limit|offset"):
        L.validate_pagination(limit, offset)


def test_pagination_limit_message() -> None:
    with pytest.raises(InvalidRequestError, match="limit must be >= 0 or -1 for no limit"):
        L.paginate([1], -3, 0)
    assert (list(L.paginate([1, 2], 0, 0)), L.paginate([1, 2], 0, 0).total) == ([], 2)


def test_paginate() -> None:
    items = list(range(10))
    page = L.paginate(items, 3, 2)
    assert isinstance(page, PaginatedResult) and list(page) == [2, 3, 4]
    assert (page.limit, page.offset, page.total) == (3, 2, 10)
    assert list(L.paginate(items, -1, 8)) == [8, 9]
    assert list(L.paginate(items, 5, 20)) == [] and L.paginate(items, 5, 20).total == 10


def test_page_result_equals_the_validated_page() -> None:
    """Stores build pages without validation; the result must be what validation would give."""
    rollouts = [rollout("running"), rollout("succeeded")]
    built = L.page_result(list(rollouts), 2, 4, 9)
    validated = PaginatedResult(items=rollouts, limit=2, offset=4, total=9)
    assert type(built) is type(validated) and built == validated
    assert built.model_fields_set == validated.model_fields_set
    assert built.model_dump_json() == validated.model_dump_json()
    assert copy.deepcopy(built) == validated and pickle.loads(pickle.dumps(built)) == validated


# ------------------------------------------------------------------------------------- spans & sequence ids


def test_plan_sequence_ids() -> None:
    stored = {"ro-a": 4}
    issued, counters = L.plan_sequence_ids(["ro-a", "ro-b", "ro-a"], lambda r: stored.get(r, 0))
    assert issued == [5, 1, 6] and counters == {"ro-a": 6, "ro-b": 1}
    assert L.plan_sequence_ids([], lambda r: 0) == ([], {})


def test_validate_span() -> None:
    good = span(sequence_id=3)
    assert L.validate_span(good) is good
    with pytest.raises(InvalidSpanError, match=r"Expected an agl_core\.types\.Span, got dict"):
        L.validate_span({"span_id": "x"})
    with pytest.raises(InvalidSpanError, match="rollout_id must be a non-empty string"):
        L.validate_span(span(rollout_id=""))
    with pytest.raises(InvalidSpanError, match="sequence_id must be an integer >= 0, got -1"):
        L.validate_span(good.model_copy(update={"sequence_id": -1}))


# ------------------------------------------------------------------------------------------- errors & UNSET


def test_error_hierarchy_and_messages() -> None:
    err = RolloutNotFoundError("ro-x")
    assert isinstance(err, NotFoundError) and isinstance(err, KeyError) and isinstance(err, ValueError)
    assert isinstance(err, StoreError) and str(err).startswith("Rollout ro-x not found.")
    assert not str(err).startswith('"')  # KeyError would quote it
    assert "start_attempt" in str(AttemptNotFoundError("ro-x", "latest"))
    assert str(AttemptNotFoundError("ro-x", "at-1")).startswith("Attempt at-1 not found for rollout ro-x.")
    assert isinstance(ResourcesNotFoundError("rs-1"), KeyError)
    assert isinstance(StoreClosedError("closed"), RuntimeError)
    assert not isinstance(InvalidRequestError("x"), KeyError)


@pytest.mark.parametrize(
    "err",
    [
        RolloutNotFoundError("ro-x"),
        AttemptNotFoundError("ro-x", "at-y"),
        ResourcesNotFoundError("rs-z"),
        InvalidStatusError("rollout", "bad", ["a"]),
        InvalidFilterError("f"),
    ],
)
def test_errors_pickle(err: StoreError) -> None:
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is type(err) and str(again) == str(err) and vars(again) == vars(err)


def test_unset_sentinel() -> None:
    assert repr(UNSET) == "UNSET" and not UNSET and isinstance(UNSET, Unset)
    assert Unset() is UNSET
    assert pickle.loads(pickle.dumps(UNSET)) is UNSET
    assert copy.copy(UNSET) is UNSET and copy.deepcopy({"a": UNSET})["a"] is UNSET


# ---------------------------------------------------------------------------------------------- base defaults


def make_store_class(**overrides: Callable[..., Any]) -> type[LightningStore]:
    """A concrete LightningStore whose abstract methods raise, except `overrides`."""

    def stub(name: str) -> Callable[..., Any]:
        async def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            raise AssertionError(f"unexpected call to {name}")

        return method

    namespace: dict[str, Any] = {name: stub(name) for name in LightningStore.__abstractmethods__}
    namespace.update(overrides)
    return type("FakeStore", (LightningStore,), namespace)


def test_contract_is_abstract_and_has_the_0_3_methods() -> None:
    with pytest.raises(TypeError):
        LightningStore()  # type: ignore[abstract]
    expected = {
        "start_rollout", "enqueue_rollout", "dequeue_rollout", "start_attempt", "query_rollouts",
        "query_attempts", "get_rollout_by_id", "get_latest_attempt", "update_rollout", "update_attempt",
        "wait_for_rollouts", "add_span", "get_next_span_sequence_id", "query_spans", "add_resources",
        "update_resources", "get_resources_by_id", "get_latest_resources", "query_resources",
        "query_workers", "get_worker_by_id", "update_worker",
    }  # fmt: skip
    assert expected <= set(dir(LightningStore))
    # Each public method checks its arguments and calls a narrow backend method instead.
    assert set(LightningStore.__abstractmethods__) == (expected - set(BACKEND_METHODS)) | set(
        BACKEND_METHODS.values()
    )


async def test_lifecycle_clock_and_defaults() -> None:
    closed: list[bool] = []

    async def close(self: Any) -> None:
        closed.append(True)

    now = [50.0]
    store = make_store_class(close=close)(clock=lambda: now[0], scan_debounce_seconds=0)
    now[0] = 60.0
    assert store._uptime() == 10.0 and store._watchdog_due() and store._watchdog_due()
    assert store.capabilities == {
        "thread_safe": False,
        "async_safe": False,
        "zero_copy": False,
        "otlp_traces": False,
    }
    with pytest.raises(NotImplementedError, match="OTLP"):
        store.otlp_traces_endpoint()
    with pytest.raises(NotImplementedError, match="construct it directly"):
        type(store).from_uri("fake:")
    async with store as entered:
        assert entered is store
    assert closed == [True]
    with pytest.raises(InvalidRequestError, match="scan_debounce_seconds must be >= 0"):
        make_store_class()(scan_debounce_seconds=-1)


async def test_single_and_batch_methods_share_one_backend_method() -> None:
    calls: list[Any] = []

    async def _enqueue_rollouts(self: Any, request: Any) -> list[Rollout]:
        calls.append([r.input for r in request.rollouts])
        return [
            Rollout(rollout_id=f"ro-{r.input}", input=r.input, start_time=0.0, mode=r.mode)
            for r in request.rollouts
        ]

    async def _insert_spans(self: Any, request: Any) -> list[Span]:
        return [s for s in request.spans if s.span_id != "dup"]

    async def _issue_sequence_ids(self: Any, request: Any) -> list[int]:
        return L.plan_sequence_ids([r for r, _ in request.pairs], lambda rid: 0)[0]

    async def _dequeue_rollouts(self: Any, request: Any) -> list[Any]:
        calls.append(("dequeue", request.limit, request.worker_id))
        return []

    from agl_core.types import EnqueueRolloutRequest

    store = make_store_class(
        _enqueue_rollouts=_enqueue_rollouts,
        _insert_spans=_insert_spans,
        _issue_sequence_ids=_issue_sequence_ids,
        _dequeue_rollouts=_dequeue_rollouts,
    )()
    out = await store.enqueue_many_rollouts([EnqueueRolloutRequest(input=i, mode="val") for i in range(3)])
    assert [r.rollout_id for r in out] == ["ro-0", "ro-1", "ro-2"] and out[0].mode == "val"
    assert (await store.enqueue_rollout(7)).rollout_id == "ro-7"
    assert await store.enqueue_many_rollouts([]) == []
    assert calls == [[0, 1, 2], [7]]
    added = await store.add_many_spans([span(span_id="a"), span(span_id="dup"), span(span_id="b")])
    assert [s.span_id for s in added] == ["a", "b"]
    assert await store.add_span(span(span_id="dup")) is None
    assert list(await store.get_many_span_sequence_ids([("r", "a"), ("r", "a")])) == [1, 2]
    assert await store.get_next_span_sequence_id("r", "a") == 1
    assert await store.dequeue_many_rollouts(limit=0) == [] and len(calls) == 2
    assert await store.dequeue_rollout("w1") is None and calls[-1] == ("dequeue", 1, "w1")


async def test_add_otel_span_leaves_the_sequence_id_to_the_backend() -> None:
    """Without a sequence id add_otel_span sends 0 (the backend numbers the span): no extra round trip."""
    from opentelemetry.sdk.trace import TracerProvider

    stored: list[Span] = []

    async def _insert_spans(self: Any, request: Any) -> list[Span]:
        stored.extend(request.spans)
        return list(request.spans)

    store = make_store_class(_insert_spans=_insert_spans)()
    with TracerProvider().get_tracer("t").start_as_current_span("work") as otel_span:
        pass
    result = await store.add_otel_span("ro-1", "at-1", otel_span)  # type: ignore[arg-type]
    assert result is stored[0] and (result.sequence_id, result.name, result.rollout_id) == (0, "work", "ro-1")
    await store.add_otel_span("ro-1", "at-1", otel_span, sequence_id=3)  # type: ignore[arg-type]
    assert stored[1].sequence_id == 3


# ---------------------------------------------------------------------------------------------- open_store


def test_open_store_schemes(plugin_manager: Any) -> None:
    from agl_core import hookimpl
    from agl_core.errors import UnknownComponentError
    from agl_testing import plugin_module

    assert parse_store_uri("SQLite:///tmp/x.db") == "sqlite"
    with pytest.raises(InvalidRequestError, match="has no scheme"):
        open_store("/tmp/x.db")
    with pytest.raises(UnknownComponentError, match="No store opens URIs with scheme 'nosuch'"):
        open_store("nosuch://x")

    class UriStore(make_store_class()):  # type: ignore[misc]
        @classmethod
        def from_uri(cls, uri: str, **kwargs: Any) -> UriStore:
            store = cls(**kwargs)
            store.uri = uri  # type: ignore[attr-defined]
            return store

    @hookimpl
    def agl_register_stores(registry: Any) -> None:
        registry.add("logictest", UriStore, schemes=["logictest"])
        registry.add("logicbad", lambda uri: object(), schemes=["logicbad"])

    plugin_manager.register(plugin_module("logic", agl_register_stores=agl_register_stores), name="logic")
    opened = open_store("logictest://a", scan_debounce_seconds=0)
    assert (
        isinstance(opened, UriStore) and opened.uri == "logictest://a" and opened.scan_debounce_seconds == 0
    )
    with pytest.raises(TypeError, match="not a LightningStore"):
        open_store("logicbad:")


class _Score(float):
    """A float subclass (as numpy's float64 is)."""


@pytest.mark.parametrize(
    "value",
    [
        {"a": 1, "b": float("nan")},
        {"a": "x", "b": _Score("inf")},
        {"a": None, "b": [_Score("-inf")]},
        {"a": True, "b": {"c": float("inf")}},
    ],
)
def test_check_json_value_refuses_nan_and_infinity_in_any_dict(value: dict[str, Any]) -> None:
    with pytest.raises(InvalidRequestError, match=r"^metadata contains -?(nan|inf); JSON has no NaN"):
        L.check_json_value("metadata", value)


def test_check_json_value_accepts_plain_values_and_span_errors_name_the_span() -> None:
    L.check_json_value("metadata", {"a": 1, "b": 2.5, "c": _Score(0.5), "d": None, "e": "s", "f": False})
    span = Span(
        rollout_id="ro-1",
        attempt_id="at-1",
        sequence_id=1,
        trace_id="t",
        span_id="sp-9",
        parent_id=None,
        name="n",
        status={"status_code": "OK"},
        attributes={"x": float("nan")},
        events=[],
        links=[],
        start_time=None,
        end_time=None,
        context=None,
        parent=None,
        resource={"attributes": {}, "schema_url": ""},
    )
    with pytest.raises(InvalidRequestError, match=r"^Span sp-9 attributes contains nan"):
        L.validate_span(span)
