"""The `LightningStore` contract as a reusable pytest suite: one subclass of `StoreConformance` per backend.

Usage (in any test module; the class name must start with ``Test`` so pytest collects it)::

    import pytest
    from agl_testing.store_conformance import FakeClock, StoreConformance

    class TestMyStore(StoreConformance):
        @pytest.fixture
        def store_factory(self):
            return lambda clock: MyStore(clock=clock, scan_debounce_seconds=0)

The factory gets a `FakeClock` and returns a fresh, empty store (or an awaitable of one). It must hand the
clock to the store, because every timestamp and the watchdog are checked against it, and it must turn
watchdog debouncing off (``scan_debounce_seconds=0``): the watchdog tests advance the clock and expect the
next guarded call to scan. The suite closes each store after its test.

Every test is a coroutine marked for pytest-asyncio, so the suite runs in strict and auto mode alike.
Time-dependent behaviour is driven with ``clock.advance()`` only; the few real waits
(`wait_for_rollouts`) are short and bounded. Backends tune the suite with these class attributes:

- ``supports_multiple_event_loops`` (True): the store may be called from threads that run their own
  event loops. When False, the concurrency tests use tasks of one loop instead.
- ``concurrency_workers`` (8), ``concurrency_rollouts`` (2000), ``concurrency_spans_per_rollout`` (10):
  the size of the concurrency race; ``concurrency_timeout`` (300 s) bounds it.
- ``max_wait_timeout`` (5.0 s): how long a test waits, at most, for `wait_for_rollouts` to notice a
  rollout that finished while it was waiting.

Sections: construction; creating rollouts; queue and dequeue; reading attempts; status propagation; spans
as heartbeats; retries; watchdog; workers; resources; span storage and sequence ids; query_spans;
query_rollouts; UNSET versus None; wait_for_rollouts; statistics; bad input; PaginatedResult;
concurrency.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import pytest
import pytest_asyncio

from agl_core.semconv import LightningResourceAttributes
from agl_core.store import (
    AttemptNotFoundError,
    InvalidFilterError,
    InvalidRequestError,
    InvalidSpanError,
    InvalidStatusError,
    LightningStore,
    RolloutNotFoundError,
)
from agl_core.store.logic import MAX_JSON_DEPTH
from agl_core.types import (
    LLM,
    Attempt,
    AttemptedRollout,
    EnqueueRolloutRequest,
    NamedResources,
    PaginatedResult,
    PromptTemplate,
    ProxyLLM,
    Rollout,
    RolloutConfig,
    Span,
    Worker,
)
from agl_testing.clock import FakeClock

__all__ = ["FakeClock", "StoreConformance", "StoreFactory", "make_span", "run_in_threads"]

T = TypeVar("T")

StoreFactory = Callable[[FakeClock], LightningStore | Awaitable[LightningStore]]
"""What a backend's ``store_factory`` fixture returns: ``factory(clock) -> store`` (or an awaitable)."""

StoreCall = Callable[[LightningStore, str], Awaitable[Any]]
"""A store call used by parametrized tests: ``call(store, rollout_id)``."""

_TRACE_A = "0af7651916cd43dd8448eb211c80319c"
_TRACE_B = "4bf92f3577b34da6a3ce929d0e0e4736"


# ---------------------------------------------------------------------------------------------- helpers


def make_span(
    rollout_id: str,
    attempt_id: str,
    sequence_id: int,
    *,
    name: str = "agl.conformance",
    span_id: str | None = None,
    trace_id: str | None = None,
    parent_id: str | None = None,
    start_time: float | None = None,
    attributes: Mapping[str, Any] | None = None,
) -> Span:
    """A synthetic span of one rollout attempt (random trace and span ids unless given)."""
    return Span.from_attributes(
        attributes=dict(attributes or {}),
        rollout_id=rollout_id,
        attempt_id=attempt_id,
        sequence_id=sequence_id,
        name=name,
        span_id=span_id,
        trace_id=trace_id,
        parent_id=parent_id,
        start_time=start_time,
        end_time=None if start_time is None else start_time + 0.5,
    )


def _span_id(n: int) -> str:
    """A deterministic span id: the hex digit of `n` (1-15) repeated 16 times, so substrings never collide."""
    return format(n, "x") * 16


def _resources(tag: str) -> NamedResources:
    return {
        "main_llm": LLM(endpoint=f"http://llm.local/{tag}/v1", model=f"model-{tag}"),
        "prompt": PromptTemplate(template="Solve {task} (" + tag + ")", engine="f-string"),
    }


async def _rollout(store: LightningStore, rollout_id: str) -> Rollout:
    found = await store.get_rollout_by_id(rollout_id)
    assert found is not None, f"rollout {rollout_id} vanished"
    return found


async def _latest(store: LightningStore, rollout_id: str) -> Attempt:
    found = await store.get_latest_attempt(rollout_id)
    assert found is not None, f"rollout {rollout_id} has no attempt"
    return found


async def _attempts(store: LightningStore, rollout_id: str) -> list[Attempt]:
    return list(await store.query_attempts(rollout_id))


async def _worker(store: LightningStore, worker_id: str) -> Worker:
    found = await store.get_worker_by_id(worker_id)
    assert found is not None, f"worker {worker_id} was not recorded"
    return found


async def _dequeue(store: LightningStore, worker_id: str | None = None) -> AttemptedRollout:
    claimed = await store.dequeue_rollout(worker_id=worker_id)
    assert claimed is not None, "expected a queued rollout, the queue was empty"
    return claimed


async def _claim(
    store: LightningStore, config: RolloutConfig | None = None, worker_id: str | None = None
) -> AttemptedRollout:
    """Enqueue one rollout and dequeue it (it must be the only one queued)."""
    queued = await store.enqueue_rollout({"task": "claim"}, config=config)
    claimed = await _dequeue(store, worker_id)
    assert claimed.rollout_id == queued.rollout_id
    return claimed


def _ids(items: Sequence[Rollout] | Sequence[Span] | Sequence[Worker]) -> list[str]:
    out: list[str] = []
    for item in items:
        if isinstance(item, Rollout):
            out.append(item.rollout_id)
        elif isinstance(item, Span):
            out.append(item.span_id)
        else:
            out.append(item.worker_id)
    return out


def _settle(future: asyncio.Future[T], result: T | None, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)  # type: ignore[arg-type]


def _thread_main(
    job: Callable[[], Coroutine[Any, Any, T]], loop: asyncio.AbstractEventLoop, future: asyncio.Future[T]
) -> None:
    result: T | None = None
    error: BaseException | None = None
    try:
        result = asyncio.run(job())
    except Exception as exc:  # handed to the waiting test
        error = exc
    with contextlib.suppress(RuntimeError):  # the test's loop is already closed (it timed out)
        loop.call_soon_threadsafe(_settle, future, result, error)


async def run_in_threads(jobs: Sequence[Callable[[], Coroutine[Any, Any, T]]], timeout: float) -> list[T]:
    """Run each job under ``asyncio.run`` in its own daemon thread; gather the results within `timeout`."""
    loop = asyncio.get_running_loop()
    futures: list[asyncio.Future[T]] = []
    for index, job in enumerate(jobs):
        future: asyncio.Future[T] = loop.create_future()
        futures.append(future)
        threading.Thread(
            target=_thread_main, args=(job, loop, future), name=f"agl-conformance-{index}", daemon=True
        ).start()
    return list(await asyncio.wait_for(asyncio.gather(*futures), timeout))


# ------------------------------------------------------------------------------------- parameter tables

_GUARDED_CALLS: dict[str, StoreCall] = {
    "start_rollout": lambda s, other: s.start_rollout("guarded"),
    "enqueue_rollout": lambda s, other: s.enqueue_rollout("guarded"),
    "enqueue_many_rollouts": lambda s, other: s.enqueue_many_rollouts([EnqueueRolloutRequest(input=1)]),
    "dequeue_rollout": lambda s, other: s.dequeue_rollout(),
    "dequeue_many_rollouts": lambda s, other: s.dequeue_many_rollouts(limit=1),
    "start_attempt": lambda s, other: s.start_attempt(other),
    "query_rollouts": lambda s, other: s.query_rollouts(),
    "get_rollout_by_id": lambda s, other: s.get_rollout_by_id(other),
    "query_attempts": lambda s, other: s.query_attempts(other),
    "get_latest_attempt": lambda s, other: s.get_latest_attempt(other),
    "update_resources": lambda s, other: s.update_resources("rs-guarded", _resources("g")),
    "wait_for_rollouts": lambda s, other: s.wait_for_rollouts(rollout_ids=[other], timeout=0),
    "query_spans": lambda s, other: s.query_spans(other),
    "update_rollout": lambda s, other: s.update_rollout(other, metadata={"touched": True}),
    "update_attempt": lambda s, other: s.update_attempt(other, "latest", metadata={"touched": True}),
    "query_workers": lambda s, other: s.query_workers(),
}

_UNKNOWN_ROLLOUT_CALLS: dict[str, StoreCall] = {
    "update_rollout": lambda s, rid: s.update_rollout(rid, status="cancelled"),
    "update_attempt(latest)": lambda s, rid: s.update_attempt(rid, "latest", status="failed"),
    "update_attempt(id)": lambda s, rid: s.update_attempt(rid, "at-00000000", status="failed", worker_id="w"),
    "start_attempt": lambda s, rid: s.start_attempt(rid, worker_id="w"),
    "add_span": lambda s, rid: s.add_span(make_span(rid, "at-00000000", 7)),
    "add_many_spans": lambda s, rid: s.add_many_spans([make_span(rid, "at-00000000", 7)]),
}

_MALFORMED_QUERIES: dict[str, tuple[StoreCall, type[Exception]]] = {
    "rollouts-filter_logic": (lambda s, r: s.query_rollouts(filter_logic="xor"), InvalidFilterError),  # type: ignore[arg-type]
    "rollouts-sort_by-unknown": (lambda s, r: s.query_rollouts(sort_by="no_such_field"), InvalidFilterError),
    "rollouts-sort_by-unsortable": (lambda s, r: s.query_rollouts(sort_by="config"), InvalidFilterError),
    "rollouts-sort_order": (lambda s, r: s.query_rollouts(sort_order="up"), InvalidFilterError),  # type: ignore[arg-type]
    "rollouts-limit-negative": (lambda s, r: s.query_rollouts(limit=-2), InvalidRequestError),
    "rollouts-offset-negative": (lambda s, r: s.query_rollouts(offset=-1), InvalidRequestError),
    "rollouts-id_in-string": (lambda s, r: s.query_rollouts(rollout_id_in=r), InvalidFilterError),
    "rollouts-id_contains-int": (lambda s, r: s.query_rollouts(rollout_id_contains=5), InvalidFilterError),  # type: ignore[arg-type]
    "spans-filter_logic": (lambda s, r: s.query_spans(r, filter_logic="nand"), InvalidFilterError),  # type: ignore[arg-type]
    "spans-sort_by": (lambda s, r: s.query_spans(r, sort_by="no_such_field"), InvalidFilterError),
    "spans-sort_order": (lambda s, r: s.query_spans(r, sort_order="ascending"), InvalidFilterError),  # type: ignore[arg-type]
    "spans-offset-negative": (lambda s, r: s.query_spans(r, offset=-5), InvalidRequestError),
    "spans-name_contains-int": (lambda s, r: s.query_spans(r, name_contains=3), InvalidFilterError),  # type: ignore[arg-type]
    "attempts-sort_by": (lambda s, r: s.query_attempts(r, sort_by="no_such_field"), InvalidFilterError),
    "resources-sort_by": (lambda s, r: s.query_resources(sort_by="no_such_field"), InvalidFilterError),
    "resources-offset-negative": (lambda s, r: s.query_resources(offset=-1), InvalidRequestError),
    "workers-filter_logic": (lambda s, r: s.query_workers(filter_logic="xor"), InvalidFilterError),  # type: ignore[arg-type]
    "workers-sort_by": (lambda s, r: s.query_workers(sort_by="no_such_field"), InvalidFilterError),
    # Integers beyond 2**63-1 (SQLite's INTEGER) are refused by every backend alike (issue 20).
    "rollouts-limit-2**63": (lambda s, r: s.query_rollouts(limit=2**63), InvalidRequestError),
    "rollouts-offset-2**63": (lambda s, r: s.query_rollouts(offset=2**63), InvalidRequestError),
    "spans-limit-2**63": (lambda s, r: s.query_spans(r, limit=2**63), InvalidRequestError),
    "spans-offset-2**63": (lambda s, r: s.query_spans(r, offset=2**63), InvalidRequestError),
    "attempts-offset-2**63": (lambda s, r: s.query_attempts(r, offset=2**63), InvalidRequestError),
    "resources-limit-2**63": (lambda s, r: s.query_resources(limit=2**63), InvalidRequestError),
    "workers-offset-2**63": (lambda s, r: s.query_workers(offset=2**63), InvalidRequestError),
    "dequeue-limit-2**63": (lambda s, r: s.dequeue_many_rollouts(limit=2**63), InvalidRequestError),
}

_BAD_STATUS_FILTERS: dict[str, StoreCall] = {
    "rollouts-unknown": lambda s, r: s.query_rollouts(status_in=["nope"]),  # type: ignore[list-item]
    "rollouts-string": lambda s, r: s.query_rollouts(status_in="queuing"),  # type: ignore[arg-type]
    "rollouts-attempt-status": lambda s, r: s.query_rollouts(status_in=["timeout"]),  # type: ignore[list-item]
    "rollouts-alias": lambda s, r: s.query_rollouts(status=["nope"]),  # type: ignore[list-item]
    "workers-unknown": lambda s, r: s.query_workers(status_in=["sleepy"]),  # type: ignore[list-item]
}


def _malformed_spans(rollout_id: str, attempt_id: str) -> dict[str, object]:
    good = make_span(rollout_id, attempt_id, 50, span_id=_span_id(1))
    return {
        "not-a-span": good.model_dump(),
        "empty-span-id": good.model_copy(update={"span_id": ""}),
        "empty-attempt-id": good.model_copy(update={"attempt_id": ""}),
        "empty-rollout-id": good.model_copy(update={"rollout_id": ""}),
        "negative-sequence-id": good.model_copy(update={"sequence_id": -1}),
        "string-sequence-id": good.model_copy(update={"sequence_id": "50"}),
        "huge-sequence-id": good.model_copy(update={"sequence_id": 2**63}),
    }


def _nested(depth: int) -> list[Any]:
    """A list nested `depth` levels deep (``[[...[1]...]]``)."""
    value: list[Any] = [1]
    for _ in range(depth - 1):
        value = [value]
    return value


_BAD_JSON_VALUES: dict[str, tuple[Any, str]] = {
    "nan": ({"score": float("nan")}, "NaN or Infinity"),
    "inf": ([1.0, float("inf")], "NaN or Infinity"),
    "-inf": ({"a": [float("-inf")]}, "NaN or Infinity"),
    "inf-among-plain-values": ({"ok": 1.5, "name": "x", "bad": float("inf")}, "NaN or Infinity"),
    "too-deep": (_nested(MAX_JSON_DEPTH + 1), "levels deep"),
}
"""Values no store accepts (issue 20): JSON cannot hold NaN/Infinity; nesting is capped."""

_JSON_VALUE_CALLS: dict[str, Callable[[LightningStore, AttemptedRollout, Any], Awaitable[Any]]] = {
    "enqueue_rollout-input": lambda s, r, v: s.enqueue_rollout(v),
    "start_rollout-input": lambda s, r, v: s.start_rollout(v),
    "enqueue_rollout-metadata": lambda s, r, v: s.enqueue_rollout("x", metadata={"k": v}),
    "enqueue_many_rollouts-input": lambda s, r, v: s.enqueue_many_rollouts([EnqueueRolloutRequest(input=v)]),
    "update_rollout-input": lambda s, r, v: s.update_rollout(r.rollout_id, input=v),
    "update_attempt-metadata": lambda s, r, v: s.update_attempt(r.rollout_id, "latest", metadata={"k": v}),
    "update_worker-heartbeat_stats": lambda s, r, v: s.update_worker("w-json", heartbeat_stats={"k": v}),
}


