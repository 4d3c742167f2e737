"""0.3 code that matches exception messages: 0.3's sentence comes first, agl's hint (if any) after it.

Each ``match`` below is Agent Lightning 0.3.0's own message, escaped, as its tests and user code matched it.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

import agl_core as agl
from agl_core.store.utils import rollout_status_from_attempt


def _match(message: str) -> str:
    return "^" + re.escape(message)


def test_runner_without_agent_or_store() -> None:
    runner = agl.LitAgentRunner(agl.DummyTracer())
    with pytest.raises(ValueError, match=_match("Agent not initialized. Call init() first.")):
        runner.get_agent()
    with pytest.raises(ValueError, match=_match("Store not initialized. Call init_worker() first.")):
        runner.get_store()


async def test_otel_tracer_used_before_init_worker() -> None:
    tracer = agl.OtelTracer()
    with pytest.raises(
        RuntimeError, match=_match("LightningSpanProcessor is not initialized. Call init_worker() first.")
    ):
        async with tracer.trace_context("t"):
            pass


async def test_invalid_attempt_status() -> None:
    attempt: Any = agl.Attempt.model_construct(
        rollout_id="ro-1", attempt_id="at-1", sequence_id=1, start_time=0.0, status="bogus"
    )
    with pytest.raises(ValueError, match=_match("Invalid attempt status: bogus")):
        await rollout_status_from_attempt(attempt, agl.RolloutConfig())


def test_second_active_tracer() -> None:
    agl.set_active_tracer(agl.DummyTracer())
    try:
        with pytest.raises(
            ValueError, match=_match("An active tracer is already set. Cannot set a new one.")
        ):
            agl.set_active_tracer(agl.DummyTracer())
    finally:
        agl.clear_active_tracer()


def test_client_server_role() -> None:
    with pytest.raises(ValueError, match=_match("role must be one of 'algorithm', 'runner', or 'both'")):
        agl.ClientServerExecutionStrategy(role="trainer")  # type: ignore[arg-type]


def test_proxy_without_models() -> None:
    with pytest.raises(ValueError, match=_match("No models found in model_list. Please specify the model.")):
        agl.LLMProxy(model_list=[]).as_resource()


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (
            lambda: agl.ProxyLLM(endpoint="http://h/v1", model="m").get_base_url("ro-1", None),
            ValueError,
            "rollout_id and attempt_id must be strings or all be empty",
        ),
        (lambda: agl.emit_reward("high", propagate=False), TypeError, "Reward must be a number"),
        (lambda: agl.Baseline().get_store(), ValueError, "Store has not been set for this algorithm."),
    ],
)
def test_messages_agl_already_kept(call: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=_match(message)):
        call()


async def test_store_not_found_messages() -> None:
    """0.3's store tests matched these (``match="Rollout nonexistent not found"``)."""
    store = agl.InMemoryLightningStore()
    with pytest.raises(ValueError, match=_match("Rollout nonexistent not found")):
        await store.update_rollout(rollout_id="nonexistent", status="failed")
    rollout = await store.enqueue_rollout(input={"test": "data"})
    with pytest.raises(ValueError, match=_match(f"No attempts found for rollout {rollout.rollout_id}")):
        await store.update_attempt(rollout_id=rollout.rollout_id, attempt_id="latest", status="failed")
    started = await store.start_rollout(input={"test": "data"})
    with pytest.raises(
        ValueError, match=_match(f"Attempt nonexistent not found for rollout {started.rollout_id}")
    ):
        await store.update_attempt(rollout_id=started.rollout_id, attempt_id="nonexistent", status="failed")


class _ReturnsTrue(agl.LitAgent[Any]):
    def validation_rollout(self, task: Any, resources: Any, rollout: Any) -> Any:
        return True


async def test_runner_warns_that_a_bool_reward_is_not_a_number(caplog: pytest.LogCaptureFixture) -> None:
    runner = agl.LitAgentRunner(agl.DummyTracer())
    with runner.run_context(agent=_ReturnsTrue(), store=agl.InMemoryLightningStore()):
        await runner.step({"q": 1})
    assert "Reward is not a number, got: <class 'bool'>." in caplog.text


class _ReturnsDict(agl.LitAgent[Any]):
    def validation_rollout(self, task: Any, resources: Any, rollout: Any) -> Any:
        return {"unexpected": True}


async def test_runner_rejects_a_result_it_cannot_record() -> None:
    runner = agl.LitAgentRunner(agl.DummyTracer())
    store = agl.InMemoryLightningStore()
    with (
        runner.run_context(agent=_ReturnsDict(), store=store),
        pytest.raises(TypeError, match=_match("Invalid raw result type")),
    ):
        await runner.step({"q": 1})


class _ForgetsRollouts(agl.InMemoryLightningStore):
    """0.3 test code: a store whose ``get_rollout_by_id`` finds nothing after the step."""

    async def get_rollout_by_id(self, rollout_id: str) -> Any:  # type: ignore[override]
        return None


async def test_step_whose_rollout_cannot_be_fetched_afterwards() -> None:
    runner = agl.LitAgentRunner(agl.DummyTracer())
    store = _ForgetsRollouts()
    with (
        runner.run_context(agent=_ReturnsTrue(), store=store),
        pytest.raises(RuntimeError, match=_match("Failed to fetch completed rollout by id after step: ro-")),
    ):
        await runner.step({"q": 1})


class _TeardownFails(agl.LitAgentRunner[Any]):
    def teardown_worker(self, worker_id: int, *args: Any, **kwargs: Any) -> None:
        super().teardown_worker(worker_id, *args, **kwargs)
        raise RuntimeError("teardown_worker failed")

    def teardown(self, *args: Any, **kwargs: Any) -> None:
        super().teardown(*args, **kwargs)
        raise RuntimeError("teardown failed")


def test_run_context_logs_teardown_errors_with_03s_sentences(caplog: pytest.LogCaptureFixture) -> None:
    runner = _TeardownFails(agl.DummyTracer())
    with runner.run_context(agent=_ReturnsTrue(), store=agl.InMemoryLightningStore()):
        pass
    messages = [record.getMessage() for record in caplog.records]
    assert any(m.startswith("Error during runner worker teardown") for m in messages)
    assert any(m.startswith("Error during runner teardown") for m in messages)
