"""Compatibility module for Agent Lightning 0.3's ``agentlightning.cli.store``.

``main(argv)`` runs ``agl store``.

Listed in docs/migrating-from-agent-lightning.md.
"""

from agl_core._compat import cli_main

__all__ = ["main"]

main = cli_main("store")
