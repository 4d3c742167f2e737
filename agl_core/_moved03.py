"""Agent Lightning 0.3 in the core, in one place: its names that agl defines elsewhere, and its arguments.

* `MOVED_03`: 0.3 names that 0.3 defined in a core module and agl defines elsewhere (each listed
  module's ``__getattr__`` calls `moved_name`);
* `LLMPROXY_03` / `llm_proxy_03_arguments`: 0.3's ``LLMProxy`` arguments, translated for agl's proxy;
* `STORE_SERVER_03` / `store_server_03_arguments`: 0.3's ``LightningStoreServer`` arguments.

A leaf module (it imports no agl_core module), so any core module can use it. The thin modules at 0.3's
own import paths (machinery in agl-legacy) use `agl_core._compat` instead. What each translation means
for a 0.3 user is in docs/migrating-from-agent-lightning.md.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "LLMPROXY_03",
    "MOVED_03",
    "STORE_SERVER_03",
    "llm_proxy_03_arguments",
    "moved_name",
    "store_server_03_arguments",
]

MOVED_03: dict[str, dict[str, str]] = {
    "agl_core.types.core": dict.fromkeys(
        ("GenericResponse", "RolloutLegacy", "RolloutRawResultLegacy", "Task", "TaskIfAny"),
        "agl_core.types.legacy",
    ),
    "agl_core.adapter.triplet": {"LlmProxyTraceToTriplet": "agl_core.adapter.proxy_triplet"},
    "agl_core.adapter.messages": dict.fromkeys(
        ("convert_to_openai_messages", "group_genai_dict"), "agl_core.adapter.messages_03"
    ),
    "agl_core.algorithm.fast": {"Baseline": "agl_core.algorithm.baseline"},
    "agl_core.emitter.annotation": dict.fromkeys(
        ("operation", "OperationContext"), "agl_core.emitter.operation"
    ),
    "agl_core.tracer": {"AgentOpsTracer": "agl_core.tracer.agentops", "WeaveTracer": "agl_core.tracer.weave"},
    "agl_core.store.base": dict.fromkeys(
        ("is_queuing", "is_running", "is_finished"), "agl_core.types.legacy"
    ),
}
"""The one table of 0.3 names that 0.3 defined in a core module and agl defines elsewhere.

