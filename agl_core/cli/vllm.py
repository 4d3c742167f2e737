"""Compatibility module for Agent Lightning 0.3's ``agentlightning.cli.vllm``.

``main(argv)`` runs ``agl vllm``.

Listed in docs/migrating-from-agent-lightning.md.
"""

from agl_core._compat import cli_main

__all__ = ["main"]

main = cli_main("vllm")
