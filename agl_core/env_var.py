"""Environment variables agl reads, and resolvers that apply "override, then environment, then fallback".

The variables (:class:`LightningEnvVar`):

* ``AGL_EMITTER_DEBUG``: log the span-processor chain.
* ``AGL_MANAGED_STORE``: when false, execution strategies pass the given store through unwrapped (no
  HTTP server or client around it).
* ``AGL_CURRENT_ROLE``: ``algorithm``, ``runner`` or ``both`` (client-server execution).
* ``AGL_SERVER_HOST`` / ``AGL_SERVER_PORT``: where the client-server strategy serves and finds the store.
"""

from __future__ import annotations

import os
from enum import Enum

__all__ = [
    "LightningEnvVar",
    "resolve_bool_env_var",
    "resolve_int_env_var",
    "resolve_str_env_var",
]

_TRUE_VALUES = ("1", "true", "yes", "on")
_FALSE_VALUES = ("0", "false", "no", "off")


class LightningEnvVar(str, Enum):
    """Names of the environment variables agl reads (the value is the variable name)."""

    AGL_EMITTER_DEBUG = "AGL_EMITTER_DEBUG"
    AGL_MANAGED_STORE = "AGL_MANAGED_STORE"
    AGL_CURRENT_ROLE = "AGL_CURRENT_ROLE"
    AGL_SERVER_HOST = "AGL_SERVER_HOST"
    AGL_SERVER_PORT = "AGL_SERVER_PORT"


def _name(var: LightningEnvVar | str) -> str:
    return var.value if isinstance(var, LightningEnvVar) else str(var)


def _raw(var: LightningEnvVar | str) -> str | None:
    """The variable's value stripped of surrounding blanks; None when unset or blank."""
    value = os.environ.get(_name(var))
    if value is None or not value.strip():
        return None
    return value.strip()


def resolve_bool_env_var(
    env_var: LightningEnvVar | str, override: bool | None = None, fallback: bool | None = None
) -> bool | None:
    """``override`` if not None, else the variable as a boolean, else ``fallback``.

    ``1/true/yes/on`` and ``0/false/no/off`` are accepted in any case.

    Raises:
        ValueError: the variable holds anything else (``"<VAR> must be one of ..."``).
    """
    if override is not None:
        return override
    raw = _raw(env_var)
    if raw is None:
        return fallback
    lowered = raw.lower()
    if lowered in _TRUE_VALUES:
        return True
    if lowered in _FALSE_VALUES:
        return False
    raise ValueError(
        f"{_name(env_var)} must be one of {', '.join(_TRUE_VALUES)} (true) or {', '.join(_FALSE_VALUES)} "
        f"(false), case-insensitive; got {raw!r}."
    )


def resolve_int_env_var(
    env_var: LightningEnvVar | str, override: int | None = None, fallback: int | None = None
) -> int | None:
    """``override`` if not None, else the variable as an integer, else ``fallback``.

    Raises:
        ValueError: the variable is not an integer (``"<VAR> must be an integer"``).
    """
    if override is not None:
        return override
    raw = _raw(env_var)
    if raw is None:
        return fallback
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{_name(env_var)} must be an integer, got {raw!r}.") from None


def resolve_str_env_var(
    env_var: LightningEnvVar | str, override: str | None = None, fallback: str | None = None
) -> str | None:
    """``override`` if not None, else the variable (when set and not blank), else ``fallback``."""
    if override is not None:
        return override
    raw = _raw(env_var)
    return fallback if raw is None else raw
