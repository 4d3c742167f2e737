"""Core models: JSON round trips, defaults, validation, PaginatedResult as a sequence, lifecycle bases."""

import inspect
from collections.abc import Sequence

import pytest
from pydantic import BaseModel, ValidationError

from agl_core.types import (
    Attempt,
    AttemptedRollout,
    Dataset,
    EnqueueRolloutRequest,
    FilterField,
    GenericResponse,
    Hook,
    PaginatedResult,
    ParallelWorkerBase,
    Rollout,
    RolloutConfig,
    RolloutLegacy,
    SortOptions,
    Task,
    TaskIfAny,
    Triplet,
    Worker,
)


def _rollout(**overrides: object) -> Rollout:
    fields: dict[str, object] = {"rollout_id": "ro-1", "input": {"q": "2+2"}, "start_time": 100.5}
    fields.update(overrides)
    return Rollout.model_validate(fields)


def _attempt(**overrides: object) -> Attempt:
    fields: dict[str, object] = {
        "rollout_id": "ro-1",
        "attempt_id": "at-1",
        "sequence_id": 1,
        "start_time": 101.0,
    }
    fields.update(overrides)
    return Attempt.model_validate(fields)


ROUND_TRIP_CASES: list[BaseModel] = [
    Triplet(prompt={"token_ids": [1, 2]}, response="4", reward=1.0, metadata={"turn": 1}),
    Triplet(prompt="p", response=None),
    RolloutConfig(
        timeout_seconds=30.0, unresponsive_seconds=5.5, max_attempts=3, retry_condition=["timeout"]
    ),
    _rollout(),
    _rollout(
        end_time=200.0,
        mode="val",
        resources_id="rs-1",
        status="succeeded",
        config=RolloutConfig(max_attempts=2, retry_condition=["failed", "unresponsive"]),
        metadata={"k": [1, 2]},
    ),
    _attempt(),
    _attempt(status="timeout", worker_id="w-1", end_time=110.0, last_heartbeat_time=105.0, metadata={"x": 1}),
    AttemptedRollout(**_rollout(status="running").model_dump(), attempt=_attempt(status="running")),
    EnqueueRolloutRequest(input=[1, 2, 3]),
    EnqueueRolloutRequest(input="x", mode="train", resources_id="r", config=RolloutConfig(), metadata={}),
    Worker(worker_id="w-0"),
    Worker(
        worker_id="w-1",
        status="busy",
        heartbeat_stats={"cpu": 0.5},
        last_heartbeat_time=1.0,
        last_dequeue_time=2.0,
        last_busy_time=3.0,
        last_idle_time=0.5,
        current_rollout_id="ro-1",
        current_attempt_id="at-1",
    ),
    PaginatedResult[Rollout](items=[_rollout(), _rollout(rollout_id="ro-2")], limit=2, offset=0, total=5),
    PaginatedResult[Attempt](items=[], limit=-1, offset=0, total=0),
    Task(rollout_id="ro-1", input={"a": 1}, mode="test", create_time=1.0, num_claims=2),
    TaskIfAny(is_available=True, task=Task(rollout_id="ro-1", input=None)),
    TaskIfAny(is_available=False),
    RolloutLegacy(
        rollout_id="ro-1",
        final_reward=0.5,
        triplets=[Triplet(prompt="p", response="r", reward=0.5)],
        trace=[{"name": "span"}],
        logs=["line"],
    ),
    GenericResponse(),
    GenericResponse(status="error", message="nope", data={"code": 3}),
]


@pytest.mark.parametrize("model", ROUND_TRIP_CASES, ids=lambda m: type(m).__name__)
def test_json_round_trip(model: BaseModel) -> None:
    restored = type(model).model_validate_json(model.model_dump_json())
    assert restored == model
    assert type(restored) is type(model)


def test_paginated_result_items_are_validated_as_the_type_parameter() -> None:
    page = PaginatedResult[Attempt].model_validate_json(
        '{"items": [{"rollout_id": "r", "attempt_id": "a", "sequence_id": 1, "start_time": 1}],'
        ' "limit": 10, "offset": 0, "total": 1}'
    )
    assert isinstance(page[0], Attempt)
    assert page[0].status == "preparing"
    with pytest.raises(ValidationError):
        PaginatedResult[Attempt].model_validate({"items": [{"bad": 1}], "limit": 1, "offset": 0, "total": 1})


def test_rollout_and_attempt_defaults() -> None:
    rollout = _rollout()
    assert rollout.status == "queuing"
    assert rollout.end_time is None and rollout.mode is None and rollout.resources_id is None
    assert rollout.metadata is None
    assert rollout.config == RolloutConfig(timeout_seconds=None, unresponsive_seconds=None, max_attempts=1)
    assert rollout.config.retry_condition == []
    assert _rollout().config is not rollout.config  # no shared mutable default

    attempt = _attempt()
    assert attempt.status == "preparing"
    assert attempt.worker_id is None and attempt.last_heartbeat_time is None and attempt.end_time is None

    worker = Worker(worker_id="w")
    assert worker.status == "unknown"
    assert worker.current_rollout_id is None and worker.heartbeat_stats is None

    assert Triplet(prompt=1, response=2).metadata == {}
    assert Triplet(prompt=1, response=2).metadata is not Triplet(prompt=1, response=2).metadata


