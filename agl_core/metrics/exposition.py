"""Render a ``prometheus_client`` registry as an aiohttp response (the Prometheus text format)."""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

__all__ = ["metrics_response"]


def metrics_response(registry: CollectorRegistry) -> web.Response:
    """A 200 response holding every metric of `registry` in the Prometheus text exposition format."""
    return web.Response(body=generate_latest(registry), headers={"Content-Type": CONTENT_TYPE_LATEST})
