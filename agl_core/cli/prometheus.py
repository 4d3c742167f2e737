"""Compatibility module for Agent Lightning 0.3's ``agentlightning.cli.prometheus``.

``main(argv)`` runs ``agl prometheus``, which exits 1 naming the replacement: ``GET /metrics`` on
``agl store serve`` and ``agl proxy serve`` (docs/metrics.md).

Listed in docs/migrating-from-agent-lightning.md.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["main"]


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
