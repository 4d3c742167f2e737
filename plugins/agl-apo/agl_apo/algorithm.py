"""`APO`: automatic prompt optimization with textual gradients and beam search (as in Agent Lightning 0.3)."""

from __future__ import annotations

import logging
import re
import secrets
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

# Agent Lightning 0.3 kept these next to APO (agl_core.algorithm.apo.apo resolves them from here)
from agl_apo.compat03 import (  # noqa: F401
    APPLY_EDIT_PROMPT_FILES,
    GRADIENT_PROMPT_FILES,
    RolloutResultForAPO,
    VersionedPromptTemplate,
)
from agl_apo.optimizer import OptimizerConfigError, OptimizerLLM
from agl_apo.report import APOReport
from agl_apo.search import BeamSearch
from agl_apo.state import (
    APORunState,
    CandidateRecord,
    RoundRecord,
    candidate_resources_id,
    load_run_state,
)
from agl_core.adapter import TraceToMessages
from agl_core.algorithm import Algorithm, with_llm_proxy, with_store
from agl_core.types import PromptTemplate

if TYPE_CHECKING:
    from openai import AsyncOpenAI
    from rich.console import Console

    from agl_core.store import LightningStore
    from agl_core.types import Dataset, NamedResources

__all__ = ["APO", "APOConfigError"]

logger = logging.getLogger("agl_core.algorithm.apo.algorithm")

T_task = TypeVar("T_task")

_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")

RoundCallback = Callable[[RoundRecord, APORunState], Awaitable[None] | None]
"""Called after each finished (and saved) round with its record and the run state."""


class APOConfigError(ValueError):
    """APO cannot start: a setting, the initial resources, a dataset or the saved run state is wrong."""


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise APOConfigError(f"{name} must be a positive integer, got {value!r}.")
    return value