_NUL = "a\x00b"

_NUL_SPAN_FIELDS = ("name", "trace_id", "parent_id", "span_id")
"""Text fields of a span a store keys or indexes; none may hold NUL (issue 34)."""

_NUL_FILTERS: dict[str, tuple[StoreCall, str]] = {
    "rollouts-rollout_id_contains": (
        lambda s, r: s.query_rollouts(rollout_id_contains=_NUL),
        "rollout_id_contains",
    ),
    "rollouts-rollout_id_in": (lambda s, r: s.query_rollouts(rollout_id_in=[r, _NUL]), "rollout_id_in"),
    "rollouts-input_contains": (lambda s, r: s.query_rollouts(input_contains=_NUL), "input_contains"),
    "spans-name": (lambda s, r: s.query_spans(r, name=_NUL), "name"),
    "spans-name_contains": (lambda s, r: s.query_spans(r, name_contains=_NUL), "name_contains"),
    "spans-trace_id": (lambda s, r: s.query_spans(r, trace_id=_NUL), "trace_id"),
    "spans-parent_id_contains": (
        lambda s, r: s.query_spans(r, parent_id_contains=_NUL),
        "parent_id_contains",
    ),
    "spans-span_id_contains": (lambda s, r: s.query_spans(r, span_id_contains=_NUL), "span_id_contains"),
    "resources-resources_id": (lambda s, r: s.query_resources(resources_id=_NUL), "resources_id"),
    "resources-resources_id_contains": (
        lambda s, r: s.query_resources(resources_id_contains=_NUL),
        "resources_id_contains",
    ),
    "workers-worker_id_contains": (
        lambda s, r: s.query_workers(worker_id_contains=_NUL),
        "worker_id_contains",
    ),
}
"""Filters with a NUL character: refused with InvalidFilterError naming the argument (issue 34)."""

_NUL_WRITES: dict[str, tuple[StoreCall, str]] = {
    "start_rollout-worker_id": (lambda s, r: s.start_rollout("x", worker_id=_NUL), "worker_id"),
    "start_rollout-resources_id": (lambda s, r: s.start_rollout("x", resources_id=_NUL), "resources_id"),
    "enqueue_rollout-resources_id": (lambda s, r: s.enqueue_rollout("x", resources_id=_NUL), "resources_id"),
    "dequeue_rollout-worker_id": (lambda s, r: s.dequeue_rollout(worker_id=_NUL), "worker_id"),
    "update_worker-worker_id": (lambda s, r: s.update_worker(_NUL), "worker_id"),
}
"""Writes whose id arguments hold a NUL character: refused with InvalidRequestError (issue 34)."""

_NUL_LOOKUPS: dict[str, tuple[StoreCall, str]] = {
    "get_rollout_by_id": (lambda s, r: s.get_rollout_by_id(_NUL), "rollout_id"),
    "get_latest_attempt": (lambda s, r: s.get_latest_attempt(_NUL), "rollout_id"),
    "query_attempts": (lambda s, r: s.query_attempts(_NUL), "rollout_id"),
    "query_spans": (lambda s, r: s.query_spans(_NUL), "rollout_id"),
    "start_attempt": (lambda s, r: s.start_attempt(_NUL), "rollout_id"),
    "update_rollout": (lambda s, r: s.update_rollout(_NUL, status="failed"), "rollout_id"),
    "update_attempt": (lambda s, r: s.update_attempt(_NUL, "latest", status="failed"), "rollout_id"),
    "get_resources_by_id": (lambda s, r: s.get_resources_by_id(_NUL), "resources_id"),
    "update_resources": (lambda s, r: s.update_resources(_NUL, NamedResources({})), "resources_id"),
    "get_worker_by_id": (lambda s, r: s.get_worker_by_id(_NUL), "worker_id"),
    "get_next_span_sequence_id": (lambda s, r: s.get_next_span_sequence_id(_NUL, "at-1"), "rollout_id"),
}
"""Calls by an id holding NUL: refused with InvalidRequestError naming the argument (issue 34)."""


# ---------------------------------------------------------------------------------------------- the suite