Core module -> {0.3 name -> the module that defines it now}; the module's ``__getattr__`` calls
`moved_name`.
"""


def moved_name(module: str, name: str) -> Any:
    """``module.name`` for a 0.3 name `MOVED_03` lists (each listed module's ``__getattr__`` calls this).

    Raises:
        AttributeError: ``module`` has no such 0.3 name.
    """
    source = MOVED_03.get(module, {}).get(name)
    if source is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    return getattr(importlib.import_module(source), name)


# ------------------------------------------------------------------------------------- 0.3's arguments

LLMPROXY_03: dict[str, str] = {
    "callbacks": '"return_token_ids" and "opentelemetry" (0.3\'s defaults) are always on: accepted as no-ops',
    "litellm_config": 'only {"litellm_settings": {"num_retries": n}}, read as max_retries',
    "num_retries": "LiteLLM's retry count, read as max_retries (extra tries on other replicas)",
    "num_workers": "accepted (>= 1) as a no-op: one asyncio server serves every request",
    "launch_mode": '"mp", "thread" or "asyncio", accepted as a no-op (start()/start_in_thread() choose)',
    "launcher_args": "refused: pass host= and port=",
    "middlewares": '"rollout_attempt" and "stream_conversion" are built in: accepted as no-ops',
}
"""0.3's ``LLMProxy`` arguments and what agl does with each (`llm_proxy_03_arguments` applies it)."""

_ALWAYS_ON_CALLBACKS = frozenset({"return_token_ids", "opentelemetry"})
_BUILT_IN_MIDDLEWARES = frozenset({"rollout_attempt", "stream_conversion"})
_LAUNCH_MODES = frozenset({"mp", "thread", "asyncio"})


def llm_proxy_03_arguments(
    max_retries: int,
    *,
    callbacks: Sequence[object] | None,
    litellm_config: Mapping[str, Any] | None,
    num_retries: int | None,
    num_workers: int,
    launch_mode: str,
    launcher_args: object | None,
    middlewares: Sequence[object] | None,
) -> int:
    """Check 0.3's ``LLMProxy`` arguments (`LLMPROXY_03`); return the ``max_retries`` they ask for.

    Raises:
        ValueError: an argument agl's proxy cannot honour, naming what to do instead.
    """
    for callback in callbacks or ():
        if callback == "logprobs":
            raise ValueError(
                "LLMProxy(callbacks=['logprobs']) is not needed with agl: ask for logprobs in the request "
                "(logprobs=True) and the proxy records them."
            )
        if callback not in _ALWAYS_ON_CALLBACKS:
            raise ValueError(
                f"LLMProxy callback {callback!r} is not supported: agl's proxy is not LiteLLM. It always "
                f"records token ids and spans ({', '.join(sorted(_ALWAYS_ON_CALLBACKS))} are accepted as "
                "no-ops)."
            )
    if launcher_args is not None:
        raise ValueError(
            "LLMProxy(launcher_args=...) is not supported: agl's proxy is an in-process asyncio server; pass "
            "host= and port= instead."
        )
    if launch_mode not in _LAUNCH_MODES:
        raise ValueError(f"LLMProxy launch_mode must be one of {sorted(_LAUNCH_MODES)}, got {launch_mode!r}.")
    if not isinstance(num_workers, int) or num_workers < 1:
        raise ValueError(f"LLMProxy num_workers must be an int >= 1, got {num_workers!r}.")
    for middleware in middlewares or ():
        if middleware not in _BUILT_IN_MIDDLEWARES:
            raise ValueError(
                f"LLMProxy middleware {middleware!r} is not supported: agl's proxy is not LiteLLM/FastAPI. "
                "Rollout routing and stream handling are built in "
                f"({', '.join(sorted(_BUILT_IN_MIDDLEWARES))} are accepted as no-ops)."
            )
    config = dict(litellm_config or {})
    settings = dict(config.pop("litellm_settings", None) or {})
    config_retries = settings.pop("num_retries", None)
    unsupported = sorted(config) + [f"litellm_settings.{key}" for key in sorted(settings)]
    if unsupported:
        raise ValueError(
            f"LLMProxy litellm_config keys {unsupported} are not supported: agl's proxy is not LiteLLM. "
            "Only litellm_settings.num_retries is read (as max_retries); give models with model_list= or "
            "backends=."
        )
    retries = num_retries if num_retries is not None else config_retries
    if retries is None:
        return max_retries
    if not isinstance(retries, int) or retries < 0:
        raise ValueError(f"LLMProxy num_retries must be an int >= 0, got {retries!r}.")
    return retries


STORE_SERVER_03: dict[str, str] = {
    "port": "None means 4747, 0.3's default, with 0.3's warning (agl's own default is 0: a free port)",
    "cors_allow_origins": "the old name of cors_origins (a single string is one origin)",
    "launch_mode": '"thread" or "asyncio": both serve from the running loop; "mp" is refused',
    "n_workers": "1 only: one aiohttp server serves every client",
    "launcher_args": "refused: pass host= and port=",
    "tracker": "refused: read store.statistics() or /v1/agl/statistics",
}
"""0.3's ``LightningStoreServer`` arguments and what agl does with each (`store_server_03_arguments`)."""

LEGACY_DEFAULT_PORT = 4747
"""The store server port Agent Lightning 0.3 used when none was given."""

_server_logger = logging.getLogger("agl_core.store.http.server")


def store_server_03_arguments(
    port: int | None,
    cors_origins: Sequence[str] | None,
    cors_allow_origins: Sequence[str] | str | None,
    launch_mode: str | None,
    launcher_args: object,
    n_workers: int,
    tracker: object,
) -> tuple[int, Sequence[str] | None]:
    """Check 0.3's ``LightningStoreServer`` arguments (`STORE_SERVER_03`); return ``(port, cors_origins)``.

    Raises:
        ValueError: an argument agl's server cannot honour, naming what to use instead.
    """
    if launcher_args is not None:
        raise ValueError(
            "LightningStoreServer(launcher_args=...) is not supported by agl (there is no server launcher): "
            "pass host= and port= instead."
        )
    if launch_mode not in (None, "thread", "asyncio"):
        raise ValueError(
            f"LightningStoreServer(launch_mode={launch_mode!r}) is not supported by agl: the server runs in "
            "the calling event loop. Use `agl store serve` for a separate server process."
        )
    if n_workers != 1:
        raise ValueError(
            f"LightningStoreServer(n_workers={n_workers}) is not supported by agl: one aiohttp server "
            "serves all clients. Use a database store (sqlite:///..., mongodb://...) to share data."
        )
    if tracker is not None:
        raise ValueError(
            "LightningStoreServer(tracker=...) is not supported by agl: metrics backends were dropped. Read "
            "`await store.statistics()` or the server's /v1/agl/statistics route instead."
        )
    if port is None:
        _server_logger.warning("No port provided, using default port %d.", LEGACY_DEFAULT_PORT)
        port = LEGACY_DEFAULT_PORT
    if cors_allow_origins is not None:
        if cors_origins is not None:
            raise ValueError("Pass cors_origins or its old name cors_allow_origins, not both.")
        cors_origins = (
            [cors_allow_origins] if isinstance(cors_allow_origins, str) else list(cors_allow_origins)
        )
    return port, cors_origins
