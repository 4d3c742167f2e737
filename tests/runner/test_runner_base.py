"""The Runner base class: abstract contract and run_context (worker id passed through, partial teardown)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from agl_core.runner import LitAgentRunner, Runner
from agl_core.store.memory import InMemoryLightningStore
from agl_core.tracer import DummyTracer
from agl_core.types import Hook, Rollout


class RecordingRunner(Runner[Any]):
    """A runner that records its lifecycle calls and can be told to fail at one stage."""

    def __init__(self, fail_at: str | None = None) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.fail_at = fail_at

    def _record(self, stage: str, value: Any) -> None:
        self.calls.append((stage, value))
        if stage == self.fail_at:
            raise RuntimeError(f"{stage} failed")

    def init(self, agent: Any, **kwargs: Any) -> None:
        self._record("init", kwargs.get("hooks"))

    def init_worker(self, worker_id: int, store: Any, **kwargs: Any) -> None:  # type: ignore[override]
        self._record("init_worker", worker_id)

    def teardown_worker(self, worker_id: int, *args: Any, **kwargs: Any) -> None:
        self._record("teardown_worker", worker_id)

    def teardown(self, *args: Any, **kwargs: Any) -> None:
        self._record("teardown", None)

    async def iter(self, *, event: Any | None = None) -> None:
        return None

    async def step(self, input: Any, **kwargs: Any) -> Rollout:
        raise NotImplementedError


def test_run_context_passes_the_worker_id_to_init_worker() -> None:
    runner = RecordingRunner()
    hooks = [Hook()]
    with runner.run_context(
        agent=object(), store=InMemoryLightningStore(), hooks=hooks, worker_id=4
    ) as entered:
        assert entered is runner
    assert runner.calls == [("init", hooks), ("init_worker", 4), ("teardown_worker", 4), ("teardown", None)]


def test_run_context_defaults_to_worker_zero() -> None:
    runner = RecordingRunner()
    with runner.run_context(agent=object(), store=InMemoryLightningStore()):
        pass
    assert ("init_worker", 0) in runner.calls and ("teardown_worker", 0) in runner.calls


def test_failed_init_worker_tears_down_only_init() -> None:
    runner = RecordingRunner(fail_at="init_worker")
    context = runner.run_context(agent=object(), store=InMemoryLightningStore(), worker_id=1)
    with pytest.raises(RuntimeError, match="init_worker failed"), context:
        pytest.fail("the block must not run")
    assert [stage for stage, _ in runner.calls] == ["init", "init_worker", "teardown"]


def test_failed_init_tears_down_nothing() -> None:
    runner = RecordingRunner(fail_at="init")
    context = runner.run_context(agent=object(), store=InMemoryLightningStore())
    with pytest.raises(RuntimeError, match="init failed"), context:
        pytest.fail("the block must not run")
    assert [stage for stage, _ in runner.calls] == ["init"]


def test_teardown_errors_are_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    runner = RecordingRunner(fail_at="teardown_worker")
    with caplog.at_level(logging.ERROR), runner.run_context(agent=object(), store=InMemoryLightningStore()):
        pass
    assert [stage for stage, _ in runner.calls][-1] == "teardown"
    assert "teardown_worker(0) failed" in caplog.text


def test_block_errors_propagate_after_teardown() -> None:
    runner = RecordingRunner()
    with pytest.raises(KeyError), runner.run_context(agent=object(), store=InMemoryLightningStore()):
        raise KeyError("inside")
    assert [stage for stage, _ in runner.calls][-2:] == ["teardown_worker", "teardown"]


def test_runner_is_abstract_and_run_is_removed() -> None:
    with pytest.raises(TypeError, match="abstract"):
        Runner()  # type: ignore[abstract]
    with pytest.raises(RuntimeError, match="iter"):
        RecordingRunner().run()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_rollouts": 0}, "max_rollouts"),
        ({"poll_interval": 0}, "poll_interval"),
        ({"interval_jitter": -1}, "interval_jitter"),
        ({"heartbeat_launch_mode": "process"}, "heartbeat_launch_mode"),
    ],
)
def test_lit_agent_runner_validates_its_options(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LitAgentRunner(tracer=DummyTracer(), **kwargs)


def test_lit_agent_runner_rejects_non_agents() -> None:
    runner: LitAgentRunner[Any] = LitAgentRunner(DummyTracer())
    with pytest.raises(TypeError, match=r"@agl\.rollout"):
        runner.init(lambda task: 1.0)  # type: ignore[arg-type]
    assert runner.get_worker_id() == "Worker-Unknown"
    with pytest.raises(ValueError, match="init_worker"):
        runner.get_store()
