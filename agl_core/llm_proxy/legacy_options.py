"""Agent Lightning 0.3's other ``LLMProxy`` arguments, translated for agl (compatibility; see
docs/migrating-from-agent-lightning.md).

* ``num_retries`` (LiteLLM's retry count) and ``litellm_config={"litellm_settings": {"num_retries": n}}``
  set agl's ``max_retries`` (extra tries on other replicas after a connection failure). Any other
  ``litellm_config`` key raises a ValueError: agl's proxy is not LiteLLM.
* ``num_workers`` and ``launch_mode`` (``"mp"``, ``"thread"``, ``"asyncio"``) are accepted as no-ops: one
  asyncio server serves every request concurrently, started with ``await proxy.start()`` in the caller's
  loop or ``proxy.start_in_thread()``.
* ``launcher_args`` raises a ValueError (pass ``host`` and ``port`` instead).
* ``middlewares``: 0.3's defaults ``"rollout_attempt"`` and ``"stream_conversion"`` are built in and
  accepted; anything else raises a ValueError.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["BUILT_IN_MIDDLEWARES", "LAUNCH_MODES", "resolve_legacy_options"]

BUILT_IN_MIDDLEWARES = frozenset({"rollout_attempt", "stream_conversion"})
"""0.3 middleware aliases whose behaviour agl's proxy always has."""

LAUNCH_MODES = frozenset({"mp", "thread", "asyncio"})
"""0.3's ``launch_mode`` values, all served by agl's one asyncio server."""


def resolve_legacy_options(
    max_retries: int,
    *,
    litellm_config: Mapping[str, Any] | None,
    num_retries: int | None,
    num_workers: int,
    launch_mode: str,
    launcher_args: object | None,
    middlewares: Sequence[object] | None,
) -> int:
    """Check 0.3's arguments and return the ``max_retries`` they ask for (``max_retries`` if none)."""
    if launcher_args is not None:
        raise ValueError(
            "LLMProxy(launcher_args=...) is not supported: agl's proxy is an in-process asyncio server; pass "
            "host= and port= instead."
        )
    if launch_mode not in LAUNCH_MODES:
        raise ValueError(f"LLMProxy launch_mode must be one of {sorted(LAUNCH_MODES)}, got {launch_mode!r}.")
    if not isinstance(num_workers, int) or num_workers < 1:
        raise ValueError(f"LLMProxy num_workers must be an int >= 1, got {num_workers!r}.")
    for middleware in middlewares or ():
        if middleware not in BUILT_IN_MIDDLEWARES:
            raise ValueError(
                f"LLMProxy middleware {middleware!r} is not supported: agl's proxy is not LiteLLM/FastAPI. "
                "Rollout routing and stream handling are built in "
                f"({', '.join(sorted(BUILT_IN_MIDDLEWARES))} are accepted as no-ops)."
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
