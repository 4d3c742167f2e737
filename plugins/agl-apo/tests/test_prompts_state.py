"""Optimizer prompts, edited-template checks, and the run state document."""

from __future__ import annotations

from pathlib import Path

import pytest

from agl_apo.prompts import (
    Experiment,
    PromptCheckError,
    check_template,
    edit_messages,
    extract_prompt,
    gradient_messages,
    placeholders,
    render_experiments,
)
from agl_apo.state import (
    STATE_RESOURCE_KEY,
    APORunState,
    APOStateError,
    CandidateRecord,
    load_run_state,
    save_run_state,
    state_resources_id,
)
from agl_core.store.memory import InMemoryLightningStore
from agl_core.store.sqlite import SqliteLightningStore
from agl_core.types import PromptTemplate


def test_placeholders_per_engine() -> None:
    assert placeholders("Hi {name}, {task[0]} {{literal}} {name}", "f-string") == ["{name}", "{task}"]
    assert placeholders("{{ user }} and {{question}}", "jinja") == ["{{ user }}", "{{ question }}"]
    assert placeholders("<poml>{{x}}</poml>", "poml") == []
    with pytest.raises(PromptCheckError, match="not a valid f-string"):
        placeholders("unbalanced {", "f-string")


@pytest.mark.parametrize(
    ("candidate", "problem"),
    [
        ("Say hi", "lost placeholder\\(s\\) {name}"),
        ("Say hi {name} {extra}", "added unknown placeholder\\(s\\) {extra}"),
        ("Say hi {name} as JSON: {", "not a valid f-string"),
        ("   ", "empty"),
    ],
)
def test_bad_f_string_edits_are_rejected(candidate: str, problem: str) -> None:
    with pytest.raises(PromptCheckError, match=problem):
        check_template(candidate, "Greet {name}", "f-string")


def test_good_edits_pass() -> None:
    check_template("Greet {name} warmly; {{braces}} are literal.", "Greet {name}", "f-string")
    check_template("Hello {{ name }}, today is {{ day }}", "Hi {{name}}", "jinja")  # jinja may add variables


def test_extract_prompt() -> None:
    assert extract_prompt("Sure!\n<prompt>\nNew {x}\n</prompt>\nDone.") == "New {x}"
    assert extract_prompt("```text\nNew {x}\n```") == "New {x}"
    assert extract_prompt("  New {x}  ") == "New {x}"


def test_runs_are_shown_worst_first_and_clipped() -> None:
    long = "x" * 5000
    experiments = [
        Experiment(1.0, "succeeded", {"q": 1}, [[{"role": "user", "content": "good run"}]]),
        Experiment(0.0, "succeeded", {"q": 2}, [[{"role": "user", "content": long}]]),
        Experiment(None, "failed", {"q": 3}, []),
    ]
    text = render_experiments(experiments)
    assert text.index("reward none") < text.index("reward 0.000") < text.index("reward 1.000")
    assert "no LLM messages were recorded" in text and '"q": 3' in text
    assert "[truncated]" in text and len(text) < 4000


def test_optimizer_messages_carry_template_runs_and_placeholders() -> None:
    runs = [Experiment(0.0, "succeeded", {}, [[{"role": "assistant", "content": "wrong answer"}]])]
    gradient = gradient_messages("failures", "Solve {q}", runs)
    assert gradient[0]["role"] == "system"
    assert "Solve {q}" in gradient[1]["content"] and "wrong answer" in gradient[1]["content"]
    edit = edit_messages("focused", "Solve {q}", "- be precise", ["{q}"])
    assert "- be precise" in edit[1]["content"] and "placeholders exactly as written" in edit[1]["content"]
    assert "{q}" in edit[1]["content"]


def _state() -> APORunState:
    records = {
        "v0": CandidateRecord(version="v0", resources_id="apo/r/v0", template="seed"),
        "v1": CandidateRecord(version="v1", resources_id="apo/r/v1", template="a", parent="v0", round=1),
        "v3": CandidateRecord(version="v3", resources_id="apo/r/v3", template="b", parent="v1", round=2),
    }
    return APORunState(
        run_id="r", prompt_key="p", engine="f-string", seed_template="seed", rng_seed=3, candidates=records
    )


def test_lineage_walks_back_to_the_seed() -> None:
    state = _state()
    assert [r.version for r in state.lineage("v3")] == ["v3", "v1", "v0"]
    with pytest.raises(KeyError, match="no candidate 'v9'"):
        state.lineage("v9")


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_state_round_trips_through_the_store(tmp_path: Path, backend: str) -> None:
    store = InMemoryLightningStore() if backend == "memory" else SqliteLightningStore(tmp_path / "s.db")
    state = _state()
    state.candidates["v3"].scores[2] = 0.5
    first = await save_run_state(store, state)
    second = await save_run_state(store, state)
    assert (first.version, second.version) == (1, 2)
    loaded = await load_run_state(store, "r")
    assert loaded is not None and loaded.model_dump() == state.model_dump()
    assert loaded.candidates["v3"].scores == {2: 0.5}
    assert await load_run_state(store, "other") is None
    await store.close()


async def test_unreadable_state_is_reported() -> None:
    store = InMemoryLightningStore()
    await store.update_resources(
        state_resources_id("foreign"), {"x": PromptTemplate(template="t", engine="jinja")}
    )
    with pytest.raises(APOStateError, match="not written by agl-apo"):
        await load_run_state(store, "foreign")
    broken = PromptTemplate(template="{not json", engine="f-string")
    await store.update_resources(state_resources_id("broken"), {STATE_RESOURCE_KEY: broken})
    with pytest.raises(APOStateError, match="cannot be read"):
        await load_run_state(store, "broken")
    newer = _state().model_copy(update={"schema_version": 99, "run_id": "newer"})
    await store.update_resources(
        state_resources_id("newer"),
        {STATE_RESOURCE_KEY: PromptTemplate(template=newer.model_dump_json(), engine="f-string")},
    )
    with pytest.raises(APOStateError, match="upgrade agl-apo"):
        await load_run_state(store, "newer")