def test_invalid_status_literals_are_rejected() -> None:
    with pytest.raises(ValidationError):
        _rollout(status="done")
    with pytest.raises(ValidationError):
        _attempt(status="queuing")
    with pytest.raises(ValidationError):
        _rollout(mode="eval")
    with pytest.raises(ValidationError):
        Worker(worker_id="w", status="sleeping")  # type: ignore[arg-type]


def test_rollout_config_rejects_zero_attempts() -> None:
    with pytest.raises(ValidationError) as info:
        RolloutConfig(max_attempts=0)
    assert info.value.errors()[0]["loc"] == ("max_attempts",)
    assert RolloutConfig(max_attempts=1).max_attempts == 1


def test_rollout_config_rejects_non_attempt_retry_status() -> None:
    with pytest.raises(ValidationError) as info:
        RolloutConfig(retry_condition=["timeout", "cancelled"])  # type: ignore[list-item]
    assert info.value.errors()[0]["loc"] == ("retry_condition", 1)
    assert RolloutConfig(retry_condition=["failed", "timeout", "unresponsive"]).retry_condition == [
        "failed",
        "timeout",
        "unresponsive",
    ]


def test_attempted_rollout_rejects_attempt_of_another_rollout() -> None:
    with pytest.raises(ValidationError, match="Inconsistent rollout_id between Rollout and Attempt"):
        AttemptedRollout(**_rollout().model_dump(), attempt=_attempt(rollout_id="ro-other"))
    ok = AttemptedRollout(**_rollout().model_dump(), attempt=_attempt())
    assert isinstance(ok, Rollout)
    assert ok.attempt.attempt_id == "at-1"


def test_paginated_result_behaves_like_a_sequence() -> None:
    rollouts = [_rollout(rollout_id=f"ro-{i}") for i in range(4)]
    page = PaginatedResult[Rollout](items=rollouts, limit=4, offset=8, total=20)

    assert isinstance(page, Sequence)
    assert len(page) == 4
    assert page[0] is rollouts[0]
    assert page[-1] is rollouts[-1]
    assert page[1:3] == rollouts[1:3]
    assert list(page) == rollouts
    assert [r.rollout_id for r in page] == ["ro-0", "ro-1", "ro-2", "ro-3"]
    assert rollouts[2] in page
    assert _rollout(rollout_id="ro-x") not in page
    assert page.index(rollouts[3]) == 3
    assert page.count(rollouts[1]) == 1
    assert list(reversed(page)) == rollouts[::-1]
    with pytest.raises(IndexError):
        page[4]

    assert repr(page) == f"<PaginatedResult (8:12 of 20) [{rollouts[0]!r}, ...]>"  # Agent Lightning 0.3's
    # the model's own fields are still there for serialization
    assert page.model_dump()["total"] == 20
    assert len(page.model_dump()["items"]) == 4


def test_empty_paginated_result() -> None:
    page = PaginatedResult[int](items=[], limit=0, offset=0, total=0)
    assert len(page) == 0
    assert list(page) == []
    assert not page.items


def test_parallel_worker_base_lifecycle() -> None:
    calls: list[str] = []

    class Worker_(ParallelWorkerBase):
        def run(self, value: int) -> int:
            calls.append("run")
            return value * 2

    worker = Worker_()
    assert worker.worker_id is None
    worker.init("anything", key="value")
    worker.init_worker(3, "extra", flag=True)
    assert worker.worker_id == 3
    assert worker.run(21) == 42
    worker.teardown_worker(3)
    worker.teardown()
    assert calls == ["run"]
    assert ParallelWorkerBase().run() is None


async def test_hook_methods_are_keyword_only_async_no_ops() -> None:
    hook = Hook()
    assert isinstance(hook, ParallelWorkerBase)
    rollout = _rollout()
    await hook.on_trace_start(agent=None, runner=None, tracer=None, rollout=rollout)
    await hook.on_trace_end(agent=None, runner=None, tracer=None, rollout=rollout)
    await hook.on_rollout_start(agent=None, runner=None, rollout=rollout)
    await hook.on_rollout_end(agent=None, runner=None, rollout=rollout, spans=[])
    expected = {
        "on_trace_start": ["agent", "runner", "tracer", "rollout"],
        "on_trace_end": ["agent", "runner", "tracer", "rollout"],
        "on_rollout_start": ["agent", "runner", "rollout"],
        "on_rollout_end": ["agent", "runner", "rollout", "spans"],
    }
    for name, params in expected.items():
        method = getattr(Hook, name)
        assert inspect.iscoroutinefunction(method)
        signature = inspect.signature(method)
        kw_only = [p.name for p in signature.parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY]
        assert kw_only == params
    with pytest.raises(TypeError):
        await hook.on_rollout_start(None, None, rollout)  # type: ignore[misc]


def test_dataset_protocol_accepts_plain_sequences() -> None:
    assert isinstance([1, 2, 3], Dataset)
    assert isinstance(("a",), Dataset)

    class Custom:
        def __getitem__(self, index: int) -> str:
            return str(index)

        def __len__(self) -> int:
            return 3

    assert isinstance(Custom(), Dataset)
    assert not isinstance({1, 2}, Dataset)  # no __getitem__
    assert not isinstance(iter([1]), Dataset)


def test_filter_and_sort_typed_dicts() -> None:
    assert FilterField.__total__ is False
    assert set(FilterField.__annotations__) == {"exact", "within", "contains"}
    assert set(SortOptions.__required_keys__) == {"name", "order"}
    sort: SortOptions = {"name": "start_time", "order": "desc"}
    assert sort["order"] == "desc"
