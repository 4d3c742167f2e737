"""``agl doctor``'s engine: read one rollout from a store and explain the training data it yields."""

from __future__ import annotations

from typing import Any, Literal

from agl_core.adapter.base import TraceToTripletBase
from agl_core.store import AttemptNotFoundError, LightningStore, RolloutNotFoundError
from agl_core.types.reports import AttemptInfo, DoctorReport

__all__ = ["AttemptInfo", "DoctorReport", "diagnose_rollout", "resolve_adapter"]


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
