"""Environment variables agl reads, and resolvers that apply "override, then environment, then fallback".

:data:`ENVIRONMENT_VARIABLES` lists every variable the core reads, with what it does (a test fails when
code reads one that is not listed). :class:`LightningEnvVar` keeps Agent Lightning 0.3's five names.
"""

from __future__ import annotations

import os
from enum import Enum

__all__ = [
    "ENVIRONMENT_VARIABLES",
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


ENVIRONMENT_VARIABLES: dict[str, str] = {
    # execution (Agent Lightning 0.3's variables, see LightningEnvVar)
    "AGL_CURRENT_ROLE": "algorithm, runner or both: the role of this process in the client-server strategy.",
    "AGL_MANAGED_STORE": "When false, execution strategies pass the given store through unwrapped "
    "(no HTTP server or client around it).",
    "AGL_SERVER_HOST": "Where the client-server strategy serves and finds the store (host).",
    "AGL_SERVER_PORT": "Where the client-server strategy serves and finds the store (port).",
    "AGL_EMITTER_DEBUG": "Log the span-processor chain.",
    # plugins
    "AGL_PLUGINS_STRICT": "1: a plugin that fails to load raises PluginLoadError instead of being recorded.",
    "AGL_DISABLE_PLUGINS": "Comma-separated plugins (entry-point or distribution names) to skip; "
    "* skips every third-party plugin.",
    "AGL_LOAD_PLUGINS": "Comma-separated plugins to load, and only those; an empty value loads none.",
    # command line
    "AGL_DEBUG": "1: full tracebacks from `agl` (same as `agl --debug`).",
    "AGL_STORE": "Default --store URI of the `agl store` inspection commands.",
    "AGL_STORE_TOKEN": "Bearer token the HTTP store server requires and its client sends.",
    "AGL_PROXY_TOKEN": "Bearer token `agl proxy serve` requires from agents.",
    # program agents (set by ProgramAgent for its program; read by `agl reward`)
    "AGL_REWARD_FILE": "Where `agl reward` writes the reward of a ProgramAgent attempt.",
    "AGL_STORE_URL": "The store server `agl reward` posts a reward span to (no reward file).",
    "AGL_ROLLOUT_ID": "The rollout `agl reward` rewards (no reward file).",
    "AGL_ATTEMPT_ID": "The attempt `agl reward` rewards (no reward file).",
    # HTTP store client TLS
    "AGL_STORE_CA_BUNDLE": "PEM file of CA certificates to trust for https:// stores.",
    "AGL_STORE_CLIENT_CERT": "PEM client certificate (optionally with its key) for mutual TLS.",
    "AGL_STORE_CLIENT_KEY": "PEM private key of the client certificate for mutual TLS.",
    # tracing
    "AGL_OTEL_GLOBAL_PROVIDER": "0/false/no/off: keep agl away from OpenTelemetry's global tracer provider.",
    "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT": "OpenTelemetry's attribute limit; when set, agl's tracer keeps it.",
    "OTEL_SDK_DISABLED": "true: OpenTelemetry providers the application builds record nothing; agl's own "
    "keep recording (it logs once) and agl doctor names the variable when a rollout has no LLM call.",
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "false/0/no_content/...: openai spans leave out "
    "prompt and completion text.",
    # reporting
    "AGL_REPORTERS": "Comma-separated metric reporters (jsonl, tensorboard, mlflow, wandb) when code "
    "names none.",
    "MLFLOW_TRACKING_URI": "Where the mlflow reporter logs (default: a local file store).",
    "MLFLOW_ALLOW_FILE_STORE": "Set to true by the mlflow reporter when it falls back to a local file store.",
    "MLFLOW_EXPERIMENT_NAME": "The mlflow reporter's experiment.",
    "WANDB_PROJECT": "The wandb reporter's project.",
    # LLM proxy backends
    "OPENAI_BASE_URL": "Upstream base URL of the proxy's OpenAI backend when none is configured.",
    "OPENAI_API_BASE": "Older name of OPENAI_BASE_URL, read when that is unset.",
    "OPENAI_API_KEY": "API key of the proxy's OpenAI backend when none is configured.",
    # process
    "PYTHONUTF8": "Set to 1 by configure_logger on Windows so logs print as UTF-8.",
}
"""Every environment variable the core reads (name -> what it does); plugins document their own."""


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
