"""0.3's ``agl store --port N`` form is agl-legacy's: without the plugin it answers with the install line."""

from __future__ import annotations

import importlib.util

from click.testing import CliRunner

from agl_core.cli import build_cli
from agl_core.plugins import PluginManager


def test_store_help_and_the_03_form_without_agl_legacy(plugin_manager: PluginManager) -> None:
    cli = build_cli(plugin_manager)
    result = CliRunner().invoke(cli, ["store", "--help"])
    assert result.exit_code == 0 and "serve" in result.output
    if importlib.util.find_spec("agl_legacy") is None:
        result = CliRunner().invoke(cli, ["store", "--port", "4747"])
        assert result.exit_code == 2 and "pip install agl-legacy" in result.output
