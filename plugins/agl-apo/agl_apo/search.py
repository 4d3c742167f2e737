"""The beam search of one APO run: seed validation, rounds of critiques and edits, selection, saving."""

from __future__ import annotations

import asyncio
import inspect
import logging
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agl_apo.evaluation import BatchEvaluator, BatchResult, cancel_unfinished_rollouts
from agl_apo.optimizer import OptimizerConfigError, OptimizerError
from agl_apo.progress import APOProgress
from agl_apo.prompts import (
    EDIT_VARIANTS,
    GRADIENT_VARIANTS,
    PromptCheckError,
    check_template,
    edit_messages,
    extract_prompt,
    gradient_messages,
    placeholders,
)
from agl_apo.report import APOReport, write_report
from agl_apo.state import (
    APORunState,
    CandidateRecord,
    RoundRecord,
    best_resources_id,
    candidate_resources_id,
    save_run_state,
)
from agl_core.algorithm import batch_iter_over_dataset
from agl_core.types import PromptTemplate

if TYPE_CHECKING:
    from agl_apo.algorithm import APO
    from agl_core.adapter import TraceToMessages
    from agl_core.store import LightningStore
    from agl_core.types import NamedResources

__all__ = ["BeamSearch"]

logger = logging.getLogger("agl_core.algorithm.apo.search")


@dataclass
class _Draft:
    """A child's edited prompt before it gets a version."""

    parent: str
    template: str
    critique: str
    gradient_variant: str
    edit_variant: str
    parent_train_score: float


@dataclass
class _ChildPlan:
    parent: str
    batch: Sequence[Any]
    gradient_variant: str
    edit_variant: str