class StoreConformance:
    """The whole `LightningStore` contract; subclass it and provide a ``store_factory`` fixture.

    See the module docstring for the factory's requirements and the tunable class attributes.
    """

    pytestmark = [pytest.mark.asyncio(loop_scope="function")]

    supports_multiple_event_loops: bool = True
    """The store may be used from threads that each run their own event loop."""
    concurrency_workers: int = 8
    """Workers (threads, or tasks) in the concurrency race."""
    concurrency_rollouts: int = 2000
    """Rollouts the workers race over."""
    concurrency_spans_per_rollout: int = 10
    """Spans each rollout gets before its attempt succeeds."""
    concurrency_timeout: float = 300.0
    """Upper bound, in real seconds, for the whole concurrency race."""
    max_wait_timeout: float = 5.0
    """Upper bound, in real seconds, for a waiter to notice a rollout that finished."""

    # ------------------------------------------------------------------ fixtures

    @pytest.fixture
    def store_factory(self) -> StoreFactory:
        """Override: return ``factory(clock) -> store`` building a fresh store that uses `clock`."""
        raise NotImplementedError(
            f"{type(self).__name__} must define a `store_factory` fixture returning "
            "`lambda clock: MyStore(clock=clock, scan_debounce_seconds=0)`."
        )

    @pytest.fixture
    def clock(self) -> FakeClock:
        """The fake clock the store under test reads."""
        return FakeClock()

    @pytest_asyncio.fixture(loop_scope="function")
    async def store(self, store_factory: StoreFactory, clock: FakeClock) -> AsyncIterator[LightningStore]:
        """A fresh store built by ``store_factory(clock)``, closed after the test."""
        built = store_factory(clock)
        if inspect.isawaitable(built):
            built = await built
        assert isinstance(built, LightningStore), f"store_factory returned {type(built).__name__}"
        try:
            yield built
        finally:
            await built.close()

    # ================================================================== construction

    async def test_capabilities_are_booleans(self, store: LightningStore) -> None:
        """`capabilities` is a mapping of known flags to booleans."""
        capabilities = store.capabilities
        assert isinstance(capabilities, Mapping)
        assert set(capabilities) <= {"thread_safe", "async_safe", "zero_copy", "otlp_traces"}
        assert all(isinstance(value, bool) for value in capabilities.values())

    async def test_statistics_of_empty_store(self, store: LightningStore, clock: FakeClock) -> None:
        """A new store counts nothing and measures its uptime with the injected clock."""
        stats = await store.statistics()
        assert isinstance(stats["name"], str) and stats["name"]
        for key in ("total_rollouts", "total_attempts", "total_spans", "total_resources", "total_workers"):
            assert stats[key] == 0, key
        assert stats["uptime"] == pytest.approx(0.0, abs=1e-6)
        clock.advance(12.5)
        assert (await store.statistics())["uptime"] == pytest.approx(12.5, abs=1e-6)

    async def test_close_is_idempotent(self, store: LightningStore) -> None:
        """Closing twice raises nothing."""
        await store.close()
        await store.close()

    # ================================================================== creating rollouts

    async def test_enqueue_rollout_creates_queuing_rollout(
        self, store: LightningStore, clock: FakeClock
    ) -> None:
        """enqueue_rollout stores a ``queuing`` rollout with no attempt, stamped by the clock."""
        clock.advance(3)
        config = RolloutConfig(timeout_seconds=30, max_attempts=2, retry_condition=["failed"])
        rollout = await store.enqueue_rollout(
            {"question": "2+2"}, mode="train", config=config, metadata={"split": "a"}
        )
        assert rollout.rollout_id.startswith("ro-")
        assert rollout.status == "queuing"
        assert rollout.start_time == clock()
        assert rollout.end_time is None
        assert (rollout.input, rollout.mode, rollout.resources_id) == ({"question": "2+2"}, "train", None)
        assert rollout.config == config
        assert rollout.metadata == {"split": "a"}
        fetched = await _rollout(store, rollout.rollout_id)
        assert not isinstance(fetched, AttemptedRollout)
        assert fetched.model_dump() == rollout.model_dump()
        assert await store.get_latest_attempt(rollout.rollout_id) is None
        assert (await store.query_attempts(rollout.rollout_id)).total == 0

    async def test_enqueue_rollout_defaults(self, store: LightningStore) -> None:
        """Without arguments a rollout has no mode, no resources and a default `RolloutConfig`."""
        rollout = await store.enqueue_rollout("plain")
        assert (rollout.mode, rollout.resources_id) == (None, None)
        assert rollout.config == RolloutConfig()

    async def test_rollout_ids_are_unique(self, store: LightningStore) -> None:
        """Every rollout gets its own id."""
        ids = {(await store.enqueue_rollout(i)).rollout_id for i in range(50)}
        ids |= {(await store.start_rollout(i)).rollout_id for i in range(50)}
        assert len(ids) == 100

    async def test_enqueue_copies_config_and_metadata(self, store: LightningStore) -> None:
        """Mutating the caller's config or metadata afterwards does not change the stored rollout."""
        metadata: dict[str, Any] = {"k": "v"}
        config = RolloutConfig(max_attempts=2, retry_condition=["failed"])
        rollout = await store.enqueue_rollout("x", config=config, metadata=metadata)
        metadata["k"] = "changed"
        metadata["extra"] = 1
        config.max_attempts = 9
        config.retry_condition = ["timeout"]
        fetched = await _rollout(store, rollout.rollout_id)
        assert fetched.metadata == {"k": "v"}
        assert fetched.config == RolloutConfig(max_attempts=2, retry_condition=["failed"])

    async def test_resources_id_defaults_to_latest_resources(self, store: LightningStore) -> None:
        """resources_id=None resolves to the latest resources (None without any); a given id is kept."""
        assert (await store.enqueue_rollout("a")).resources_id is None
        first = await store.add_resources(_resources("one"))
        assert (await store.enqueue_rollout("b")).resources_id == first.resources_id
        assert (await store.start_rollout("c")).resources_id == first.resources_id
        await store.update_resources("custom-id", _resources("two"))
        (many,) = await store.enqueue_many_rollouts([EnqueueRolloutRequest(input="d")])
        assert many.resources_id == "custom-id"
        explicit = await store.enqueue_rollout("e", resources_id="rs-not-stored-anywhere")
        assert explicit.resources_id == "rs-not-stored-anywhere"

    async def test_enqueue_many_rollouts_keeps_input_order(self, store: LightningStore) -> None:
        """enqueue_many_rollouts returns rollouts in input order and queues them in that order."""
        requests = [
            EnqueueRolloutRequest(input=0),
            EnqueueRolloutRequest(input=1, mode="val", metadata={"i": 1}),
            EnqueueRolloutRequest(input=2, config=RolloutConfig(max_attempts=3)),
        ]
        created = list(await store.enqueue_many_rollouts(requests))
        assert [r.input for r in created] == [0, 1, 2]
        assert all(r.status == "queuing" for r in created)
        assert (created[1].mode, created[1].metadata) == ("val", {"i": 1})
        assert created[2].config.max_attempts == 3
        claimed = [await _dequeue(store) for _ in created]
        assert _ids(claimed) == _ids(created)
        assert await store.dequeue_rollout() is None

    async def test_enqueue_many_rollouts_empty_batch(self, store: LightningStore) -> None:
        """An empty batch creates nothing."""
        assert list(await store.enqueue_many_rollouts([])) == []
        assert (await store.statistics())["total_rollouts"] == 0

    async def test_start_rollout_creates_preparing_rollout_with_first_attempt(
        self, store: LightningStore, clock: FakeClock
    ) -> None:
        """start_rollout creates a ``preparing`` rollout with attempt #1 and does not queue it."""
        clock.advance(1)
        started = await store.start_rollout({"q": 1}, mode="test", metadata={"m": 1})
        assert isinstance(started, AttemptedRollout)
        assert (started.status, started.mode, started.input) == ("preparing", "test", {"q": 1})
        assert started.start_time == clock()
        attempt = started.attempt
        assert attempt.attempt_id.startswith("at-")
        assert (attempt.rollout_id, attempt.sequence_id, attempt.status) == (
            started.rollout_id,
            1,
            "preparing",
        )
        assert (attempt.start_time, attempt.end_time, attempt.worker_id) == (clock(), None, None)
        assert await _latest(store, started.rollout_id) == attempt
        assert await store.dequeue_rollout() is None

    async def test_start_rollout_with_worker_records_it(
        self, store: LightningStore, clock: FakeClock
    ) -> None:
        """start_rollout(worker_id=...) puts the worker on the attempt and marks the worker busy."""
        started = await store.start_rollout("x", worker_id="worker-s")
        assert started.attempt.worker_id == "worker-s"
        worker = await _worker(store, "worker-s")
        assert worker.status == "busy"
        assert (worker.current_rollout_id, worker.current_attempt_id) == (
            started.rollout_id,
            started.attempt.attempt_id,
        )
        assert worker.last_busy_time == clock()

    # ================================================================== queue and dequeue

    async def test_dequeue_is_fifo(self, store: LightningStore, clock: FakeClock) -> None:
        """Rollouts are dequeued in the order they were enqueued."""
        created = []
        for i in range(5):
            created.append(await store.enqueue_rollout(i))
            clock.advance(1)
        claimed = [await _dequeue(store) for _ in range(5)]
        assert _ids(claimed) == _ids(created)
        assert await store.dequeue_rollout() is None

    async def test_dequeue_creates_preparing_attempt(self, store: LightningStore, clock: FakeClock) -> None:
        """A dequeue moves the rollout to ``preparing`` with a new ``preparing`` attempt #1."""
        queued = await store.enqueue_rollout("x")
        clock.advance(3)
        claimed = await _dequeue(store)
        assert (claimed.rollout_id, claimed.status, claimed.start_time) == (
            queued.rollout_id,
            "preparing",
            queued.start_time,
        )
        assert (claimed.attempt.sequence_id, claimed.attempt.status) == (1, "preparing")
        assert (claimed.attempt.start_time, claimed.attempt.end_time) == (clock(), None)
        fetched = await _rollout(store, queued.rollout_id)
        assert isinstance(fetched, AttemptedRollout)
        assert fetched.status == "preparing"
        assert fetched.attempt.attempt_id == claimed.attempt.attempt_id

    async def test_dequeue_on_empty_queue_returns_none(self, store: LightningStore) -> None:
        """Dequeueing from an empty queue returns None without blocking."""
        assert await store.dequeue_rollout() is None
        assert list(await store.dequeue_many_rollouts(limit=3)) == []

    async def test_dequeue_skips_rollouts_that_left_the_queue(self, store: LightningStore) -> None:
        """Queued rollouts that are no longer queuing (cancelled, claimed manually) are skipped."""
        cancelled = await store.enqueue_rollout("a")
        claimed_by_hand = await store.enqueue_rollout("b")
        waiting = await store.enqueue_rollout("c")
        await store.update_rollout(cancelled.rollout_id, status="cancelled")
        await store.start_attempt(claimed_by_hand.rollout_id)
        assert (await _dequeue(store)).rollout_id == waiting.rollout_id
        assert await store.dequeue_rollout() is None
        assert (await _rollout(store, cancelled.rollout_id)).status == "cancelled"
        assert len(await _attempts(store, claimed_by_hand.rollout_id)) == 1

    async def test_requeue_does_not_duplicate_queue_entries(self, store: LightningStore) -> None:
        """Writing queuing/requeuing to an already queued rollout never queues it twice."""
        rollout = await store.enqueue_rollout("a")
        await store.update_rollout(rollout.rollout_id, status="queuing")
        await store.update_rollout(rollout.rollout_id, status="requeuing")
        await store.update_rollout(rollout.rollout_id, status="queuing")
        assert (await _dequeue(store)).rollout_id == rollout.rollout_id
        assert await store.dequeue_rollout() is None
        assert len(await _attempts(store, rollout.rollout_id)) == 1
        retried = await store.start_rollout(
            "b", config=RolloutConfig(max_attempts=3, retry_condition=["failed"])
        )
        await store.update_attempt(retried.rollout_id, "latest", status="failed")
        await store.update_rollout(retried.rollout_id, status="requeuing")
        assert (await _dequeue(store)).attempt.sequence_id == 2
        assert await store.dequeue_rollout() is None

    @pytest.mark.parametrize("status", ["queuing", "requeuing"])
    async def test_update_rollout_to_queuing_status_requeues(
        self, store: LightningStore, status: str
    ) -> None:
        """update_rollout(status=queuing|requeuing) puts a held rollout back in the queue, once."""
        started = await store.start_rollout("a")
        updated = await store.update_rollout(started.rollout_id, status=status)  # type: ignore[arg-type]
        assert updated.status == status
        again = await _dequeue(store)
        assert again.rollout_id == started.rollout_id
        assert again.attempt.sequence_id == 2
        assert await store.dequeue_rollout() is None

    async def test_dequeue_many_respects_limit(self, store: LightningStore) -> None:
        """dequeue_many_rollouts claims up to `limit` in FIFO order; limit <= 0 claims nothing."""
        created = list(await store.enqueue_many_rollouts([EnqueueRolloutRequest(input=i) for i in range(5)]))
        assert list(await store.dequeue_many_rollouts(limit=0)) == []
        assert list(await store.dequeue_many_rollouts(limit=-3)) == []
        first = list(await store.dequeue_many_rollouts(limit=2))
        assert _ids(first) == _ids(created[:2])
        rest = list(await store.dequeue_many_rollouts(limit=10))
        assert _ids(rest) == _ids(created[2:])
        assert all(c.status == "preparing" and c.attempt.sequence_id == 1 for c in first + rest)
        assert list(await store.dequeue_many_rollouts(limit=1)) == []

    async def test_dequeue_many_default_limit_is_one(self, store: LightningStore) -> None:
        """dequeue_many_rollouts() without a limit claims one rollout."""
        await store.enqueue_many_rollouts([EnqueueRolloutRequest(input=i) for i in range(2)])
        assert len(await store.dequeue_many_rollouts()) == 1

    async def test_start_attempt_ignores_max_attempts(self, store: LightningStore, clock: FakeClock) -> None:
        """start_attempt adds a ``preparing`` attempt even to a failed rollout past max_attempts."""
        started = await store.start_rollout("x", config=RolloutConfig(max_attempts=1))
        rid = started.rollout_id
        await store.update_attempt(rid, started.attempt.attempt_id, status="failed")
        assert (await _rollout(store, rid)).status == "failed"
        clock.advance(2)
        retried = await store.start_attempt(rid)
        assert (retried.status, retried.end_time) == ("preparing", None)
        assert (retried.attempt.sequence_id, retried.attempt.status) == (2, "preparing")
        assert retried.attempt.start_time == clock()
        fetched = await _rollout(store, rid)
        assert (fetched.status, fetched.end_time) == ("preparing", None)
        assert [a.status for a in await _attempts(store, rid)] == ["failed", "preparing"]
        assert (await store.start_attempt(rid)).attempt.sequence_id == 3

    async def test_start_attempt_claims_a_queued_rollout(self, store: LightningStore) -> None:
        """start_attempt on a queued rollout creates attempt #1 and takes it out of the queue."""
        queued = await store.enqueue_rollout("x")
        started = await store.start_attempt(queued.rollout_id, worker_id="worker-m")
        assert (started.status, started.attempt.sequence_id) == ("preparing", 1)
        assert started.attempt.worker_id == "worker-m"
        assert (await _worker(store, "worker-m")).current_attempt_id == started.attempt.attempt_id
        assert await store.dequeue_rollout() is None

    # ================================================================== reading attempts

    async def test_limit_zero_is_an_empty_page_with_the_total(self, store: LightningStore) -> None:
        """``limit=0`` answers no items but counts every match (as Agent Lightning 0.3 did)."""
        started = await store.start_rollout("x")
        await store.enqueue_rollout("y")
        await store.add_span(make_span(started.rollout_id, started.attempt.attempt_id, 1))
        for page, total in (
            (await store.query_rollouts(limit=0), 2),
            (await store.query_rollouts(limit=0, sort_by="rollout_id"), 2),
            (await store.query_attempts(started.rollout_id, limit=0), 1),
            (await store.query_spans(started.rollout_id, limit=0), 1),
        ):
            assert (list(page), page.limit, page.total) == ([], 0, total)

    async def test_query_attempts_orders_and_pages(self, store: LightningStore, clock: FakeClock) -> None:
        """query_attempts lists attempts oldest first, sorts, pages and reports the total."""
        started = await store.start_rollout("x")
        rid = started.rollout_id
        for _ in range(2):
            clock.advance(1)
            await store.start_attempt(rid)
        result = await store.query_attempts(rid)
        assert [a.sequence_id for a in result] == [1, 2, 3]
        assert result.total == 3
        desc = await store.query_attempts(rid, sort_order="desc")
        assert [a.sequence_id for a in desc] == [3, 2, 1]
        by_time = await store.query_attempts(rid, sort_by="start_time", sort_order="desc")
        assert [a.sequence_id for a in by_time] == [3, 2, 1]
        page = await store.query_attempts(rid, limit=1, offset=1)
        assert ([a.sequence_id for a in page], page.total) == ([2], 3)
        unknown = await store.query_attempts("ro-unknown")
        assert (list(unknown), unknown.total) == ([], 0)

    async def test_get_latest_attempt_is_highest_sequence(self, store: LightningStore) -> None:
        """get_latest_attempt returns the highest sequence id; None for unknown or attempt-less rollouts."""
        started = await store.start_rollout("x")
        await store.start_attempt(started.rollout_id)
        third = await store.start_attempt(started.rollout_id)
        latest = await _latest(store, started.rollout_id)
        assert (latest.attempt_id, latest.sequence_id) == (third.attempt.attempt_id, 3)
        assert await store.get_latest_attempt("ro-unknown") is None
        assert await store.get_latest_attempt((await store.enqueue_rollout("y")).rollout_id) is None

    async def test_get_rollout_by_id_attaches_latest_attempt(self, store: LightningStore) -> None:
        """get_rollout_by_id returns the rollout with its latest attempt, or None when unknown."""
        assert await store.get_rollout_by_id("ro-unknown") is None
        started = await store.start_rollout("x")
        second = await store.start_attempt(started.rollout_id)
        fetched = await _rollout(store, started.rollout_id)
        assert isinstance(fetched, AttemptedRollout)
        assert fetched.attempt.attempt_id == second.attempt.attempt_id

    # ================================================================== status propagation

    @pytest.mark.parametrize(
        ("attempt_status", "rollout_status"),
        [
            ("preparing", "preparing"),
            ("running", "running"),
            ("succeeded", "succeeded"),
            ("failed", "failed"),
            ("timeout", "failed"),
            ("unresponsive", "failed"),
        ],
    )
    async def test_latest_attempt_status_drives_rollout(
        self, store: LightningStore, attempt_status: str, rollout_status: str
    ) -> None:
        """The rollout mirrors its latest attempt (failures without retry fail the rollout)."""
        started = await store.start_rollout("x")
        rid, aid = started.rollout_id, started.attempt.attempt_id
        await store.update_attempt(rid, aid, status="running")
        updated = await store.update_attempt(rid, aid, status=attempt_status)  # type: ignore[arg-type]
        assert updated.status == attempt_status
        assert (await _rollout(store, rid)).status == rollout_status

    async def test_rollout_end_time_follows_finished_status(
        self, store: LightningStore, clock: FakeClock
    ) -> None:
        """Finishing stamps Rollout.end_time with the clock; a non-finished status clears it."""
        started = await store.start_rollout("x")
        rid = started.rollout_id
        clock.advance(2)
        await store.update_attempt(rid, "latest", status="succeeded")
        assert (await _rollout(store, rid)).end_time == clock()
        clock.advance(2)
        assert (await store.update_rollout(rid, status="running")).end_time is None
        clock.advance(2)
        cancelled = await store.update_rollout(rid, status="cancelled")
        assert cancelled.end_time == clock()
        assert (await _rollout(store, rid)).end_time == clock()

    @pytest.mark.parametrize("status", ["failed", "succeeded", "timeout", "unresponsive"])
    async def test_attempt_end_time_set_for_every_terminal_status(
        self, store: LightningStore, clock: FakeClock, status: str
    ) -> None:
        """Attempt.end_time is stamped for every terminal status and cleared on preparing/running (fix 3)."""
        started = await store.start_rollout("x")
        rid, aid = started.rollout_id, started.attempt.attempt_id
        clock.advance(4)
        ended = await store.update_attempt(rid, aid, status=status)  # type: ignore[arg-type]
        assert ended.end_time == clock()
        assert (await _latest(store, rid)).end_time == clock()
        clock.advance(1)
        assert (await store.update_attempt(rid, aid, status="running")).end_time is None
        assert (await _latest(store, rid)).end_time is None

    async def test_update_attempt_latest_targets_highest_sequence(self, store: LightningStore) -> None:
        """update_attempt(attempt_id="latest") changes the newest attempt only."""
        started = await store.start_rollout("x")
        second = await store.start_attempt(started.rollout_id)
        updated = await store.update_attempt(started.rollout_id, "latest", status="running")
        assert updated.attempt_id == second.attempt.attempt_id
        statuses = [a.status for a in await _attempts(store, started.rollout_id)]
        assert statuses == ["preparing", "running"]
        assert (await _rollout(store, started.rollout_id)).status == "running"

    async def test_non_latest_attempt_updates_do_not_propagate(self, store: LightningStore) -> None:
        """Updating an older attempt changes that attempt only, never the rollout or the queue."""
        config = RolloutConfig(max_attempts=5, retry_condition=["failed"])
        started = await store.start_rollout("x", config=config)
        rid, first = started.rollout_id, started.attempt.attempt_id
        await store.start_attempt(rid)
        assert (await store.update_attempt(rid, first, status="succeeded")).status == "succeeded"
        assert (await _rollout(store, rid)).status == "preparing"
        await store.update_attempt(rid, first, status="failed")
        assert (await _rollout(store, rid)).status == "preparing"
        assert await store.dequeue_rollout() is None
        assert [a.status for a in await _attempts(store, rid)] == ["failed", "preparing"]

    @pytest.mark.parametrize("finished", ["cancelled", "succeeded", "failed"])
    async def test_finished_rollout_ignores_later_attempt_updates(
        self, store: LightningStore, clock: FakeClock, finished: str
    ) -> None:
        """Attempt updates never change a finished rollout or its end_time (fix 2)."""
        config = RolloutConfig(max_attempts=5, retry_condition=["failed"])
        started = await store.start_rollout("x", config=config)
        rid = started.rollout_id
        ended = await store.update_rollout(rid, status=finished)  # type: ignore[arg-type]
        for status in ("running", "succeeded", "failed", "preparing"):
            clock.advance(1)
            assert (await store.update_attempt(rid, "latest", status=status)).status == status
            fetched = await _rollout(store, rid)
            assert (fetched.status, fetched.end_time) == (finished, ended.end_time), status
        assert await store.dequeue_rollout() is None

    async def test_update_rollout_sets_status_without_guard(self, store: LightningStore) -> None:
        """update_rollout sets any status directly, finished ones included, and leaves attempts alone."""
        started = await store.start_rollout("x")
        rid = started.rollout_id
        await store.update_attempt(rid, "latest", status="succeeded")
        assert (await store.update_rollout(rid, status="running")).status == "running"
        assert (await _latest(store, rid)).status == "succeeded"
        assert (await store.update_rollout(rid, status="cancelled")).status == "cancelled"
        assert (await _latest(store, rid)).status == "succeeded"

    async def test_cancelling_keeps_attempt_open(self, store: LightningStore) -> None:
        """Cancelling a held rollout does not end its attempt."""
        started = await store.start_rollout("x")
        await store.update_rollout(started.rollout_id, status="cancelled")
        attempt = await _latest(store, started.rollout_id)
        assert (attempt.status, attempt.end_time) == ("preparing", None)

    # ================================================================== spans as heartbeats

    async def test_span_moves_preparing_attempt_and_rollout_to_running(
        self, store: LightningStore, clock: FakeClock
    ) -> None:
        """The first span of a preparing attempt makes attempt and rollout ``running``."""
        claimed = await _claim(store)
        clock.advance(1)
        await store.add_span(make_span(claimed.rollout_id, claimed.attempt.attempt_id, 1))
        attempt = await _latest(store, claimed.rollout_id)
        assert (attempt.status, attempt.last_heartbeat_time) == ("running", clock())
        assert (await _rollout(store, claimed.rollout_id)).status == "running"

    @pytest.mark.parametrize("queued_status", ["queuing", "requeuing"])
    async def test_span_moves_queued_rollout_to_running(
        self, store: LightningStore, queued_status: str
    ) -> None:
        """A span of the latest attempt moves a queuing/requeuing rollout to running (fix 1)."""
        started = await store.start_rollout("x")
        rid, aid = started.rollout_id, started.attempt.attempt_id
        await store.update_rollout(rid, status=queued_status)  # type: ignore[arg-type]
        await store.add_span(make_span(rid, aid, 1))
        assert (await _latest(store, rid)).status == "running"
        assert (await _rollout(store, rid)).status == "running"
        assert await store.dequeue_rollout() is None

    async def test_span_revives_unresponsive_attempt(self, store: LightningStore, clock: FakeClock) -> None:
        """A span brings an unresponsive latest attempt and its requeuing rollout back to running."""
        config = RolloutConfig(max_attempts=2, retry_condition=["unresponsive"])
        started = await store.start_rollout("x", config=config)
        rid, aid = started.rollout_id, started.attempt.attempt_id
        await store.update_attempt(rid, aid, status="unresponsive")
        assert (await _rollout(store, rid)).status == "requeuing"
        clock.advance(1)
        await store.add_span(make_span(rid, aid, 1))
        attempt = await _latest(store, rid)
        assert (attempt.attempt_id, attempt.status, attempt.end_time) == (aid, "running", None)
        assert attempt.last_heartbeat_time == clock()
        assert (await _rollout(store, rid)).status == "running"
        assert await store.dequeue_rollout() is None

    @pytest.mark.parametrize("status", ["failed", "succeeded", "timeout"])
    async def test_span_on_ended_attempt_only_refreshes_heartbeat(
        self, store: LightningStore, clock: FakeClock, status: str
    ) -> None:
        """A span for a failed/succeeded/timeout attempt refreshes its heartbeat and moves nothing."""
        config = RolloutConfig(max_attempts=3, retry_condition=["failed", "timeout"])
        started = await store.start_rollout("x", config=config)
        rid, aid = started.rollout_id, started.attempt.attempt_id
        ended = await store.update_attempt(rid, aid, status=status)  # type: ignore[arg-type]
        before = await _rollout(store, rid)
        clock.advance(3)
        assert await store.add_span(make_span(rid, aid, 1)) is not None
        attempt = await _latest(store, rid)
        assert (attempt.status, attempt.end_time, attempt.last_heartbeat_time) == (
            status,
            ended.end_time,
            clock(),
        )
        after = await _rollout(store, rid)
        assert (after.status, after.end_time) == (before.status, before.end_time)

    async def test_span_on_older_attempt_does_not_move_rollout(self, store: LightningStore) -> None:
        """A span of a non-latest attempt revives that attempt but leaves the rollout alone."""
        started = await store.start_rollout("x")
        rid, first = started.rollout_id, started.attempt.attempt_id
        second = await store.start_attempt(rid)
        await store.add_span(make_span(rid, first, 1))
        statuses = {a.attempt_id: a.status for a in await _attempts(store, rid)}
        assert statuses == {first: "running", second.attempt.attempt_id: "preparing"}
        assert (await _rollout(store, rid)).status == "preparing"

    async def test_span_on_finished_rollout_does_not_move_it(self, store: LightningStore) -> None:
        """A span never moves a finished rollout, even when its attempt was still open (fix 2)."""
        started = await store.start_rollout("x")
        rid, aid = started.rollout_id, started.attempt.attempt_id
        cancelled = await store.update_rollout(rid, status="cancelled")
        await store.add_span(make_span(rid, aid, 1))
        fetched = await _rollout(store, rid)
        assert (fetched.status, fetched.end_time) == ("cancelled", cancelled.end_time)
        assert (await _latest(store, rid)).status == "running"

    # ================================================================== retries

    @pytest.mark.parametrize("condition", ["failed", "timeout", "unresponsive"])
    async def test_retries_up_to_max_attempts(
        self, store: LightningStore, clock: FakeClock, condition: str
    ) -> None:
        """A listed retry condition requeues the rollout until max_attempts attempts have run."""
        config = RolloutConfig(max_attempts=3, retry_condition=[condition])  # type: ignore[list-item]
        queued = await store.enqueue_rollout("x", config=config)
        rid = queued.rollout_id
        for sequence_id in (1, 2, 3):
            claimed = await _dequeue(store)
            assert (claimed.rollout_id, claimed.attempt.sequence_id) == (rid, sequence_id)
            clock.advance(1)
            await store.update_attempt(rid, claimed.attempt.attempt_id, status=condition)  # type: ignore[arg-type]
            rollout = await _rollout(store, rid)
            if sequence_id < 3:
                assert (rollout.status, rollout.end_time) == ("requeuing", None)
            else:
                assert (rollout.status, rollout.end_time) == ("failed", clock())
        assert await store.dequeue_rollout() is None
        assert [a.status for a in await _attempts(store, rid)] == [condition] * 3

    @pytest.mark.parametrize("condition", ["failed", "timeout", "unresponsive"])
    async def test_no_retry_when_condition_not_listed(self, store: LightningStore, condition: str) -> None:
        """A failure whose status is not in retry_condition fails the rollout at once."""
        others = [c for c in ("failed", "timeout", "unresponsive") if c != condition]
        claimed = await _claim(store, RolloutConfig(max_attempts=3, retry_condition=others))  # type: ignore[arg-type]
        await store.update_attempt(claimed.rollout_id, "latest", status=condition)  # type: ignore[arg-type]
        assert (await _rollout(store, claimed.rollout_id)).status == "failed"
        assert await store.dequeue_rollout() is None

    async def test_default_config_never_retries(self, store: LightningStore) -> None:
        """With the default config a failed attempt fails the rollout."""
        claimed = await _claim(store)
        await store.update_attempt(claimed.rollout_id, "latest", status="failed")
        assert (await _rollout(store, claimed.rollout_id)).status == "failed"
        assert await store.dequeue_rollout() is None

    async def test_success_is_never_retried(self, store: LightningStore) -> None:
        """A succeeded attempt finishes the rollout whatever the retry policy."""
        config = RolloutConfig(max_attempts=5, retry_condition=["failed", "timeout", "unresponsive"])
        claimed = await _claim(store, config)
        await store.update_attempt(claimed.rollout_id, "latest", status="succeeded")
        assert (await _rollout(store, claimed.rollout_id)).status == "succeeded"
        assert await store.dequeue_rollout() is None

    # ================================================================== watchdog

    async def test_watchdog_times_out_from_attempt_start(
        self, store: LightningStore, clock: FakeClock
    ) -> None:
        """timeout_seconds counts from the attempt start (strictly greater), not the rollout start."""
        await store.enqueue_rollout("x", config=RolloutConfig(timeout_seconds=10))
        clock.advance(100)
        claimed = await _dequeue(store)
        rid = claimed.rollout_id
        clock.advance(10)
        assert (await _rollout(store, rid)).status == "preparing"
        clock.advance(0.5)
        rollout = await _rollout(store, rid)
        attempt = await _latest(store, rid)
        assert (attempt.status, attempt.end_time) == ("timeout", clock())
        assert (rollout.status, rollout.end_time) == ("failed", clock())

    async def test_watchdog_timeout_ignores_heartbeats(self, store: LightningStore, clock: FakeClock) -> None:
        """Heartbeats do not postpone a timeout."""
        claimed = await _claim(store, RolloutConfig(timeout_seconds=10, unresponsive_seconds=100))
        rid, aid = claimed.rollout_id, claimed.attempt.attempt_id
        for sequence_id in (1, 2, 3):
            clock.advance(3)
            await store.add_span(make_span(rid, aid, sequence_id))
        assert (await _rollout(store, rid)).status == "running"
        clock.advance(1.5)
        assert (await _latest(store, rid)).status == "timeout"
        assert (await _rollout(store, rid)).status == "failed"

    async def test_watchdog_unresponsive_without_heartbeat(
        self, store: LightningStore, clock: FakeClock
    ) -> None:
        """With no heartbeat, unresponsive_seconds counts from the attempt start."""
        claimed = await _claim(store, RolloutConfig(unresponsive_seconds=5))
        rid = claimed.rollout_id
        clock.advance(5)
        assert (await _latest(store, rid)).status == "preparing"
        clock.advance(0.1)
        attempt = await _latest(store, rid)
        assert (attempt.status, attempt.end_time) == ("unresponsive", clock())
        assert (await _rollout(store, rid)).status == "failed"

    async def test_watchdog_unresponsive_from_last_span(
        self, store: LightningStore, clock: FakeClock
    ) -> None:
        """Spans are heartbeats: unresponsive_seconds counts from the latest one."""
        claimed = await _claim(store, RolloutConfig(unresponsive_seconds=5))
        rid, aid = claimed.rollout_id, claimed.attempt.attempt_id
        clock.advance(4)
        await store.add_span(make_span(rid, aid, 1))
        clock.advance(4)
        assert (await _latest(store, rid)).status == "running"
        clock.advance(1.5)
        assert (await _latest(store, rid)).status == "unresponsive"
        assert (await _rollout(store, rid)).status == "failed"

    async def test_watchdog_unresponsive_from_heartbeat_field(
        self, store: LightningStore, clock: FakeClock
    ) -> None:
        """A heartbeat written with update_attempt(last_heartbeat_time=...) postpones unresponsive."""
        claimed = await _claim(store, RolloutConfig(unresponsive_seconds=5))
        rid, aid = claimed.rollout_id, claimed.attempt.attempt_id
        clock.advance(4)
        beat = await store.update_attempt(rid, aid, last_heartbeat_time=clock())
        assert (beat.status, beat.last_heartbeat_time) == ("preparing", clock())
        clock.advance(4)
        assert (await _latest(store, rid)).status == "preparing"
        clock.advance(1.5)
        assert (await _latest(store, rid)).status == "unresponsive"

    @pytest.mark.parametrize("condition", ["timeout", "unresponsive"])
    async def test_watchdog_flags_go_through_retry_policy(
        self, store: LightningStore, clock: FakeClock, condition: str
    ) -> None:
        """A watchdog flag requeues per retry_condition/max_attempts and marks the worker unknown."""
        limit = {"timeout_seconds": 10} if condition == "timeout" else {"unresponsive_seconds": 10}
        config = RolloutConfig(max_attempts=2, retry_condition=[condition], **limit)  # type: ignore[list-item]
        first = await _claim(store, config, worker_id="worker-wd")
        rid = first.rollout_id
        clock.advance(11)
        (listed,) = await store.query_rollouts(rollout_id_in=[rid])
        assert listed.status == "requeuing"
        assert (await _worker(store, "worker-wd")).status == "unknown"
        second = await _dequeue(store)
        assert (second.rollout_id, second.attempt.sequence_id, second.attempt.start_time) == (rid, 2, clock())
        clock.advance(11)
        assert (await _rollout(store, rid)).status == "failed"
        assert [a.status for a in await _attempts(store, rid)] == [condition, condition]

    @pytest.mark.parametrize("method", sorted(_GUARDED_CALLS))
    async def test_watchdog_scans_before_guarded_method(
        self, store: LightningStore, clock: FakeClock, method: str
    ) -> None:
        """Each guarded method runs the watchdog first (observed through the worker it frees)."""
        other = await store.start_rollout("bystander")
        await _claim(store, RolloutConfig(timeout_seconds=1), worker_id="worker-g")
        clock.advance(2)
        assert (await _worker(store, "worker-g")).status == "busy", "get_worker_by_id must not scan"
        await _GUARDED_CALLS[method](store, other.rollout_id)
        assert (await _worker(store, "worker-g")).status == "unknown"

    async def test_late_span_rescues_attempt_before_any_scan(
        self, store: LightningStore, clock: FakeClock
    ) -> None:
        """Span writes do not scan, so a late heartbeat keeps an attempt the watchdog had not flagged."""
        claimed = await _claim(store, RolloutConfig(unresponsive_seconds=5), worker_id="worker-late")
        rid, aid = claimed.rollout_id, claimed.attempt.attempt_id
        clock.advance(6)
        await store.add_span(make_span(rid, aid, 1))
        await store.add_many_spans([make_span(rid, aid, 2)])
        assert (await _rollout(store, rid)).status == "running"
        assert (await _latest(store, rid)).status == "running"
        assert (await _worker(store, "worker-late")).status == "busy"

    async def test_watchdog_leaves_finished_rollouts_alone(
        self, store: LightningStore, clock: FakeClock
    ) -> None:
        """Attempts of finished rollouts are never flagged."""
        started = await store.start_rollout(
            "x", config=RolloutConfig(timeout_seconds=1, unresponsive_seconds=1)
        )
        rid = started.rollout_id
        await store.update_rollout(rid, status="cancelled")
        clock.advance(50)
        assert (await _rollout(store, rid)).status == "cancelled"
        assert (await _latest(store, rid)).status == "preparing"

    async def test_watchdog_checks_latest_attempt_only(self, store: LightningStore, clock: FakeClock) -> None:
        """Only the latest attempt of a held rollout is checked; older ones are never flagged."""
        started = await store.start_rollout("x", config=RolloutConfig(timeout_seconds=10))
        rid = started.rollout_id
        clock.advance(8)
        await store.start_attempt(rid)
        clock.advance(5)
        assert (await _rollout(store, rid)).status == "preparing"
        assert [a.status for a in await _attempts(store, rid)] == ["preparing", "preparing"]

    async def test_watchdog_ignores_ended_attempts(self, store: LightningStore, clock: FakeClock) -> None:
        """A terminal attempt is never re-flagged, and its end_time stays put."""
        claimed = await _claim(store, RolloutConfig(timeout_seconds=1, unresponsive_seconds=1))
        done = await store.update_attempt(claimed.rollout_id, "latest", status="succeeded")
        clock.advance(30)
        attempt = await _latest(store, claimed.rollout_id)
        assert (attempt.status, attempt.end_time) == ("succeeded", done.end_time)

    async def test_no_watchdog_without_limits(self, store: LightningStore, clock: FakeClock) -> None:
        """Without timeout_seconds/unresponsive_seconds an attempt is never flagged."""
        claimed = await _claim(store)
        clock.advance(10**7)
        assert (await _latest(store, claimed.rollout_id)).status == "preparing"

    # ================================================================== workers

    async def test_dequeue_marks_worker_busy(self, store: LightningStore, clock: FakeClock) -> None:
        """A dequeue with a worker id records it on the attempt and makes the worker busy with it."""
        await store.enqueue_rollout("x")
        clock.advance(2)
        claimed = await _dequeue(store, "worker-1")
        assert claimed.attempt.worker_id == "worker-1"
        worker = await _worker(store, "worker-1")
        assert worker.status == "busy"
        assert (worker.current_rollout_id, worker.current_attempt_id) == (
            claimed.rollout_id,
            claimed.attempt.attempt_id,
        )
        assert (worker.last_dequeue_time, worker.last_busy_time) == (clock(), clock())

    async def test_empty_dequeue_marks_worker_idle(self, store: LightningStore, clock: FakeClock) -> None:
        """A dequeue that finds nothing records the worker as idle."""
        clock.advance(1)
        assert await store.dequeue_rollout(worker_id="worker-new") is None
        worker = await _worker(store, "worker-new")
        assert (worker.status, worker.last_dequeue_time, worker.last_idle_time) == ("idle", clock(), clock())
        await _claim(store, worker_id="worker-busy")
        clock.advance(1)
        assert await store.dequeue_rollout(worker_id="worker-busy") is None
        worker = await _worker(store, "worker-busy")
        assert (worker.status, worker.last_dequeue_time) == ("idle", clock())

    @pytest.mark.parametrize(
        ("attempt_status", "worker_status"),
        [("succeeded", "idle"), ("failed", "idle"), ("timeout", "unknown"), ("unresponsive", "unknown")],
    )
    async def test_attempt_outcome_sets_worker_status(
        self, store: LightningStore, clock: FakeClock, attempt_status: str, worker_status: str
    ) -> None:
        """succeeded/failed free the worker as idle; timeout/unresponsive as unknown."""
        claimed = await _claim(store, worker_id="worker-o")
        clock.advance(3)
        await store.update_attempt(claimed.rollout_id, claimed.attempt.attempt_id, status=attempt_status)  # type: ignore[arg-type]
        worker = await _worker(store, "worker-o")
        assert (worker.status, worker.last_idle_time) == (worker_status, clock())
        assert (worker.current_rollout_id, worker.current_attempt_id) == (None, None)

    async def test_running_attempt_keeps_worker_busy(self, store: LightningStore, clock: FakeClock) -> None:
        """A non-terminal status write on an attempt with a worker keeps the worker busy."""
        claimed = await _claim(store, worker_id="worker-r")
        clock.advance(3)
        await store.update_attempt(claimed.rollout_id, "latest", status="running")
        worker = await _worker(store, "worker-r")
        assert (worker.status, worker.last_busy_time, worker.current_attempt_id) == (
            "busy",
            clock(),
            claimed.attempt.attempt_id,
        )

    async def test_update_attempt_with_worker_assigns_it(self, store: LightningStore) -> None:
        """update_attempt(worker_id=...) records the worker on the attempt and makes it busy."""
        started = await store.start_rollout("x")
        updated = await store.update_attempt(started.rollout_id, "latest", worker_id="worker-late")
        assert updated.worker_id == "worker-late"
        worker = await _worker(store, "worker-late")
        assert (worker.status, worker.current_rollout_id, worker.current_attempt_id) == (
            "busy",
            started.rollout_id,
            started.attempt.attempt_id,
        )

    async def test_dequeue_many_associates_worker_with_last_claim(self, store: LightningStore) -> None:
        """dequeue_many_rollouts leaves the worker busy with its last claim, idle when nothing was claimed."""
        await store.enqueue_many_rollouts([EnqueueRolloutRequest(input=i) for i in range(3)])
        claims = list(await store.dequeue_many_rollouts(limit=2, worker_id="worker-b"))
        worker = await _worker(store, "worker-b")
        assert (worker.status, worker.current_attempt_id) == ("busy", claims[-1].attempt.attempt_id)
        assert all(c.attempt.worker_id == "worker-b" for c in claims)
        (last,) = await store.dequeue_many_rollouts(limit=5, worker_id="worker-b")
        worker = await _worker(store, "worker-b")
        assert (worker.status, worker.current_rollout_id) == ("busy", last.rollout_id)
        assert list(await store.dequeue_many_rollouts(limit=2, worker_id="worker-b")) == []
        assert (await _worker(store, "worker-b")).status == "idle"

    async def test_update_worker_is_a_heartbeat(self, store: LightningStore, clock: FakeClock) -> None:
        """update_worker upserts (new workers are unknown), stamps the heartbeat, replaces stats if given."""
        clock.advance(1)
        created = await store.update_worker("worker-h", heartbeat_stats={"cpu": 0.5})
        assert (created.status, created.last_heartbeat_time, created.heartbeat_stats) == (
            "unknown",
            clock(),
            {"cpu": 0.5},
        )
        clock.advance(1)
        kept = await store.update_worker("worker-h")
        assert (kept.last_heartbeat_time, kept.heartbeat_stats) == (clock(), {"cpu": 0.5})
        replaced = await store.update_worker("worker-h", heartbeat_stats={"gpu": 1})
        assert replaced.heartbeat_stats == {"gpu": 1}
        assert (await _worker(store, "worker-h")).heartbeat_stats == {"gpu": 1}

    async def test_update_worker_keeps_status_and_current_work(self, store: LightningStore) -> None:
        """A heartbeat never changes a worker's status or current ids."""
        claimed = await _claim(store, worker_id="worker-k")
        beat = await store.update_worker("worker-k", heartbeat_stats={"load": 1})
        assert (beat.status, beat.current_attempt_id) == ("busy", claimed.attempt.attempt_id)

    async def test_get_worker_by_id_unknown_is_none(self, store: LightningStore) -> None:
        """An unknown worker id gives None."""
        assert await store.get_worker_by_id("worker-nobody") is None

    async def test_query_workers_filters_sorts_and_pages(self, store: LightningStore) -> None:
        """query_workers filters by status and case-sensitive id substring, with and/or, sort and paging."""
        await _claim(store, worker_id="alpha-1")
        await store.dequeue_rollout(worker_id="alpha-2")
        await store.update_worker("Beta-1")

        async def ids(**kwargs: Any) -> list[str]:
            return _ids(await store.query_workers(**kwargs))

        assert sorted(await ids()) == ["Beta-1", "alpha-1", "alpha-2"]
        assert sorted(await ids(status_in=["busy", "idle"])) == ["alpha-1", "alpha-2"]
        assert await ids(status_in=["unknown"]) == ["Beta-1"]
        assert sorted(await ids(worker_id_contains="alpha")) == ["alpha-1", "alpha-2"]
        assert await ids(worker_id_contains="beta") == []
        assert sorted(await ids(status_in=["unknown"], worker_id_contains="alpha", filter_logic="or")) == [
            "Beta-1",
            "alpha-1",
            "alpha-2",
        ]
        assert await ids(status_in=["unknown"], worker_id_contains="alpha") == []
        assert len(await ids(filter_logic="or")) == 3
        assert await ids(sort_by="worker_id") == ["Beta-1", "alpha-1", "alpha-2"]
        assert await ids(sort_by="worker_id", sort_order="desc") == ["alpha-2", "alpha-1", "Beta-1"]
        assert (await ids(sort_by="last_heartbeat_time"))[0] == "Beta-1"
        assert (await ids(sort_by="last_heartbeat_time", sort_order="desc"))[-1] == "Beta-1"
        page = await store.query_workers(sort_by="worker_id", limit=1, offset=1)
        assert (_ids(page), page.total) == (["alpha-1"], 3)

    # ================================================================== resources

    async def test_add_resources_creates_version_one(self, store: LightningStore, clock: FakeClock) -> None:
        """add_resources stores a snapshot under a fresh rs- id at version 1 and makes it the latest."""
        clock.advance(1)
        added = await store.add_resources(_resources("a"))
        assert added.resources_id.startswith("rs-")
        assert (added.version, added.create_time, added.update_time) == (1, clock(), clock())
        assert added.resources == _resources("a")
        assert await store.get_resources_by_id(added.resources_id) == added
        assert await store.get_latest_resources() == added
        other = await store.add_resources(_resources("b"))
        assert other.resources_id != added.resources_id
        assert await store.get_latest_resources() == other

    async def test_resources_lookups_when_missing(self, store: LightningStore) -> None:
        """get_latest_resources and get_resources_by_id return None when there is nothing to return."""
        assert await store.get_latest_resources() is None
        assert await store.get_resources_by_id("rs-missing") is None

    async def test_update_resources_bumps_version(self, store: LightningStore, clock: FakeClock) -> None:
        """update_resources on a known id bumps the version, keeps create_time, stamps update_time."""
        added = await store.add_resources(_resources("a"))
        clock.advance(5)
        updated = await store.update_resources(added.resources_id, _resources("b"))
        assert (updated.resources_id, updated.version) == (added.resources_id, 2)
        assert (updated.create_time, updated.update_time) == (added.create_time, clock())
        assert updated.resources == _resources("b")
        assert await store.get_resources_by_id(added.resources_id) == updated
        assert (await store.update_resources(added.resources_id, _resources("c"))).version == 3

    async def test_update_resources_upserts_unknown_id(self, store: LightningStore, clock: FakeClock) -> None:
        """update_resources on an unknown id creates it at version 1 (kept 0.3 behaviour)."""
        created = await store.update_resources("default", _resources("a"))
        assert (created.resources_id, created.version) == ("default", 1)
        assert created.create_time == created.update_time == clock()
        assert await store.get_latest_resources() == created

    async def test_latest_resources_is_last_written(self, store: LightningStore) -> None:
        """The latest snapshot is the one most recently added or updated."""
        first = await store.add_resources(_resources("a"))
        await store.add_resources(_resources("b"))
        bumped = await store.update_resources(first.resources_id, _resources("c"))
        assert await store.get_latest_resources() == bumped

    async def test_resources_keep_their_types(self, store: LightningStore) -> None:
        """Stored resources come back as the same resource classes."""
        resources: NamedResources = {
            "llm": LLM(endpoint="http://a/v1", model="m", sampling_parameters={"temperature": 0.2}),
            "proxy": ProxyLLM(endpoint="http://proxy/v1", model="p"),
            "prompt": PromptTemplate(template="{x}", engine="f-string"),
        }
        added = await store.add_resources(resources)
        fetched = await store.get_resources_by_id(added.resources_id)
        assert fetched is not None
        assert {name: type(r) for name, r in fetched.resources.items()} == {
            "llm": LLM,
            "proxy": ProxyLLM,
            "prompt": PromptTemplate,
        }
        assert fetched.resources == resources

    async def test_query_resources_filters_sorts_and_pages(self, store: LightningStore) -> None:
        """query_resources filters by exact id and case-sensitive substring (ANDed), sorts and pages."""
        for resources_id in ("prompt-A", "prompt-b", "llm-main"):
            await store.update_resources(resources_id, _resources(resources_id))
        await store.update_resources("prompt-b", _resources("again"))

        async def ids(**kwargs: Any) -> list[str]:
            return [r.resources_id for r in await store.query_resources(**kwargs)]

        assert await ids() == ["prompt-A", "prompt-b", "llm-main"]
        assert await ids(resources_id="prompt-A") == ["prompt-A"]
        assert await ids(resources_id_contains="prompt") == ["prompt-A", "prompt-b"]
        assert await ids(resources_id_contains="PROMPT") == []
        assert await ids(resources_id="llm-main", resources_id_contains="prompt") == []
        assert await ids(resources_id="llm-main", resources_id_contains="main") == ["llm-main"]
        assert (await ids(sort_by="version", sort_order="desc"))[0] == "prompt-b"
        assert await ids(sort_by="resources_id") == ["llm-main", "prompt-A", "prompt-b"]
        page = await store.query_resources(sort_by="resources_id", limit=2, offset=1)
        assert ([r.resources_id for r in page], page.total) == (["prompt-A", "prompt-b"], 3)

    # ================================================================== span storage and sequence ids

    async def test_sequence_ids_are_per_rollout_and_consecutive(self, store: LightningStore) -> None:
        """Sequence ids count 1, 2, 3 per rollout, whatever the attempt id."""
        a = await store.start_rollout("a")
        b = await store.start_rollout("b")
        aid = a.attempt.attempt_id
        assert [await store.get_next_span_sequence_id(a.rollout_id, aid) for _ in range(3)] == [1, 2, 3]
        assert await store.get_next_span_sequence_id(b.rollout_id, b.attempt.attempt_id) == 1
        assert await store.get_next_span_sequence_id(a.rollout_id, "at-other") == 4

    async def test_sequence_ids_need_no_existing_rollout(self, store: LightningStore) -> None:
        """Sequence ids are not validated, so a tracer can allocate them before any span lands."""
        assert await store.get_next_span_sequence_id("ro-not-created", "at-x") == 1
        assert await store.get_next_span_sequence_id("ro-not-created", "at-x") == 2

    async def test_get_many_span_sequence_ids(self, store: LightningStore) -> None:
        """get_many_span_sequence_ids issues one id per pair in input order, sharing per-rollout counters."""
        a = (await store.start_rollout("a")).rollout_id
        b = (await store.start_rollout("b")).rollout_id
        assert await store.get_next_span_sequence_id(a, "at-x") == 1
        issued = await store.get_many_span_sequence_ids([(a, "at-x"), (b, "at-y"), (a, "at-x"), (a, "at-z")])
        assert list(issued) == [2, 1, 3, 4]
        assert await store.get_next_span_sequence_id(a, "at-x") == 5
        assert list(await store.get_many_span_sequence_ids([])) == []

    async def test_explicit_sequence_id_raises_counter(self, store: LightningStore) -> None:
        """A stored span's sequence_id raises the rollout's counter (never lowers it), in every add path."""
        started = await store.start_rollout("x")
        rid, aid = started.rollout_id, started.attempt.attempt_id
        await store.add_span(make_span(rid, aid, 10))
        assert await store.get_next_span_sequence_id(rid, aid) == 11
        await store.add_span(make_span(rid, aid, 3))
        assert await store.get_next_span_sequence_id(rid, aid) == 12
        await store.add_many_spans([make_span(rid, aid, 20), make_span(rid, aid, 15)])
        assert await store.get_next_span_sequence_id(rid, aid) == 21
        await store.add_otel_span(rid, aid, _otel_span("explicit"), sequence_id=30)
        assert await store.get_next_span_sequence_id(rid, aid) == 31

    async def test_spans_without_sequence_id_are_numbered_by_the_store(self, store: LightningStore) -> None:
        """Spans sent with sequence_id 0 get the rollout's next ids, in input order, in every add path.

        The counter is the one `get_next_span_sequence_id` uses; an identity resource attribute of 0
        (as the tracer stamps it) gets the same id; a duplicate is skipped as usual.
        """
        key = LightningResourceAttributes.SPAN_SEQUENCE_ID.value
        started = await store.start_rollout("x")
        other = await store.start_rollout("y")
        rid, aid = started.rollout_id, started.attempt.attempt_id
        assert await store.get_next_span_sequence_id(rid, aid) == 1
        first = await store.add_span(make_span(rid, aid, 0, span_id=_span_id(1)))
        assert first is not None and first.sequence_id == 2
        tagged = make_span(rid, aid, 0, span_id=_span_id(2))
        tagged.resource.attributes[key] = 0
        batch = [tagged, make_span(other.rollout_id, other.attempt.attempt_id, 0), make_span(rid, aid, 0)]
        inserted = list(await store.add_many_spans(batch))
        assert [s.sequence_id for s in inserted] == [3, 1, 4]
        assert inserted[0].resource.attributes[key] == 3
        await store.add_span(make_span(rid, aid, 10))
        stored = await store.add_otel_span(rid, aid, _otel_span("numbered"))
        assert stored is not None and stored.sequence_id == 11
        assert await store.get_next_span_sequence_id(rid, aid) == 12
        assert await store.add_span(make_span(rid, aid, 0, span_id=_span_id(1))) is None
        spans = await store.query_spans(rid)
        assert [s.sequence_id for s in spans] == [2, 3, 4, 10, 11]
        assert spans[1].resource.attributes[key] == 3

    async def test_add_span_stores_the_span(self, store: LightningStore) -> None:
        """add_span returns the span and query_spans gives it back unchanged."""
        started = await store.start_rollout("x")
        span = make_span(
            started.rollout_id,
            started.attempt.attempt_id,
            1,
            name="llm.call",
            parent_id=_span_id(9),
            start_time=5.0,
            attributes={"gen_ai.request.model": "m", "tokens": 12, "ok": True},
        )
        stored = await store.add_span(span)
        assert stored is not None
        assert stored.model_dump() == span.model_dump()
        (fetched,) = await store.query_spans(started.rollout_id)
        assert fetched.model_dump() == span.model_dump()

    async def test_duplicate_span_is_ignored(self, store: LightningStore) -> None:
        """A second span with the same (rollout, attempt, span_id) returns None and is not stored."""
        started = await store.start_rollout("x")
        rid, aid = started.rollout_id, started.attempt.attempt_id
        assert await store.add_span(make_span(rid, aid, 1, span_id=_span_id(1), name="first")) is not None
        assert await store.add_span(make_span(rid, aid, 2, span_id=_span_id(1), name="second")) is None
        spans = await store.query_spans(rid)
        assert ([s.name for s in spans], spans.total) == (["first"], 1)
        second = await store.start_attempt(rid)
        other = await store.start_rollout("y")
        assert (
            await store.add_span(make_span(rid, second.attempt.attempt_id, 3, span_id=_span_id(1)))
            is not None
        )
        assert await store.add_span(
            make_span(other.rollout_id, other.attempt.attempt_id, 1, span_id=_span_id(1))
        )
        assert (await store.query_spans(rid)).total == 2
        assert (await store.statistics())["total_spans"] == 3

    async def test_add_many_spans_returns_only_inserted(self, store: LightningStore) -> None:
        """add_many_spans returns the inserted spans in input order, skipping duplicates (even in-batch)."""
        started = await store.start_rollout("x")
        rid, aid = started.rollout_id, started.attempt.attempt_id
        await store.add_span(make_span(rid, aid, 1, span_id=_span_id(1)))
        batch = [
            make_span(rid, aid, 2, span_id=_span_id(1)),
            make_span(rid, aid, 3, span_id=_span_id(2)),
            make_span(rid, aid, 4, span_id=_span_id(3)),
            make_span(rid, aid, 5, span_id=_span_id(2)),
        ]
        inserted = list(await store.add_many_spans(batch))
        assert [(s.span_id, s.sequence_id) for s in inserted] == [(_span_id(2), 3), (_span_id(3), 4)]
        assert [s.sequence_id for s in await store.query_spans(rid)] == [1, 3, 4]
        assert list(await store.add_many_spans([])) == []

    async def test_add_otel_span_converts_a_real_span(self, store: LightningStore) -> None:
        """add_otel_span stores an OpenTelemetry SDK span with an allocated sequence id, once."""
        started = await store.start_rollout("x")
        rid, aid = started.rollout_id, started.attempt.attempt_id
        readable = _otel_span("openai.chat.completion", attributes={"gen_ai.usage.total_tokens": 42})
        stored = await store.add_otel_span(rid, aid, readable)
        assert stored is not None
        context = readable.get_span_context()
        assert context is not None
        assert (stored.rollout_id, stored.attempt_id, stored.sequence_id) == (rid, aid, 1)
        assert (stored.name, stored.attributes) == (
            "openai.chat.completion",
            {"gen_ai.usage.total_tokens": 42},
        )
        assert (stored.trace_id, stored.span_id) == (
            format(context.trace_id, "032x"),
            format(context.span_id, "016x"),
        )
        assert (await store.add_otel_span(rid, aid, _otel_span("second"))) is not None
        assert [s.sequence_id for s in await store.query_spans(rid)] == [1, 2]
        assert (await _latest(store, rid)).status == "running"
        assert await store.add_otel_span(rid, aid, readable) is None
        assert (await store.query_spans(rid)).total == 2

    # ================================================================== query_spans

    async def _span_corpus(self, store: LightningStore) -> tuple[str, str, str, dict[str, Span]]:
        """Rollout with spans s1-s3 on attempt 1 and s4-s5 on attempt 2, added out of sequence order."""
        started = await store.start_rollout("spans")
        rid, first = started.rollout_id, started.attempt.attempt_id
        second = (await store.start_attempt(rid)).attempt.attempt_id
        s1 = make_span(
            rid, first, 1, name="llm.call", span_id=_span_id(1), trace_id=_TRACE_A, start_time=10.0
        )
        s2 = make_span(
            rid,
            first,
            2,
            name="tool.search",
            span_id=_span_id(2),
            trace_id=_TRACE_A,
            parent_id=s1.span_id,
            start_time=11.0,
        )
        s3 = make_span(rid, first, 3, name="LLM.Call", span_id=_span_id(3), trace_id=_TRACE_B)
        s4 = make_span(
            rid,
            second,
            4,
            name="llm.call",
            span_id=_span_id(4),
            trace_id=_TRACE_B,
            parent_id=s3.span_id,
            start_time=13.0,
        )
        s5 = make_span(
            rid,
            second,
            5,
            name="reward",
            span_id=_span_id(5),
            trace_id=_TRACE_B,
            parent_id=s4.span_id,
            start_time=12.0,
        )
        for span in (s3, s1, s5, s2, s4):
            assert await store.add_span(span) is not None
        return rid, first, second, {"s1": s1, "s2": s2, "s3": s3, "s4": s4, "s5": s5}

    async def test_query_spans_by_attempt(self, store: LightningStore) -> None:
        """attempt_id None covers every attempt, "latest" the newest one, an id that attempt only."""
        rid, first, second, s = await self._span_corpus(store)
        everything = await store.query_spans(rid)
        assert (_ids(everything), everything.total) == (
            [s[k].span_id for k in ("s1", "s2", "s3", "s4", "s5")],
            5,
        )
        assert _ids(await store.query_spans(rid, "latest")) == [s["s4"].span_id, s["s5"].span_id]
        assert _ids(await store.query_spans(rid, first)) == [s[k].span_id for k in ("s1", "s2", "s3")]
        assert _ids(await store.query_spans(rid, second)) == [s["s4"].span_id, s["s5"].span_id]

    async def test_query_spans_empty_cases(self, store: LightningStore) -> None:
        """An unknown rollout, or "latest" of a rollout without attempts, gives an empty result."""
        await self._span_corpus(store)
        unknown = await store.query_spans("ro-unknown")
        assert (list(unknown), unknown.total) == ([], 0)
        queued = await store.enqueue_rollout("no attempts")
        latest = await store.query_spans(queued.rollout_id, "latest")
        assert (list(latest), latest.total) == ([], 0)

    @pytest.mark.parametrize(
        ("field", "value", "expected"),
        [
            ("trace_id", _TRACE_A, ["s1", "s2"]),
            ("trace_id_contains", _TRACE_B[4:12], ["s3", "s4", "s5"]),
            ("span_id", _span_id(2), ["s2"]),
            ("span_id_contains", _span_id(5)[3:11], ["s5"]),
            ("parent_id", _span_id(1), ["s2"]),
            ("parent_id_contains", _span_id(3)[2:10], ["s4"]),
            ("name", "llm.call", ["s1", "s4"]),
            ("name_contains", "call", ["s1", "s4"]),
            ("name_contains", "LLM", ["s3"]),
            ("name_contains", "l", ["s1", "s2", "s3", "s4"]),
        ],
    )
    async def test_query_spans_single_filter(
        self, store: LightningStore, field: str, value: str, expected: list[str]
    ) -> None:
        """Each span filter selects exactly the matching spans; contains is case-sensitive (fix 5)."""
        rid, _, _, s = await self._span_corpus(store)
        one_filter: dict[str, Any] = {field: value}
        result = await store.query_spans(rid, **one_filter)
        assert (_ids(result), result.total) == ([s[k].span_id for k in expected], len(expected))

    async def test_query_spans_filter_logic(self, store: LightningStore) -> None:
        """Field filters combine with and/or; the attempt is always ANDed; "or" alone matches all (fix 4)."""
        rid, first, _, s = await self._span_corpus(store)

        async def keys(*args: Any, **kwargs: Any) -> list[str]:
            by_id = {span.span_id: key for key, span in s.items()}
            return [by_id[span.span_id] for span in await store.query_spans(rid, *args, **kwargs)]

        assert await keys(name="llm.call", trace_id=_TRACE_A) == ["s1"]
        assert await keys(name="llm.call", trace_id=_TRACE_A, filter_logic="or") == ["s1", "s2", "s4"]
        assert await keys("latest", name="llm.call", trace_id=_TRACE_A, filter_logic="or") == ["s4"]
        assert await keys(first, name_contains="LLM", parent_id=_span_id(1), filter_logic="or") == [
            "s2",
            "s3",
        ]
        assert await keys(filter_logic="or") == ["s1", "s2", "s3", "s4", "s5"]
        assert await keys("latest", filter_logic="or") == ["s4", "s5"]
        assert await keys(name="reward", trace_id=_TRACE_A) == []

    async def test_query_spans_sorting(self, store: LightningStore) -> None:
        """Spans sort by any scalar field; *_time None sorts last ascending and first descending."""
        rid, _, _, s = await self._span_corpus(store)

        async def keys(**kwargs: Any) -> list[str]:
            by_id = {span.span_id: key for key, span in s.items()}
            return [by_id[span.span_id] for span in await store.query_spans(rid, **kwargs)]

        assert await keys(sort_order="desc") == ["s5", "s4", "s3", "s2", "s1"]
        assert await keys(sort_by="start_time") == ["s1", "s2", "s5", "s4", "s3"]
        assert await keys(sort_by="start_time", sort_order="desc") == ["s3", "s4", "s5", "s2", "s1"]
        names = [span.name for span in await store.query_spans(rid, sort_by="name")]
        assert names == ["LLM.Call", "llm.call", "llm.call", "reward", "tool.search"]
        assert await keys(sort_by=None) == ["s3", "s1", "s5", "s2", "s4"]

    async def test_query_spans_pagination(self, store: LightningStore) -> None:
        """limit/offset select a page; total counts every match."""
        rid, _, _, s = await self._span_corpus(store)
        page = await store.query_spans(rid, limit=2, offset=1)
        assert (_ids(page), page.total, page.limit, page.offset) == (
            [s["s2"].span_id, s["s3"].span_id],
            5,
            2,
            1,
        )
        tail = await store.query_spans(rid, offset=3)
        assert _ids(tail) == [s["s4"].span_id, s["s5"].span_id]
        beyond = await store.query_spans(rid, limit=3, offset=10)
        assert (list(beyond), beyond.total) == ([], 5)
        filtered = await store.query_spans(rid, name_contains="l", limit=1)
        assert (_ids(filtered), filtered.total) == ([s["s1"].span_id], 4)

    # ================================================================== query_rollouts

    async def _rollout_corpus(self, store: LightningStore, clock: FakeClock) -> dict[str, Rollout]:
        """r1 queuing; r2 succeeded; r3 preparing with two attempts; r4 cancelled (clock moves between)."""
        r1 = await store.enqueue_rollout("r1")
        clock.advance(1)
        r2 = await store.start_rollout("r2")
        clock.advance(1)
        r3 = await store.start_rollout("r3")
        clock.advance(1)
        r4 = await store.enqueue_rollout("r4")
        clock.advance(1)
        await store.update_attempt(r2.rollout_id, "latest", status="succeeded")
        clock.advance(1)
        await store.update_rollout(r4.rollout_id, status="cancelled")
        await store.start_attempt(r3.rollout_id)
        return {"r1": r1, "r2": r2, "r3": r3, "r4": r4}

    async def test_query_rollouts_filters(self, store: LightningStore, clock: FakeClock) -> None:
        """status_in, rollout_id_in and case-sensitive rollout_id_contains select, in insertion order."""
        r = await self._rollout_corpus(store, clock)
        key = {rollout.rollout_id: name for name, rollout in r.items()}

        async def keys(**kwargs: Any) -> list[str]:
            return [key[item.rollout_id] for item in await store.query_rollouts(**kwargs)]

        assert await keys() == ["r1", "r2", "r3", "r4"]
        assert await keys(status_in=["queuing"]) == ["r1"]
        assert await keys(status_in=["succeeded", "cancelled"]) == ["r2", "r4"]
        assert await keys(status_in=[]) == []
        assert await keys(rollout_id_in=[r["r3"].rollout_id, r["r1"].rollout_id, "ro-unknown"]) == [
            "r1",
            "r3",
        ]
        assert await keys(rollout_id_in=[]) == []
        assert await keys(rollout_id_contains=r["r2"].rollout_id[2:]) == ["r2"]
        assert await keys(rollout_id_contains="ro-") == ["r1", "r2", "r3", "r4"]
        assert await keys(rollout_id_contains="RO-") == []

    async def test_query_rollouts_filter_logic(self, store: LightningStore, clock: FakeClock) -> None:
        """Conditions combine with and/or; no condition matches everything for both (fix 4)."""
        r = await self._rollout_corpus(store, clock)
        key = {rollout.rollout_id: name for name, rollout in r.items()}

        async def keys(**kwargs: Any) -> list[str]:
            return [key[item.rollout_id] for item in await store.query_rollouts(**kwargs)]

        pair = [r["r1"].rollout_id, r["r2"].rollout_id]
        assert await keys(status_in=["queuing", "preparing"], rollout_id_in=pair) == ["r1"]
        assert await keys(status_in=["queuing", "preparing"], rollout_id_in=pair, filter_logic="or") == [
            "r1",
            "r2",
            "r3",
        ]
        assert await keys(
            status_in=["cancelled"], rollout_id_contains=r["r2"].rollout_id, filter_logic="or"
        ) == ["r2", "r4"]
        assert await keys(filter_logic="or") == ["r1", "r2", "r3", "r4"]
        assert await keys(filter_logic="and") == ["r1", "r2", "r3", "r4"]

    async def test_query_rollouts_mode_in(self, store: LightningStore) -> None:
        """``mode_in`` (new in agl) keeps rollouts of the listed modes; a rollout without one never matches.

        Skipped for a store whose ``query_rollouts`` predates the option (an Agent Lightning 0.3-style
        override of the public method).
        """
        if "mode_in" not in inspect.signature(store.query_rollouts).parameters:
            pytest.skip("this store's query_rollouts has no mode_in option")
        train = await store.enqueue_rollout("a", mode="train")
        val = await store.enqueue_rollout("b", mode="val")
        plain = await store.enqueue_rollout("c")

        async def ids(**kwargs: Any) -> list[str]:
            return [item.rollout_id for item in await store.query_rollouts(**kwargs)]

        assert await ids(mode_in=["train"]) == [train.rollout_id]
        assert await ids(mode_in=["val", "train"]) == [train.rollout_id, val.rollout_id]
        assert await ids(mode_in=["test"]) == []
        assert await ids(mode_in=["val"], rollout_id_contains=plain.rollout_id, filter_logic="or") == [
            val.rollout_id,
            plain.rollout_id,
        ]
        with pytest.raises(InvalidFilterError, match="mode_in"):
            not_a_mode: list[Any] = ["training"]
            await store.query_rollouts(mode_in=not_a_mode)

    async def test_query_rollouts_input_contains(self, store: LightningStore) -> None:
        """``input_contains`` (new in agl): text in the input's compact JSON, ASCII letters in either case.

        The JSON is the stores' own encoding (``pydantic_core.to_json``: no spaces, non-ASCII kept), so
        keys, quotes and numbers match too; ``%``, ``_`` and ``\\`` are plain characters; other letters
        (``É``) match only themselves. Skipped for a store whose ``query_rollouts`` predates the option.
        """
        if "input_contains" not in inspect.signature(store.query_rollouts).parameters:
            pytest.skip("this store's query_rollouts has no input_contains option")
        paris = await store.enqueue_rollout(
            {"question": "Capital of France?", "answer": "Paris"}, mode="train"
        )
        cafe = await store.enqueue_rollout("Un café au lait, 100% _arabica_ \\o/", mode="val")
        numbers = await store.enqueue_rollout([1, 2.5, None, True])
        empty = await store.enqueue_rollout(None)

        async def ids(**kwargs: Any) -> list[str]:
            return [item.rollout_id for item in await store.query_rollouts(**kwargs)]

        assert await ids(input_contains="paris") == [paris.rollout_id]
        assert await ids(input_contains="CAPITAL OF france") == [paris.rollout_id]
        assert await ids(input_contains='"answer":"Paris"') == [paris.rollout_id]
        assert await ids(input_contains="CAFé") == [cafe.rollout_id]
        assert await ids(input_contains="CAFÉ") == []
        assert await ids(input_contains="100% _arabica_ \\\\o/") == [cafe.rollout_id]  # JSON doubles \\
        assert await ids(input_contains="%") == [cafe.rollout_id]  # no wildcard
        assert await ids(input_contains="a_a") == []  # no wildcard either
        assert await ids(input_contains="[1,2.5,null,true]") == [numbers.rollout_id]
        assert await ids(input_contains="null") == [numbers.rollout_id, empty.rollout_id]
        assert await ids(input_contains="") == [
            paris.rollout_id,
            cafe.rollout_id,
            numbers.rollout_id,
            empty.rollout_id,
        ]
        assert await ids(input_contains="a", mode_in=["val"]) == [cafe.rollout_id]
        assert await ids(input_contains="paris", rollout_id_contains=cafe.rollout_id, filter_logic="or") == [
            paris.rollout_id,
            cafe.rollout_id,
        ]
        page = await store.query_rollouts(input_contains="A", limit=1, offset=1, sort_by="rollout_id")
        assert page.total == 2 and len(page.items) == 1
        await store.update_rollout(numbers.rollout_id, input={"city": "Lyon"})
        assert await ids(input_contains="lyon") == [numbers.rollout_id]
        assert await ids(input_contains="2.5") == []
        with pytest.raises(InvalidFilterError, match="input_contains"):
            await store.query_rollouts(input_contains=5)  # type: ignore[arg-type]

    async def test_query_rollouts_deprecated_aliases(self, store: LightningStore, clock: FakeClock) -> None:
        """status/rollout_ids still work with a DeprecationWarning; the new names win over them."""
        r = await self._rollout_corpus(store, clock)
        with pytest.warns(DeprecationWarning):
            assert _ids(await store.query_rollouts(status=["queuing"])) == [r["r1"].rollout_id]
        with pytest.warns(DeprecationWarning):
            assert _ids(await store.query_rollouts(rollout_ids=[r["r2"].rollout_id])) == [r["r2"].rollout_id]
        with pytest.warns(DeprecationWarning):
            both = await store.query_rollouts(status_in=["succeeded"], status=["queuing"])
        assert _ids(both) == [r["r2"].rollout_id]
        with pytest.warns(DeprecationWarning):
            both = await store.query_rollouts(
                rollout_id_in=[r["r3"].rollout_id], rollout_ids=[r["r4"].rollout_id]
            )
        assert _ids(both) == [r["r3"].rollout_id]

    async def test_query_rollouts_sorting(self, store: LightningStore, clock: FakeClock) -> None:
        """Rollouts sort by scalar fields; a None end_time sorts last ascending and first descending."""
        r = await self._rollout_corpus(store, clock)
        key = {rollout.rollout_id: name for name, rollout in r.items()}

        async def keys(**kwargs: Any) -> list[str]:
            return [key[item.rollout_id] for item in await store.query_rollouts(**kwargs)]

        assert await keys(sort_by="start_time", sort_order="desc") == ["r4", "r3", "r2", "r1"]
        ascending = await keys(sort_by="end_time")
        assert ascending[:2] == ["r2", "r4"]
        assert sorted(ascending[2:]) == ["r1", "r3"]
        descending = await keys(sort_by="end_time", sort_order="desc")
        assert sorted(descending[:2]) == ["r1", "r3"]
        assert descending[2:] == ["r4", "r2"]
        assert await keys(sort_by="status") == ["r4", "r3", "r1", "r2"]

    async def test_query_rollouts_pagination(self, store: LightningStore, clock: FakeClock) -> None:
        """limit/offset select a page of the (sorted) matches; total counts every match."""
        r = await self._rollout_corpus(store, clock)
        page = await store.query_rollouts(limit=2, offset=1)
        assert (_ids(page), page.total) == ([r["r2"].rollout_id, r["r3"].rollout_id], 4)
        sorted_page = await store.query_rollouts(sort_by="start_time", sort_order="desc", limit=1, offset=3)
        assert (_ids(sorted_page), sorted_page.total) == ([r["r1"].rollout_id], 4)
        filtered = await store.query_rollouts(status_in=["preparing", "queuing"], limit=1)
        assert (_ids(filtered), filtered.total) == ([r["r1"].rollout_id], 2)

    async def test_query_rollouts_carry_latest_attempt(self, store: LightningStore, clock: FakeClock) -> None:
        """Each listed rollout carries its current latest attempt; rollouts without attempts carry none."""
        r = await self._rollout_corpus(store, clock)
        listed = {item.rollout_id: item for item in await store.query_rollouts()}
        with_attempt = listed[r["r3"].rollout_id]
        assert isinstance(with_attempt, AttemptedRollout)
        assert with_attempt.attempt == await _latest(store, r["r3"].rollout_id)
        assert with_attempt.attempt.sequence_id == 2
        finished = listed[r["r2"].rollout_id]
        assert isinstance(finished, AttemptedRollout)
        assert finished.attempt.status == "succeeded"
        assert not isinstance(listed[r["r1"].rollout_id], AttemptedRollout)

    # ================================================================== UNSET versus None

    async def test_update_rollout_changes_only_given_fields(self, store: LightningStore) -> None:
        """update_rollout leaves UNSET fields alone and clears fields given as None."""
        config = RolloutConfig(max_attempts=2)
        rollout = await store.enqueue_rollout(
            {"a": 1}, mode="train", resources_id="rs-x", config=config, metadata={"m": 1}
        )
        rid = rollout.rollout_id
        untouched = await store.update_rollout(rid)
        assert untouched.model_dump() == rollout.model_dump()
        changed = await store.update_rollout(rid, input={"b": 2})
        assert changed.model_dump() == {**rollout.model_dump(), "input": {"b": 2}}
        cleared = await store.update_rollout(rid, mode=None, resources_id=None, metadata=None)
        assert (cleared.mode, cleared.resources_id, cleared.metadata) == (None, None, None)
        assert (cleared.input, cleared.status, cleared.config) == ({"b": 2}, "queuing", config)
        none_input = await store.update_rollout(rid, input=None)
        assert none_input.input is None
        fetched = await _rollout(store, rid)
        assert fetched.model_dump() == none_input.model_dump()

    async def test_update_rollout_config_drives_retries(self, store: LightningStore) -> None:
        """A config replaced with update_rollout governs later retries."""
        queued = await store.enqueue_rollout("x")
        new_config = RolloutConfig(max_attempts=2, retry_condition=["failed"])
        assert (await store.update_rollout(queued.rollout_id, config=new_config)).config == new_config
        claimed = await _dequeue(store)
        await store.update_attempt(claimed.rollout_id, "latest", status="failed")
        assert (await _rollout(store, queued.rollout_id)).status == "requeuing"

    async def test_update_attempt_changes_only_given_fields(self, store: LightningStore) -> None:
        """update_attempt leaves UNSET fields alone and clears metadata given as None."""
        started = await store.start_rollout("x", worker_id="worker-u")
        rid, aid = started.rollout_id, started.attempt.attempt_id
        untouched = await store.update_attempt(rid, aid)
        assert untouched.model_dump() == started.attempt.model_dump()
        with_meta = await store.update_attempt(rid, aid, metadata={"x": 1})
        assert (with_meta.status, with_meta.worker_id, with_meta.metadata) == (
            "preparing",
            "worker-u",
            {"x": 1},
        )
        beat = await store.update_attempt(rid, aid, last_heartbeat_time=123.0)
        assert (beat.last_heartbeat_time, beat.metadata) == (123.0, {"x": 1})
        cleared = await store.update_attempt(rid, aid, metadata=None)
        assert (cleared.metadata, cleared.last_heartbeat_time, cleared.worker_id) == (None, 123.0, "worker-u")
        assert (await _latest(store, rid)).model_dump() == cleared.model_dump()

    # ================================================================== wait_for_rollouts

    async def test_wait_returns_finished_rollouts_in_input_order(self, store: LightningStore) -> None:
        """Rollouts finished already are returned at once, in the order asked for."""
        a = await store.start_rollout("a")
        b = await store.start_rollout("b")
        await store.update_attempt(a.rollout_id, "latest", status="succeeded")
        await store.update_rollout(b.rollout_id, status="cancelled")
        for timeout in (0, None, 1.0):
            done = await asyncio.wait_for(
                store.wait_for_rollouts(rollout_ids=[b.rollout_id, a.rollout_id], timeout=timeout),
                self.max_wait_timeout,
            )
            assert [(x.rollout_id, x.status) for x in done] == [
                (b.rollout_id, "cancelled"),
                (a.rollout_id, "succeeded"),
            ]

    async def test_wait_omits_unknown_ids(self, store: LightningStore) -> None:
        """Unknown ids are left out of the result, never raised."""
        a = await store.start_rollout("a")
        await store.update_attempt(a.rollout_id, "latest", status="failed")
        done = await store.wait_for_rollouts(rollout_ids=["ro-unknown", a.rollout_id], timeout=0)
        assert _ids(done) == [a.rollout_id]
        assert await store.wait_for_rollouts(rollout_ids=["ro-unknown"], timeout=0.05) == []

    @pytest.mark.parametrize("timeout", [0, -1.0, 0.05])
    async def test_wait_timeout_returns_only_finished(self, store: LightningStore, timeout: float) -> None:
        """At the (real-time) deadline only the finished rollouts come back; timeout <= 0 checks once."""
        finished = await store.start_rollout("a")
        pending = await store.start_rollout("b")
        requeuing = await store.start_rollout(
            "c", config=RolloutConfig(max_attempts=2, retry_condition=["failed"])
        )
        await store.update_attempt(finished.rollout_id, "latest", status="succeeded")
        await store.update_attempt(requeuing.rollout_id, "latest", status="failed")
        ids = [pending.rollout_id, finished.rollout_id, requeuing.rollout_id]
        done = await asyncio.wait_for(
            store.wait_for_rollouts(rollout_ids=ids, timeout=timeout), self.max_wait_timeout
        )
        assert _ids(done) == [finished.rollout_id]

    async def test_wait_is_woken_by_a_finish_in_another_task(self, store: LightningStore) -> None:
        """A waiter without timeout returns once another task finishes the rollout."""
        started = await store.start_rollout("a")
        waiter = asyncio.create_task(store.wait_for_rollouts(rollout_ids=[started.rollout_id], timeout=None))
        try:
            done, _ = await asyncio.wait({waiter}, timeout=0.05)
            assert not done, "wait_for_rollouts returned before the rollout finished"
            await store.update_attempt(started.rollout_id, "latest", status="succeeded")
            result = await asyncio.wait_for(waiter, self.max_wait_timeout)
        finally:
            waiter.cancel()
        assert [(x.rollout_id, x.status) for x in result] == [(started.rollout_id, "succeeded")]

    async def test_wait_for_several_rollouts_finishing_at_different_times(
        self, store: LightningStore
    ) -> None:
        """A waiter on several rollouts returns all of them once the last one finishes."""
        a = await store.start_rollout("a")
        b = await store.start_rollout("b")
        ids = [a.rollout_id, b.rollout_id]
        waiter = asyncio.create_task(
            store.wait_for_rollouts(rollout_ids=ids, timeout=self.max_wait_timeout * 2)
        )
        try:
            await store.update_rollout(b.rollout_id, status="cancelled")
            done, _ = await asyncio.wait({waiter}, timeout=0.05)
            assert not done, "wait_for_rollouts returned while a rollout was still running"
            await store.update_attempt(a.rollout_id, "latest", status="failed")
            result = await asyncio.wait_for(waiter, self.max_wait_timeout)
        finally:
            waiter.cancel()
        assert [(x.rollout_id, x.status) for x in result] == [
            (a.rollout_id, "failed"),
            (b.rollout_id, "cancelled"),
        ]

    async def test_wait_is_woken_by_a_finish_in_another_thread(self, store: LightningStore) -> None:
        """A waiter is woken when a thread with its own event loop finishes the rollout."""
        if not self.supports_multiple_event_loops:
            pytest.skip("the store does not support several event loops")
        started = await store.start_rollout("a")
        waiter = asyncio.create_task(store.wait_for_rollouts(rollout_ids=[started.rollout_id], timeout=None))
        try:
            done, _ = await asyncio.wait({waiter}, timeout=0.05)
            assert not done
            await run_in_threads(
                [lambda: store.update_attempt(started.rollout_id, "latest", status="succeeded")],
                self.max_wait_timeout,
            )
            result = await asyncio.wait_for(waiter, self.max_wait_timeout)
        finally:
            waiter.cancel()
        assert _ids(result) == [started.rollout_id]

    async def test_wait_runs_the_watchdog(self, store: LightningStore, clock: FakeClock) -> None:
        """wait_for_rollouts scans first, so a timed-out rollout comes back failed."""
        claimed = await _claim(store, RolloutConfig(timeout_seconds=1))
        clock.advance(2)
        done = await store.wait_for_rollouts(rollout_ids=[claimed.rollout_id], timeout=0)
        assert [(x.rollout_id, x.status) for x in done] == [(claimed.rollout_id, "failed")]

    # ================================================================== statistics

    async def test_statistics_count_everything(self, store: LightningStore) -> None:
        """statistics() counts rollouts, attempts, stored spans, resources snapshots and workers exactly."""
        claimed = await _claim(store, worker_id="worker-1")
        await store.enqueue_rollout("queued")
        started = await store.start_rollout("started")
        await store.start_attempt(started.rollout_id)
        rid, aid = claimed.rollout_id, claimed.attempt.attempt_id
        await store.add_span(make_span(rid, aid, 1, span_id=_span_id(1)))
        await store.add_span(make_span(rid, aid, 2, span_id=_span_id(1)))
        await store.add_many_spans([make_span(rid, aid, 3, span_id=_span_id(2)), make_span(rid, aid, 4)])
        second = await _latest(store, started.rollout_id)
        await store.add_span(make_span(started.rollout_id, second.attempt_id, 1))
        first = await store.add_resources(_resources("a"))
        await store.update_resources(first.resources_id, _resources("b"))
        await store.update_resources("named", _resources("c"))
        await store.update_worker("worker-2")
        stats = await store.statistics()
        assert {k: stats[k] for k in ("total_rollouts", "total_attempts", "total_spans")} == {
            "total_rollouts": 3,
            "total_attempts": 3,
            "total_spans": 4,
        }
        assert (stats["total_resources"], stats["total_workers"]) == (2, 2)

    # ================================================================== bad input

    @pytest.mark.parametrize("call", sorted(_UNKNOWN_ROLLOUT_CALLS))
    async def test_unknown_rollout_raises_not_found(self, store: LightningStore, call: str) -> None:
        """Calls on an unknown rollout raise RolloutNotFoundError (a KeyError and ValueError); no change."""
        missing = "ro-000000000000"
        with pytest.raises(RolloutNotFoundError, match=missing) as caught:
            await _UNKNOWN_ROLLOUT_CALLS[call](store, missing)
        assert isinstance(caught.value, KeyError) and isinstance(caught.value, ValueError)
        stats = await store.statistics()
        counts = (
            stats["total_rollouts"],
            stats["total_attempts"],
            stats["total_spans"],
            stats["total_workers"],
        )
        assert counts == (0, 0, 0, 0)

    async def test_unknown_attempt_raises_attempt_not_found(self, store: LightningStore) -> None:
        """An unknown attempt id, or "latest" with no attempt, raises AttemptNotFoundError; no change."""
        started = await store.start_rollout("x")
        rid = started.rollout_id
        with pytest.raises(AttemptNotFoundError, match="at-missing"):
            await store.update_attempt(rid, "at-missing", status="failed", worker_id="worker-x")
        with pytest.raises(AttemptNotFoundError):
            await store.add_span(make_span(rid, "at-missing", 40))
        assert (await _rollout(store, rid)).status == "preparing"
        assert (await _latest(store, rid)).model_dump() == started.attempt.model_dump()
        assert (await store.query_spans(rid)).total == 0
        assert await store.get_worker_by_id("worker-x") is None
        assert await store.get_next_span_sequence_id(rid, started.attempt.attempt_id) == 1
        queued = await store.enqueue_rollout("y")
        with pytest.raises(AttemptNotFoundError) as caught:
            await store.update_attempt(queued.rollout_id, "latest", status="running")
        assert isinstance(caught.value, KeyError) and isinstance(caught.value, ValueError)
        assert (await _rollout(store, queued.rollout_id)).status == "queuing"
        assert (await _dequeue(store)).rollout_id == queued.rollout_id

    @pytest.mark.parametrize("bad", ["done", "QUEUING", "timeout", None, 3])
    async def test_invalid_rollout_status_changes_nothing(self, store: LightningStore, bad: object) -> None:
        """update_rollout with an invalid status raises InvalidStatusError and applies no field."""
        queued = await store.enqueue_rollout("x", metadata={"keep": True})
        with pytest.raises(InvalidStatusError):
            await store.update_rollout(queued.rollout_id, status=bad, metadata={"lost": True})  # type: ignore[arg-type]
        fetched = await _rollout(store, queued.rollout_id)
        assert fetched.model_dump() == queued.model_dump()
        assert (await _dequeue(store)).rollout_id == queued.rollout_id

    @pytest.mark.parametrize("bad", ["finished", "queuing", "RUNNING", None])
    async def test_invalid_attempt_status_changes_nothing(self, store: LightningStore, bad: object) -> None:
        """update_attempt with an invalid status raises InvalidStatusError and applies no field."""
        claimed = await _claim(store, worker_id="worker-i")
        rid, aid = claimed.rollout_id, claimed.attempt.attempt_id
        worker_before = await _worker(store, "worker-i")
        with pytest.raises(InvalidStatusError):
            await store.update_attempt(rid, aid, status=bad, metadata={"lost": True}, worker_id="worker-j")  # type: ignore[arg-type]
        assert (await _latest(store, rid)).model_dump() == claimed.attempt.model_dump()
        assert (await _rollout(store, rid)).status == "preparing"
        assert await _worker(store, "worker-i") == worker_before
        assert await store.get_worker_by_id("worker-j") is None

    @pytest.mark.parametrize("query", sorted(_BAD_STATUS_FILTERS))
    async def test_invalid_status_filter_raises(self, store: LightningStore, query: str) -> None:
        """Status filters with a value that is not a status (or a bare string) raise InvalidStatusError."""
        rollout = await store.enqueue_rollout("x")
        with pytest.raises(InvalidStatusError), _maybe_deprecated():
            await _BAD_STATUS_FILTERS[query](store, rollout.rollout_id)

    @pytest.mark.parametrize("query", sorted(_MALFORMED_QUERIES))
    async def test_malformed_query_raises_typed_error(self, store: LightningStore, query: str) -> None:
        """Malformed filters, sort options and pagination raise InvalidFilterError/InvalidRequestError."""
        rollout = await store.enqueue_rollout("x")
        call, error = _MALFORMED_QUERIES[query]
        with pytest.raises(error) as caught:
            await call(store, rollout.rollout_id)
        assert isinstance(caught.value, ValueError)
        assert str(caught.value)

    @pytest.mark.parametrize("value", sorted(_BAD_JSON_VALUES))
    @pytest.mark.parametrize("call", sorted(_JSON_VALUE_CALLS))
    async def test_unstorable_json_values_are_refused_alike(
        self, store: LightningStore, call: str, value: str
    ) -> None:
        """NaN/Infinity and nesting beyond MAX_JSON_DEPTH raise InvalidRequestError on every backend."""
        started = await store.start_rollout("x")
        with pytest.raises(InvalidRequestError, match=_BAD_JSON_VALUES[value][1]):
            await _JSON_VALUE_CALLS[call](store, started, _BAD_JSON_VALUES[value][0])
        assert (await store.statistics())["total_rollouts"] == 1

    async def test_json_values_at_the_depth_limit_round_trip(self, store: LightningStore) -> None:
        """A value nested exactly MAX_JSON_DEPTH levels deep is stored and read back unchanged."""
        deep = _nested(MAX_JSON_DEPTH)
        rollout = await store.enqueue_rollout(deep, metadata={"k": _nested(MAX_JSON_DEPTH - 1)})
        stored = await store.get_rollout_by_id(rollout.rollout_id)
        assert stored is not None and stored.input == deep
        assert stored.metadata == {"k": _nested(MAX_JSON_DEPTH - 1)}

    @pytest.mark.parametrize("kind", sorted(_malformed_spans("ro-x", "at-x")))
    async def test_malformed_span_is_rejected(self, store: LightningStore, kind: str) -> None:
        """A malformed span raises InvalidSpanError and stores nothing, nor moves the counter or attempt."""
        started = await store.start_rollout("x")
        rid, aid = started.rollout_id, started.attempt.attempt_id
        bad = _malformed_spans(rid, aid)[kind]
        with pytest.raises(InvalidSpanError):
            await store.add_span(bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidSpanError):
            await store.add_many_spans([make_span(rid, aid, 7), bad])  # type: ignore[list-item]
        assert (await store.query_spans(rid)).total == 0
        assert (await store.statistics())["total_spans"] == 0
        assert (await _latest(store, rid)).model_dump() == started.attempt.model_dump()
        assert await store.get_next_span_sequence_id(rid, aid) == 1

    @pytest.mark.parametrize("field", _NUL_SPAN_FIELDS)
    async def test_span_text_with_nul_is_refused_naming_the_field(
        self, store: LightningStore, field: str
    ) -> None:
        """NUL in a span's name, trace_id, parent_id or span_id: InvalidSpanError naming it, nothing stored.

        The rule of every backend (docs/guarantees.md): text a store keys, indexes or filters on holds
        no NUL character (PostgreSQL text cannot), so all refuse it alike; JSON values keep theirs.
        """
        started = await store.start_rollout("x")
        rid, aid = started.rollout_id, started.attempt.attempt_id
        bad = make_span(rid, aid, 9, span_id=_span_id(2)).model_copy(update={field: _NUL})
        with pytest.raises(InvalidSpanError, match=f"Span {field} contains a NUL character"):
            await store.add_span(bad)
        with pytest.raises(InvalidSpanError, match=f"Span {field} contains a NUL character"):
            await store.add_many_spans([make_span(rid, aid, 7), bad])
        assert (await store.query_spans(rid)).total == 0
        assert (await _latest(store, rid)).model_dump() == started.attempt.model_dump()

    @pytest.mark.parametrize("query", sorted(_NUL_FILTERS))
    async def test_filter_with_nul_is_refused_naming_the_argument(
        self, store: LightningStore, query: str
    ) -> None:
        """A string filter holding NUL raises InvalidFilterError naming the argument, on every backend."""
        rollout = await store.enqueue_rollout("x")
        call, argument = _NUL_FILTERS[query]
        if (
            query == "rollouts-input_contains"
            and "input_contains" not in inspect.signature(store.query_rollouts).parameters
        ):
            pytest.skip("this store's query_rollouts has no input_contains option")
        with pytest.raises(InvalidFilterError, match=f"{argument} contains a NUL character"):
            await call(store, rollout.rollout_id)

    @pytest.mark.parametrize("call", sorted(_NUL_WRITES))
    async def test_id_with_nul_is_refused_and_changes_nothing(self, store: LightningStore, call: str) -> None:
        """An id argument holding NUL raises InvalidRequestError naming it and creates nothing."""
        before = await store.statistics()
        write, argument = _NUL_WRITES[call]
        with pytest.raises(InvalidRequestError, match=f"{argument} contains a NUL character"):
            await write(store, "")
        after = await store.statistics()
        assert (after["total_rollouts"], after["total_attempts"], after["total_workers"]) == (
            before["total_rollouts"],
            before["total_attempts"],
            before["total_workers"],
        )

    async def test_nul_inside_json_values_round_trips(self, store: LightningStore) -> None:
        """NUL in JSON values (input, metadata, span attributes) is data, stored and read back unchanged."""
        started = await store.start_rollout({"text": _NUL}, metadata={"k": _NUL})
        rid, aid = started.rollout_id, started.attempt.attempt_id
        await store.add_span(make_span(rid, aid, 1, attributes={"agl.text": _NUL}))
        stored = await _rollout(store, rid)
        assert stored.input == {"text": _NUL} and stored.metadata == {"k": _NUL}
        spans = await store.query_spans(rid)
        assert spans.items[0].attributes["agl.text"] == _NUL

    @pytest.mark.parametrize("call", sorted(_NUL_LOOKUPS))
    async def test_lookup_by_an_id_with_nul_is_refused(self, store: LightningStore, call: str) -> None:
        """Reads by an id holding NUL raise InvalidRequestError naming it too (one rule for every call)."""
        lookup, argument = _NUL_LOOKUPS[call]
        with pytest.raises(InvalidRequestError, match=f"{argument} contains a NUL character"):
            await lookup(store, "")

    async def test_add_many_spans_with_unknown_attempt_stores_nothing(self, store: LightningStore) -> None:
        """A batch with a span of an unknown attempt raises AttemptNotFoundError and stores none of it."""
        started = await store.start_rollout("x")
        rid, aid = started.rollout_id, started.attempt.attempt_id
        with pytest.raises(AttemptNotFoundError):
            await store.add_many_spans([make_span(rid, aid, 5), make_span(rid, "at-missing", 6)])
        assert (await store.query_spans(rid)).total == 0
        assert (await _latest(store, rid)).status == "preparing"
        assert await store.get_next_span_sequence_id(rid, aid) == 1

    async def test_invalid_mode_is_rejected(self, store: LightningStore) -> None:
        """An unknown rollout mode raises InvalidRequestError and creates or changes nothing."""
        with pytest.raises(InvalidRequestError, match="prod"):
            await store.enqueue_rollout("x", mode="prod")  # type: ignore[arg-type]
        with pytest.raises(InvalidRequestError, match="prod"):
            await store.start_rollout("x", mode="prod", worker_id="worker-m")  # type: ignore[arg-type]
        stats = await store.statistics()
        assert (stats["total_rollouts"], stats["total_attempts"], stats["total_workers"]) == (0, 0, 0)
        queued = await store.enqueue_rollout("y", mode="val")
        with pytest.raises(InvalidRequestError, match="prod"):
            await store.update_rollout(queued.rollout_id, mode="prod", metadata={"lost": True})  # type: ignore[arg-type]
        assert (await _rollout(store, queued.rollout_id)).model_dump() == queued.model_dump()

    # ================================================================== PaginatedResult

    async def test_query_results_behave_as_lists(self, store: LightningStore) -> None:
        """Query results are PaginatedResults: len, index, slice, iterate and `in` go to the items."""
        created = list(await store.enqueue_many_rollouts([EnqueueRolloutRequest(input=i) for i in range(3)]))
        page = await store.query_rollouts(limit=2)
        assert isinstance(page, PaginatedResult)
        assert (len(page), page.total, page.limit, page.offset) == (2, 3, 2, 0)
        assert page[0].rollout_id == created[0].rollout_id
        assert page[-1].rollout_id == created[1].rollout_id
        assert [r.rollout_id for r in page[0:1]] == [created[0].rollout_id]
        assert [r.rollout_id for r in page] == [r.rollout_id for r in page.items]
        assert page[0] in page
        everything = await store.query_rollouts()
        assert (len(everything), everything.limit, everything.offset) == (3, -1, 0)
        for result in (
            await store.query_attempts("ro-unknown"),
            await store.query_spans("ro-unknown"),
            await store.query_resources(),
            await store.query_workers(),
        ):
            assert isinstance(result, PaginatedResult)
            assert (len(result), result.total, list(result)) == (0, 0, [])

    # ================================================================== concurrency

    async def test_concurrent_dequeues_on_one_loop(self, store: LightningStore) -> None:
        """Many tasks dequeueing at once receive every rollout exactly once."""
        created = await store.enqueue_many_rollouts([EnqueueRolloutRequest(input=i) for i in range(200)])

        async def drain(worker: int) -> list[str]:
            claimed: list[str] = []
            while (item := await store.dequeue_rollout(worker_id=f"task-{worker}")) is not None:
                claimed.append(item.rollout_id)
            return claimed

        results = await asyncio.wait_for(
            asyncio.gather(*(drain(i) for i in range(16))), self.concurrency_timeout
        )
        everything = [rid for claimed in results for rid in claimed]
        assert sorted(everything) == sorted(_ids(created))

    async def test_concurrent_sequence_ids_are_unique(self, store: LightningStore) -> None:
        """Concurrent sequence-id requests for one rollout get 1..N with no gap and no repeat."""
        started = await store.start_rollout("x")
        rid, aid = started.rollout_id, started.attempt.attempt_id

        async def allocate() -> list[int]:
            issued: list[int] = []
            for _ in range(10):
                issued.append(await store.get_next_span_sequence_id(rid, aid))
                issued.extend(await store.get_many_span_sequence_ids([(rid, aid)] * 3))
            return issued

        results = await asyncio.wait_for(
            asyncio.gather(*(allocate() for _ in range(10))), self.concurrency_timeout
        )
        assert sorted(i for issued in results for i in issued) == list(range(1, 401))

    async def test_store_is_usable_from_another_event_loop(self, store: LightningStore) -> None:
        """A thread running its own event loop can use the store, and this loop sees its writes."""
        if not self.supports_multiple_event_loops:
            pytest.skip("the store does not support several event loops")
        queued = await store.enqueue_rollout("x")

        async def elsewhere() -> tuple[str, str]:
            claimed = await _dequeue(store, "worker-thread")
            await store.add_span(make_span(claimed.rollout_id, claimed.attempt.attempt_id, 1))
            await store.update_attempt(claimed.rollout_id, "latest", status="succeeded")
            return claimed.rollout_id, claimed.attempt.attempt_id

        ((rid, _),) = await run_in_threads([elsewhere], self.max_wait_timeout)
        assert rid == queued.rollout_id
        assert (await _rollout(store, rid)).status == "succeeded"
        assert (await store.query_spans(rid)).total == 1
        assert (await _worker(store, "worker-thread")).status == "idle"

    async def test_concurrent_workers_race_without_loss(self, store: LightningStore) -> None:
        """Workers racing over many rollouts: no double dequeue, no lost or duplicated span, exact counts."""
        n_rollouts, n_spans, n_workers = (
            self.concurrency_rollouts,
            self.concurrency_spans_per_rollout,
            self.concurrency_workers,
        )
        expected: list[str] = []
        for start in range(0, n_rollouts, 500):
            batch = [EnqueueRolloutRequest(input=i) for i in range(start, min(start + 500, n_rollouts))]
            expected.extend(_ids(await store.enqueue_many_rollouts(batch)))
        assert len(set(expected)) == n_rollouts

        def job(index: int) -> Callable[[], Coroutine[Any, Any, list[tuple[str, str]]]]:
            return lambda: _race_worker(store, f"racer-{index}", n_spans)

        jobs = [job(i) for i in range(n_workers)]
        if self.supports_multiple_event_loops:
            with _frequent_thread_switches():
                results = await run_in_threads(jobs, self.concurrency_timeout)
        else:
            results = await asyncio.wait_for(asyncio.gather(*(j() for j in jobs)), self.concurrency_timeout)

        claims = [claim for claimed in results for claim in claimed]
        claimed_ids = [rid for rid, _ in claims]
        assert len(claimed_ids) == len(set(claimed_ids)), "a rollout was dequeued more than once"
        assert sorted(claimed_ids) == sorted(expected), "some rollouts were never dequeued"
        for rid, aid in claims:
            spans = await store.query_spans(rid)
            assert spans.total == n_spans, f"rollout {rid} has {spans.total} spans, expected {n_spans}"
            assert sorted(s.sequence_id for s in spans) == list(range(1, n_spans + 1)), rid
            assert len({s.span_id for s in spans}) == n_spans, rid
            assert {s.attempt_id for s in spans} == {aid}, rid
        succeeded = await store.query_rollouts(status_in=["succeeded"], limit=1)
        assert succeeded.total == n_rollouts, "every rollout must end succeeded"
        stats = await store.statistics()
        assert (stats["total_rollouts"], stats["total_attempts"], stats["total_spans"]) == (
            n_rollouts,
            n_rollouts,
            n_rollouts * n_spans,
        )
        assert stats["total_workers"] == n_workers
        workers = await store.query_workers()
        assert sorted(w.status for w in workers) == ["idle"] * n_workers


