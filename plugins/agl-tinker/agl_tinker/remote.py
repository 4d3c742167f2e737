"""The hosted Tinker service: configuration from the SDK's own settings, and a fast reachability check."""

from __future__ import annotations

import asyncio
import contextlib
import os
from typing import Any
from urllib.parse import urlsplit

__all__ = ["TinkerConfigError", "TinkerUnreachableError", "connect_service", "preflight", "resolve_remote"]


class TinkerConfigError(RuntimeError):
    """The hosted backend is selected but no Tinker API key is configured."""


class TinkerUnreachableError(ConnectionError):
    """The Tinker base URL did not accept a connection within the preflight timeout."""


def _have_credentials(api_key: str | None) -> bool:
    if api_key or os.environ.get("TINKER_API_KEY") or os.environ.get("TINKER_CREDENTIAL_CMD"):
        return True
    try:
        from tinker.lib.credentials import default_credentials_path

        return default_credentials_path().is_file()
    except Exception:  # an SDK without stored credentials support
        return False


def resolve_remote(base_url: str | None, api_key: str | None) -> str:
    """The base URL the SDK will use (argument, ``TINKER_BASE_URL``, default); raise without a key."""
    from tinker.lib.base_url import resolve_base_url

    if not _have_credentials(api_key):
        raise TinkerConfigError(
            "No Tinker API key: set TINKER_API_KEY (or pass api_key=..., or run `tinker auth login`). "
            "For offline development use Tinker(backend='local', model_name=<local model folder>)."
        )
    return resolve_base_url(base_url)


async def preflight(base_url: str, timeout: float) -> None:
    """Open (and close) a TCP connection to ``base_url``'s host within ``timeout`` seconds.

    The SDK retries an unreachable service for minutes; this fails in seconds instead.
    """
    parts = urlsplit(base_url)
    host = parts.hostname
    if not host:
        raise TinkerConfigError(
            f"Invalid Tinker base URL {base_url!r}: it has no host (check TINKER_BASE_URL)."
        )
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except (OSError, asyncio.TimeoutError) as exc:
        reason = "timed out" if isinstance(exc, asyncio.TimeoutError) else str(exc) or type(exc).__name__
        raise TinkerUnreachableError(
            f"Cannot reach the Tinker service at {base_url} ({host}:{port}: {reason}, "
            f"preflight timeout {timeout:g}s). Check TINKER_BASE_URL and the network, or use backend='local' "
            "for offline development."
        ) from exc
    writer.close()
    with contextlib.suppress(OSError, asyncio.TimeoutError):
        await asyncio.wait_for(writer.wait_closed(), timeout)


async def connect_service(base_url: str | None, api_key: str | None, timeout: float) -> Any:
    """A ``tinker.ServiceClient`` for the configured service, after the key check and the preflight."""
    import tinker

    url = resolve_remote(base_url, api_key)
    await preflight(url, timeout)
    return tinker.ServiceClient(base_url=url, api_key=api_key)
