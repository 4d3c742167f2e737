"""Testing helpers for agl and its plugins.

Opt in from a ``conftest.py`` with ``pytest_plugins = ["agl_core.testing"]`` to get the
``plugin_manager`` fixture. Helpers: :func:`register_plugin`, :func:`plugin_module`, :func:`fake_entry_point`,
:func:`run_cli`, :func:`use_plugin_manager`. The fixture and the store conformance suite need pytest and
pytest-asyncio: ``pip install 'agl-core[testing]'``; the helpers work without them.
"""

from typing import Any

from agl_core.testing.plugins import (
    CliResult,
    FakeDistribution,
    FakeEntryPoint,
    fake_entry_point,
    plugin_module,
    records_by_name,
    register_plugin,
    run_cli,
    use_plugin_manager,
)

TESTING_EXTRA_HINT = "agl_core.testing's fixtures need pytest: pip install 'agl-core[testing]'"

try:
    from agl_core.testing.fixtures import plugin_manager
except ModuleNotFoundError as exc:
    if exc.name != "pytest":
        raise

    def __getattr__(name: str) -> Any:
        """Say which extra to install when the fixture is asked for without pytest."""
        if name == "plugin_manager":
            raise ModuleNotFoundError(TESTING_EXTRA_HINT, name="pytest")
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CliResult",
    "FakeDistribution",
    "FakeEntryPoint",
    "fake_entry_point",
    "plugin_manager",
    "plugin_module",
    "records_by_name",
    "register_plugin",
    "run_cli",
    "use_plugin_manager",
]
