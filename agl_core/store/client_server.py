"""Compatibility module for Agent Lightning 0.3's ``agentlightning.store.client_server``.

Listed in docs/migrating-from-agent-lightning.md."""

from __future__ import annotations

from typing import Any

from agl_core._compat import module_getattr

__all__ = ["LightningStoreClient", "LightningStoreServer"]  # noqa: F822 (resolved by __getattr__)

_NAMES: dict[str, Any] = {
    "LightningStoreClient": "agl_core.store.http:LightningStoreClient",
    "LightningStoreServer": "agl_core.store.http:LightningStoreServer",
}

API_V1_PREFIX = "/v1"
"""The version prefix of the store's HTTP API."""
API_AGL_PREFIX = "/agl"
"""The agl part of the store's HTTP API prefix."""
API_V1_AGL_PREFIX = API_V1_PREFIX + API_AGL_PREFIX
"""Where `agl store serve` serves the store API (``/v1/agl``), as in Agent Lightning 0.3."""

_REQUEST_MODELS_REASON = (
    "agl's store server has its own request bodies (agl_core.store.http.models; the OpenAPI document is "
    "at /v1/agl/openapi.json): talk to it through LightningStoreClient"
)

_DROPPED: dict[str, str] = {
    **dict.fromkeys(
        [
            "DequeueManyRolloutsRequest",
            "DequeueRolloutRequest",
            "EnqueueManyRolloutsRequest",
            "NextSequenceIdRequest",
            "NextSequenceIdResponse",
            "QueryAttemptsRequest",
            "QueryResourcesRequest",
            "QueryRolloutsRequest",
            "QuerySpansRequest",
            "QueryWorkersRequest",
            "RolloutRequest",
            "StartAttemptRequest",
            "UpdateAttemptRequest",
            "UpdateRolloutRequest",
            "UpdateWorkerRequest",
            "WaitForRolloutsRequest",
        ],
        _REQUEST_MODELS_REASON,
    ),
    "CachedStaticFiles": (
        "agl's store server is aiohttp, not FastAPI; `agl store serve` serves the dashboard itself"
    ),
}

__getattr__ = module_getattr("agl_core.store.client_server", _NAMES, _DROPPED)
