"""Point ``weave.init`` at an in-process trace server, fully offline (0.3's ``instrument_weave``).

While instrumented, ``weave.init(project)``:

* uses the given :class:`~agl_weave.server.InMemoryWeaveTraceServer` instead of W&B's server;
* needs no W&B login: real credentials are used when configured, a local placeholder otherwise;
* resolves ``"entity/project"`` locally (a bare ``"project"`` gets ``$WANDB_ENTITY`` or ``"agl"``) and the
  user name as ``"agl"``, instead of asking the W&B API;
* does not install Weave's OpenTelemetry exporter to W&B (its "conversation" tracing), which would replace
  the application's global tracer provider and send spans to W&B;
* does not report Weave's internal errors to Sentry, and logs where calls go instead of printing a W&B
  login and W&B links.

Weave also reports a usage session to Sentry when the process exits, instrumented or not; set
``WANDB_ERROR_REPORTING=false`` (Weave's and W&B's own switch) to turn that off.

So nothing leaves the process. :func:`uninstrument_weave` restores all of it. This redirects functions of
``weave.trace.weave_init`` (not public API), which is why agl-weave pins Weave's minor version.

Differences from Agent Lightning 0.3 (on purpose): 0.3 still asked the W&B API for the entity and user
name and fell back only when that failed (a network round trip, or a hang offline); the W&B login
placeholder is part of instrumenting here (0.3 did it in ``WeaveTracer.init_worker``).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

import weave.trace.weave_init as weave_init
from weave.telemetry import trace_sentry
from weave.trace import init_message, weave_client
from weave.wandb_interface.auth import ApiKeyCredentials, WandbCredentials

from agl_weave.server import InMemoryWeaveTraceServer

__all__ = ["InMemoryWeaveTraceServer", "instrument_weave", "is_weave_instrumented", "uninstrument_weave"]

DEFAULT_ENTITY = "agl"
"""The W&B entity of a bare project name when ``$WANDB_ENTITY`` is not set."""

PLACEHOLDER_API_KEY = "agl-offline"
"""What Weave is given as W&B credentials when none are configured (it never leaves the process)."""

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_originals: dict[tuple[ModuleType, str], Any] | None = None
_sentry_was_disabled: bool | None = None


def _server_factory(server: InMemoryWeaveTraceServer) -> Callable[..., InMemoryWeaveTraceServer]:
    def init_weave_get_server(*args: Any, **kwargs: Any) -> InMemoryWeaveTraceServer:
        return server

    return init_weave_get_server


def _local_entity_project(project_name: str) -> tuple[str, str]:
    if not project_name or not project_name.strip():
        raise ValueError("weave.init needs a non-empty project name ('project' or 'entity/project').")
    fields = project_name.split("/")
    if len(fields) == 1:
        return os.environ.get("WANDB_ENTITY") or DEFAULT_ENTITY, fields[0]
    if len(fields) == 2 and all(fields):
        return fields[0], fields[1]
    raise ValueError(f"Weave project name must be 'project' or 'entity/project', got {project_name!r}.")


def _local_username() -> str:
    return DEFAULT_ENTITY


def _credentials_or_placeholder(
    original: Callable[[], WandbCredentials | None],
) -> Callable[[], WandbCredentials]:
    def get_wandb_auth_context() -> WandbCredentials:
        try:
            credentials = original()  # reads the environment and local files only
        except Exception:
            credentials = None
        return credentials if credentials is not None else ApiKeyCredentials(PLACEHOLDER_API_KEY)

    return get_wandb_auth_context


def _no_conversation_tracing(*args: Any, **kwargs: Any) -> None:
    return None


def _no_call_link(*args: Any, **kwargs: Any) -> None:
    return None


def _log_init_message(username: str | None, entity_name: str, project_name: str, **kwargs: Any) -> None:
    logger.info(
        "Weave project %s/%s: calls stay in this process (nothing is sent to W&B).", entity_name, project_name
    )


def instrument_weave(server: InMemoryWeaveTraceServer) -> None:
    """Make ``weave.init`` use ``server`` and stay offline (see the module docstring).

    Raises ``RuntimeError`` if Weave is already instrumented (call :func:`uninstrument_weave` first).
    Call it before ``weave.init``: a Weave client created earlier keeps the server it has.
    """
    global _originals, _sentry_was_disabled
    if not isinstance(server, InMemoryWeaveTraceServer):
        raise TypeError(f"instrument_weave needs an InMemoryWeaveTraceServer, got {type(server).__name__}.")
    with _lock:
        if _originals is not None:
            raise RuntimeError("Weave is already instrumented; call uninstrument_weave() first.")
        replacements: dict[tuple[ModuleType, str], Any] = {
            (weave_init, "init_weave_get_server"): _server_factory(server),
            (weave_init, "get_entity_project_from_project_name"): _local_entity_project,
            (weave_init, "get_username"): _local_username,
            (weave_init, "get_wandb_auth_context"): _credentials_or_placeholder(
                weave_init.get_wandb_auth_context
            ),
            (weave_init, "_setup_conversation_tracing"): _no_conversation_tracing,
            (init_message, "print_init_message"): _log_init_message,
            (weave_client, "print_call_link"): _no_call_link,
        }
        _originals = {target: getattr(*target) for target in replacements}
        for (module, name), replacement in replacements.items():
            setattr(module, name, replacement)
        sentry = trace_sentry.global_trace_sentry
        _sentry_was_disabled = sentry._disabled
        sentry._disabled = True


def uninstrument_weave() -> None:
    """Restore what :func:`instrument_weave` replaced; ``RuntimeError`` if Weave is not instrumented."""
    global _originals, _sentry_was_disabled
    with _lock:
        if _originals is None:
            raise RuntimeError("Weave is not instrumented (instrument_weave() was not called).")
        for (module, name), original in _originals.items():
            setattr(module, name, original)
        _originals = None
        if _sentry_was_disabled is not None:
            trace_sentry.global_trace_sentry._disabled = _sentry_was_disabled
            _sentry_was_disabled = None


def is_weave_instrumented() -> bool:
    """Whether :func:`instrument_weave` is in effect."""
    return _originals is not None
