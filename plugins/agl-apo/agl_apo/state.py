"""The state of an APO run -- candidates with their lineage, rounds, beam -- kept in the store.

Where things live (every backend stores them unchanged, nothing beyond the built-in resource types):

* ``apo/<run_id>/v<n>``: one resources snapshot per candidate prompt: the run's initial resources with the
  prompt template replaced. Rollouts evaluating a candidate name this id, so runners get exactly it.
* ``apo/<run_id>/best``: the best prompt so far (same shape). It is written last in every round, so after a
  run ``store.get_latest_resources()`` is the best prompt too.
* ``apo-state/<run_id>``: the run state, a JSON document (:class:`APORunState`) carried in a
  ``PromptTemplate`` resource named ``apo_state``. ``ResourcesUpdate`` has no metadata field, and a custom
  resource type would make the store unreadable to processes without this plugin, so the document rides on
  a built-in type. Its resources version increases with every save (one per finished round, plus the start).

The document holds the lineage of every candidate (:class:`CandidateRecord`: parent version, round,
scores, the critique that produced it) and a :class:`RoundRecord` per finished round.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, ValidationError

from agl_core.types import PromptTemplate

if TYPE_CHECKING:
    from agl_core.store import LightningStore
    from agl_core.types import ResourcesUpdate

__all__ = [
    "SCHEMA_VERSION",
    "STATE_RESOURCE_KEY",
    "APORunState",
    "APOStateError",
    "CandidateRecord",
    "RoundRecord",
    "best_resources_id",
    "candidate_resources_id",
    "load_run_state",
    "save_run_state",
    "state_resources_id",
]

SCHEMA_VERSION = 1
"""Version of the state document's layout."""

STATE_RESOURCE_KEY = "apo_state"
"""Name of the resource that carries the state document inside ``apo-state/<run_id>``."""


class APOStateError(RuntimeError):
    """The run state in the store cannot be read (corrupt, or written by an incompatible version)."""


def candidate_resources_id(run_id: str, version: str) -> str:
    """Resources id of one candidate prompt: ``apo/<run_id>/<version>``."""
    return f"apo/{run_id}/{version}"


def best_resources_id(run_id: str) -> str:
    """Resources id of the run's best prompt so far: ``apo/<run_id>/best``."""
    return f"apo/{run_id}/best"


def state_resources_id(run_id: str) -> str:
    """Resources id of the run state document: ``apo-state/<run_id>``."""
    return f"apo-state/{run_id}"


class CandidateRecord(BaseModel):
    """One candidate prompt and where it came from."""

    version: str
    """``v0`` is the seed; later candidates count up, never reused within a run."""
    resources_id: str
    parent: str | None = None
    """Version of the prompt this one was edited from (None for the seed)."""
    round: int = 0
    """Round that created it (0 for the seed)."""
    template: str
    critique: str | None = None
    """The textual gradient the edit applied."""
    gradient_variant: str | None = None
    edit_variant: str | None = None
    parent_train_score: float | None = None
    """Mean reward of the parent on the training batch the critique was computed from."""
    scores: dict[int, float] = Field(default_factory=dict)
    """Round -> mean reward on that round's validation batch (beam selection)."""
    full_val_score: float | None = None
    """Mean reward on the whole validation set, when it was measured (seed, round leaders)."""
    created_at: float = Field(default_factory=time.time)

    @property
    def score(self) -> float | None:
        """The latest validation-batch score, or None before the candidate was scored."""
        return self.scores[max(self.scores)] if self.scores else None


class RoundRecord(BaseModel):
    """What one finished round did. Round 0 is the seed's validation."""

    round: int
    parents: list[str] = Field(default_factory=list)
    candidates: list[str] = Field(default_factory=list)
    """Versions created in this round."""
    scores: dict[str, float] = Field(default_factory=dict)
    """Version -> score on this round's validation batch (the beam and the new candidates)."""
    beam: list[str] = Field(default_factory=list)
    """The beam after selection, best first."""
    leader: str
    leader_full_val_score: float | None = None
    best: str
    best_score: float | None = None
    rollouts: int = 0
    skipped: list[str] = Field(default_factory=list)
    """Why children of this round produced no candidate (one line each)."""
    started_at: float = 0.0
    finished_at: float = Field(default_factory=time.time)


