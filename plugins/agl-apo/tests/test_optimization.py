"""APO end to end against scripted models: the beam improves the prompt, lineage and store contents."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from agl_apo import APO, APORunState, load_run_state
from agl_apo.state import STATE_RESOURCE_KEY, best_resources_id, state_resources_id
from agl_core.store.memory import InMemoryLightningStore
from agl_core.types import LLM, PromptTemplate

from .harness import fake_models, initial_resources, make_apo, run_apo
from .scripted import CRITIC_MODEL, EDITOR_MODEL, INSTRUCTION, make_tasks

TRAIN = make_tasks(9)
VAL = make_tasks(6, offset=3)


pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def finished_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[APO[Any], InMemoryLightningStore, Any]:
    """One 3-round run shared by the tests that inspect it (they only read it)."""
    store = InMemoryLightningStore()
    async with fake_models() as (server, models):
        out = tmp_path_factory.mktemp("words") / "run"
        apo = make_apo(server, run_id="words", output_dir=out, beam_rounds=3)
        await run_apo(apo, store, initial_resources(server), TRAIN, VAL)
    return apo, store, models


def _state(apo: APO[Any]) -> APORunState:
    assert apo.state is not None
    return apo.state


async def test_best_prompt_beats_the_seed(finished_run: Any) -> None:
    apo, _, models = finished_run
    state = _state(apo)
    assert state.finished and state.completed_rounds == 3
    seed = state.candidate("v0")
    assert seed.full_val_score == pytest.approx(1 / 3)
    assert state.best_score == 1.0 and state.best_version != "v0"
    assert apo.get_best_prompt().template == state.best.template
    assert INSTRUCTION in state.best.template
    assert models.calls[CRITIC_MODEL] > 0 and models.calls[EDITOR_MODEL] > 0


async def test_beam_is_the_top_of_each_round(finished_run: Any) -> None:
    apo, _, _ = finished_run
    state = _state(apo)
    assert [r.round for r in state.rounds] == [0, 1, 2, 3]
    beam_before = ["v0"]
    for record in state.rounds[1:]:
        # Selection pool = previous beam + this round's candidates; the beam is its best `beam_width`.
        assert set(record.scores) == set(beam_before) | set(record.candidates)
        assert len(record.beam) == min(apo.beam_width, len(record.scores))
        ranked = sorted(record.scores.values(), reverse=True)
        assert [record.scores[v] for v in record.beam] == ranked[: len(record.beam)]
        assert record.leader == record.beam[0]
        for version, score in record.scores.items():
            assert state.candidate(version).scores[record.round] == score
        beam_before = record.beam
    assert state.beam == state.rounds[-1].beam


async def test_every_candidate_records_its_lineage(finished_run: Any) -> None:
    apo, _, _ = finished_run
    state = _state(apo)
    numbers = sorted(int(v[1:]) for v in state.candidates)
    assert numbers == list(range(len(numbers)))  # v0, v1, ... with no gaps or reuse
    created = {v: r.round for r in state.rounds for v in r.candidates}
    assert set(created) == set(state.candidates) - {"v0"}
    for version, record in state.candidates.items():
        assert "{word}" in record.template  # edits that dropped the placeholder were rejected
        if version == "v0":
            assert record.parent is None and record.round == 0
            continue
        parent = state.candidate(record.parent or "")
        assert record.round == created[version]
        assert parent.round < record.round
        assert record.parent in state.rounds[record.round].parents
        assert record.critique and record.gradient_variant and record.edit_variant
        assert record.parent_train_score is not None
    chain = state.lineage(state.best_version)
    assert chain[0].version == state.best_version and chain[-1].version == "v0"
    introduced = next(r for r in reversed(chain) if INSTRUCTION in r.template)
    assert introduced.parent is not None and INSTRUCTION not in state.candidate(introduced.parent).template
    assert "upper case" in (introduced.critique or "")
    skipped = [line for r in state.rounds for line in r.skipped]
    assert any("lost placeholder(s) {word}" in line for line in skipped)


async def test_store_holds_candidates_best_and_state(finished_run: Any) -> None:
    apo, store, _ = finished_run
    state = _state(apo)
    for record in state.candidates.values():
        update = await store.get_resources_by_id(record.resources_id)
        assert update is not None
        prompt = update.resources["prompt_template"]
        assert isinstance(prompt, PromptTemplate) and prompt.template == record.template
        assert isinstance(update.resources["llm"], LLM)  # the other initial resources are kept
    best = await store.get_resources_by_id(best_resources_id("words"))
    latest = await store.get_latest_resources()
    assert best is not None and latest is not None and latest.resources_id == best.resources_id
    best_prompt = best.resources["prompt_template"]
    assert isinstance(best_prompt, PromptTemplate) and best_prompt.template == state.best.template
    saved = await load_run_state(store, "words")
    assert saved is not None and saved.model_dump() == state.model_dump()
    document = await store.get_resources_by_id(state_resources_id("words"))
    assert document is not None and set(document.resources) == {STATE_RESOURCE_KEY}
    assert document.version == 1 + 4 + 1  # the start, round 0..3, the final save
    rollouts = list(await store.query_rollouts())
    assert rollouts and all(r.metadata and r.metadata["apo"]["run_id"] == "words" for r in rollouts)
    assert all(r.status == "succeeded" for r in rollouts)
    known_ids = {c.resources_id for c in state.candidates.values()}
    assert {r.resources_id for r in rollouts} <= known_ids
    assert sum(r.rollouts for r in state.rounds) == len(rollouts)


async def test_report_files(finished_run: Any) -> None:
    apo, _, _ = finished_run
    state = _state(apo)
    report = apo.report
    assert report is not None and report.run_dir == apo.output_dir
    assert report.best_prompt.name == "best_prompt.txt"
    assert report.best_prompt.read_text(encoding="utf-8") == state.best.template + "\n"
    png = report.plot.read_bytes()
    assert report.plot.parent == report.best_prompt.parent and png[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(png) > 5000
    saved = json.loads(report.state.read_text(encoding="utf-8"))
    assert saved["best_version"] == state.best_version
    children = sum(len(r.parents) for r in state.rounds)
    assert saved["optimizer_usage"]["calls"] == 2 * children  # one critique and one edit per child


async def test_optimizer_calls_carry_the_temperature(finished_run: Any) -> None:
    _, _, models = finished_run
    sent = [t for model, t in models.temperatures if model in (CRITIC_MODEL, EDITOR_MODEL)]
    assert sent and all(t == 1.0 for t in sent)
    assert all(t == "<absent>" for model, t in models.temperatures if model == "fake-task")


async def test_critiques_see_the_task_conversations_and_rewards(finished_run: Any) -> None:
    _, _, models = finished_run
    prompt = models.critic_prompts[0]
    assert "<prompt_template>\nRepeat the word <{word}> and nothing else.\n</prompt_template>" in prompt
    # The runs come from the spans (TraceToMessages): the task model's prompt and answer, with rewards.
    assert "[user] Repeat the word <" in prompt and "[assistant] " in prompt
    assert "reward 0.000" in prompt and prompt.index("reward 0.000") < prompt.rfind("reward 1.000")


async def test_without_initial_validation_the_first_leader_sets_the_bar(tmp_path: Path) -> None:
    store = InMemoryLightningStore()
    async with fake_models() as (server, _):
        apo = make_apo(
            server, run_id="no-seed-val", output_dir=tmp_path, run_initial_validation=False, beam_rounds=1
        )
        await run_apo(apo, store, initial_resources(server), TRAIN, VAL)
    state = _state(apo)
    assert state.candidate("v0").full_val_score is None and state.rounds[0].best_score is None
    assert state.best_version == state.rounds[1].leader and state.best_score is not None
    purposes = {r.metadata["apo"]["purpose"] for r in await store.query_rollouts() if r.metadata}
    assert "seed-validation" not in purposes
