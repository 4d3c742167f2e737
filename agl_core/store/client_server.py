"""Compatibility module for Agent Lightning 0.3's ``agentlightning.store.client_server``.

Listed in docs/migrating-from-agent-lightning.md."""

from __future__ import annotations

from typing import Any

from agl_core._compat import module_getattr

__all__ = ["LightningStoreClient", "LightningStoreServer"]  # noqa: F822 (resolved by __getattr__)

# 0.3's request and response models of the store API -> agl's models of the same bodies (same paths
# under /v1/agl, same field names; agl's refuse unknown fields).
_MODELS = "agl_core.store.http.models"
_NAMES: dict[str, Any] = {
    "LightningStoreClient": "agl_core.store.http:LightningStoreClient",
    "LightningStoreServer": "agl_core.store.http:LightningStoreServer",
    "RolloutRequest": f"{_MODELS}:StartRolloutBody",
    "DequeueRolloutRequest": f"{_MODELS}:DequeueBody",
    "DequeueManyRolloutsRequest": f"{_MODELS}:DequeueBody",
    "EnqueueManyRolloutsRequest": f"{_MODELS}:EnqueueBody",
    "StartAttemptRequest": f"{_MODELS}:StartAttemptBody",
    "QueryRolloutsRequest": f"{_MODELS}:RolloutQuery",
    "QueryAttemptsRequest": f"{_MODELS}:AttemptQuery",
    "QueryResourcesRequest": f"{_MODELS}:ResourcesQuery",
    "QuerySpansRequest": f"{_MODELS}:SpanQuery",
    "QueryWorkersRequest": f"{_MODELS}:WorkerQuery",
    "UpdateRolloutRequest": f"{_MODELS}:UpdateRolloutBody",
    "UpdateAttemptRequest": f"{_MODELS}:UpdateAttemptBody",
    "UpdateWorkerRequest": f"{_MODELS}:UpdateWorkerBody",
    "WaitForRolloutsRequest": f"{_MODELS}:WaitBody",
    "NextSequenceIdRequest": f"{_MODELS}:NextSequenceIdBody",
    "NextSequenceIdResponse": f"{_MODELS}:SequenceIdResponse",
}

API_V1_PREFIX = "/v1"
"""The version prefix of the store's HTTP API."""
API_AGL_PREFIX = "/agl"
"""The agl part of the store's HTTP API prefix."""
API_V1_AGL_PREFIX = API_V1_PREFIX + API_AGL_PREFIX
"""Where `agl store serve` serves the store API (``/v1/agl``), as in Agent Lightning 0.3."""

_DROPPED: dict[str, str] = {
    "CachedStaticFiles": (
        "agl's store server is aiohttp, not FastAPI; `agl store serve` serves the dashboard itself"
    ),
}

__getattr__ = module_getattr("agl_core.store.client_server", _NAMES, _DROPPED)
