"""A run killed with SIGKILL mid-round continues from its last finished round, in the same store."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from agl_apo import OptimizerError, load_run_state
from agl_core.store.memory import InMemoryLightningStore
from agl_core.store.sqlite import SqliteLightningStore
from agl_core.types import LLM
from agl_testing.fake_openai import FakeOpenAIServer, Fault

from .harness import fake_models, initial_resources, make_apo, run_apo
from .resume_worker import RUN_ID, TRAIN, VAL
from .scripted import CRITIC_MODEL, EDITOR_MODEL, TASK_MODEL, ScriptedModels

PLUGIN_DIR = Path(__file__).resolve().parent.parent
UNFINISHED = ["queuing", "requeuing", "preparing", "running"]


async def _read_until(stream: asyncio.StreamReader, wanted: str, timeout: float) -> list[str]:
    """Lines read until one equals ``wanted`` (bounded by ``timeout``)."""
    lines: list[str] = []

    async def read() -> None:
        while True:
            raw = await stream.readline()
            if not raw:
                raise AssertionError(f"worker exited before printing {wanted!r}; it printed {lines}")
            lines.append(raw.decode().strip())
            if lines[-1] == wanted:
                return

    await asyncio.wait_for(read(), timeout=timeout)
    return lines


async def _kill_worker_mid_round_two(db: Path, run_dir: Path, log: Path) -> list[str]:
    with log.open("wb") as stderr:
        worker = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.resume_worker",
            str(db),
            str(run_dir),
            cwd=PLUGIN_DIR,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
        )
        try:
            assert worker.stdout is not None
            lines = await _read_until(worker.stdout, "BLOCKED", timeout=120)
        finally:
            if worker.returncode is None:
                worker.send_signal(signal.SIGKILL)
            await asyncio.wait_for(worker.wait(), timeout=30)
    assert worker.returncode == -signal.SIGKILL
    return lines


def _versions(state: Any) -> set[int]:
    return {int(v[1:]) for v in state.candidates}


@pytest.mark.slow
async def test_killed_run_continues_from_the_last_finished_round(tmp_path: Path) -> None:
    db = tmp_path / "apo.db"
    lines = await _kill_worker_mid_round_two(db, tmp_path / "run", tmp_path / "worker.log")
    assert lines == ["SAVED 1", "BLOCKED"]

    store = SqliteLightningStore(db)
    try:
        before = await load_run_state(store, RUN_ID)
        assert before is not None and not before.finished
        assert before.completed_rounds == 1 and [r.round for r in before.rounds] == [0, 1]
        rollouts_before = {r.rollout_id: r for r in await store.query_rollouts()}
        in_flight = [r for r in rollouts_before.values() if r.status in UNFINISHED]
        assert in_flight and {r.metadata["apo"]["round"] for r in in_flight if r.metadata} == {2}
        published = [
            u.resources_id for u in await store.query_resources(resources_id_contains=f"apo/{RUN_ID}/v")
        ]
        highest_before = max(int(rid.rsplit("/v", 1)[1]) for rid in published)
        assert highest_before >= max(_versions(before))  # round 2 may have published orphan versions

        async with fake_models() as (server, _):
            apo = make_apo(server, run_id=RUN_ID, resume=True, output_dir=tmp_path / "run", beam_rounds=3)
            await run_apo(apo, store, initial_resources(server), TRAIN, VAL)
            beam_endpoint = server.base_url

        state = apo.state
        assert state is not None and state.finished and state.completed_rounds == 3
        # The finished rounds were kept as they were, and the run went on with rounds 2 and 3.
        assert [r.round for r in state.rounds] == [0, 1, 2, 3]
        assert [r.model_dump() for r in state.rounds[:2]] == [r.model_dump() for r in before.rounds]
        for version, record in before.candidates.items():
            kept = state.candidate(version)
            assert (kept.template, kept.parent, kept.round) == (record.template, record.parent, record.round)
        new_versions = _versions(state) - _versions(before)
        assert new_versions and min(new_versions) > highest_before  # no version id is reused
        assert state.best_score is not None and state.best_score >= (before.best_score or 0.0)

        rollouts_after = {r.rollout_id: r for r in await store.query_rollouts()}
        for rollout in in_flight:  # what the killed process left in flight no longer runs
            status = rollouts_after[rollout.rollout_id].status
            if rollout.status in ("preparing", "running"):
                assert status == "cancelled"
            else:  # a queued one may have been picked up by a new runner before APO cancelled it
                assert status in ("cancelled", "failed")
        new = [r for rid, r in rollouts_after.items() if rid not in rollouts_before]
        assert new and {r.metadata["apo"]["round"] for r in new if r.metadata} == {2, 3}  # no rerun of 0-1
        seed_runs = [r for r in rollouts_after.values() if r.metadata and r.metadata["apo"]["round"] == 0]
        assert len(seed_runs) == len(VAL)
        for version in state.beam:  # snapshots point at the resumed process's endpoints
            update = await store.get_resources_by_id(state.candidate(version).resources_id)
            assert update is not None
            llm = update.resources["llm"]
            assert isinstance(llm, LLM) and llm.endpoint == beam_endpoint
    finally:
        await store.close()


class _BrokenCritic(ScriptedModels):
    """The critic model is down (HTTP 503 on every call)."""

    def __call__(self, request: dict[str, Any]) -> Any:
        if request.get("model") == CRITIC_MODEL:
            return Fault(status=503, message="critic overloaded")
        return super().__call__(request)


async def test_a_round_whose_optimizer_calls_all_fail_is_retried_on_resume(tmp_path: Path) -> None:
    store = InMemoryLightningStore()
    broken = _BrokenCritic()
    async with FakeOpenAIServer(broken, models=[TASK_MODEL, CRITIC_MODEL, EDITOR_MODEL]) as server:
        apo = make_apo(server, run_id="flaky", output_dir=tmp_path, max_retries=0, beam_rounds=1)
        with pytest.raises(OptimizerError, match=r"Round 1: every optimizer call failed.*critic overloaded"):
            await run_apo(apo, store, initial_resources(server), TRAIN, VAL)
    saved = await load_run_state(store, "flaky")
    assert saved is not None and saved.completed_rounds == 0 and saved.seed_evaluated
    assert not (tmp_path / "best_prompt.txt").exists()

    async with fake_models() as (server, _):
        again = make_apo(server, run_id="flaky", output_dir=tmp_path, resume=True, beam_rounds=1)
        await run_apo(again, store, initial_resources(server), TRAIN, VAL)
    state = again.state
    assert state is not None and state.finished and [r.round for r in state.rounds] == [0, 1]
    assert state.rounds[0].model_dump() == saved.rounds[0].model_dump()
