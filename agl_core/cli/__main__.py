"""``python -m agl_core.cli`` runs the ``agl`` command line."""

from agl_core.cli import main

main()
