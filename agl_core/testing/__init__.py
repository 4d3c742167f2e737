"""Testing helpers for agl and its plugins.

Opt in from a ``conftest.py`` with ``pytest_plugins = ["agl_core.testing"]`` to get the
``plugin_manager`` fixture. Helpers: :func:`register_plugin`, :func:`plugin_module`, :func:`fake_entry_point`,
:func:`run_cli`, :func:`use_plugin_manager`.
"""

from agl_core.testing.fixtures import plugin_manager
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