class APORunState(BaseModel):
    """Everything needed to continue a run: beam, history, round and version counter."""

    schema_version: int = SCHEMA_VERSION
    run_id: str
    prompt_key: str
    """Name of the prompt template resource being optimized."""
    engine: Literal["jinja", "f-string", "poml"]
    seed_template: str
    rng_seed: int
    config: dict[str, Any] = Field(default_factory=dict)
    """The optimization settings the run was started or last resumed with."""
    next_version: int = 1
    seed_evaluated: bool = False
    completed_rounds: int = 0
    beam: list[str] = Field(default_factory=list)
    best_version: str = "v0"
    best_score: float | None = None
    candidates: dict[str, CandidateRecord] = Field(default_factory=dict)
    rounds: list[RoundRecord] = Field(default_factory=list)
    finished: bool = False
    created_at: float = Field(default_factory=time.time)
    updated_at: float = Field(default_factory=time.time)

    def candidate(self, version: str) -> CandidateRecord:
        """The record of ``version``; ``KeyError`` naming the known versions when it is unknown."""
        try:
            return self.candidates[version]
        except KeyError:
            known = ", ".join(self.candidates) or "none"
            raise KeyError(f"Run {self.run_id!r} has no candidate {version!r} (known: {known}).") from None

    def lineage(self, version: str) -> list[CandidateRecord]:
        """``version`` and its ancestors, newest first, ending with the seed."""
        chain: list[CandidateRecord] = []
        seen: set[str] = set()
        current: str | None = version
        while current is not None and current not in seen:
            seen.add(current)
            record = self.candidate(current)
            chain.append(record)
            current = record.parent
        return chain

    def iter_beam(self) -> Iterator[CandidateRecord]:
        """The beam's records, best first."""
        return (self.candidate(version) for version in self.beam)

    @property
    def best(self) -> CandidateRecord:
        """The record of the best prompt so far."""
        return self.candidate(self.best_version)

    def best_prompt(self) -> PromptTemplate:
        """The best prompt so far as a :class:`~agl_core.types.PromptTemplate`."""
        return PromptTemplate(template=self.best.template, engine=self.engine)


async def save_run_state(store: LightningStore, state: APORunState) -> ResourcesUpdate:
    """Write ``state`` as the next version of ``apo-state/<run_id>``."""
    state.updated_at = time.time()
    document = PromptTemplate(template=state.model_dump_json(), engine="f-string")
    return await store.update_resources(state_resources_id(state.run_id), {STATE_RESOURCE_KEY: document})


async def load_run_state(store: LightningStore, run_id: str) -> APORunState | None:
    """The saved state of ``run_id``, or None when the store has none.

    Raises:
        APOStateError: the document exists but cannot be read.
    """
    resources_id = state_resources_id(run_id)
    update = await store.get_resources_by_id(resources_id)
    if update is None:
        return None
    document = update.resources.get(STATE_RESOURCE_KEY)
    if not isinstance(document, PromptTemplate):
        raise APOStateError(
            f"Resources {resources_id!r} exist but hold no {STATE_RESOURCE_KEY!r} document; they were not "
            "written by agl-apo. Use another run_id."
        )
    try:
        state = APORunState.model_validate_json(document.template)
    except ValidationError as exc:
        raise APOStateError(f"The APO state in {resources_id!r} cannot be read: {exc}") from exc
    if state.schema_version > SCHEMA_VERSION:
        raise APOStateError(
            f"The APO state in {resources_id!r} has schema version {state.schema_version}, newer than this "
            f"agl-apo understands ({SCHEMA_VERSION}); upgrade agl-apo to resume it."
        )
    return state