def _positive_float(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise APOConfigError(f"{name} must be a positive number, got {value!r}.")
    return float(value)


class APO(Algorithm, Generic[T_task]):
    """Automatic prompt optimization: critique a prompt from its rollouts, edit it, keep the best (beam).

    The seed is the first ``PromptTemplate`` of the initial resources; every candidate replaces it under
    the same resource name (the other initial resources are published alongside, unchanged). Per round,
    each of ``beam_width`` parents gets ``branch_factor`` children: the parent runs on a training batch
    (``gradient_batch_size`` rollouts), an optimizer model writes a critique of the prompt from those runs
    (worst first, with rewards and the LLM messages from ``TraceToMessages``), and a second call applies
    it. The beam and the new candidates are then scored on one validation batch (``val_batch_size``) and
    the top ``beam_width`` stay; the leader is scored on the whole validation set, and becomes the best
    prompt if it beats the best so far.

    Every candidate is published as resources ``apo/<run_id>/v<n>``, the best as ``apo/<run_id>/best``,
    and the run state with every candidate's lineage (parent, round, scores, critique) as
    ``apo-state/<run_id>`` (see :mod:`agl_apo.state`). A run killed at any point continues from its last
    finished round with ``APO(..., run_id=<same id>, resume=True)``. At the end ``best_prompt.txt``, a
    score-per-round plot ``scores.png`` and ``run_state.json`` are written to ``output_dir``.

    Differences from Agent Lightning 0.3's APO: no ``temperature`` is sent to models that reject it
    (quirk 18 in docs/migrating-from-agent-lightning.md); settings, resources, datasets and the optimizer
    endpoint are checked before anything is
    written to the store; edits that lose a placeholder, change nothing or repeat a known prompt are
    dropped; children run concurrently; a leader's full-validation score is measured once and reused;
    the optimizer prompts are agl's own.

    Args:
        async_openai_client: The client for optimizer calls; without one it is built from ``base_url`` and
            ``api_key`` (or ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``).
        base_url: OpenAI-compatible endpoint of the optimizer models.
        api_key: Its key.
        gradient_model: Model that writes critiques.
        apply_edit_model: Model that applies them.
        diversity_temperature: Sampling temperature of optimizer calls (omitted for models rejecting it).
        gradient_batch_size: Training rollouts behind each critique.
        val_batch_size: Validation rollouts per candidate for beam selection.
        beam_width: Prompts kept per round.
        branch_factor: Children per parent per round.
        beam_rounds: Rounds to run.
        rollout_batch_timeout: Seconds a batch of rollouts may take; late ones are cancelled, not scored.
        run_initial_validation: Score the seed on the whole validation set first (the baseline to beat).
        request_timeout: Seconds one optimizer call may take.
        max_retries: Retries of an optimizer call after rate limits and transient errors.
        preflight: Check that the optimizer endpoint answers before the run starts.
        preflight_timeout: Seconds that check may take.
        max_concurrent_children: Children worked on at once (None: all of a round's).
        run_id: Names the run in the store and the output folder; needed to resume.
        resume: Continue the saved run ``run_id`` (a fresh start when the store has none).
        output_dir: Folder for the report files (default ``apo_runs/<run_id>``).
        progress: Live view on (True), log lines (False), or pick by terminal (None).
        console: `rich` console for the live view and the final table.
        seed: Random seed (batches, parents, prompt styles); saved with the run.
        poll_interval: Longest single wait on the store while rollouts run.
        on_round_end: Callback after each saved round, ``(round_record, state)``; may be async.
        _poml_trace: Agent Lightning 0.3's debug switch (POML traces in ``./pomltrace``). Accepted for
            compatibility; agl-apo uses no POML and always writes every optimizer prompt and answer to its
            run folder (``output_dir``), so it only logs where to look.

    Raises:
        APOConfigError: a non-positive size or timeout, a bad ``run_id``, ``resume`` without ``run_id``,
            or no API key for the official OpenAI endpoint.
    """

    def __init__(
        self,
        async_openai_client: AsyncOpenAI | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        gradient_model: str = "gpt-5-mini",
        apply_edit_model: str = "gpt-4.1-mini",
        diversity_temperature: float = 1.0,
        gradient_batch_size: int = 4,
        val_batch_size: int = 16,
        beam_width: int = 4,
        branch_factor: int = 4,
        beam_rounds: int = 3,
        rollout_batch_timeout: float = 3600.0,
        run_initial_validation: bool = True,
        request_timeout: float = 120.0,
        max_retries: int = 6,
        preflight: bool = True,
        preflight_timeout: float = 10.0,
        max_concurrent_children: int | None = None,
        run_id: str | None = None,
        resume: bool = False,
        output_dir: str | Path | None = None,
        progress: bool | None = None,
        console: Console | None = None,
        seed: int | None = None,
        poll_interval: float = 1.0,
        on_round_end: RoundCallback | None = None,
        _poml_trace: bool = False,
    ) -> None:
        if _poml_trace:
            logger.info("APO(_poml_trace=True): agl-apo writes optimizer prompts to the run's output_dir.")
        self.gradient_batch_size = _positive_int("gradient_batch_size", gradient_batch_size)
        self.val_batch_size = _positive_int("val_batch_size", val_batch_size)
        self.beam_width = _positive_int("beam_width", beam_width)
        self.branch_factor = _positive_int("branch_factor", branch_factor)
        self.beam_rounds = _positive_int("beam_rounds", beam_rounds)
        self.rollout_batch_timeout = _positive_float("rollout_batch_timeout", rollout_batch_timeout)
        self.preflight_timeout = _positive_float("preflight_timeout", preflight_timeout)
        self.poll_interval = _positive_float("poll_interval", poll_interval)
        if max_concurrent_children is not None:
            _positive_int("max_concurrent_children", max_concurrent_children)
        self.max_concurrent_children = max_concurrent_children
        if isinstance(diversity_temperature, bool) or not 0 <= diversity_temperature <= 2:
            raise APOConfigError(
                f"diversity_temperature must be between 0 and 2, got {diversity_temperature!r}."
            )
        for name, model in (("gradient_model", gradient_model), ("apply_edit_model", apply_edit_model)):
            if not isinstance(model, str) or not model.strip():
                raise APOConfigError(f"{name} must be a model name, got {model!r}.")
        if run_id is not None and (not isinstance(run_id, str) or not _RUN_ID.match(run_id)):
            raise APOConfigError(
                f"run_id must be 1-100 letters, digits, '_', '-' or '.', starting with a letter or digit; "
                f"got {run_id!r}."
            )
        if resume and run_id is None:
            raise APOConfigError("resume=True needs the run_id of the run to continue.")
        self.gradient_model = gradient_model
        self.apply_edit_model = apply_edit_model
        self.diversity_temperature = float(diversity_temperature)
        self.run_initial_validation = bool(run_initial_validation)
        self.preflight = bool(preflight)
        self.run_id: str = run_id or f"apo-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
        self.resume = bool(resume)
        self.output_dir = Path(output_dir) if output_dir is not None else Path("apo_runs") / self.run_id
        self.progress = progress
        self.console = console
        self.seed = seed
        self.on_round_end = on_round_end
        try:
            self.optimizer = OptimizerLLM(
                async_openai_client,
                base_url=base_url,
                api_key=api_key,
                request_timeout=request_timeout,
                max_retries=max_retries,
            )
        except OptimizerConfigError as exc:
            raise APOConfigError(str(exc)) from exc
        self._own_adapter = TraceToMessages()
        self._state: APORunState | None = None
        self._report: APOReport | None = None

    # -- results -------------------------------------------------------------------------------------

    @property
    def state(self) -> APORunState | None:
        """The run state (candidates, lineage, rounds) once :meth:`run` started, else None."""
        return self._state

    @property
    def report(self) -> APOReport | None:
        """Paths of the report files once a run finished, else None."""
        return self._report

    def get_best_prompt(self) -> PromptTemplate:
        """The best prompt template found.

        Raises:
            ValueError: before :meth:`run` scored a prompt.
        """
        if self._state is None or not self._state.seed_evaluated:
            raise ValueError("APO has not run yet: no best prompt. Call run() (or Trainer.fit) first.")
        return self._state.best_prompt()

    # -- checks --------------------------------------------------------------------------------------

    def _seed_prompt(self) -> tuple[str, PromptTemplate, NamedResources]:
        resources = self.get_initial_resources()
        if not resources:
            raise APOConfigError(
                "initial_resources are not set for APO: it needs the prompt template to optimize. Pass "
                "Trainer(initial_resources={'prompt_template': PromptTemplate(template=..., "
                "engine='f-string'), ...}) or call apo.set_initial_resources(...)."
            )
        for name, resource in resources.items():
            if isinstance(resource, PromptTemplate):
                return name, resource, dict(resources)
        found = ", ".join(f"{n!r} ({type(r).__name__})" for n, r in resources.items())
        raise APOConfigError(
            f"No prompt template resource found in initial_resources (found {found}); APO optimizes the "
            "first PromptTemplate resource. Add one, e.g. {'prompt_template': PromptTemplate(template=..., "
            "engine='f-string')}."
        )

    @staticmethod
    def _dataset(name: str, dataset: Dataset[Any] | None) -> list[Any]:
        if dataset is None:
            raise APOConfigError(
                f"{name} is required for APO (training tasks drive the critiques, validation tasks pick "
                "the beam). Pass it to Trainer.fit(agent, train_dataset, val_dataset=...)."
            )
        try:
            size = len(dataset)
            items = [dataset[i] for i in range(size)]
        except TypeError as exc:
            raise APOConfigError(
                f"{name} must support len() and integer indexing (e.g. a list): {exc}"
            ) from exc
        if not items:
            raise APOConfigError(f"{name} is empty; APO needs at least one task in it.")
        return items

    def _check_saved_state(self, saved: APORunState | None, prompt_key: str, seed: PromptTemplate) -> None:
        if saved is None:
            return
        if not self.resume:
            raise APOConfigError(
                f"The store already holds APO run {self.run_id!r} ({saved.completed_rounds} round(s) "
                "finished). Pass resume=True to continue it, or choose another run_id."
            )
        if (
            saved.prompt_key != prompt_key
            or saved.seed_template != seed.template
            or saved.engine != seed.engine
        ):
            raise APOConfigError(
                f"Cannot resume APO run {self.run_id!r}: it optimizes prompt resource {saved.prompt_key!r} "
                f"starting from a different seed template than the initial resources given now. Resume with "
                "the same initial prompt, or start a new run_id."
            )

    def _config(self) -> dict[str, Any]:
        return {
            "gradient_model": self.gradient_model,
            "apply_edit_model": self.apply_edit_model,
            "diversity_temperature": self.diversity_temperature,
            "gradient_batch_size": self.gradient_batch_size,
            "val_batch_size": self.val_batch_size,
            "beam_width": self.beam_width,
            "branch_factor": self.branch_factor,
            "beam_rounds": self.beam_rounds,
            "run_initial_validation": self.run_initial_validation,
        }

    def _messages_adapter(self) -> TraceToMessages:
        try:
            adapter = self.get_adapter()
        except ValueError:
            return self._own_adapter
        return adapter if isinstance(adapter, TraceToMessages) else self._own_adapter

    def _live_view(self) -> bool | None:
        if self.progress is not None:
            return self.progress
        try:
            trainer = self.get_trainer()
        except ValueError:
            return None
        if getattr(trainer, "progress", False):
            logger.info("APO reports progress as log lines; use Trainer(progress=False) for its live view.")
            return False
        return None

    # -- the run -------------------------------------------------------------------------------------

    @with_llm_proxy()
    @with_store
    async def run(
        self,
        store: LightningStore,
        llm_proxy: Any,
        train_dataset: Dataset[T_task] | None = None,
        val_dataset: Dataset[T_task] | None = None,
    ) -> None:
        """Optimize the prompt; everything is checked before the first rollout is enqueued.

        Raises:
            APOConfigError: no prompt template, a missing or empty dataset, or a saved run that cannot be
                continued.
            OptimizerConfigError: the optimizer endpoint is unreachable or rejects the key.
            OptimizerError: every child of a round failed to get an answer from the optimizer.
        """
        prompt_key, seed, base_resources = self._seed_prompt()
        train = self._dataset("train_dataset", train_dataset)
        val = self._dataset("val_dataset", val_dataset)
        saved = await load_run_state(store, self.run_id)
        self._check_saved_state(saved, prompt_key, seed)
        if self.preflight:
            try:
                await self.optimizer.preflight(
                    [self.gradient_model, self.apply_edit_model], timeout=self.preflight_timeout
                )
            except BaseException:
                await self.optimizer.aclose()
                raise
        state = saved or APORunState(
            run_id=self.run_id,
            prompt_key=prompt_key,
            engine=seed.engine,
            seed_template=seed.template,
            rng_seed=self.seed if self.seed is not None else secrets.randbits(32),
            candidates={
                "v0": CandidateRecord(
                    version="v0",
                    resources_id=candidate_resources_id(self.run_id, "v0"),
                    template=seed.template,
                )
            },
            beam=["v0"],
        )
        state.config = self._config()
        self._state = state
        search = BeamSearch(
            self,
            store,
            state,
            base_resources,
            train,
            val,
            live=self._live_view(),
            adapter=self._messages_adapter(),
        )
        self._report = await search.execute(resumed=saved is not None)
