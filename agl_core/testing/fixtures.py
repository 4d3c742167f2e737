"""pytest fixtures for plugin authors (enable with ``pytest_plugins = ["agl_core.testing"]``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agl_core.plugins import PluginManager
from agl_core.testing.plugins import use_plugin_manager


@pytest.fixture
def plugin_manager() -> Iterator[PluginManager]:
    """A fresh plugin manager with the core's built-ins and no autoloaded entry points.

    It is also installed as the process-wide manager for the test, so code that resolves
    components by name (``Trainer(algorithm="apo")``) sees exactly the plugins the test registers.
    """
    manager = PluginManager(strict=False)
    with use_plugin_manager(manager):
        yield manager
