"""Compatibility module for Agent Lightning 0.3's ``agentlightning.store.client_server``.

Listed in docs/migrating-from-agent-lightning.md."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from agl_core._compat import module_getattr
from agl_core.types import RolloutStatus, WorkerStatus

__all__ = ["LightningStoreClient", "LightningStoreServer"]  # noqa: F822 (resolved by __getattr__)

# 0.3's request and response models of the store API -> agl's models of the same bodies (same paths
# under /v1/agl, same field names; agl's refuse unknown fields).
_MODELS = "agl_core.store.http.models"
_NAMES: dict[str, Any] = {
    "LightningStoreClient": "agl_core.store.http:LightningStoreClient",
    "LightningStoreServer": "agl_core.store.http:LightningStoreServer",
    # 0.3's FastAPI static files of the dashboard -> the aiohttp class agl's dashboard is served with
    "CachedStaticFiles": "agl_core.dashboard.static_files:CachedStaticFiles",
    "RolloutRequest": f"{_MODELS}:StartRolloutBody",
    "DequeueRolloutRequest": f"{_MODELS}:DequeueBody",
    "DequeueManyRolloutsRequest": f"{_MODELS}:DequeueBody",
    "EnqueueManyRolloutsRequest": f"{_MODELS}:EnqueueBody",
    "StartAttemptRequest": f"{_MODELS}:StartAttemptBody",
    "QueryAttemptsRequest": f"{_MODELS}:AttemptQuery",
    "QueryResourcesRequest": f"{_MODELS}:ResourcesQuery",
    "UpdateRolloutRequest": f"{_MODELS}:UpdateRolloutBody",
    "UpdateAttemptRequest": f"{_MODELS}:UpdateAttemptBody",
    "UpdateWorkerRequest": f"{_MODELS}:UpdateWorkerBody",
    "WaitForRolloutsRequest": f"{_MODELS}:WaitBody",
    "NextSequenceIdRequest": f"{_MODELS}:NextSequenceIdBody",
    "NextSequenceIdResponse": f"{_MODELS}:SequenceIdResponse",
}


class QueryRolloutsRequest(BaseModel):
    """Body of ``POST /v1/agl/rollouts/search`` (the arguments of ``query_rollouts``)."""

    status_in: list[RolloutStatus] | None = None
    rollout_id_in: list[str] | None = None
    rollout_id_contains: str | None = None
    limit: int = -1
    offset: int = 0
    sort_by: str | None = None
    sort_order: Literal["asc", "desc"] = "asc"
    filter_logic: Literal["and", "or"] = "and"


class QuerySpansRequest(BaseModel):
    """Body of ``POST /v1/agl/spans/search`` (the arguments of ``query_spans``)."""

    rollout_id: str
    attempt_id: str | None = None
    trace_id: str | None = None
    trace_id_contains: str | None = None
    span_id: str | None = None
    span_id_contains: str | None = None
    parent_id: str | None = None
    parent_id_contains: str | None = None
    name: str | None = None
    name_contains: str | None = None
    filter_logic: Literal["and", "or"] = "and"
    limit: int = -1
    offset: int = 0
    sort_by: str | None = "sequence_id"
    sort_order: Literal["asc", "desc"] = "asc"


class QueryWorkersRequest(BaseModel):
    """Body of ``POST /v1/agl/workers/search`` (the arguments of ``query_workers``)."""

    status_in: list[WorkerStatus] | None = None
    worker_id_contains: str | None = None
    limit: int = -1
    offset: int = 0
    sort_by: str | None = None
    sort_order: Literal["asc", "desc"] = "asc"
    filter_logic: Literal["and", "or"] = "and"


API_V1_PREFIX = "/v1"
"""The version prefix of the store's HTTP API."""
API_AGL_PREFIX = "/agl"
"""The agl part of the store's HTTP API prefix."""
API_V1_AGL_PREFIX = API_V1_PREFIX + API_AGL_PREFIX
"""Where `agl store serve` serves the store API (``/v1/agl``), as in Agent Lightning 0.3."""

__getattr__ = module_getattr("agl_legacy.client_server", _NAMES)
