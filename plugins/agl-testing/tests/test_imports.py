"""Importing the kit, and its pytest plugin."""

from __future__ import annotations

import subprocess
import sys

from agl_core.plugins import PluginManager, get_plugin_manager


def test_the_helpers_and_the_fake_server_import_without_pytest() -> None:
    code = (
        "import sys\n"
        "sys.modules['pytest'] = None  # as if pytest were not importable\n"
        "from agl_testing import plugin_module, register_plugin, run_cli\n"
        "from agl_testing.fake_openai import FakeOpenAIServer\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_the_plugin_manager_fixture_needs_no_conftest(plugin_manager: PluginManager) -> None:
    # this suite has no conftest.py: the fixture comes through agl-testing's pytest11 entry point
    assert get_plugin_manager() is plugin_manager
