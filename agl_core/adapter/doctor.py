"""``agl doctor``'s engine: read one rollout from a store and explain the training data it yields."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from agl_core.adapter.base import TraceToTripletBase
from agl_core.adapter.diagnostics import AdapterReport
from agl_core.store import AttemptNotFoundError, LightningStore, RolloutNotFoundError

__all__ = ["AttemptInfo", "DoctorReport", "diagnose_rollout", "resolve_adapter"]


class AttemptInfo(BaseModel):
    """One attempt of the rollout, as the report shows it."""

    attempt_id: str
    sequence_id: int
    status: str
    worker_id: str | None = None
    start_time: float | None = None
    end_time: float | None = None


class DoctorReport(BaseModel):
    """The rollout, its attempts, which spans were analysed (``scope``) and the adapter's report."""

    rollout_id: str
    status: str
    mode: str | None = None
    attempts: list[AttemptInfo] = Field(default_factory=list)
    scope: str
    report: AdapterReport

    def format(self) -> str:
        """Text for a person: rollout, attempts, then the adapter report."""
        mode = f", mode {self.mode}" if self.mode else ""
        lines = [f"Rollout {self.rollout_id}: {self.status}{mode}, {len(self.attempts)} attempt(s)"]
        for attempt in self.attempts:
            worker = f", worker {attempt.worker_id}" if attempt.worker_id else ""
            lines.append(f"  attempt {attempt.sequence_id} {attempt.attempt_id}: {attempt.status}{worker}")
        lines.append(f"Analysed: {self.scope}")
        lines.append(self.report.format())
        return "\n".join(lines)


def resolve_adapter(spec: str | TraceToTripletBase, **kwargs: Any) -> TraceToTripletBase:
    """An adapter from a registered name (``"triplet"``, ``"proxy-triplet"``, a plugin's) and ``kwargs``.

    An instance is returned as is. A string is only ever a registered name, never an import path: the
    store server's doctor route passes its ``?adapter=`` here.

    Raises:
        ValueError: the name is unknown, or the adapter cannot explain its output.
    """
    if isinstance(spec, TraceToTripletBase):
        return spec
    from agl_core.plugins import get_registry

    adapter: Any = get_registry("adapter").create_named(spec, **kwargs)
    if not isinstance(adapter, TraceToTripletBase):
        raise ValueError(
            f"Adapter {spec!r} ({type(adapter).__name__}) produces no triplets, so it cannot be diagnosed; "
            "use 'triplet' or 'proxy-triplet'."
        )
    return adapter


async def diagnose_rollout(
    store: LightningStore,
    rollout_id: str,
    *,
    attempt: Literal["latest", "all"] | str = "latest",
    adapter: str | TraceToTripletBase = "triplet",
    adapter_options: dict[str, Any] | None = None,
) -> DoctorReport:
    """Read one rollout's spans (of the latest attempt, all attempts, or one attempt id) and report.

    ``adapter_options`` are constructor arguments of a named adapter (``agent_match``, ...).

    Raises:
        RolloutNotFoundError: the store has no such rollout.
        AttemptNotFoundError: ``attempt`` names an attempt the rollout does not have.
        ValueError: unknown adapter.
    """
    triplet_adapter = resolve_adapter(adapter, **(adapter_options or {}))
    rollout = await store.get_rollout_by_id(rollout_id)
    if rollout is None:
        raise RolloutNotFoundError(
            rollout_id, f"Rollout {rollout_id!r} is not in this store; check the id and the --store URI."
        )
    attempts = list(await store.query_attempts(rollout_id))
    infos = [
        AttemptInfo(
            attempt_id=a.attempt_id,
            sequence_id=a.sequence_id,
            status=a.status,
            worker_id=a.worker_id,
            start_time=a.start_time,
            end_time=a.end_time,
        )
        for a in attempts
    ]
    if attempt == "all":
        selector: str | None = None
        scope = f"all {len(attempts)} attempt(s)"
    elif attempt == "latest":
        selector = "latest"
        scope = f"latest attempt ({attempts[-1].attempt_id})" if attempts else "latest attempt (none started)"
    else:
        if attempt not in {a.attempt_id for a in attempts}:
            known = ", ".join(a.attempt_id for a in attempts) or "none"
            raise AttemptNotFoundError(
                rollout_id, attempt, f"Rollout {rollout_id!r} has no attempt {attempt!r} (attempts: {known})."
            )
        selector, scope = attempt, f"attempt {attempt}"
    spans = list(await store.query_spans(rollout_id, selector)) if attempts else []
    return DoctorReport(
        rollout_id=rollout_id,
        status=rollout.status,
        mode=rollout.mode,
        attempts=infos,
        scope=scope,
        report=triplet_adapter.diagnose(spans),
    )
