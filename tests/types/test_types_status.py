"""Status literals, status groups and the attempt -> rollout status mapping."""

from typing import get_args

import pytest

from agl_core.types import (
    ATTEMPT_STATUSES,
    FINISHED_ROLLOUT_STATUSES,
    QUEUING_ROLLOUT_STATUSES,
    ROLLOUT_STATUSES,
    RUNNING_ROLLOUT_STATUSES,
    TERMINAL_ATTEMPT_STATUSES,
    AttemptStatus,
    RolloutConfig,
    RolloutMode,
    RolloutStatus,
    WorkerStatus,
    is_finished,
    is_queuing,
    is_running,
    rollout_status_from_attempt,
)


def test_literal_values_match_agent_lightning() -> None:
    assert set(get_args(RolloutStatus)) == {
        "queuing",
        "preparing",
        "running",
        "failed",
        "succeeded",
        "cancelled",
        "requeuing",
    }
    assert set(get_args(AttemptStatus)) == {
        "preparing",
        "running",
        "failed",
        "succeeded",
        "unresponsive",
        "timeout",
    }
    assert set(get_args(RolloutMode)) == {"train", "val", "test"}
    assert set(get_args(WorkerStatus)) == {"idle", "busy", "unknown"}
    assert get_args(RolloutStatus) == ROLLOUT_STATUSES
    assert get_args(AttemptStatus) == ATTEMPT_STATUSES


def test_rollout_status_groups_partition_all_statuses() -> None:
    groups = [QUEUING_ROLLOUT_STATUSES, RUNNING_ROLLOUT_STATUSES, FINISHED_ROLLOUT_STATUSES]
    assert set().union(*groups) == set(ROLLOUT_STATUSES)
    assert sum(len(g) for g in groups) == len(ROLLOUT_STATUSES)
    assert {"queuing", "requeuing"} == QUEUING_ROLLOUT_STATUSES
    assert {"preparing", "running"} == RUNNING_ROLLOUT_STATUSES
    assert {"failed", "succeeded", "cancelled"} == FINISHED_ROLLOUT_STATUSES
    assert {"failed", "succeeded", "timeout", "unresponsive"} == TERMINAL_ATTEMPT_STATUSES


@pytest.mark.parametrize("status", ROLLOUT_STATUSES)
def test_exactly_one_predicate_holds(status: RolloutStatus) -> None:
    flags = (is_queuing(status), is_running(status), is_finished(status))
    assert flags.count(True) == 1
    assert is_queuing(status) == (status in ("queuing", "requeuing"))
    assert is_running(status) == (status in ("preparing", "running"))
    assert is_finished(status) == (status in ("failed", "succeeded", "cancelled"))


RETRY_ALL = ["failed", "timeout", "unresponsive"]


@pytest.mark.parametrize(
    ("attempt_status", "sequence_id", "max_attempts", "retry_condition", "expected"),
    [
        # pass-through statuses ignore the retry policy entirely
        ("preparing", 1, 1, [], "preparing"),
        ("running", 1, 1, [], "running"),
        ("succeeded", 1, 1, [], "succeeded"),
        ("succeeded", 3, 3, RETRY_ALL, "succeeded"),
        ("running", 5, 2, RETRY_ALL, "running"),
        # no retry configured -> failed
        ("failed", 1, 1, [], "failed"),
        ("timeout", 1, 1, [], "failed"),
        ("unresponsive", 1, 1, [], "failed"),
        # retry allowed and attempts left -> requeuing
        ("failed", 1, 2, RETRY_ALL, "requeuing"),
        ("timeout", 1, 3, ["timeout"], "requeuing"),
        ("unresponsive", 2, 3, ["unresponsive"], "requeuing"),
        # status not in retry_condition -> failed even with attempts left
        ("failed", 1, 3, ["timeout"], "failed"),
        ("timeout", 1, 3, ["failed", "unresponsive"], "failed"),
        ("unresponsive", 1, 3, ["failed"], "failed"),
        # attempts exhausted (sequence_id == max_attempts, or beyond) -> failed
        ("failed", 2, 2, RETRY_ALL, "failed"),
        ("timeout", 3, 3, RETRY_ALL, "failed"),
        ("unresponsive", 4, 3, RETRY_ALL, "failed"),
    ],
)
def test_rollout_status_from_attempt_table(
    attempt_status: AttemptStatus,
    sequence_id: int,
    max_attempts: int,
    retry_condition: list[AttemptStatus],
    expected: RolloutStatus,
) -> None:
    config = RolloutConfig(max_attempts=max_attempts, retry_condition=retry_condition)
    assert rollout_status_from_attempt(attempt_status, sequence_id, config) == expected


@pytest.mark.parametrize("bad", ["queuing", "cancelled", "requeuing", "done", ""])
def test_rollout_status_from_attempt_rejects_invalid_status(bad: str) -> None:
    with pytest.raises(ValueError, match="Invalid attempt status") as info:
        rollout_status_from_attempt(bad, 1, RolloutConfig())  # type: ignore[arg-type]
    message = str(info.value)
    assert repr(bad) in message
    for valid in ATTEMPT_STATUSES:
        assert repr(valid) in message
