"""pytest fixtures for agl and its plugins (a pytest plugin: installing agl-testing enables them)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agl_core.plugins import PluginManager
from agl_testing.plugins import use_plugin_manager

# pytest marks a pytest11 plugin's files for assert rewriting only when installed from a wheel; this gives the
# conformance suite's asserts pytest's messages in an editable install too (it is not imported yet here).
pytest.register_assert_rewrite("agl_testing.store_conformance")


@pytest.fixture
def plugin_manager() -> Iterator[PluginManager]:
    """A fresh plugin manager with the core's built-ins and no autoloaded entry points.

    It is also installed as the process-wide manager for the test, so code that resolves
    components by name (``Trainer(algorithm="apo")``) sees exactly the plugins the test registers.
    """
    manager = PluginManager(strict=False)
    with use_plugin_manager(manager):
        yield manager