class BeamSearch:
    """One execution of :meth:`APO.run` (a fresh start or a resumption) with the APO's settings."""

    def __init__(
        self,
        apo: APO[Any],
        store: LightningStore,
        state: APORunState,
        base_resources: NamedResources,
        train: list[Any],
        val: list[Any],
        *,
        live: bool | None,
        adapter: TraceToMessages,
    ) -> None:
        self.apo = apo
        self.store = store
        self.state = state
        self.base_resources = base_resources
        self.train = train
        self.val = val
        self.progress = APOProgress(
            run_id=state.run_id, total_rounds=apo.beam_rounds, live=live, console=apo.console
        )
        self.evaluator = BatchEvaluator(
            store,
            adapter,
            run_id=state.run_id,
            timeout=apo.rollout_batch_timeout,
            poll_interval=apo.poll_interval,
            on_progress=self.progress.rollouts,
        )

    # -- store writes --------------------------------------------------------------------------------

    def _resources(self, template: str) -> NamedResources:
        resources = dict(self.base_resources)
        resources[self.state.prompt_key] = PromptTemplate(template=template, engine=self.state.engine)
        return resources

    async def _publish(self, record: CandidateRecord) -> None:
        await self.store.update_resources(record.resources_id, self._resources(record.template))

    async def _save(self) -> None:
        """Save the state, then re-publish the best prompt so it is the store's latest resources."""
        await save_run_state(self.store, self.state)
        await self.store.update_resources(
            best_resources_id(self.state.run_id), self._resources(self.state.best.template)
        )

    async def _prepare(self, resumed: bool) -> None:
        state = self.state
        if not resumed:
            await self._publish(state.candidate("v0"))
            await self._save()
            return
        cancelled = await cancel_unfinished_rollouts(self.store, state.run_id)
        # Versions published by an interrupted round are not in the saved state; never reuse their ids.
        prefix = candidate_resources_id(state.run_id, "v")
        published = await self.store.query_resources(resources_id_contains=prefix)
        numbers = [
            int(update.resources_id[len(prefix) :])
            for update in published
            if update.resources_id.startswith(prefix) and update.resources_id[len(prefix) :].isdigit()
        ]
        state.next_version = max([state.next_version, *(n + 1 for n in numbers)])
        if state.completed_rounds < self.apo.beam_rounds:
            state.finished = False
        for version in state.beam:  # the base resources may differ from the first process's
            await self._publish(state.candidate(version))
        logger.info(
            "APO %s: resuming after round %d (%d leftover rollouts cancelled; next candidate v%d).",
            state.run_id,
            state.completed_rounds,
            cancelled,
            state.next_version,
        )

    async def _notify(self, record: RoundRecord) -> None:
        callback = self.apo.on_round_end
        if callback is None:
            return
        result = callback(record, self.state)
        if inspect.isawaitable(result):
            await result

    # -- the loop ------------------------------------------------------------------------------------

    async def execute(self, *, resumed: bool) -> APOReport:
        """Run the remaining rounds, saving after each, and write the report; returns its paths."""
        state = self.state
        self.progress.start()
        try:
            await self._prepare(resumed)
            for record in state.rounds:
                self.progress.end_round(record)
            if not state.seed_evaluated:
                await self._seed_round()
            while state.completed_rounds < self.apo.beam_rounds:
                record = await self._round(state.completed_rounds + 1)
                state.rounds.append(record)
                state.completed_rounds = record.round
                await self._save()
                self.progress.end_round(record)
                await self._notify(record)
            state.finished = True
            await self._save()
            self.progress.phase(f"done: best {state.best_version} ({_fmt(state.best_score)})")
        finally:
            self.progress.stop()
            await self.apo.optimizer.aclose()
        return write_report(
            state,
            self.apo.output_dir,
            console=self.progress.console,
            usage=self.apo.optimizer.usage.as_dict(),
        )

    async def _seed_round(self) -> None:
        state = self.state
        seed = state.candidate("v0")
        started = time.time()
        rollouts = 0
        if self.apo.run_initial_validation:
            self.progress.phase(f"seed: scoring v0 on the {len(self.val)} validation tasks")
            result = await self._evaluate("v0", self.val, mode="val", round_=0, purpose="seed-validation")
            rollouts = len(result.outcomes) + result.unfinished
            seed.full_val_score = result.score
            state.best_score = result.score
        state.best_version = "v0"
        state.beam = ["v0"]
        state.seed_evaluated = True
        record = RoundRecord(
            round=0,
            beam=["v0"],
            leader="v0",
            leader_full_val_score=seed.full_val_score,
            best="v0",
            best_score=state.best_score,
            rollouts=rollouts,
            started_at=started,
        )
        state.rounds.append(record)
        await self._save()
        self.progress.end_round(record)

    async def _evaluate(
        self, version: str, tasks: Sequence[Any], *, mode: Any, round_: int, purpose: str
    ) -> BatchResult:
        record = self.state.candidate(version)
        return await self.evaluator.evaluate(
            version, record.resources_id, tasks, mode=mode, round_=round_, purpose=purpose
        )

    def _plan(self, round_: int, rng: random.Random) -> tuple[list[_ChildPlan], Sequence[Any]]:
        apo, beam = self.apo, list(self.state.beam)
        if len(beam) < apo.beam_width:
            parents = [beam[i % len(beam)] for i in range(apo.beam_width)]
        else:
            parents = rng.sample(beam, apo.beam_width)
        train_batches = batch_iter_over_dataset(self.train, apo.gradient_batch_size, rng=rng)
        val_batches = batch_iter_over_dataset(self.val, apo.val_batch_size, rng=rng)
        plans = [
            _ChildPlan(
                parent=parent,
                batch=list(next(train_batches)),
                gradient_variant=rng.choice(sorted(GRADIENT_VARIANTS)),
                edit_variant=rng.choice(sorted(EDIT_VARIANTS)),
            )
            for parent in parents
            for _ in range(apo.branch_factor)
        ]
        return plans, list(next(val_batches))

    async def _round(self, round_: int) -> RoundRecord:
        apo, state = self.apo, self.state
        started = time.time()
        enqueued_before = self.evaluator.rollouts_enqueued
        plans, val_batch = self._plan(round_, random.Random(f"{state.rng_seed}:{round_}"))
        self.progress.start_round(round_, [p.parent for p in plans])
        self.progress.phase(f"round {round_}: {len(plans)} children (train rollouts, critiques, edits)")
        limit = asyncio.Semaphore(apo.max_concurrent_children or len(plans))
        outcomes = await asyncio.gather(
            *(self._child(i, plan, round_, limit) for i, plan in enumerate(plans))
        )
        errors = [o for o in outcomes if isinstance(o, OptimizerError)]
        skipped = [o for o in outcomes if isinstance(o, str)]
        if errors and len(errors) == len(outcomes):
            raise OptimizerError(f"Round {round_}: every optimizer call failed; last error: {errors[-1]}")
        skipped += [f"optimizer error: {e}" for e in errors]
        created, duplicates = await self._register(round_, outcomes)
        skipped += duplicates

        pool = list(dict.fromkeys([*state.beam, *created]))
        self.progress.phase(
            f"round {round_}: scoring {len(pool)} prompts on {len(val_batch)} validation tasks"
        )
        results = await asyncio.gather(
            *(self._evaluate(v, val_batch, mode="val", round_=round_, purpose="selection") for v in pool)
        )
        scores = {version: result.score for version, result in zip(pool, results, strict=True)}
        for version, score in scores.items():
            state.candidate(version).scores[round_] = score
            self.progress.scored(version, score)
        beam = sorted(pool, key=lambda v: -scores[v])[: apo.beam_width]  # stable: incumbents win ties
        leader = state.candidate(beam[0])
        if leader.full_val_score is None:
            self.progress.phase(
                f"round {round_}: scoring leader {leader.version} on all {len(self.val)} tasks"
            )
            full = await self._evaluate(leader.version, self.val, mode="val", round_=round_, purpose="leader")
            leader.full_val_score = full.score
        assert leader.full_val_score is not None
        if state.best_score is None or leader.full_val_score > state.best_score:
            state.best_version, state.best_score = leader.version, leader.full_val_score
            self.progress.best(state.best_version, state.best_score)
        state.beam = beam
        return RoundRecord(
            round=round_,
            parents=[p.parent for p in plans],
            candidates=created,
            scores=scores,
            beam=beam,
            leader=leader.version,
            leader_full_val_score=leader.full_val_score,
            best=state.best_version,
            best_score=state.best_score,
            rollouts=self.evaluator.rollouts_enqueued - enqueued_before,
            skipped=skipped,
            started_at=started,
        )

    async def _register(self, round_: int, outcomes: Sequence[Any]) -> tuple[list[str], list[str]]:
        """Give the round's new prompts versions (in child order), publish them and record their lineage.

        Returns the new versions and a note per draft dropped as a duplicate of a known prompt.
        """
        state = self.state
        known = {record.template.strip() for record in state.candidates.values()}
        created: list[str] = []
        duplicates: list[str] = []
        for index, outcome in enumerate(outcomes):
            if not isinstance(outcome, _Draft):
                continue
            if outcome.template.strip() in known:
                self.progress.child(index, "skipped: duplicate of a known prompt")
                duplicates.append(f"child {index + 1} of {outcome.parent}: duplicate of a known prompt")
                continue
            known.add(outcome.template.strip())
            version = f"v{state.next_version}"
            state.next_version += 1
            record = CandidateRecord(
                version=version,
                resources_id=candidate_resources_id(state.run_id, version),
                parent=outcome.parent,
                round=round_,
                template=outcome.template,
                critique=outcome.critique,
                gradient_variant=outcome.gradient_variant,
                edit_variant=outcome.edit_variant,
                parent_train_score=outcome.parent_train_score,
            )
            state.candidates[version] = record
            await self._publish(record)
            created.append(version)
            self.progress.child(index, "candidate", version=version)
        return created, duplicates

    async def _child(
        self, index: int, plan: _ChildPlan, round_: int, limit: asyncio.Semaphore
    ) -> _Draft | OptimizerError | str:
        """Train rollouts of the parent, a critique and an edit; a draft, or why there is none."""
        apo = self.apo
        parent = self.state.candidate(plan.parent)
        async with limit:
            self.progress.child(index, "train rollouts")
            result = await self._evaluate(
                plan.parent, plan.batch, mode="train", round_=round_, purpose="gradient"
            )
            if not result.outcomes:
                self.progress.child(index, "skipped: no finished rollouts")
                return f"child {index + 1} of {plan.parent}: no training rollout finished"
            experiments = [o.as_experiment() for o in result.outcomes]
            try:
                self.progress.child(index, f"critique ({plan.gradient_variant})")
                critique = await apo.optimizer.chat(
                    apo.gradient_model,
                    gradient_messages(plan.gradient_variant, parent.template, experiments),
                    temperature=apo.diversity_temperature,
                )
                if not critique.strip():
                    self.progress.child(index, "skipped: empty critique")
                    return f"child {index + 1} of {plan.parent}: empty critique"
                self.progress.child(index, f"edit ({plan.edit_variant})")
                required = placeholders(parent.template, self.state.engine)
                reply = await apo.optimizer.chat(
                    apo.apply_edit_model,
                    edit_messages(plan.edit_variant, parent.template, critique, required),
                    temperature=apo.diversity_temperature,
                )
            except OptimizerConfigError:
                raise
            except OptimizerError as exc:
                self.progress.child(index, "failed: optimizer error")
                logger.warning(
                    "APO %s: child %d of %s failed: %s", self.state.run_id, index + 1, plan.parent, exc
                )
                return exc
        template = extract_prompt(reply)
        try:
            check_template(template, parent.template, self.state.engine)
        except PromptCheckError as exc:
            self.progress.child(index, f"skipped: {exc}")
            return f"child {index + 1} of {plan.parent}: {exc}"
        if template.strip() == parent.template.strip():
            self.progress.child(index, "skipped: edit changed nothing")
            return f"child {index + 1} of {plan.parent}: the edit changed nothing"
        self.progress.child(index, "drafted")
        return _Draft(plan.parent, template, critique, plan.gradient_variant, plan.edit_variant, result.score)


def _fmt(score: float | None) -> str:
    return "-" if score is None else f"{score:.3f}"
