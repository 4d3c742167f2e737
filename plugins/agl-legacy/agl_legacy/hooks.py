"""Entry point of agl-legacy: 0.3's ``agl`` commands and the collection-based store."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agl_core import hookimpl

if TYPE_CHECKING:
    import click

    from agl_core.registry import Registry

AGL_PLUGIN_API_VERSION = 1
"""The agl plugin contract version these hooks are built for (see `agl plugins check`)."""


@hookimpl
def agl_register_stores(registry: Registry[Any]) -> None:
    """Register ``collection`` (0.3's `CollectionBasedLightningStore`, in-memory collections by default)."""
    registry.add(
        "collection",
        "agl_legacy.collection_based:CollectionBasedLightningStore",
        summary="Agent Lightning 0.3's collection-based store (in-memory or MongoDB collections)",
    )


@hookimpl
def agl_register_commands(cli: click.Group) -> None:
    """Agent Lightning 0.3's ``agl vllm``, ``agl prometheus`` and ``agl agentops``."""
    from agl_legacy.cli import agentops_command, prometheus_command, vllm_command

    for command in (vllm_command, prometheus_command, agentops_command):
        cli.add_command(command)
