"""Compatibility module for Agent Lightning 0.3's ``agentlightning.cli.prometheus``.

``main(argv)`` runs ``agl prometheus``, which exits 1 naming the replacement: ``GET /metrics`` on
``agl store serve`` and ``agl proxy serve`` (docs/metrics.md). `create_prometheus_app` still builds 0.3's
exporter of a ``prometheus_client`` multiprocess directory, as an aiohttp application (0.3: FastAPI).

Listed in docs/migrating-from-agent-lightning.md.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aiohttp import web

__all__ = ["create_prometheus_app", "ensure_prometheus_dir", "main"]

# named by its 0.3 path, so logging set up for agl_core (or agentlightning) covers it
logger = logging.getLogger("agl_core.cli.prometheus")


def ensure_prometheus_dir() -> str:
    """Create the directory ``PROMETHEUS_MULTIPROC_DIR`` names and return it (`ValueError` if unset)."""
    directory = os.getenv("PROMETHEUS_MULTIPROC_DIR")
    if directory is None:
        raise ValueError(
            "PROMETHEUS_MULTIPROC_DIR is not set: set it to the directory the processes write to."
        )
    Path(directory).mkdir(parents=True, exist_ok=True)
    logger.info("Serving Prometheus multiprocess metrics from %s", directory)
    return directory


def create_prometheus_app(metrics_path: str = "/v1/prometheus") -> web.Application:
    """An aiohttp app serving the multiprocess metrics at ``metrics_path`` and a health check at /health.

    The metrics are collected from ``PROMETHEUS_MULTIPROC_DIR`` on every request.
    """
    if not metrics_path.startswith("/"):
        raise ValueError(f"metrics_path must start with '/', got {metrics_path!r}.")
    path = metrics_path.rstrip("/")
    if not path:
        raise ValueError("metrics_path must not be '/'. Choose a sub-path such as /v1/prometheus.")
    from aiohttp import web
    from prometheus_client import CollectorRegistry
    from prometheus_client.multiprocess import MultiProcessCollector

    from agl_core.metrics.exposition import metrics_response

    async def metrics(_: web.Request) -> web.Response:
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=ensure_prometheus_dir())  # type: ignore[no-untyped-call]
        return metrics_response(registry)

    async def health(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    app = web.Application()
    app.router.add_get(path, metrics)
    app.router.add_get("/health", health)
    return app


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``agl prometheus ARGV...`` (0.3's entry point of this subcommand); returns the exit status."""
    import sys

    from agl_core.cli import build_cli

    args = list(argv) if argv is not None else sys.argv[1:]
    try:
        build_cli().main(args=["prometheus", *args], prog_name="agl", standalone_mode=False)
    except SystemExit as exc:
        return int(exc.code or 0) if not isinstance(exc.code, str) else 1
    return 0
