"""Each runner worker gets its own runner and tracer (Agent Lightning 0.3 quirk 10 in
docs/migrating-from-agent-lightning.md fixed)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import agl_core as agl
from agl_core.runner import LitAgentRunner
from agl_core.store.memory import InMemoryLightningStore
from agl_core.tracer.otel import OtelTracer
from agl_core.trainer import Trainer
from agl_core.trainer._workers import WorkerRunners, clone_component
from agl_core.types import Hook
from tests.trainer._helpers import DrainAlgorithm, run


class Recorder(Hook):
    """Remembers, per worker id, which runner and tracer objects ran its rollouts."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: dict[str, set[tuple[int, int]]] = {}

    async def on_trace_start(self, *, agent: Any, runner: Any, tracer: Any, rollout: Any) -> None:
        with self.lock:
            self.seen.setdefault(runner.get_worker_id(), set()).add((id(runner), id(tracer)))


@agl.rollout
async def slow_agent(task: int) -> float:
    await asyncio.sleep(0.02)
    return 1.0


def test_shared_memory_workers_each_use_their_own_runner_and_tracer() -> None:
    recorder = Recorder()
    store = InMemoryLightningStore()
    trainer = Trainer(
        n_runners=4,
        strategy="shm",
        store=store,
        runner={"type": "litagent", "poll_interval": 0.01},
        algorithm=DrainAlgorithm(),
        hooks=recorder,
        progress=False,
    )

    trainer.fit(slow_agent, list(range(40)))

    assert {r.status for r in run(store.query_rollouts())} == {"succeeded"}
    assert len(recorder.seen) >= 2
    for pairs in recorder.seen.values():
        assert len(pairs) == 1, "a worker switched runner or tracer"
    runners = [next(iter(p))[0] for p in recorder.seen.values()]
    tracers = [next(iter(p))[1] for p in recorder.seen.values()]
    assert len(set(runners)) == len(runners)
    assert len(set(tracers)) == len(tracers)
    assert id(trainer.runner) in runners  # the configured runner serves one of the workers


def test_clone_component_copies_a_runner_and_its_tracer_but_keeps_the_configuration() -> None:
    tracer = OtelTracer(flush_timeout=7.0, instrument_llm_clients=False)
    runner: LitAgentRunner[Any] = LitAgentRunner(tracer, max_rollouts=3, poll_interval=0.2)

    clone = clone_component(runner)

    assert clone is not runner and clone.tracer is not tracer
    assert isinstance(clone.tracer, OtelTracer)
    assert (clone.max_rollouts, clone.poll_interval, clone.tracer.flush_timeout) == (3, 0.2, 7.0)


def test_worker_runners_hand_out_the_template_first_then_distinct_copies() -> None:
    runner: LitAgentRunner[Any] = LitAgentRunner(OtelTracer(instrument_llm_clients=False))
    pool = WorkerRunners(runner, 3)

    handed = [pool.acquire() for _ in range(3)]

    assert handed[0] is runner
    assert len({id(r) for r in handed}) == 3
    assert len({id(r.tracer) for r in handed}) == 3