# --------------------------------------------------------------------------------------- module helpers


def _otel_span(name: str, attributes: Mapping[str, Any] | None = None) -> Any:
    """A finished OpenTelemetry SDK `ReadableSpan` with a parent, made by a private tracer provider."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("agl.testing.store_conformance")
    with (
        tracer.start_as_current_span("parent"),
        tracer.start_as_current_span(name, attributes=dict(attributes or {})),
    ):
        pass
    provider.shutdown()
    (finished,) = [span for span in exporter.get_finished_spans() if span.name == name]
    return finished


@contextlib.contextmanager
def _frequent_thread_switches(interval: float = 1e-5) -> Iterator[None]:
    """Make the interpreter switch threads far more often than its 5 ms default, to provoke races."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(interval)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


@contextlib.contextmanager
def _maybe_deprecated() -> Iterator[None]:
    """Silence the DeprecationWarning of the query_rollouts aliases (some tests use them on purpose)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        yield


async def _race_worker(store: LightningStore, worker_id: str, n_spans: int) -> list[tuple[str, str]]:
    """Claim rollouts until the queue is empty; give each `n_spans` spans, then mark it succeeded."""
    claims: list[tuple[str, str]] = []
    turn = 0
    while True:
        turn += 1
        if turn % 3 == 0:
            batch = list(await store.dequeue_many_rollouts(limit=2, worker_id=worker_id))
        else:
            one = await store.dequeue_rollout(worker_id=worker_id)
            batch = [] if one is None else [one]
        if not batch:
            return claims
        for claimed in batch:
            rid, aid = claimed.rollout_id, claimed.attempt.attempt_id
            claims.append((rid, aid))
            singles = n_spans // 2
            for _ in range(singles):
                sequence_id = await store.get_next_span_sequence_id(rid, aid)
                assert await store.add_span(make_span(rid, aid, sequence_id)) is not None
            rest = n_spans - singles
            if rest:
                sequence_ids = await store.get_many_span_sequence_ids([(rid, aid)] * rest)
                inserted = await store.add_many_spans([make_span(rid, aid, s) for s in sequence_ids])
                assert len(inserted) == rest
            await store.update_attempt(rid, aid, status="succeeded")
