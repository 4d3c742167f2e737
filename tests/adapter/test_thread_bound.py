"""``agl doctor`` names a thread-affinity failure of a sync agent (its cause and its fix)."""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

import agl_core as agl
from agl_core.adapter.doctor import diagnose_rollout
from agl_core.store.memory import InMemoryLightningStore

# Created in the test's thread, as an agent module would at import: the rollout runs on the runner's
# agent thread, where sqlite3 refuses the object (a real thread-affinity error, as DSPy's configure()).
CONNECTION = sqlite3.connect(":memory:")


@agl.rollout
def lookup_agent(task: dict[str, Any]) -> float:
    """A sync agent that uses a connection another thread created."""
    (value,) = CONNECTION.execute("SELECT ?", (task["x"],)).fetchone()
    return float(value)


def test_doctor_names_the_thread_bound_state_and_the_fix() -> None:
    store = InMemoryLightningStore()
    trainer = agl.Trainer(
        n_runners=1,
        strategy="shm",
        store=store,
        algorithm=agl.Baseline(polling_interval=0.2, span_verbosity="none"),
        progress=False,
    )
    trainer.dev(lookup_agent, [{"x": 1}])

    async def verdict() -> Any:
        (rollout,) = await store.query_rollouts()
        assert rollout.status == "failed"
        return await diagnose_rollout(store, rollout.rollout_id)

    report = asyncio.run(verdict()).report
    assert not report.ok
    assert report.problems[0].code == "thread_bound_state", report.format()
    problem = report.problems[0]
    assert "can only be used in that same thread" in problem.message
    assert "dspy.context" in (problem.fix or "") and "one thread of its own per runner" in (problem.fix or "")
